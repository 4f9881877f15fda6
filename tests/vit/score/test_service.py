"""The shown view scored for a server's visitors (`attention.vit.score.service`): the map on screen is the one
the tab draws (a head's, the mean of heads, rollout with its options), its scores are the package's for that
map, the whole job (the shown rollout and the scoring) is priced before anything runs, a visitor's own picture
is answered from their own result only, threads asking at once share one job, and a model without a classifier
is scored by its embedding (the cosine with the whole image's: 1 at 0% removed)."""

from __future__ import annotations

import dataclasses
from concurrent.futures import ThreadPoolExecutor

import numpy as np
import pytest
from PIL import Image

from attention.crowd.cache import SharedCache
from attention.crowd.visitors import Visitor
from attention.errors import BudgetError, NoClassifierError
from attention.images import load_image
from attention.vit.draw.frames import ViewSpec
from attention.vit.engine.preprocess import Preprocess
from attention.vit.models.loader import load_vit
from attention.vit.score import score_maps, scorer, service
from attention.vit.score.compute import check_price
from attention.vit.serve import pass_memo, rollouts
from attention.vit.serve.passes import get_pass
from tests.conftest import DIGIT

VIEWS = [
    (ViewSpec(view="heads"), 2, lambda p: p.at(None, -1).maps[2]),
    (ViewSpec(view="masks"), 1, lambda p: p.at(None, -1).maps[1]),
    (ViewSpec(view="mean", layer=1), 0, lambda p: p.at(None, 1).mean),
    (
        ViewSpec(view="rollout", rollout_options={"head_fusion": "max"}),
        0,
        lambda p: p.rollout(None, -1, head_fusion="max"),
    ),
]


@pytest.mark.parametrize("view, head, want", VIEWS)
def test_the_shown_map_is_the_tabs(view, head, want):
    p = get_pass(DIGIT, "mnist_vit", "auto")
    np.testing.assert_array_equal(service.shown_map(p, view, head), want(p))


def test_the_shown_view_is_scored_as_the_package_scores_its_map():
    view, head, want = VIEWS[-1]
    s = service.faithfulness(DIGIT, "mnist_vit", "auto", view, head, shared=False)
    maps = {"shown": want(get_pass(DIGIT, "mnist_vit", "auto")), "random": np.random.default_rng(0).random((7, 7))}
    ref = score_maps(scorer(load_vit("mnist_vit", device="cpu")), DIGIT, maps, protocols=["perturbation"])
    for m in ("shown", "random"):
        np.testing.assert_allclose(s.maps[m].positive, ref.maps[m].positive, atol=1e-6)
        np.testing.assert_allclose(s.maps[m].negative, ref.maps[m].negative, atol=1e-6)


def test_a_shown_rollout_is_priced_with_the_scoring_and_refused_before_it_is_computed(monkeypatch):
    view = ViewSpec(view="rollout", rollout_options={"head_fusion": "max", "discard_ratio": 0.5, "discard": "global"})
    roll = rollouts.price(get_pass(DIGIT, "mnist_vit", "auto", cache=None), view)  # a fresh pass: nothing memoised
    sc = scorer(load_vit("mnist_vit", device="cpu"), embedding=True)
    scoring = check_price(sc, load_image(DIGIT), Preprocess.of(sc.image_model, "auto"), 2, rules=False, steps=10,
                          protocols=("perturbation",), step=None, max_gflop=float("inf"))  # fmt: skip
    computed = []
    real = pass_memo.rollout_map
    monkeypatch.setattr(pass_memo, "rollout_map", lambda *a, **k: computed.append(1) or real(*a, **k))
    for budget, fits in ((scoring + roll / 2, False), ((scoring + roll) * 1.001, True)):
        for module in (service, rollouts):  # the heavy jobs' budget, as the server reads it
            monkeypatch.setattr(module, "SETTINGS", dataclasses.replace(module.SETTINGS, relevance_gflop_cpu=budget))
        monkeypatch.setattr(service, "RESULTS", SharedCache(1 << 20, 60))
        if fits:
            s = service.faithfulness(DIGIT, "mnist_vit", "auto", view, shared=False)
            assert computed == [1] and set(s.maps) == {"shown", "random"}
        else:  # the scoring alone fits: the rollout's price tips it over, and nothing is computed
            with pytest.raises(BudgetError, match="over this server.s budget"):
                service.faithfulness(DIGIT, "mnist_vit", "auto", view, shared=False)
            assert computed == [] and roll > 0 and scoring < budget


def test_a_visitors_picture_is_theirs_and_threads_share_one_job(tmp_path, monkeypatch):
    own = tmp_path / "mine.png"
    pixels = np.array(Image.open(DIGIT))
    pixels[0, 0] = 7  # not a shipped example's bytes: keyed to the visitor
    Image.fromarray(pixels).save(own)
    calls = []
    real = service._compute

    def counted(*a, **k):
        calls.append(a[6])
        return real(*a, **k)

    monkeypatch.setattr(service, "_compute", counted)
    a, b = Visitor("sa", "10.9.0.1"), Visitor("sb", "10.9.0.2")
    v = ViewSpec(view="mean")
    with ThreadPoolExecutor(4) as pool:
        got = list(pool.map(lambda w: service.faithfulness(str(own), "mnist_vit", "auto", v, visitor=w), [a, a, a, b]))
    assert sorted(c.session for c in calls) == ["sa", "sb"]  # one job per visitor, however many threads asked
    assert got[0] is got[1] is got[2] and got[3] is not got[0]
    assert got[3].maps["shown"].auc_positive == pytest.approx(got[0].maps["shown"].auc_positive)


@pytest.mark.slow
def test_a_model_without_a_classifier_is_scored_by_its_embedding():
    clip = load_vit("digit_clip", device="cpu")
    with pytest.raises(NoClassifierError, match="prompts"):
        scorer(clip)
    sc = scorer(clip, embedding=True)
    r = score_maps(sc, DIGIT, ["attention", "random"], protocols=["perturbation"], resolution="native")
    assert sc.kind == "embedding" and r.probability == pytest.approx(1.0, abs=1e-6)
    assert r.maps["attention"].positive[0] == pytest.approx(1.0, abs=1e-6)
    assert all(-1 <= v <= 1 + 1e-6 for v in r.maps["random"].positive)


@pytest.mark.slow
def test_embedding_scores_of_threads_at_once_are_each_their_own():
    """Each call reads its own pass's tokens (the engine's per-thread recorder), not another thread's."""
    emb = scorer(load_vit("digit_clip", device="cpu"), embedding=True)
    digits = [DIGIT.replace("digit_3", f"digit_{i}") for i in range(4)]
    alone = [score_maps(emb, d, ["random"], protocols=["perturbation"]).maps["random"].positive for d in digits]
    with ThreadPoolExecutor(4) as pool:
        together = list(pool.map(lambda d: score_maps(emb, d, ["random"], protocols=["perturbation"]), digits * 2))
    for i, r in enumerate(together):
        np.testing.assert_allclose(r.maps["random"].positive, alone[i % 4], atol=1e-6)
