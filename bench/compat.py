"""Which timm ViTs the engine reads exactly: tiny random instances checked against timm's own
unfused attention, and the table the README shows.

    python -m bench.compat            # markdown table, per family (a minute or two on 2 cores)
    python -m bench.compat --per 1    # one architecture per family

The oracle is timm's computation, not ours: a copy of the model with `fused_attn = False` on every
attention module runs timm's explicit path, and the softmax it computes is captured as it is made.
Both see the same random weights, made peaked (q and k projections x3, position-bias tables ~N(0, 1)),
every layer, every head, every token as the query, on a square and a non-square input. The figure is
the worst |ours - timm's| over each row, divided by that row's peak.
"""

from __future__ import annotations

import argparse
import copy
import re
from dataclasses import dataclass

import torch
from torch.overrides import TorchFunctionMode

from attention.errors import AttentionError
from attention.vit.engine.capture import attention_modules, check_supported
from attention.vit.engine.query import has_pool
from attention.vit.engine.rows import run_pass

TINY = {"depth": 2, "embed_dim": 64, "num_heads": 4}  # every family's shape, small
TOLERANCE = 1e-4  # of each row's peak

# (family, pattern on the timm name), first match wins: the README's rows, in order
FAMILIES = [
    ("DINOv3", r"dinov3"),
    ("Sapiens 2", r"sapiens"),
    ("Perception Encoder", r"^vit_pe_"),
    ("DINOv2 with registers", r"reg\d.*dinov2"),
    ("DINOv2", r"dinov2"),
    ("SigLIP / SigLIP 2", r"siglip"),
    ("CLIP", r"clip"),
    ("DeiT distilled", r"^deit.*distilled"),
    ("DeiT / DeiT III", r"^deit"),
    ("EVA-02", r"^eva02"),
    ("EVA", r"^eva"),
    ("RoPE ViT", r"rope"),
    ("relpos ViT", r"relpos"),
    ("BEiT / BEiT v2 / v3", r"^beit"),
    ("FlexiViT", r"^flexivit"),
    ("NaFlexViT", r"naflex"),
    ("DiffAttention ViT", r"^vit_d(wee|little|pwee)_"),
    ("ViT, attention-pooling head (map)", r"_map"),
    ("ViT, global average pool (gap)", r"_gap"),
    ("ViT with registers", r"reg\d"),
    ("SAM ViT", r"^samvit"),
    ("hybrid ViT (CNN stem)", r"^vit_.*(_r\d|resnet)"),
    ("ViT (plain)", r"^vit_"),
]


def family(name: str) -> str | None:
    """The README family of a timm model name, None for names outside these families."""
    for fam, pat in FAMILIES:
        if re.search(pat, name):
            return fam
    return None


def tiny(name: str, size: tuple[int, int] | None = None, seed: int = 0) -> torch.nn.Module:
    """A tiny random instance of timm architecture `name` (2 layers, width 64, 4 heads), peaked, in
    eval mode: any input size where the architecture allows it, else built for `size` (H, W) px."""
    import timm

    torch.manual_seed(seed)
    try:
        m = timm.create_model(name, pretrained=False, num_classes=0, dynamic_img_size=True, **TINY)
    except TypeError as e:
        if "dynamic_img_size" not in str(e):
            raise
        m = timm.create_model(name, pretrained=False, num_classes=0, img_size=size or 64, **TINY)
    return peak(m.eval())


@torch.no_grad()
def peak(model: torch.nn.Module) -> torch.nn.Module:
    """Sharpen random attention so rows have a clear peak: q and k projections x3, relative-position
    tables drawn from N(0, 1) (zero at init). In place; returns the model."""
    for mod in model.modules():
        qkv = getattr(mod, "qkv", None)
        if isinstance(qkv, torch.nn.Linear) and qkv.weight.shape[0] % 3 == 0:
            qkv.weight[: 2 * qkv.weight.shape[0] // 3] *= 3.0
        for part in ("q_proj", "k_proj", "q"):
            lin = getattr(mod, part, None)
            if isinstance(lin, torch.nn.Linear):
                lin.weight *= 3.0
        kv = getattr(mod, "kv", None)
        if isinstance(kv, torch.nn.Linear):
            kv.weight[: kv.weight.shape[0] // 2] *= 3.0
    for n, p in model.named_parameters():
        if "relative_position_bias_table" in n or "rel_pos" in n:
            p.normal_(0.0, 1.0)
    return model


class _Softmax(TorchFunctionMode):
    """Records every softmax computed under it, in order."""

    def __init__(self):
        super().__init__()
        self.out: list[torch.Tensor] = []

    def __torch_function__(self, func, types, args=(), kwargs=None):
        r = func(*args, **(kwargs or {}))
        if func in (torch.Tensor.softmax, torch.softmax, torch.nn.functional.softmax):
            self.out.append(r.detach().float())
        return r


@torch.no_grad()
def timm_attention(model: torch.nn.Module, x: torch.Tensor) -> list[torch.Tensor]:
    """timm's own attention, layer by layer: a copy of `model` with every attention module's
    `fused_attn = False` (timm's explicit path), its softmax outputs as computed: (B, H, N, N) per
    block, then (B, H, 1, N') for an attention-pooling head."""
    ref = copy.deepcopy(model)
    for mod in attention_modules(ref):
        mod.fused_attn = False
    with _Softmax() as rec:
        f = ref.forward_features(x)
        if has_pool(ref):
            ref.forward_head(f)
    want = len(attention_modules(ref))
    if len(rec.out) != want:
        raise RuntimeError(f"timm's unfused path computed {len(rec.out)} softmaxes for {want} attention modules")
    return rec.out


@torch.no_grad()
def deviation(model: torch.nn.Module, x: torch.Tensor) -> float:
    """Worst |ours - timm's| / row peak over every layer, head and query token (and the pooling
    head's query) of one input x (1, C, H, W)."""
    ref = timm_attention(model, x)
    N = ref[0].shape[-1]
    rec = run_pass(model, x.expand(N, -1, -1, -1), torch.arange(N), keep_qk=False, pool=has_pool(model))
    worst = 0.0
    for layer, r in enumerate(ref[: len(model.blocks)]):
        ours = torch.softmax(rec.rows[layer].float(), -1).transpose(0, 1)  # (H, N queries, N)
        worst = max(worst, float(((ours - r[0]).abs().amax(-1) / r[0].amax(-1)).max()))
    if has_pool(model):
        ours = torch.softmax(rec.pool[0][0].float(), -1)  # (H, N')
        r = ref[-1][0, :, 0]
        worst = max(worst, float(((ours - r).abs().amax(-1) / r.amax(-1)).max()))
    return worst


@dataclass
class Verdict:
    name: str
    exact: bool
    figure: float | None = None  # worst deviation / row peak, when exact
    why: str = ""  # the refusal's message
    built: bool = True  # False: no tiny instance could be built (the name is not checked)


def check(name: str) -> Verdict:
    """Build a tiny `name`, then: refused (the engine's typed refusal, or load_vit's) or the worst
    deviation on a square and a non-square input (exact when within TOLERANCE)."""
    import timm

    from attention.vit.models.registry import VIT_MODULES

    if not timm.models.is_model_in_modules(name, VIT_MODULES):
        return Verdict(name, False, why=f"not a model of {', '.join(VIT_MODULES)} (load_vit refuses it by name)")
    worst = 0.0
    for hw in ((3, 3), (4, 3)):
        try:
            model = tiny(name)
            p = model.patch_embed.patch_size
            size = (hw[0] * p[0], hw[1] * p[1])
            if getattr(model.patch_embed, "strict_img_size", False):
                model = tiny(name, size)
        except Exception as e:  # noqa: BLE001 - an architecture with fixed widths: not checked, said so
            return Verdict(name, False, why=f"no tiny instance ({type(e).__name__})", built=False)
        try:
            check_supported(model)
            worst = max(worst, deviation(model, torch.randn(1, 3, *size)))
        except AttentionError as e:
            return Verdict(name, False, why=str(e))
        except Exception as e:  # noqa: BLE001 - the engine crashed: the table must show it, not hide it
            return Verdict(name, False, why=f"CRASH {type(e).__name__}: {e}")
    return Verdict(name, worst <= TOLERANCE, worst, "" if worst <= TOLERANCE else "rows differ from timm's")


def table(per: int = 3, names: list[str] | None = None) -> str:
    """The markdown table: per family, the names timm lists, `per` architectures checked, the verdict."""
    import timm

    names = names if names is not None else timm.list_models()
    groups: dict[str, list[str]] = {}
    for n in names:
        fam = family(n)
        if fam is not None:
            groups.setdefault(fam, []).append(n)
    lines = [
        "| family | timm names | checked (tiny, random, peaked) | verdict | worst deviation / row peak |",
        "|---|---:|---|---|---:|",
    ]
    for fam, _ in FAMILIES:
        if fam not in groups:
            continue
        picked = _spread(groups[fam], per)
        verdicts = [v for v in (check(n) for n in picked) if v.built]
        exact = [v for v in verdicts if v.exact]
        if not verdicts:
            verdict, fig = "not checked (no tiny instance could be built)", "-"
        elif len(exact) == len(verdicts):
            verdict, fig = "exact", f"{max(v.figure or 0.0 for v in exact):.1e}"
        elif not exact:
            verdict, fig = "refused: " + verdicts[0].why.replace("|", "/"), "-"
        else:
            bad = next(v for v in verdicts if not v.exact)
            worst = max(v.figure or 0.0 for v in exact)
            verdict, fig = f"exact, except {bad.name}: {bad.why.replace('|', '/')}", f"{worst:.1e}"
        names = ", ".join(f"`{v.name}`" for v in verdicts) or ", ".join(f"`{n}`" for n in picked)
        lines.append(f"| {fam} | {len(groups[fam])} | {names} | {verdict} | {fig} |")
    return "\n".join(lines)


def _spread(names: list[str], k: int) -> list[str]:
    """k names spread over the sorted list (distinct architectures where there are)."""
    names = sorted(names)
    if len(names) <= k:
        return names
    return [names[round(i * (len(names) - 1) / max(k - 1, 1))] for i in range(k)]


def main(argv: list[str] | None = None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--per", type=int, default=3, help="architectures checked per family (default 3)")
    a = ap.parse_args(argv)
    print(table(a.per))


if __name__ == "__main__":
    main()
