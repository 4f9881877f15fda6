"""Spec of the step-by-step view (`stepwise.explain_row`): every number equals a recomputation from the
model's own weights, done here (the block's qkv projection on the attention module's input, q_norm/k_norm,
the rotary embedding as timm's EvaAttention applies it, the relative-position bias as the relpos and BEiT
blocks make it), for tiny random models of five families (a plain ViT, DINOv2 with registers, DINOv3 with
RoPE, a relpos ViT, BEiT); the temperature-1 row is the map the tab draws; the
calculator fed by "Open in the calculator" reproduces the head's output row restricted to those keys."""

from __future__ import annotations

import numpy as np
import pytest
import torch
import torch.nn.functional as F
from timm.layers import apply_rot_embed_cat

from attention.calculator import form as qkv_form
from attention.errors import InputError
from attention.vit.engine import stepwise
from attention.vit.engine.extract import attention_maps
from bench import compat

FAMILIES = {
    "plain": "vit_small_patch16_224",
    "dinov2_reg": "vit_small_patch14_reg4_dinov2",
    "dinov3_rope": "vit_small_patch16_dinov3",
    "relpos": "vit_relpos_small_patch16_224",
    "beit": "beit_base_patch16_224",
}
BIASED = ("relpos", "beit")  # an additive relative-position bias in the kernel


def oracle(model: torch.nn.Module, img: np.ndarray, layer: int, resolution) -> dict[str, torch.Tensor]:
    """q, k, v (H, N, d) of block `layer` recomputed from its weights, and its additive bias (H, N, N)
    or None: the attention module's input is captured by a pre-hook; everything after it is done here."""
    got = {}

    def grab(mod, args, kwargs):
        got["x"], got["kw"] = (args[0] if args else kwargs["x"]), kwargs

    attn = model.blocks[layer].attn
    hook = attn.register_forward_pre_hook(grab, with_kwargs=True)
    try:
        attention_maps(model, img, resolution=resolution)  # any forward of the same input
    finally:
        hook.remove()
    x, kw = got["x"].float(), got["kw"]
    B, N, C = x.shape
    H = attn.num_heads
    bias = None
    with torch.no_grad():
        if getattr(attn, "q_bias", None) is not None:  # EVA, DINOv3, BEiT: q and v biases, k's zero
            qb = torch.cat((attn.q_bias, attn.k_bias, attn.v_bias))
            qkv = F.linear(x, attn.qkv.weight, qb)
        else:
            qkv = F.linear(x, attn.qkv.weight, attn.qkv.bias)
        q, k, v = qkv.reshape(B, N, 3, H, -1).permute(2, 0, 3, 1, 4).unbind(0)
        if hasattr(attn, "q_norm"):
            q, k = attn.q_norm(q), attn.k_norm(k)
        rope = kw.get("rope")
        if rope is not None:  # as EvaAttention: rotary embedding on the patch tokens only
            npt, half = attn.num_prefix_tokens, getattr(attn, "rotate_half", False)
            q = torch.cat([q[:, :, :npt], apply_rot_embed_cat(q[:, :, npt:], rope, half=half)], 2)
            k = torch.cat([k[:, :, :npt], apply_rot_embed_cat(k[:, :, npt:], rope, half=half)], 2)
        if getattr(attn, "relative_position_bias_table", None) is not None:  # BEiT's own table
            bias = attn._get_rel_pos_bias().float()[0]
            if kw.get("shared_rel_pos_bias") is not None:
                bias = bias + kw["shared_rel_pos_bias"].float()[0]
        elif getattr(attn, "rel_pos", None) is not None:
            bias = attn.rel_pos.get_bias().float().expand(1, H, N, N)[0]
        elif kw.get("shared_rel_pos") is not None:
            bias = kw["shared_rel_pos"].float().expand(1, H, N, N)[0]
    return {"q": q[0], "k": k[0], "v": v[0], "bias": bias, "scale": attn.scale}


def setup(fam: str):
    name = FAMILIES[fam]
    model = compat.tiny(name)
    p = model.patch_embed.patch_size[0]
    h, w = 4 * p, 5 * p
    if getattr(model.patch_embed, "strict_img_size", False):
        model = compat.tiny(name, (h, w))
    img = (np.random.default_rng(1).random((h, w, 3)) * 255).astype(np.uint8)
    res = "auto" if fam in BIASED else "native"
    return model, img, res, attention_maps(model, img, resolution=res, keep_qk=True)


@pytest.mark.parametrize("fam", FAMILIES)
def test_every_step_equals_a_recomputation_from_the_models_weights(fam):
    model, img, resolution, res = setup(fam)
    assert res.grid == (4, 5)
    P = res.num_prefix_tokens
    for layer in (0, 1):
        ref = oracle(model, img, layer, resolution)
        assert (ref["bias"] is not None) == (fam in BIASED)
        for query, head, key in (((2, 3), 1, None), ((0, 0), 3, (3, 4)), (("cls" if P else (1, 1)), 0, None)):
            s = stepwise.explain_row(res, query=query, layer=layer, head=head, k=6, key=key)
            i = s.query_index
            q, k, v = ref["q"][head], ref["k"][head], ref["v"][head]
            full = q[i] @ k.T * ref["scale"]
            if ref["bias"] is not None:
                full = full + ref["bias"][head, i]
            j = torch.as_tensor(s.index)
            top = set((P + torch.topk(full[P:], 6).indices).tolist())
            extra = key is not None and P + key[0] * 5 + key[1] not in top  # a key outside the top: added
            assert len(s.names) == len(s.index) == P + 6 + extra
            assert np.abs(s.q - q[i].numpy()).max() <= 1e-5
            assert np.abs(s.k - k[j].numpy()).max() <= 1e-5
            assert np.abs(s.v - v[j].numpy()).max() <= 1e-5
            sel = int(j[s.selected])
            if key is None:  # the top patch by the model's weight
                assert sel == P + int(torch.argmax(full[P:]))
            else:
                assert sel == P + key[0] * 5 + key[1]
            assert np.abs(s.products - (q[i] * k[sel]).numpy()).max() <= 1e-5
            assert np.abs(s.dots - (k[j] @ q[i]).numpy()).max() <= 1e-5
            assert s.scale == pytest.approx(ref["scale"], abs=1e-12)
            if ref["bias"] is not None:
                assert np.abs(s.bias - ref["bias"][head, i, j].numpy()).max() <= 1e-5
            assert np.abs(s.logits - full[j].numpy()).max() <= 1e-5
            assert np.abs(s.weights - torch.softmax(full, -1).numpy()).max() <= 1e-5
            # the top patches are the largest weights of the row, prefix tokens always kept
            assert s.index[:P].tolist() == list(range(P))
            assert set(s.index[P : P + 6].tolist()) == top


@pytest.mark.parametrize("fam", ["plain", "relpos"])
def test_temperature_one_is_the_map_on_screen_and_temperature_sharpens_or_flattens(fam):
    from attention.vit.serve.passes import Pass

    _, _, _, res = setup(fam)
    p = Pass(key=("x", "m", "native", ""), model="m", base=res, device="cpu")
    s = stepwise.explain_row(p, query=(1, 2), layer=-1, head=2)
    shown = p.at((1, 2), -1).maps[2]  # what the tab's large map draws for head 2 (`views.query_image`)
    assert np.abs(s.map - shown).max() <= 1e-6
    cold, hot = (stepwise.explain_row(p, query=(1, 2), head=2, temperature=t) for t in (0.5, 3.0))
    ref = torch.softmax(torch.as_tensor(s.scores, dtype=torch.float64) / 3.0, -1).numpy()
    assert np.abs(hot.weights - ref).max() <= 1e-6
    assert cold.top_share > s.top_share > hot.top_share
    assert cold.entropy < s.entropy < hot.entropy <= s.max_entropy + 1e-9
    w = s.weights.astype(np.float64)
    assert s.entropy == pytest.approx(float(-(w * np.log2(w)).sum()), abs=1e-6)


@pytest.mark.parametrize("fam, cols", [("plain", None), ("relpos", None), ("relpos", 16)])
def test_the_calculator_fed_by_open_in_the_calculator_gives_the_restricted_row(fam, cols):
    """The calculator's own steps on the matrices the button writes (as text cells) equal the head's output
    row restricted to the kept keys: softmax over them of the model's scores, times their values (from the
    recomputation). cols=16 (= head_dim): the bias cannot take a column, it is carried along q."""
    model, img, resolution, res = setup(fam)
    ref = oracle(model, img, 1, resolution)
    for t in (1.0, 0.6):
        s = stepwise.explain_row(res, query=(2, 1), layer=1, head=3, k=5, temperature=t)
        form = stepwise.calculator_form(s, max_cols=cols)
        assert form["folded"] == ("" if fam == "plain" else "column" if cols is None else "along q")
        out = qkv_form.run_form(form["matrices"], "Q, K, V directly", qkv_form.read_settings(form["settings"]))
        i, j = s.query_index, torch.as_tensor(s.index)
        q, k, v = ref["q"][3].double(), ref["k"][3].double(), ref["v"][3].double()
        logit = q[i] @ k[j].T * ref["scale"] + (0 if ref["bias"] is None else ref["bias"][3, i, j].double())
        row = torch.softmax(logit / t, -1) @ v[j]
        assert out.steps.output.shape == (1, v.shape[1])
        assert np.abs(out.steps.output[0] - row.numpy()).max() <= 1e-6
        assert np.abs(s.output - row.numpy()).max() <= 1e-6
        assert form["names"] == list(s.names)


def test_bad_requests_are_refused_naming_what_is_accepted():
    _, _, _, res = setup("plain")
    with pytest.raises(InputError, match="whole number from 1 to 64"):
        stepwise.explain_row(res, k=0)
    with pytest.raises(InputError, match="temperature"):
        stepwise.explain_row(res, temperature=0)
    with pytest.raises(InputError, match="4 heads: 0 to 3"):
        stepwise.explain_row(res, head=4)
    with pytest.raises(InputError, match="off the 4x5 grid"):
        stepwise.explain_row(res, key=(9, 9))
    bare = attention_maps(compat.tiny(FAMILIES["plain"]), np.zeros((64, 80, 3), np.uint8), resolution="native")
    with pytest.raises(InputError, match="keep_qk=True"):
        stepwise.explain_row(bare)


def test_the_panels_map_at_temperature_one_has_the_large_maps_pixels_but_the_selected_keys_square():
    from attention.vit.draw.stepwise_html import KEY_COLOR, stepwise_map
    from attention.vit.draw.views import query_image

    _, _, _, res = setup("dinov2_reg")
    r = res.requery((1, 2))
    s = stepwise.explain_row(r, head=2, key=(3, 4))
    ours, shown = stepwise_map(r, s), query_image(r, head=2)  # the panel's map, the tab's large map of head 2
    assert ours.shape == shown.shape
    step = ours.shape[0] // 4
    square = np.zeros(ours.shape[:2], bool)
    square[3 * step : 4 * step, 4 * step : 5 * step] = True  # patch (3, 4): the selected key, marked
    assert (ours[~square] == shown[~square]).all()
    assert (ours[square] == KEY_COLOR).all(-1).any()
    hot = stepwise_map(r, stepwise.explain_row(r, head=2, key=(3, 4), temperature=3.0))
    assert (hot[~square] != shown[~square]).any()  # another temperature: another map
