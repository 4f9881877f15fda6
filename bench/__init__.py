"""Benchmarks of the measured claims in README.md and docs/; run each as `python -m bench.<name>` from the root."""
