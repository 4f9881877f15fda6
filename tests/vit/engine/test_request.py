"""Spec of the view request (`attention.vit.engine.request`): every view parameter's default and bounds are
declared once, there; each bound says its range in the same words wherever it refuses; a slider over an open
range stops one step inside it; a view is read once into a checked request; and no literal default of the
request is written anywhere else in the package or app.py."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

from attention.errors import InputError
from attention.vit.engine import request
from attention.vit.engine.request import DISCARD_RATIO, OPACITY, THRESHOLD, ViewRequest

ROOT = Path(__file__).resolve().parents[3]


@pytest.mark.parametrize(
    "bound, refused, accepted, words",
    [
        (THRESHOLD, [0, -0.1, 1.01, "most"], [1, 0.01, "0.5"], "accepted: more than 0, at most 1"),
        (OPACITY, [-0.01, 1.5], [0, 1, "0.3"], "accepted: 0 to 1"),
        (DISCARD_RATIO, [1, 1.2, -0.5], [0, 0.99], "accepted: 0 up to, not including, 1"),
        (request.FIND_BETA, [10.5, -1], [0, 10], "accepted: 0 to 10"),
    ],
)
def test_a_bound_accepts_its_range_and_refuses_the_rest_naming_it(bound, refused, accepted, words):
    for v in accepted:
        assert bound.check(v) == float(v)
    for v in refused:
        with pytest.raises(InputError, match=f"^{bound.name} .* is out of range; {words}"):
            bound.check(v)


def test_a_slider_over_an_open_end_stops_one_step_inside_it():
    assert THRESHOLD.slider() == (0.05, 1.0, 0.05)  # (0, 1]: the slider from 0.05
    assert DISCARD_RATIO.slider() == (0.0, 0.95, 0.05)  # [0, 1): the slider to 0.95
    assert OPACITY.slider() == (0.0, 1.0, 0.05)
    # a value the request accepts beyond a slider's end (a hand-made link's) is shown at that end
    assert (THRESHOLD.on_slider(0.01), DISCARD_RATIO.on_slider(0.99), THRESHOLD.on_slider(0.3)) == (0.05, 0.95, 0.3)
    assert THRESHOLD.on_slider(None) is None


def test_the_papers_defaults_are_the_requests():
    assert (THRESHOLD.default, OPACITY.default, request.CMAP.default) == (0.6, 0.6, "inferno")  # DINO's
    assert (request.FIND_STD.default, request.FIND_GAMMA.default, request.FIND_BETA.default) == (5.0, 3.0, 1.2)
    assert request.GRAD_DISCARD.default == 0.9  # vit-explain's grad-rollout


def test_a_view_is_read_once_into_a_checked_request():
    r = ViewRequest.parse("cat.jpg", "dino_vits16", None, query_row="2", query_col=3.0, layer="-1", head="1")
    assert (r.resolution, r.head, r.spec.query, r.spec.layer) == ("auto", 1, (2, 3), -1)
    assert (r.spec.view, r.spec.threshold, r.spec.cmap, r.spec.rollout_options) == ("heads", 0.6, "inferno", None)
    r = ViewRequest.parse(view="Mean of heads", fusion="max", discard_ratio=0.5, discard_rule="global")
    assert r.spec.view == "mean"
    assert r.spec.rollout_options == {"head_fusion": "max", "discard_ratio": 0.5, "discard": "global"}


@pytest.mark.parametrize(
    "given, said",
    [
        (dict(query_row=2), "Give both query_row and query_col"),
        (dict(threshold=0), "Threshold 0 is out of range"),
        (dict(view="pie"), "Unknown view 'pie'"),
        (dict(head="x"), "Head 'x' is not a whole number"),
        (dict(fusion="median", discard_ratio=0, discard_rule="row"), "Unknown head fusion 'median'"),
        (dict(fusion="max", discard_ratio=1, discard_rule="row"), "Discard ratio 1 is out of range"),
    ],
)
def test_a_bad_field_is_refused_naming_it(given, said):
    with pytest.raises(InputError, match=said):
        ViewRequest.parse(**given)


# --- declared once: no literal default of the request outside it -------------------------------------------------

# the request's defaults by the parameter names that carry them (layer -1 and head 0 are the package's index
# convention, "the last" and "the first", and not scanned)
DEFAULTS = {
    "threshold": THRESHOLD.default,
    "alpha": OPACITY.default,
    "cmap": request.CMAP.default,
    "view": request.VIEW.default,
    "resolution": request.RESOLUTION,
    "resize": request.RESOLUTION,
    "head_fusion": request.FUSION.default,
    "fusion": request.FUSION.default,
    "discard_ratio": DISCARD_RATIO.default,
    "discard": request.DISCARD_RULE.default,
    "std": request.FIND_STD.default,
    "gamma": request.FIND_GAMMA.default,
    "beta": request.FIND_BETA.default,
    "rule": request.FIND_RULE,
}
# values that mean nothing but the request's defaults wherever they are written
LITERALS = {THRESHOLD.default, request.CMAP.default, request.FIND_BETA.default}
# where a default must be written below the request: the renderer (media floor) checks the opacity and names its
# colormap when none is given; the request reads both from there
ALLOWED = {"attention/vit/engine/request.py", "attention/validate.py", "attention/render.py"}


def _value(node):
    """A constant's value (a negative number too), else None."""
    if isinstance(node, ast.Constant):
        return node.value
    if isinstance(node, ast.UnaryOp) and isinstance(node.op, ast.USub) and isinstance(node.operand, ast.Constant):
        return -node.operand.value
    return None


def _docstrings(tree) -> set[int]:
    kinds = (ast.Module, ast.ClassDef, ast.FunctionDef, ast.AsyncFunctionDef)
    return {
        id(n.body[0].value)
        for n in ast.walk(tree)
        if isinstance(n, kinds) and n.body and isinstance(n.body[0], ast.Expr)
    }


def literal_defaults(path: Path) -> list[str]:
    """Where `path` writes a request default: a parameter's default or a call's keyword with the request's default
    for that name (`threshold=0.6`, `cmap: str = "inferno"`), or one of `LITERALS` anywhere but a docstring."""
    tree = ast.parse(path.read_text())
    docs, found = _docstrings(tree), []
    for n in ast.walk(tree):
        pairs = []
        if isinstance(n, (ast.FunctionDef, ast.AsyncFunctionDef, ast.Lambda)):
            a = n.args
            pos = a.posonlyargs + a.args
            pairs += zip([x.arg for x in pos[len(pos) - len(a.defaults) :]], a.defaults)
            pairs += [(x.arg, d) for x, d in zip(a.kwonlyargs, a.kw_defaults) if d is not None]
        elif isinstance(n, ast.Call):
            pairs += [(k.arg, k.value) for k in n.keywords if k.arg]
        elif (
            isinstance(n, ast.Constant) and id(n) not in docs and type(n.value) in (float, str) and n.value in LITERALS
        ):
            found.append(f"{n.lineno}: {n.value!r}")
        for name, d in pairs:
            v = _value(d)
            if name in DEFAULTS and v is not None and type(v) is type(DEFAULTS[name]) and v == DEFAULTS[name]:
                found.append(f"{d.lineno}: {name}={v!r}")
    return found


def test_no_literal_default_of_the_request_outside_it():
    files = [ROOT / "app.py", *sorted((ROOT / "attention").rglob("*.py"))]
    found = {
        rel: hits
        for p in files
        if (rel := p.relative_to(ROOT).as_posix()) not in ALLOWED and (hits := literal_defaults(p))
    }
    assert found == {}, "read them from attention.vit.engine.request"


def test_the_scan_finds_a_literal_default(tmp_path):
    src = tmp_path / "m.py"
    src.write_text('def f(x, cmap: str = "inferno", *, threshold=0.6):\n    return g(view="heads", k=1.2)\n')
    assert set(literal_defaults(src)) == {"1: cmap='inferno'", "1: 'inferno'", "1: threshold=0.6", "1: 0.6"} | {
        "2: view='heads'",
        "2: 1.2",
    }
