"""Each score against a reference written here from the paper's protocol, one image at a time, on mnist_vit and a
planted canvas: Chefer et al.'s perturbation (`baselines/ViT/pertubation_eval_from_hdf5.py`: topk of the map,
scatter 0 on the [0, 1] image, normalise, softmax), RISE's deletion and insertion (`evaluation.py`
`CausalMetric.single_run`: `step` pixels of the flipped argsort a step, area `(sum - a0/2 - aN/2) / N`),
Chefer et al.'s segmentation counts (`imagenet_seg_eval.py`: bilinear upsampling, min-max, over the mean; the
+1 shifted histogram IoU) and the pointing game. Maps are random floats: no ties, so any sort agrees."""

from __future__ import annotations

import numpy as np
import pytest
import torch
import torch.nn.functional as F

from attention.errors import InputError
from attention.planted import planted
from attention.vit.models.loader import load_vit
from attention.vit.score import protocol as P
from attention.vit.score import score_maps, scorer

MEAN, STD = 0.1307, 0.3081  # mnist_vit's normalisation


@pytest.fixture(scope="module")
def sc():
    return scorer(load_vit("mnist_vit", device="cpu"))


@pytest.fixture(scope="module")
def canvas():
    p = planted(n_digits=1, cells=(1, 1), seed=3)  # one held-out digit on 28 x 28: mnist_vit's own input
    return p.image, p.masks[0]


def model_prob(model, data01: torch.Tensor, c: int, hit: bool = False) -> float:
    """The reference's read: normalise a [0, 1] image (1, 1, H, W), one forward, softmax, class c's
    probability (hit: 1.0 when c is the top class, else 0.0: their accuracy)."""
    with torch.no_grad():
        p = torch.softmax(model((data01 - MEAN) / STD).double(), -1)[0]
    return float(p.argmax() == c) if hit else float(p[c])


def chefer_reference(model, img: np.ndarray, vis: np.ndarray, steps, c: int, neg: bool, hit: bool = False):
    """Chefer et al.'s loop: for each step, the top int(HW * step) pixels of vis (negated for --neg) set to 0."""
    data = torch.from_numpy(img).double()[None, None] / 255
    v = torch.from_numpy(-vis if neg else vis).reshape(1, -1)
    out = []
    for s in steps:
        d = data.clone().reshape(1, 1, -1)
        _, idx = torch.topk(v, int(v.shape[1] * s), dim=-1)
        d[0, 0, idx[0]] = 0
        out.append(model_prob(model, d.reshape(data.shape).float(), c, hit))
    return out


def test_positive_and_negative_perturbation_match_chefers_loop_pixel_by_pixel(sc, canvas):
    img, _ = canvas
    rng = np.random.default_rng(0)
    vis = rng.random((28, 28))  # a pixel map: no upsampling, no ties
    r = score_maps(sc, img, {"m": vis}, unit="pixel", protocols=["perturbation"])
    c = r.target
    f = r.maps["m"].figures()
    for neg, got in ((False, r.maps["m"].positive), (True, r.maps["m"].negative)):
        want = chefer_reference(sc.image_model, img, vis, P.STEPS, c, neg)
        np.testing.assert_allclose(got, want, atol=2e-6)
        assert f"{P.auc(got, P.STEPS):.4f}" == f"{np.trapezoid(want, P.STEPS):.4f}"
        hits = chefer_reference(sc.image_model, img, vis, P.STEPS, c, neg, hit=True)  # their accuracy curve
        assert f[f"top1_{'negative' if neg else 'positive'}"] == pytest.approx(np.trapezoid(hits, P.STEPS))
    assert r.maps["m"].positive[0] == pytest.approx(r.probability, abs=1e-6)


def test_patch_perturbation_removes_whole_patches_in_the_maps_order(sc, canvas):
    img, _ = canvas
    m = np.random.default_rng(1).random((7, 7))
    r = score_maps(sc, img, {"m": m}, protocols=["perturbation"])
    ranked = np.argsort(-m.ravel())
    want = []
    for s in P.STEPS:
        d = img.astype(np.float64) / 255
        for j in ranked[: int(49 * s)]:
            d[4 * (j // 7) : 4 * (j // 7) + 4, 4 * (j % 7) : 4 * (j % 7) + 4] = 0
        want.append(model_prob(sc.image_model, torch.from_numpy(d).float()[None, None], r.target))
    np.testing.assert_allclose(r.maps["m"].positive, want, atol=2e-6)


def rise_reference(model, x: torch.Tensor, expl: np.ndarray, step: int, start, finish) -> np.ndarray:
    """RISE's single_run: the class c is the top one on x; n = ceil(HW / step); at each i the score, then the
    next `step` pixels of the flipped argsort copied from `finish` into `start`."""
    HW = expl.size
    with torch.no_grad():
        c = int(model(x).argmax())
    n = (HW + step - 1) // step
    order = np.flip(np.argsort(expl.reshape(-1, HW), axis=1), axis=-1)
    start, finish = start.clone().numpy(), finish.clone().numpy()
    scores = np.empty(n + 1)
    for i in range(n + 1):
        with torch.no_grad():
            scores[i] = float(torch.softmax(model(torch.from_numpy(start)).double(), -1)[0, c])
        if i < n:
            coords = order[:, step * i : step * (i + 1)]
            start.reshape(1, 1, HW)[0, :, coords] = finish.reshape(1, 1, HW)[0, :, coords]
    return scores


def gaussian_blur(x: torch.Tensor, klen: int = 11, sigma: float = 5.0) -> torch.Tensor:
    """The insertion substrate as RISE's `gkern` and `blur`: scipy's gaussian_filter of an impulse at the centre of
    a klen x klen grid, conv2d with zero padding klen // 2."""
    from scipy.ndimage import gaussian_filter

    impulse = np.zeros((klen, klen))
    impulse[klen // 2, klen // 2] = 1
    k = torch.from_numpy(gaussian_filter(impulse, sigma)).float()[None, None]
    return F.conv2d(x, k, padding=klen // 2)


def test_deletion_and_insertion_match_rises_single_run(sc, canvas):
    img, _ = canvas
    expl = np.random.default_rng(2).random((28, 28))
    r = score_maps(sc, img, {"m": expl}, value="mean", step=49)
    x = ((torch.from_numpy(img).float() / 255 - MEAN) / STD)[None, None]
    dele = rise_reference(sc.image_model, x, expl, 49, x, torch.zeros_like(x))
    ins = rise_reference(sc.image_model, x, expl, 49, gaussian_blur(x), x)
    np.testing.assert_allclose(r.maps["m"].deletion, dele, atol=2e-6)
    np.testing.assert_allclose(r.maps["m"].insertion, ins, atol=2e-6)
    f = r.maps["m"].figures()
    assert f"{f['deletion']:.4f}" == f"{(dele.sum() - dele[0] / 2 - dele[-1] / 2) / (len(dele) - 1):.4f}"
    assert len(dele) == 17  # 784 px, 49 a step: 16 steps and the whole image


def chefer_seg_reference(patch_map: np.ndarray, labels: np.ndarray, scale: int):
    """imagenet_seg_eval.py's eval_batch for one image: (correct, labeled, inter (2,), union (2,))."""
    res = F.interpolate(torch.from_numpy(patch_map).float()[None, None], scale_factor=scale, mode="bilinear")
    res = (res - res.min()) / (res.max() - res.min())
    ret = res.mean()
    output = torch.cat((res.le(ret).float(), res.gt(ret).float()), 1)  # (1, 2, H, W)
    lab = torch.from_numpy(labels.astype(np.int64))
    predict = output[0].argmax(0) + 1
    target = lab + 1
    correct = int(((predict == target) * (target > 0)).sum())
    labeled = int((target > 0).sum())
    predict = predict * (target > 0).long()
    inter = predict * (predict == target).long()
    hist = lambda t: torch.histc(t.float(), bins=2, min=1, max=2).numpy()  # noqa: E731
    a_inter, a_pred, a_lab = hist(inter), hist(predict), hist(target)
    return correct, labeled, a_inter, a_pred + a_lab - a_inter


def test_segmentation_counts_and_miou_match_chefers_evaluation(canvas):
    _, mask = canvas
    m = np.random.default_rng(3).random((7, 7))
    got = P.segmentation(m, mask)
    correct, labeled, inter, union = chefer_seg_reference(m, mask, 4)
    assert (got.correct, got.labeled) == (correct, labeled)
    assert got.inter == tuple(int(v) for v in inter) and got.union == tuple(int(v) for v in union)
    spacing = np.spacing(1, dtype=np.float64)
    assert f"{got.miou:.4f}" == f"{(inter / (spacing + union)).mean():.4f}"
    two = got + got  # a dataset's mIoU from summed counts
    assert two.miou == pytest.approx(got.miou) and two.labeled == 2 * labeled


def test_pointing_game_hits_closer_than_the_tolerance_only():
    """TorchRay's PointingGame: a hit when the peak is strictly closer than the tolerance to the mask."""
    m = np.zeros((7, 7))
    m[1, 5] = 1.0  # upsampled: the peak's first pixel in raster order
    r = P.upsampled(m, (28, 28))
    peak = np.unravel_index(int(np.argmax(r)), r.shape)
    mask = np.zeros((28, 28), bool)
    mask[peak[0] + 3, peak[1] + 4] = True  # 5 px from the peak
    assert not P.pointing(m, mask, 1) and not P.pointing(m, mask, 5) and P.pointing(m, mask, 5.01)
    mask[peak] = True
    assert P.pointing(m, mask, 1) and P.pointing(m, mask)  # the default, 1: the peak pixel itself
    assert not P.pointing(m, np.zeros((28, 28), bool), 5)


def test_truth_beats_random_and_curves_start_at_the_whole_image(sc):
    p = planted(n_digits=1, cells=(1, 1), seed=5)
    r = score_maps(sc, p.image, ["truth", "random", "chefer"], mask=p.masks[0])
    t, rnd = r.maps["truth"].figures(), r.maps["random"].figures()
    assert t["miou"] > rnd["miou"] and t["pointing"] == 1.0
    assert t["auc_positive"] < rnd["auc_positive"] and t["auc_negative"] > rnd["auc_negative"]
    for s in r.maps.values():
        assert s.positive[0] == pytest.approx(r.probability, abs=1e-6) == s.negative[0]
    assert r.forwards == 1 + 3 * (2 * 10 + 2 * 17)


@pytest.mark.parametrize(
    "kwargs, words",
    [
        ({"steps": (0.5, 0.2)}, "increasing"),
        ({"value": "grey"}, "black, mean"),
        ({"unit": "token"}, "patch, pixel"),
        ({"protocols": ["deletion"]}, "perturbation"),
        ({"maps": {"m": np.ones((5, 5))}}, "patch grid (7, 7)"),
        ({"maps": ["lrp"]}, "accepted: attention"),
        ({"maps": ["truth"]}, "give a mask"),
        ({"mask": np.ones((3, 3, 3))}, "(H, W)"),
        ({"point": (30, 2)}, "outside"),
        ({"tolerance": 0}, "over 0"),
        ({"target": 12}, "index 0 to 9"),
    ],
)
def test_bad_options_are_refused_by_name(sc, canvas, kwargs, words):
    kw = {"maps": ["random"], **kwargs}
    with pytest.raises(InputError, match=words.replace("(", r"\(").replace(")", r"\)")):
        score_maps(sc, canvas[0], **kw)


@pytest.mark.slow
def test_clip_is_scored_over_its_prompts_and_needs_two():
    clip = load_vit("digit_clip", device="cpu")
    with pytest.raises(InputError, match="two or more"):
        scorer(clip, ["a handwritten three"])
    p = planted(n_digits=2, cells=(2, 2), seed=1)
    from attention.vit.text.digit_clip import caption

    sc = scorer(clip, [caption(int(c)) for c in p.classes])
    r = score_maps(sc, p.image, ["chefer", "truth"], target=caption(int(p.classes[0])), mask=p.masks[0],
                   resolution="native")  # fmt: skip
    assert r.label == caption(int(p.classes[0])) and set(r.maps) == {"chefer", "truth"}
    assert r.maps["chefer"].positive[0] == pytest.approx(r.probability, abs=1e-6)
