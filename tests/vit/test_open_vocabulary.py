"""The open-vocabulary rules (`attention.vit.text`: MaskCLIP, SCLIP, ClearCLIP, NACLIP, the proxy rule) against
their papers written with full N x N matrices (tests/vit/openvocab_reference.py), on tiny random open_clip
CLIP (class token, projection), mean-pooled CLIP and SigLIP (attention-pooling head) with timm towers: every
rule, one prompt and several, square and non-square grids, within 1e-5 of the reference's cosine."""

from __future__ import annotations

import functools

import numpy as np
import pytest
import timm
import torch
from PIL import Image

from attention.errors import InputError
from attention.vit.text import OPEN_RULES, check_options, text_relevance
from attention.vit.text.compute import encode_prompts
from attention.vit.text.dense import open_vocabulary_rows
from attention.vit.text.openvocab import RuleOptions, rule_rows
from attention.vit.text.tower import ready
from tests.vit import openvocab_reference as ref
from tests.vit.test_text_relevance import PROMPTS, tiny

TOL = 1e-5  # of a cosine


@functools.cache
def _tiny(kind: str):
    return tiny(kind)


def _case(kind, size, prompts, seed=1):
    clip = _tiny(kind)
    tower = ready(clip)
    x = torch.randn(1, 3, *size, generator=torch.Generator().manual_seed(seed))
    return clip, tower, x, encode_prompts(clip, prompts)


def _proxy(n: int, seed: int = 5) -> torch.Tensor:
    """Proxy features with a clear structure (two clusters plus noise), as a DINO's are."""
    g = torch.Generator().manual_seed(seed)
    centres = torch.randn(2, 24, generator=g)
    return centres[torch.arange(n) % 2] + 0.7 * torch.randn(n, 24, generator=g)


@pytest.mark.parametrize("kind", ["clip", "siglip", "avg"])
def test_every_rule_equals_its_paper_with_full_matrices(kind):
    clip = tiny(kind)
    tower = ready(clip)
    for size, prompts in (((64, 64), PROMPTS[1:2]), ((48, 80), PROMPTS), ((80, 48), PROMPTS[:2])):
        x = torch.randn(1, 3, *size, generator=torch.Generator().manual_seed(size[1]))
        text = encode_prompts(clip, prompts)
        n = (size[0] // 16) * (size[1] // 16)
        proxy = _proxy(n)
        logits, maps, _ = open_vocabulary_rows(clip, tower, x, text, OPEN_RULES, RuleOptions(), proxy)
        for rule in OPEN_RULES:
            want = ref.maps(clip, x, text, rule, proxy=proxy).T
            assert maps[rule].shape == (len(prompts), n)
            err = (maps[rule] - want).abs().max().item()
            assert err <= TOL, f"{rule} {size} {len(prompts)} prompt(s): {err:.2e}"


def test_options_reach_the_rule():
    """Each rule with the residual flipped, NACLIP with another std, the proxy with another gamma and beta."""
    clip, tower, x, text = _case("clip", (48, 80), PROMPTS)
    proxy = _proxy(15)
    for rule in OPEN_RULES:
        opts = RuleOptions(residual=not ref.RESIDUAL[rule], std=1.5, gamma=5.0, beta=0.5)
        _, maps, _ = open_vocabulary_rows(clip, tower, x, text, (rule,), opts, proxy)
        want = ref.maps(clip, x, text, rule, std=1.5, gamma=5.0, beta=0.5, residual=opts.residual, proxy=proxy).T
        assert (maps[rule] - want).abs().max().item() <= TOL, rule
        _, default, _ = open_vocabulary_rows(clip, tower, x, text, (rule,), RuleOptions(), proxy)
        assert (default[rule] - want).abs().max().item() > 100 * TOL, rule  # the options changed the answer


def test_chunks_of_a_few_rows_give_the_whole_answer():
    clip, tower, x, text = _case("clip", (48, 80), PROMPTS)
    proxy = _proxy(15)
    whole = open_vocabulary_rows(clip, tower, x, text, OPEN_RULES, RuleOptions(), proxy)[1]
    small = open_vocabulary_rows(clip, tower, x, text, OPEN_RULES, RuleOptions(), proxy, chunk_bytes=1 << 10)[1]
    for rule in OPEN_RULES:
        assert (whole[rule] - small[rule]).abs().max().item() <= 1e-6


def test_the_tolerance_is_sharp():
    """NACLIP's reference with another std, or ClearCLIP's with SCLIP's attention, fails the comparison."""
    clip, tower, x, text = _case("clip", (64, 64), PROMPTS)
    _, maps, _ = open_vocabulary_rows(clip, tower, x, text, ("naclip", "clearclip"), RuleOptions())
    assert (maps["naclip"] - ref.maps(clip, x, text, "naclip", std=4.0).T).abs().max().item() > 10 * TOL
    assert (maps["clearclip"] - ref.maps(clip, x, text, "sclip", residual=False).T).abs().max().item() > 10 * TOL


def test_a_proxy_row_with_nothing_left_keeps_its_own_patch():
    g = torch.Generator().manual_seed(0)
    q = k = torch.randn(2, 5, 4, generator=g)
    v = torch.randn(2, 5, 4, generator=g)
    same = torch.ones(4, 3)  # every similarity 1 = its mean: beta 1.2 masks every entry
    out = rule_rows("proxy", (q, k, v, None, 0.5), (2, 2), 1, RuleOptions(beta=1.2), same)
    torch.testing.assert_close(out, v[:, 1:])


def test_text_relevance_runs_the_asked_rules_with_a_proxy_model_and_no_backward(monkeypatch):
    from attention.vit.text import find

    monkeypatch.setattr(find, "text_relevance_rows", lambda *a, **k: pytest.fail("a backward ran"))
    clip = tiny("clip")
    dino = timm.create_model("test_vit", num_classes=0, dynamic_img_size=True).eval()
    img = Image.fromarray(np.random.default_rng(0).integers(0, 255, (48, 80, 3), dtype=np.uint8))
    tr = text_relevance(clip, img, "a cat, two dogs", rules="naclip, proxy", proxy=dino, resolution="native")
    assert tr.rules == ("similarity", "naclip", "proxy") or tr.rules == ("naclip", "proxy")
    assert tr.maps("proxy").shape == (2, 3, 5) and tr.options["naclip"] == {"residual": False, "std": 5.0}
    with pytest.raises(InputError, match="needs a proxy model"):
        text_relevance(clip, img, "a cat", rules="proxy")
    with pytest.raises(InputError, match="accepted: chefer, legrad, similarity, maskclip"):
        text_relevance(clip, img, "a cat", rules="gradcam")


@pytest.mark.parametrize(
    "kwargs, said",
    [
        ({"std": 0}, "std 0 is out of range; accepted: more than 0, at most 100"),
        ({"gamma": "x"}, "gamma 'x' is out of range"),
        ({"beta": 11}, "0 to 10"),
        ({"residual": "maybe"}, "true, false or empty"),
    ],
)
def test_bad_options_are_refused_naming_what_is_accepted(kwargs, said):
    with pytest.raises(InputError, match=said):
        check_options(**kwargs)
    assert check_options(residual="false", std="2.5").keeps_residual("maskclip") is False
