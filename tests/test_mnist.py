"""MNIST loading (full set when reachable, else the shipped subset, never a network wait) and
sketch normalisation (any drawing becomes a 28 x 28, white-on-black, MNIST-style digit)."""

from __future__ import annotations

import logging
import time

import numpy as np
import pytest
from PIL import Image

from attention import mnist
from attention.crowd import net
from attention.errors import ImageError


@pytest.fixture
def no_network(monkeypatch):
    """Fail the test if anything tries to open a socket."""

    def refuse(*a, **k):
        raise AssertionError("tried to use the network")

    monkeypatch.setattr(net.socket, "create_connection", refuse)
    monkeypatch.setattr(net, "_seen", {})
    mnist.load_digits.cache_clear()
    yield
    mnist.load_digits.cache_clear()


def _not_cached(root=None, download=True):
    raise RuntimeError("Dataset not found")


def test_subset_is_5000_digits_500_per_class():
    d = mnist.load_subset()
    assert d.images.shape == (5000, 28, 28) and d.images.dtype == np.uint8
    assert np.bincount(d.labels).tolist() == [500] * 10


@pytest.mark.parametrize("switch", ["attention", "hub"])
def test_offline_start_uses_the_subset_without_touching_the_network(monkeypatch, no_network, offline_switches, switch):
    offline_switches(**{switch: True})
    monkeypatch.setattr(mnist, "load_full", _not_cached)
    t = time.time()
    d = mnist.load_digits()
    assert len(d) == 5000 and "subset" in d.source
    assert time.time() - t < 1.0


def test_cached_full_set_is_used_even_offline(monkeypatch, no_network, offline_switches):
    offline_switches(attention=True)
    full = mnist.Digits(np.zeros((60000, 28, 28), np.uint8), np.zeros(60000, np.int64), "MNIST training set")
    calls = []
    monkeypatch.setattr(mnist, "load_full", lambda root=None, download=True: calls.append(download) or full)
    assert mnist.load_digits() is full
    assert calls == [False]  # read from the cache, no download attempted


def test_each_fallback_to_the_subset_is_logged_with_its_reason(monkeypatch, no_network, offline_switches, caplog):
    offline_switches(attention=True)
    monkeypatch.setattr(mnist, "load_full", _not_cached)
    with caplog.at_level(logging.INFO, logger="attention.mnist"):
        mnist.load_digits()
    said = [r.getMessage() for r in caplog.records if r.name == "attention.mnist"]
    assert said == [
        "full MNIST not cached (Dataset not found)",
        "offline (ATTENTION_OFFLINE or HF_HUB_OFFLINE): not downloading full MNIST",
        "using the MNIST subset shipped with the app (5,000 digits)",
    ]
    assert caplog.records[-1].levelno == logging.WARNING


def test_unreachable_host_is_probed_once_then_the_subset_is_used(monkeypatch, offline_switches):
    offline_switches(attention=False, hub=False)
    monkeypatch.setattr(mnist, "load_full", _not_cached)
    monkeypatch.setattr(net, "_seen", {})
    probes = []

    def unreachable(host, timeout):
        probes.append(timeout)
        raise OSError("unreachable")

    monkeypatch.setattr(net.socket, "create_connection", unreachable)
    for _ in range(3):
        mnist.load_digits.cache_clear()
        assert "subset" in mnist.load_digits().source
    mnist.load_digits.cache_clear()
    assert probes == [1.5]  # one short connect, remembered


def test_an_uncached_full_set_is_known_from_the_cache_folder_before_torchvision_is_imported(monkeypatch, tmp_path):
    import sys

    monkeypatch.setitem(sys.modules, "torchvision.datasets", None)  # importing it now raises ImportError
    with pytest.raises(RuntimeError, match="not cached"):
        mnist.load_full(tmp_path, download=False)
    raw = tmp_path / "MNIST" / "raw"
    raw.mkdir(parents=True)
    for name in mnist.RAW_FILES:
        (raw / name).write_bytes(b"")
    with pytest.raises(ImportError):  # cached (as far as the folder says): now torchvision reads it
        mnist.load_full(tmp_path, download=False)


# ---- sketch normalisation -------------------------------------------------------------
DIGITS = mnist.load_subset()


def _close(a: np.ndarray, b: np.ndarray) -> float:
    """Mean absolute pixel difference on [0, 255], at the best shift of up to 1 px (centring rounds)."""
    return min(
        float(np.abs(np.roll(a.astype(float), (dy, dx), (0, 1)) - b.astype(float)).mean())
        for dy in (-1, 0, 1)
        for dx in (-1, 0, 1)
    )


def test_mnist_digits_are_almost_fixed_points():
    """MNIST was made this way, so its digits come back (up to rounding and the 20 px box, which a
    few digits exceed by a pixel)."""
    diffs = np.array([np.abs(mnist.normalise_sketch(x).astype(int) - x).max() for x in DIGITS.images[::50]])
    assert np.mean(diffs <= 2) > 0.8
    assert np.mean([_close(mnist.normalise_sketch(x), x) for x in DIGITS.images[::50]]) < 3


@pytest.mark.parametrize("size", [56, 280, 777])
def test_any_size_and_inverted_colours_come_back_like_mnist(size):
    x = DIGITS.images[2500]
    big = np.asarray(Image.fromarray(255 - x).resize((size, size), Image.Resampling.BILINEAR))  # black on white
    rgb = np.repeat(big[..., None], 3, axis=2)
    y = mnist.normalise_sketch(rgb)
    assert y.shape == (28, 28) and y.dtype == np.uint8
    assert y[0].max() == 0 and y[:, 0].max() == 0 and y.max() == 255  # white ink on black
    assert _close(y, x) < 15  # close to the original digit
    assert _close(y, DIGITS.images[0]) > 25  # and not to another one


def test_rgba_ink_on_a_transparent_background():
    x = DIGITS.images[3000]
    rgba = np.zeros((300, 300, 4), np.uint8)  # black strokes, colour irrelevant: alpha is the ink
    rgba[10:290, 10:290, 3] = np.asarray(Image.fromarray(x).resize((280, 280), Image.Resampling.BILINEAR))
    assert _close(mnist.normalise_sketch(rgba), x) < 15


def test_the_digit_is_fitted_to_20_px_and_centred_by_its_centre_of_mass():
    canvas = np.zeros((400, 300), np.uint8)
    canvas[50:350, 30:120] = 255  # a thick bar, off-centre, 300 px tall
    y = mnist.normalise_sketch(canvas).astype(float)
    rows, cols = np.flatnonzero(y.max(1) > 0), np.flatnonzero(y.max(0) > 0)
    assert rows[-1] - rows[0] + 1 == 20 and cols[-1] - cols[0] + 1 <= 20
    cy, cx = (np.indices(y.shape) * y).reshape(2, -1).sum(1) / y.sum()
    assert abs(cy - 14) <= 1 and abs(cx - 14) <= 1


def test_thin_strokes_on_a_big_canvas_are_thickened_to_a_visible_digit():
    canvas = np.full((800, 800, 3), 255, np.uint8)
    canvas[100:700, 398:402] = 0  # a 4 px wide "1" on an 800 px canvas
    y = mnist.normalise_sketch(canvas)
    assert (y > 128).sum(1).max() >= 2  # at least 2 px wide, like MNIST strokes


@pytest.mark.parametrize(
    "image",
    [
        np.zeros((200, 200), np.uint8),  # all black
        np.full((200, 200, 3), 255, np.uint8),  # all white
        np.zeros((280, 280, 4), np.uint8),  # fully transparent (an untouched sketchpad)
        np.full((100, 100, 3), (40, 90, 200), np.uint8),  # one colour
    ],
)
def test_empty_sketches_are_refused_with_a_message(image):
    with pytest.raises(ImageError, match="empty"):
        mnist.normalise_sketch(image)


@pytest.mark.parametrize(
    "image,words",
    [
        (np.zeros((4, 4), np.uint8), "8 to 4096"),
        (np.zeros((50, 50, 2), np.uint8), "expected a gray"),
        (np.zeros((2, 50, 50, 3), np.uint8), "expected a gray"),
    ],
)
def test_malformed_sketches_are_refused_with_what_is_accepted(image, words):
    with pytest.raises(ImageError, match=words):
        mnist.normalise_sketch(image)
