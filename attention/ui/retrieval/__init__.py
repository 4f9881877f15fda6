"""The MNIST retrieval tab and its endpoints."""
