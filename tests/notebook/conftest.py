"""The notebook tests' shared results: one digit through mnist_vit (q and k kept), its relevance."""

from __future__ import annotations

import base64
import io

import numpy as np
import pytest
from PIL import Image

import attention
from tests.conftest import DIGIT


@pytest.fixture(scope="session")
def mnist_vit():
    return attention.load_vit("mnist_vit")


@pytest.fixture(scope="session")
def maps(mnist_vit):
    """DIGIT's CLS attention in every layer of mnist_vit (a 7x7 grid of 4 px patches, 4 layers, 4 heads), q/k kept."""
    return attention.attention_maps(mnist_vit, DIGIT, keep_qk=True)


def rgb(picture: str | bytes) -> np.ndarray:
    """uint8 (H, W, 3) of a PNG: its bytes, or a data URL."""
    raw = picture if isinstance(picture, bytes) else base64.b64decode(picture.split(",", 1)[1])
    return np.asarray(Image.open(io.BytesIO(raw)).convert("RGB"))
