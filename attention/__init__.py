"""Attention Explorer's engine: load vision transformers, extract and render attention,
retrieve MNIST digits by attention, and compute attention step by step.

Knows nothing of Gradio: `app.py` is one user of it, the command line
(`python -m attention`) and notebooks are others.
"""

from attention.errors import AttentionError, ImageError, InputError, ModelLoadError

__all__ = ["AttentionError", "ImageError", "InputError", "ModelLoadError"]
