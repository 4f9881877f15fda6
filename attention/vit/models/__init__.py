"""What a model is and where it comes from: the registry (data), the loader, weights, checkpoints, Hub errors."""
