"""Benchmarks of the measured claims in README.md; run each as `python -m bench.<name>` from the repository root."""
