"""Spec of attention.vit.serve.passes: a forward pass of (image, model, resolution), what it answers
without another forward (queries, layers, rollout), the server's store keeping one per key, and a
query or layer carried to another grid or depth. Runs offline on the shipped mnist_vit."""

from __future__ import annotations

import shutil
from pathlib import Path

import numpy as np
import pytest

from attention.crowd.cache import SharedCache
from attention.errors import ImageError, InputError, ModelLoadError
from attention.vit.engine.extract import attention_maps
from attention.vit.engine.flow import rollout_map
from attention.vit.models import loader as models
from attention.vit.models.loader import load_vit
from attention.vit.serve import passes

ROOT = Path(__file__).resolve().parents[3]
DIGIT = ROOT / "examples" / "digits" / "digit_3.png"
DIGIT7 = ROOT / "examples" / "digits" / "digit_7.png"


def store() -> SharedCache:
    """A server's store of passes, as `passes.PASSES` but this test's own."""
    return SharedCache(64 << 20, 600.0)


@pytest.fixture
def forwards(monkeypatch):
    """Counts the forward passes `passes.get_pass` makes."""
    calls = []
    real = passes.forward

    def counting(*args):
        calls.append(args)
        return real(*args)

    monkeypatch.setattr(passes, "forward", counting)
    return calls


def test_a_store_keeps_one_pass_per_image_content_model_and_resolution(forwards, tmp_path):
    kept = store()
    p = passes.get_pass(str(DIGIT), "mnist_vit", "auto", cache=kept)
    copy = tmp_path / "same_digit.png"
    shutil.copy(DIGIT, copy)  # another upload of the same file: same content digest
    assert passes.get_pass(str(copy), "mnist_vit", "auto", cache=kept) is p
    assert passes.get_pass(str(DIGIT), " mnist_vit ", "AUTO", cache=kept) is p
    assert len(forwards) == 1
    assert passes.get_pass(str(DIGIT7), "mnist_vit", "auto", cache=kept) is not p
    assert passes.get_pass(str(DIGIT), "mnist_vit", "56", cache=kept) is not p
    assert len(forwards) == 3
    assert passes.get_pass(str(DIGIT), "mnist_vit", "auto") is not p  # no store: a forward of its own
    assert len(forwards) == 4


def test_progress_is_reported_before_the_forward_pass():
    seen = []
    passes.get_pass(str(DIGIT), "mnist_vit", "auto", progress=lambda f, d: seen.append((f, d)))
    assert seen and seen[0][0] < 0.5 and "mnist_vit" in seen[0][1]


def test_queries_and_layers_need_no_new_forward_and_match_a_direct_pass(forwards):
    p = passes.get_pass(str(DIGIT), "mnist_vit", "auto")
    model = load_vit("mnist_vit")
    for query in [(3, 3), (0, 6)]:
        res = p.at(query, layer=1)
        direct = attention_maps(model, str(DIGIT), query=query, layer=1)
        assert res.layer == 1 and res.query == query
        np.testing.assert_allclose(res.maps, direct.maps, atol=1e-5)
        assert not np.allclose(res.maps, p.at("cls", 1).maps)  # a patch query sees differently
    assert len(forwards) == 1


def test_a_one_query_pass_keeps_no_qk_matches_the_full_pass_and_refuses_other_queries(forwards):
    kept = store()
    full = passes.get_pass(str(DIGIT), "mnist_vit", "auto")
    one = passes.get_pass(str(DIGIT), "mnist_vit", "auto", query=(3, 4), keep_qk=False, cache=kept)
    assert one.base.qk is None and one.base.query == (3, 4)
    np.testing.assert_allclose(one.at((3, 4), 2).maps, full.at((3, 4), 2).maps, atol=1e-5)
    with pytest.raises(InputError, match="keep_qk"):
        one.at("cls")
    assert kept.get(one.key) is None  # a one-query pass is never kept: it cannot answer the next query
    stored = passes.get_pass(str(DIGIT), "mnist_vit", "auto", cache=kept)
    assert stored is not one and stored.base.qk is not None and len(forwards) == 3
    # a kept full pass serves every later request of its key, a one-query request too
    assert passes.get_pass(str(DIGIT), "mnist_vit", "auto", query=(1, 1), keep_qk=False, cache=kept) is stored
    assert len(forwards) == 3


def test_rollout_is_computed_once_per_query_and_layer():
    p = passes.get_pass(str(DIGIT), "mnist_vit", "auto")
    a = p.rollout((2, 2), -1)
    assert p.rollout((2, 2), 3) is a  # -1 and 3 are the same layer of a 4-layer model
    np.testing.assert_allclose(a, rollout_map(p.at((2, 2), -1)))
    assert not np.allclose(a, p.rollout("cls", -1))


def test_bad_inputs_raise_typed_errors_with_what_is_accepted(tmp_path):
    with pytest.raises(InputError, match="No image"):
        passes.get_pass(None, "mnist_vit")
    with pytest.raises(ModelLoadError, match="Accepted"):
        passes.get_pass(str(DIGIT), "no_such_model")
    bad = tmp_path / "notes.txt"
    bad.write_text("not an image")
    with pytest.raises(ImageError, match="PNG, JPEG"):
        passes.get_pass(str(bad), "mnist_vit")
    p = passes.get_pass(str(DIGIT), "mnist_vit")
    with pytest.raises(InputError, match="0 to 3"):
        p.at("cls", 4)
    with pytest.raises(InputError, match="7x7"):
        p.at((7, 0))


def test_map_query_keeps_the_position_across_grids():
    p = passes.get_pass(str(DIGIT), "mnist_vit", "auto")  # 7x7
    q = passes.get_pass(str(DIGIT), "mnist_vit", "56")  # 14x14
    assert passes.map_query("cls", p.base.grid, q.base.grid) == "cls"
    assert passes.map_query((3, 3), p.base.grid, q.base.grid) == (7, 7)
    assert passes.map_query((6, 0), p.base.grid, q.base.grid) == (13, 1)
    assert passes.map_query((7, 7), q.base.grid, p.base.grid) == (3, 3)


@pytest.mark.parametrize("layer, n_src, n_dst, want", [(-1, 12, 4, 3), (11, 12, 12, 11), (0, 12, 4, 0), (6, 13, 5, 2)])
def test_map_layer_keeps_the_relative_depth(layer, n_src, n_dst, want):
    assert passes.map_layer(layer, n_src, n_dst) == want


def test_depth_reads_layers_and_heads_without_a_forward(forwards):
    assert models.depth("mnist_vit") == (4, 4) and not forwards
