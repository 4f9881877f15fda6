"""Text relevance (`attention.vit.text`) against the papers' algorithms with full matrices
(tests/vit/text_reference.py), on tiny random open_clip CLIP (class-token pool, projection) and SigLIP
(attention-pooling head, logit bias) models with timm image towers."""

from __future__ import annotations

import numpy as np
import open_clip
import pytest
import torch
from PIL import Image

from attention.errors import InputError, NoTextTowerError
from attention.vit.text import MAX_PROMPT_CHARS, MAX_PROMPTS, NONE, text_relevance
from attention.vit.text.compute import encode_prompts, text_relevance_rows
from attention.vit.text.result import FOREGROUND, MARGIN
from attention.vit.text.tower import ready
from tests.vit import text_reference as ref

TOL = 1e-4  # of the peak
PROMPTS = ["a cat", "a remote control", "two dogs"]


def tiny(kind: str, seed: int = 0):
    """A tiny random open_clip model: "clip" (timm test_vit, class token, linear projection) or "siglip"
    (timm test_vit with an attention-pooling head, no projection, logit bias -10)."""
    torch.manual_seed(seed)
    text = dict(context_length=16, vocab_size=49408, width=32, heads=2, layers=1)
    if kind == "siglip":
        vision = dict(timm_model_name="test_vit", timm_pool="map", timm_proj="none", image_size=64)
        return open_clip.CLIP(embed_dim=64, vision_cfg=vision, text_cfg=text, init_logit_bias=-10.0).eval()
    pool = "avg" if kind == "avg" else "token"
    vision = dict(timm_model_name="test_vit", timm_pool=pool, timm_proj="linear", image_size=64)
    return open_clip.CLIP(embed_dim=32, vision_cfg=vision, text_cfg=text).eval()


def _peak_close(ours, theirs, tol=TOL):
    ours, theirs = np.asarray(ours, np.float64), np.asarray(theirs, np.float64)
    assert ours.shape == theirs.shape
    err = np.abs(ours - theirs).max() / np.abs(theirs).max()
    assert err <= tol, f"max error {err:.2e} of the peak"


@pytest.mark.parametrize("kind", ["clip", "siglip", "avg"])
@pytest.mark.parametrize("size", [(64, 64), (48, 80)])
def test_rules_equal_the_full_matrix_reference(kind, size):
    clip = tiny(kind)
    tower = ready(clip)
    x = torch.randn(1, 3, *size, generator=torch.Generator().manual_seed(1))
    text = encode_prompts(clip, PROMPTS)
    logits, chefer, legrad, sim = text_relevance_rows(clip, tower, x, text, legrad_layers=3)
    T = tower.num_prefix_tokens
    for p in range(len(PROMPTS)):
        row, s = ref.chefer(clip, x, text[p])
        assert abs(float(logits[p]) - s) < 1e-4 * max(1, abs(s))
        _peak_close(chefer[p, T:], row[T:])
        _peak_close(legrad[p, T:], ref.legrad(clip, x, text[p], 3))
        _peak_close(sim[p, T:], ref.similarity(clip, x, text[p]))


@pytest.mark.parametrize("kind", ["clip", "siglip"])
def test_logits_are_the_models_own(kind):
    clip = tiny(kind)
    img = Image.fromarray(np.random.default_rng(0).integers(0, 255, (64, 64, 3), dtype=np.uint8))
    tr = text_relevance(clip, img, PROMPTS, resolution="native")
    x = torch.from_numpy(np.asarray(tr.image, np.float32) / 255).permute(2, 0, 1)[None]
    mean, std = clip.visual.trunk.pretrained_cfg["mean"], clip.visual.trunk.pretrained_cfg["std"]
    x = (x - torch.tensor(mean)[:, None, None]) / torch.tensor(std)[:, None, None]
    ids = open_clip.tokenizer.SimpleTokenizer(context_length=16)(PROMPTS)
    with torch.no_grad():
        out = clip(x, ids)
    own = (out[2] * out[0] @ out[1].T + (out[3] if len(out) > 3 else 0)).detach()
    np.testing.assert_allclose(tr.logits, own[0].numpy(), rtol=1e-4, atol=1e-4)
    assert tr.kind == ("siglip" if kind == "siglip" else "clip")
    assert [p for p, _, _ in tr.ranking()] == [PROMPTS[i] for i in np.argsort(-own[0].numpy(), kind="stable")]


@pytest.mark.parametrize("kind", ["clip", "siglip"])
def test_a_batch_of_prompts_equals_the_prompts_one_at_a_time(kind):
    clip = tiny(kind)
    tower = ready(clip)
    x = torch.randn(1, 3, 48, 64, generator=torch.Generator().manual_seed(2))
    text = encode_prompts(clip, PROMPTS)
    together = text_relevance_rows(
        clip, tower, x, text, chunk_bytes=1 << 10
    )  # a row or two per chunk: many chunks per layer
    for p in range(len(PROMPTS)):
        alone = text_relevance_rows(clip, tower, x, text[p : p + 1])
        for a, b in zip(together, alone):
            _peak_close(a[p : p + 1], b, 1e-5)


def test_segmentation_labels_only_clear_winners_and_scores_are_the_models_own():
    clip = tiny("siglip")
    img = Image.fromarray(np.random.default_rng(3).integers(0, 255, (64, 96, 3), dtype=np.uint8))
    tr = text_relevance(clip, img, "a cat, a remote control, two dogs", resolution="native")
    assert tr.prompts == tuple(PROMPTS) and tr.grid == (4, 6)
    for rule in tr.rules:
        m = tr.maps(rule).astype(np.float64)
        seg = tr.segmentation(rule)
        assert seg.shape == (4, 6)
        lo, spread = m.min(), m.max() - m.min()
        top2 = np.sort(m, 0)[-2:]
        clear = (top2[1] - lo >= FOREGROUND * spread) & (top2[1] - top2[0] >= MARGIN * spread)
        np.testing.assert_array_equal(seg[clear], m.argmax(0)[clear])
        assert (seg[~clear] == NONE).all()
    np.testing.assert_allclose(tr.scores, 1 / (1 + np.exp(-tr.logits.astype(np.float64))), rtol=1e-6)
    one = text_relevance(tiny("clip"), img, "a cat", rules="clearclip", resolution="native")
    clip_ = tiny("clip")
    assert abs(float(one.scores[0]) - float(one.logits[0]) / float(clip_.logit_scale.exp())) < 1e-6
    assert -1 <= float(one.scores[0]) <= 1  # a cosine: one prompt alone is not 100%
    seg = one.segmentation("clearclip")
    m = one.maps("clearclip")[0]
    np.testing.assert_array_equal(seg == 0, m - m.min() >= FOREGROUND * (m.max() - m.min()))


def test_the_tolerance_is_sharp():
    """A reference fed another prompt's gradient (a wrong target) fails the comparison."""
    clip = tiny("clip")
    tower = ready(clip)
    x = torch.randn(1, 3, 64, 64, generator=torch.Generator().manual_seed(1))
    text = encode_prompts(clip, PROMPTS)
    _, chefer, _, _ = text_relevance_rows(clip, tower, x, text)
    row, _ = ref.chefer(clip, x, text[1])
    with pytest.raises(AssertionError):
        _peak_close(chefer[0, 1:], row[1:])


def test_bad_prompts_are_refused_naming_what_is_accepted():
    clip = tiny("clip")
    img = Image.new("RGB", (64, 64))
    for bad, said in [
        ("", "No prompt"),
        ("  ,  ", "No prompt"),
        ("a cat,,a dog", "Prompt 2 is empty"),
        ("x" * (MAX_PROMPT_CHARS + 1), f"at most {MAX_PROMPT_CHARS}"),
        (",".join(["a cat"] * (MAX_PROMPTS + 1)), f"1 to {MAX_PROMPTS}"),
        (" ".join(["cat"] * 20), "reads at most 16"),
        ([1, 2], "must be text"),
    ]:
        with pytest.raises(InputError, match=said):
            text_relevance(clip, img, bad)


def test_a_model_without_a_text_tower_is_refused_by_type():
    import timm

    vit = timm.create_model("test_vit", num_classes=0)
    with pytest.raises(NoTextTowerError, match="pick a model that has one: .*digit_clip"):
        text_relevance(vit, Image.new("RGB", (64, 64)), "a cat")


@pytest.mark.parametrize("kind", ["clip", "avg"])
@pytest.mark.parametrize("size", [(64, 64), (48, 80)])
def test_one_prompt_runs_chefers_update_inside_the_backward_and_equals_the_reference(kind, size, monkeypatch):
    """One prompt on the CPU: blocks L-1..1 run as `backward.FusedRows`, whose backward builds each chunk of
    A and dA once for the kernel's gradients and Chefer's update (a few rows per chunk here)."""
    from attention.vit.text import backward

    calls = []
    rows = backward.backward_rows
    monkeypatch.setattr(backward, "CHUNK_BYTES", 1 << 11)
    monkeypatch.setattr(backward, "backward_rows", lambda *a, **k: calls.append(a[-1] is not None) or rows(*a, **k))
    clip = tiny(kind)
    tower = ready(clip)
    x = torch.randn(1, 3, *size, generator=torch.Generator().manual_seed(1))
    text = encode_prompts(clip, PROMPTS[1:2])
    logits, chefer, legrad, sim = text_relevance_rows(clip, tower, x, text, legrad_layers=3)
    assert calls == [True] * (len(clip.visual.trunk.blocks) - 1)
    row, s = ref.chefer(clip, x, text[0])
    T = tower.num_prefix_tokens
    assert abs(float(logits[0]) - s) < 1e-4 * max(1, abs(s))
    _peak_close(chefer[0, T:], row[T:])
    _peak_close(legrad[0, T:], ref.legrad(clip, x, text[0], 3))
    _peak_close(sim[0, T:], ref.similarity(clip, x, text[0]))


def test_the_fused_backwards_gradients_are_the_kernels():
    """`backward.backward_rows` against autograd through torch's own fused kernel, and its row update against
    r (I + mean_h((dA * A)^+)) with the full A and dA."""
    from attention.vit.text.backward import backward_rows

    g = torch.Generator().manual_seed(4)
    H, N, d = 3, 37, 8
    q, k, v, do = (torch.randn(H, N, d, generator=g) * 2 for _ in range(4))
    r = torch.rand(N, generator=g)
    qs, ks, vs = (t.clone().requires_grad_(True) for t in (q, k, v))
    out = torch.nn.functional.scaled_dot_product_attention(qs, ks, vs, scale=0.3)
    want = torch.autograd.grad(out, (qs, ks, vs), do)
    a = torch.softmax(q @ k.mT * 0.3, -1)
    da = do @ v.mT
    want_r = r + r @ (da * a).clamp(min=0).mean(0)
    lse = torch.logsumexp(q @ k.mT * 0.3, -1)
    got = backward_rows(q, k, v, out.detach(), lse, do, 0.3, r, chunk_bytes=4 * H * N * 5)  # 5 rows a chunk
    for ours, theirs in zip(got[:3], want):
        _peak_close(ours, theirs, 1e-5)
    _peak_close(got[3], want_r, 1e-5)


def test_one_prompt_passes_on_a_shared_model_from_several_threads_get_their_solo_answers():
    """Each thread's pass records its own kernels and Chefer state (`record.Pass`, `backward.CheferState`):
    threads running at once on one model object give each the answer it gets alone."""
    from concurrent.futures import ThreadPoolExecutor

    clip = tiny("clip")
    tower = ready(clip)
    text = encode_prompts(clip, PROMPTS)
    xs = [torch.randn(1, 3, 48, 64, generator=torch.Generator().manual_seed(10 + i)) for i in range(6)]

    def one(i):
        return text_relevance_rows(clip, tower, xs[i], text[i % 3 : i % 3 + 1])

    alone = [one(i) for i in range(6)]
    with ThreadPoolExecutor(6) as pool:
        together = list(pool.map(one, range(6)))
    for a, b in zip(together, alone):
        for x, y in zip(a, b):
            _peak_close(x, y, 1e-6)
