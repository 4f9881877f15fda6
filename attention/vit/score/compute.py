"""Which map to trust: faithfulness and localisation scores of maps, for one image and one explained answer.

    sc = scorer(load_vit("mnist_vit"))
    out = score_maps(sc, digit, ["chefer", "random"])                 # {name: Scores}
    out["chefer"].auc_positive, out["chefer"].auc_negative            # Chefer et al.'s AUCs
    score_maps(sc, digit, {"mine": my_map}, mask=ink)                  # your own (gh, gw) or (H, W) array

Every map of one image is scored on the same input (`prepare` at `resolution`), its removals applied to the
image (pixels, not tokens, so every library's model is scored alike), all curves' inputs batched (`batch`
images per forward): perturbation (positive, negative), deletion and insertion cost 2 * len(steps) +
2 * (ceil(H * W / step) + 1) inputs per map. The protocols and their settings: `protocol`.
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field
from functools import partial

import numpy as np
import torch

from attention.errors import InputError
from attention.images import MAX_TOKENS, ImageSource, load_image
from attention.vit.backbone import describe
from attention.vit.engine.preprocess import Preprocess
from attention.vit.engine.request import RESOLUTION
from attention.vit.score import protocol as P
from attention.vit.score.maps import check_names, method_maps
from attention.vit.score.target import Scorer

PROTOCOLS = ("perturbation", "deletion", "insertion")
RISE_POINTS = 16  # deletion / insertion: ceil(H * W / 16) pixels a step by default, 17 points


@dataclass
class Scores:
    """One map's scores for one image. S = len(steps) perturbation points, R deletion/insertion points."""

    positive: np.ndarray  # float64 (S,): the explained answer's probability, most relevant removed first
    negative: np.ndarray  # float64 (S,): least relevant first
    positive_hits: np.ndarray  # bool (S,): the answer still the top one (Chefer et al.'s accuracy curve)
    negative_hits: np.ndarray
    deletion: np.ndarray | None = None  # float64 (R,)
    insertion: np.ndarray | None = None
    pointing: bool | None = None  # with a mask or point
    segmentation: P.Segmentation | None = None  # with a mask
    steps: tuple[float, ...] = P.STEPS

    @property
    def auc_positive(self) -> float:
        """Area under the positive curve over the removed fraction: lower is more faithful."""
        return P.auc(self.positive, self.steps)

    @property
    def auc_negative(self) -> float:
        """Area under the negative curve: higher is more faithful."""
        return P.auc(self.negative, self.steps)

    def figures(self) -> dict[str, float]:
        """The scalars: AUCs (of the probability; top1_*: of the hit curve, whose mean over a dataset x 100 is
        Chefer et al.'s Table 1 figure), deletion/insertion areas, pointing hit, mIoU and pixel accuracy."""
        out = {"auc_positive": self.auc_positive, "auc_negative": self.auc_negative}
        for side, hits in (("positive", self.positive_hits), ("negative", self.negative_hits)):
            out[f"top1_{side}"] = P.auc(hits.astype(np.float64), self.steps)
        if self.deletion is not None:
            out["deletion"] = P.rise_auc(self.deletion)
        if self.insertion is not None:
            out["insertion"] = P.rise_auc(self.insertion)
        if self.pointing is not None:
            out["pointing"] = float(self.pointing)
        if self.segmentation is not None:
            out["miou"] = self.segmentation.miou
            out["pixel_accuracy"] = self.segmentation.pixel_accuracy
        return out


@dataclass
class Scored:
    """The scores of several maps of one image, and what they explain."""

    maps: dict[str, Scores]
    target: int
    label: str
    probability: float  # of the explained answer on the whole image
    top: int  # the model's own answer on the whole image
    grid: tuple[int, int]
    settings: dict = field(default_factory=dict)  # value, unit, steps, step, blur, tolerance: what was run
    raw: dict[str, np.ndarray] = field(default_factory=dict, repr=False)  # the maps scored, (gh, gw) or (H, W)
    seconds: float = 0.0
    forwards: int = 0  # inputs run through the model

    @property
    def nbytes(self) -> int:
        """Bytes held (the maps and every curve), for a server's bounded store."""
        curves = [c for s in self.maps.values() for c in (s.positive, s.negative, s.deletion, s.insertion)]
        return sum(a.nbytes for a in [*self.raw.values(), *curves] if a is not None) + 1024


def price(
    model: torch.nn.Module, tokens: int, *, maps: int, steps: int, protocols, step: int | None, rules: bool
) -> float:
    """GFLOP of a scoring job at `tokens` patch tokens: one forward per perturbed input (2 * steps a map, and
    the deletion/insertion points), the whole image's and the attention maps' forwards, a relevance job
    (`cost.relevance_gflop`) when a rule's map is asked."""
    from attention.vit.engine.cost import forward_gflop, relevance_gflop

    p = describe(model).patch_size
    points = RISE_POINTS + 1 if step is None else -(-tokens * p * p // step) + 1
    inputs = 2 + maps * (2 * steps + points * (len(protocols) - 1))
    return inputs * forward_gflop(model, tokens) + (relevance_gflop(model, tokens) if rules else 0.0)


def check_price(
    sc: Scorer,
    img,
    prep: Preprocess,
    maps: int,
    *,
    rules: bool,
    steps: int,
    protocols,
    step: int | None,
    max_gflop: float,
    extra_gflop: float = 0.0,
) -> float:
    """The price (GFLOP) of scoring `maps` maps of the decoded image `img` (`price`, and `extra_gflop` of other
    work in the same job: the faithfulness line's rollout); BudgetError over `max_gflop` before anything runs,
    naming the largest resolution that fits."""
    from attention.vit.engine.cost import check_budget

    model = sc.image_model
    cost = partial(price, maps=maps, steps=steps, protocols=protocols, step=step, rules=rules)
    name, device = getattr(model, "alias", "this model"), str(next(model.parameters()).device)
    return check_budget(
        model, prep.input_size(img), prep.resolution, max_gflop, name=name, device=device,
        max_tokens=prep.max_tokens, gflop=lambda m, t: cost(m, t) + extra_gflop, job="faithfulness job",
    )  # fmt: skip


def check_options(
    steps, value: str, unit: str, protocols, tolerance: float = 1.0
) -> tuple[tuple[float, ...], tuple[str, ...]]:
    """(steps, protocols) checked: steps increasing in [0, 1), value, unit, protocols known, tolerance over 0."""
    steps = tuple(float(s) for s in steps)
    if not steps or any(not 0 <= s < 1 for s in steps) or list(steps) != sorted(set(steps)):
        raise InputError(f"Steps {steps} are not accepted; accepted: increasing fractions in [0, 1), e.g. 0, 0.1, ...")
    if value not in P.VALUES:
        raise InputError(f"Removal value {value!r} is not accepted; accepted: {', '.join(P.VALUES)}.")
    if not tolerance > 0:
        raise InputError(f"Tolerance {tolerance} px is not accepted; accepted: over 0 (1: the peak pixel itself).")
    if unit not in P.UNITS:
        raise InputError(f"Unit {unit!r} is not accepted; accepted: {', '.join(P.UNITS)}.")
    given = (protocols,) if isinstance(protocols, str) else tuple(protocols)
    bad = [p for p in given if p not in PROTOCOLS]
    protocols = tuple(p for p in PROTOCOLS if p in given)  # in PROTOCOLS' order, once each
    if bad or "perturbation" not in protocols:
        raise InputError(f"Protocols {protocols} are not accepted; accepted: perturbation, with deletion, insertion.")
    return steps, protocols


def _user_map(name: str, m, grid: tuple[int, int], size: tuple[int, int]) -> np.ndarray:
    a = np.asarray(m, np.float64)
    if a.shape not in (tuple(grid), tuple(size)) or not np.isfinite(a).all():
        raise InputError(
            f"Map {name!r} has shape {a.shape}; accepted: finite numbers of the patch grid {grid} or the input {size}."
        )
    return a


def _mask_at(mask, prep: Preprocess, size: tuple[int, int]) -> np.ndarray:
    """bool (H, W) at the input: a mask of the input's size as is; of the original image's size, through
    the image's own resize and crop (as a picture, then over half)."""
    m = np.asarray(mask)
    if m.ndim != 2:
        raise InputError(f"A mask is (H, W); this one has shape {m.shape}.")
    if m.shape == tuple(size):
        return m.astype(bool)
    from PIL import Image

    shown = prep.decoded(Image.fromarray(np.where(m.astype(bool), 255, 0).astype(np.uint8)).convert("RGB")).shown
    out = np.asarray(shown.convert("L")) > 127
    if out.shape != tuple(size):
        raise InputError(f"The mask ({m.shape}) does not map onto the input {size}: give it at the image's size.")
    return out


def score_maps(
    sc: Scorer,
    image: ImageSource,
    maps: list[str] | str | dict[str, np.ndarray],
    target: int | str | None = None,
    *,
    mask: np.ndarray | None = None,
    others: np.ndarray | None = None,
    point: tuple[int, int] | None = None,
    resolution=RESOLUTION,
    steps=P.STEPS,
    value: str = "black",
    unit: str = "patch",
    protocols=PROTOCOLS,
    step: int | None = None,
    tolerance: float = 1.0,
    seed: int = 0,
    batch: int = 64,
    max_tokens: int = MAX_TOKENS,
    max_gflop: float | None = None,
) -> Scored:
    """Score `maps` (names, `maps.accepted`, or {name: array (gh, gw) or (H, W)}) of `image` for `target`
    (a class index or name, a prompt; None: the model's top answer on the whole image).

    mask: bool (H, W) of the image or the input (pointing game, segmentation, the "truth" map); others: the
    other objects' pixels, the same way ("truth" ranks them last: `maps.truth_map`); point: (row, col) px of
    the input (pointing game). value: "black" (Chefer et al.'s 0 before normalising) or "mean" (0 after).
    unit: "patch" or "pixel" (`protocol`). step: pixels per deletion/insertion step (default ceil(H * W / 16)).
    tolerance: the pointing game's, px (a hit: closer than it; 1: the peak pixel itself in the mask).
    max_gflop: the budget of the whole job, priced before it runs (`price`: its forwards, and a relevance job
    when a rule's map is asked; BudgetError naming the largest resolution that fits). Returns a Scored.
    """
    steps, protocols = check_options(steps, value, unit, protocols, tolerance)
    t0 = time.perf_counter()
    model = sc.image_model
    prep = Preprocess.of(model, resolution, max_tokens)
    img = load_image(image)
    if max_gflop is not None:
        n_maps = len(maps) if isinstance(maps, dict) else len(check_names(sc, maps))
        rules = not isinstance(maps, dict) and bool({"chefer", "grad_rollout", "legrad"} & set(check_names(sc, maps)))
        check_price(sc, img, prep, n_maps, rules=rules, steps=len(steps), protocols=protocols, step=step,
                    max_gflop=max_gflop)  # fmt: skip
    p = prep.decoded(img)
    x, grid = p.x[None], p.grid
    size = (x.shape[2], x.shape[3])
    m_in = None if mask is None else _mask_at(mask, prep, size)
    o_in = None if others is None else _mask_at(others, prep, size)
    pm = None if point is None else P.point_mask(point, size)  # checked, even beside a mask
    m_in = pm if m_in is None else m_in
    if sc.bind is not None:
        sc = sc.bind(x)
    whole = sc.predict(x)[0]
    t = sc.target_index(target, whole)
    if isinstance(maps, dict):
        raw = {str(k): _user_map(str(k), v, grid, size) for k, v in maps.items()}
        if not raw:
            raise InputError("No map to score: give at least one.")
    else:
        names = check_names(sc, maps)
        raw = method_maps(sc, image, t, names, grid=grid, resolution=resolution, mask=m_in, others=o_in, seed=seed)
    step = step or -(-size[0] * size[1] // RISE_POINTS)
    if step < 1:
        raise InputError(f"Step {step} px is not accepted; accepted: 1 or more.")
    fill = P.removal_value(value, *sc.mean_std)
    x0 = x[0]
    inputs, spans = [], {}
    base = P.blurred(x)[0] if "insertion" in protocols else None
    for name, m in raw.items():
        parts = [P.perturbation_keep(m, size, sc.patch, steps, unit, neg) for neg in (False, True)]
        inputs += [x0 * k + fill * (1 - k) for k in parts]
        if "deletion" in protocols:
            k = P.rise_keep(m, size, step)
            inputs.append(x0 * k + fill * (1 - k))
        if "insertion" in protocols:
            k = P.rise_keep(m, size, step)
            inputs.append(base * k + x0 * (1 - k))
        spans[name] = [len(i) for i in inputs[-len(protocols) - 1 :]]
    xs = torch.cat(inputs)
    probs = torch.cat([sc.predict(xs[i : i + batch]) for i in range(0, len(xs), batch)])
    pt, top = probs[:, t].double().numpy(), (probs.argmax(-1) == t).numpy()
    out, at = {}, 0
    for name, m in raw.items():
        lens = spans[name]
        cut = np.cumsum([at] + lens)
        at = int(cut[-1])
        pos, neg = slice(cut[0], cut[1]), slice(cut[1], cut[2])
        more = dict(zip(protocols[1:], (pt[cut[i + 2] : cut[i + 3]] for i in range(len(protocols) - 1))))
        out[name] = Scores(
            positive=pt[pos],
            negative=pt[neg],
            positive_hits=top[pos],
            negative_hits=top[neg],
            deletion=more.get("deletion"),
            insertion=more.get("insertion"),
            pointing=None if m_in is None else P.pointing(m, m_in, tolerance),
            segmentation=None if mask is None else P.segmentation(m, m_in),
            steps=steps,
        )
    settings = {"kind": sc.kind, "value": value, "unit": unit, "steps": list(steps), "step": step}
    settings |= {"tolerance": tolerance, "blur": list(P.BLUR), "resolution": str(resolution)}
    settings["protocols"] = list(protocols)
    return Scored(
        maps=out,
        target=t,
        label=sc.labels[t],
        probability=float(whole[t]),
        top=int(whole.argmax()),
        grid=grid,
        settings=settings,
        raw=raw,
        seconds=time.perf_counter() - t0,
        forwards=len(xs) + 1,
    )
