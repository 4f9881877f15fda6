"""One pass of pixels through a model, numbers only: capture, rows, queries, maps, batches, video runs."""
