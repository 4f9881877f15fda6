"""Spec of attention.vit.session: the per-visitor cached forward pass, queries on it, the start-up
model choice, and the ZeroGPU wrapper. Runs offline on the shipped mnist_vit."""

from __future__ import annotations

import shutil
import sys
import time
import types
from pathlib import Path

import numpy as np
import pytest

from attention.errors import ImageError, InputError, ModelLoadError
from attention.vit import session
from attention.vit.extract import attention_maps
from attention.vit.flow import rollout_map
from attention.vit.models import load_vit

ROOT = Path(__file__).resolve().parents[2]
DIGIT = ROOT / "examples" / "digits" / "digit_3.png"
DIGIT7 = ROOT / "examples" / "digits" / "digit_7.png"


@pytest.fixture
def forwards(monkeypatch):
    """Counts the forward passes `session.get_pass` makes."""
    calls = []
    real = session.forward

    def counting(*args):
        calls.append(args)
        return real(*args)

    monkeypatch.setattr(session, "forward", counting)
    return calls


def test_startup_offline_picks_the_shipped_model_with_a_notice_and_no_network_wait():
    t = time.perf_counter()
    s = session.startup_model()
    assert time.perf_counter() - t < 1.0  # HF_HUB_OFFLINE=1: no connect attempted
    assert s.model == "mnist_vit" and not s.default_available
    assert "dino_vits16" in s.notice and "timm/vit_small_patch16_224.dino" in s.notice and "mnist_vit" in s.notice


def test_startup_online_keeps_the_default(monkeypatch):
    monkeypatch.setattr(session, "available", lambda name: name == "dino_vits16")
    s = session.startup_model()
    assert (s.model, s.default_available, s.notice) == ("dino_vits16", True, None)


@pytest.mark.parametrize(
    "row, col, want",
    [
        (None, None, None),  # empty: the model's own token (Pass.default_query: CLS, else the pool's, ...)
        (float("nan"), float("nan"), None),
        ("", " ", None),
        (2, 3, (2, 3)),
        (2.0, 3.0, (2, 3)),
        ("4", "0", (4, 0)),
    ],
)
def test_parse_query(row, col, want):
    assert session.parse_query(row, col) == want


@pytest.mark.parametrize(
    "row, col, fragment",
    [
        (2, None, "both"),
        (None, 1, "both"),
        (2.5, 1, "whole"),
        ("a", 1, "whole numbers"),
        (float("inf"), 1, "whole"),
        (1, float("-inf"), "whole"),
    ],
)
def test_parse_query_refuses_half_or_malformed_queries(row, col, fragment):
    with pytest.raises(InputError, match=fragment):
        session.parse_query(row, col)


def test_parse_index():
    assert session.parse_index(-1.0) == -1 and session.parse_index("3") == 3
    with pytest.raises(InputError, match="whole"):
        session.parse_index(1.5, "Layer")
    with pytest.raises(InputError, match="Head 'x'"):
        session.parse_index("x", "Head")
    with pytest.raises(InputError, match="Layer inf is not a whole number"):
        session.parse_index(float("inf"), "Layer")


def test_a_pass_is_reused_for_the_same_image_content_model_and_resolution(forwards, tmp_path):
    p = session.get_pass(str(DIGIT), "mnist_vit", "auto")
    copy = tmp_path / "same_digit.png"
    shutil.copy(DIGIT, copy)  # another upload of the same file: same content digest
    assert session.get_pass(str(copy), "mnist_vit", "auto", p) is p
    assert session.get_pass(str(DIGIT), " mnist_vit ", "AUTO", p) is p
    assert len(forwards) == 1
    assert session.get_pass(str(DIGIT7), "mnist_vit", "auto", p) is not p
    assert session.get_pass(str(DIGIT), "mnist_vit", "56", p) is not p
    assert len(forwards) == 3


def test_progress_is_reported_before_the_forward_pass():
    seen = []
    session.get_pass(str(DIGIT), "mnist_vit", "auto", progress=lambda f, d: seen.append((f, d)))
    assert seen and seen[0][0] < 0.5 and "mnist_vit" in seen[0][1]


def test_queries_and_layers_need_no_new_forward_and_match_a_direct_pass(forwards):
    p = session.get_pass(str(DIGIT), "mnist_vit", "auto")
    model = load_vit("mnist_vit")
    for query in [(3, 3), (0, 6)]:
        res = p.at(query, layer=1)
        direct = attention_maps(model, str(DIGIT), query=query, layer=1)
        assert res.layer == 1 and res.query == query
        np.testing.assert_allclose(res.maps, direct.maps, atol=1e-5)
        assert not np.allclose(res.maps, p.at("cls", 1).maps)  # a patch query sees differently
    assert len(forwards) == 1


def test_a_one_query_pass_keeps_no_qk_matches_the_session_pass_and_refuses_other_queries():
    full = session.get_pass(str(DIGIT), "mnist_vit", "auto")
    one = session.get_pass(str(DIGIT), "mnist_vit", "auto", query=(3, 4), keep_qk=False)
    assert one.base.qk is None and one.base.query == (3, 4)
    np.testing.assert_allclose(one.at((3, 4), 2).maps, full.at((3, 4), 2).maps, atol=1e-5)
    with pytest.raises(InputError, match="keep_qk"):
        one.at("cls")
    assert session.get_pass(str(DIGIT), "mnist_vit", "auto", full) is full  # a session pass serves every query
    assert session.get_pass(str(DIGIT), "mnist_vit", "auto", one) is not one  # a one-query pass is not reused for that
    assert session.get_pass(str(DIGIT), "mnist_vit", "auto", one, query=(3, 4), keep_qk=False) is one


def test_rollout_is_computed_once_per_query_and_layer():
    p = session.get_pass(str(DIGIT), "mnist_vit", "auto")
    a = p.rollout((2, 2), -1)
    assert p.rollout((2, 2), 3) is a  # -1 and 3 are the same layer of a 4-layer model
    np.testing.assert_allclose(a, rollout_map(p.at((2, 2), -1)))
    assert not np.allclose(a, p.rollout("cls", -1))


def test_bad_inputs_raise_typed_errors_with_what_is_accepted(tmp_path):
    with pytest.raises(InputError, match="No image"):
        session.get_pass(None, "mnist_vit")
    with pytest.raises(ModelLoadError, match="Accepted"):
        session.get_pass(str(DIGIT), "no_such_model")
    bad = tmp_path / "notes.txt"
    bad.write_text("not an image")
    with pytest.raises(ImageError, match="PNG, JPEG"):
        session.get_pass(str(bad), "mnist_vit")
    p = session.get_pass(str(DIGIT), "mnist_vit")
    with pytest.raises(InputError, match="0 to 3"):
        p.at("cls", 4)
    with pytest.raises(InputError, match="7x7"):
        p.at((7, 0))


def test_map_query_keeps_the_position_across_grids():
    p = session.get_pass(str(DIGIT), "mnist_vit", "auto")  # 7x7
    q = session.get_pass(str(DIGIT), "mnist_vit", "56")  # 14x14
    assert session.map_query("cls", p.base.grid, q.base.grid) == "cls"
    assert session.map_query((3, 3), p.base.grid, q.base.grid) == (7, 7)
    assert session.map_query((6, 0), p.base.grid, q.base.grid) == (13, 1)
    assert session.map_query((7, 7), q.base.grid, p.base.grid) == (3, 3)


@pytest.mark.parametrize("layer, n_src, n_dst, want", [(-1, 12, 4, 3), (11, 12, 12, 11), (0, 12, 4, 0), (6, 13, 5, 2)])
def test_map_layer_keeps_the_relative_depth(layer, n_src, n_dst, want):
    assert session.map_layer(layer, n_src, n_dst) == want


def test_gpu_is_a_no_op_without_spaces_and_wraps_with_spaces_gpu(monkeypatch):
    def f(x):
        return x + 1

    monkeypatch.setitem(sys.modules, "spaces", None)  # import fails
    assert session.gpu(f) is f and session.gpu(duration=5)(f) is f
    seen = []
    fake = types.SimpleNamespace(GPU=lambda duration: lambda fn: seen.append(duration) or (lambda *a: ("gpu", fn(*a))))
    monkeypatch.setitem(sys.modules, "spaces", fake)
    assert session.gpu(f)(1) == ("gpu", 2) and session.gpu(duration=120)(f)(1) == ("gpu", 2)
    assert seen == [session.GPU_SECONDS, 120]


def test_depth_reads_layers_and_heads_without_a_forward(forwards):
    assert session.depth("mnist_vit") == (4, 4) and not forwards


def test_file_digest_follows_content_not_identity(tmp_path):
    from PIL import Image

    from attention.vit.session import file_digest

    a = np.zeros((8, 8, 3), np.uint8)
    b = a.copy()
    assert file_digest(a) == file_digest(b)
    b[0, 0, 0] = 1
    assert file_digest(a) != file_digest(b)
    assert file_digest(a) != file_digest(a.reshape(8, 24))  # same bytes, other shape
    assert file_digest(Image.fromarray(a)) == file_digest(Image.fromarray(a.copy()))
    p = tmp_path / "a.png"
    Image.fromarray(a).save(p)
    assert file_digest(p) == file_digest(str(p)) == file_digest(p.read_bytes())
