"""`attention.explore` in-process (no browser): the page's questions answered as the Space's server answers
them (a clicked patch's rows from the kept q and k, checked against a fresh pass with that query), the page's
data bounded and said, the export the Space's one-file HTML, a static picture for a saved notebook, and the
Space's live script inlined verbatim (one copy)."""

from __future__ import annotations

import base64
import zlib
from importlib import resources

import numpy as np
import pytest

import attention
from attention.notebook import widget
from attention.vit.draw import views
from attention.vit.serve import live
from tests.conftest import DIGIT
from tests.notebook.conftest import rgb


@pytest.fixture
def explorer(maps):
    w = attention.explore(maps, model="mnist_vit")
    w.answers = []
    w.send = w.answers.append  # what the page would receive
    return w


def ask(w, fn: str, args) -> object:
    w._answer(w, {"ask": 7, "fn": fn, "args": args}, [])
    answer = w.answers[-1]
    assert answer["answer"] == 7
    return answer["result"]


def test_a_clicked_patch_is_answered_with_its_rows_then_drawn_by_the_kernel(explorer, mnist_vit):
    got = ask(explorer, "live_maps", ["any token", [5, 2], 1])
    fresh = attention.attention_maps(mnist_vit, DIGIT, query=(5, 2), layer=1)  # the package's own answer
    indices = np.frombuffer(zlib.decompress(base64.b64decode(got["maps"])), np.uint8).reshape(5, 7, 7)
    assert np.array_equal(indices, live.indices(fresh.maps))
    assert (got["query"], got["layer"]) == ([5, 2], 1)
    assert (explorer.query, explorer.layer) == (None, 3)  # an answer keeps nothing: the page then says
    explorer.query, explorer.layer = [5, 2], 1
    assert np.array_equal(rgb(explorer.large), views.query_image(fresh, head=0))


def test_a_question_off_the_grid_or_malformed_gets_no_answer_and_changes_nothing(explorer):
    assert ask(explorer, "live_maps", ["t", [7, 0], 0]) is None
    assert ask(explorer, "live_maps", ["t", "cls", "x"]) is None
    assert ask(explorer, "live_maps", None) is None
    assert (explorer.query, explorer.layer) == (None, 3)


def test_the_base_picture_and_the_models_own_token(explorer):
    assert ask(explorer, "live_base", "t").startswith("data:image/png;base64,")
    explorer.query = [1, 1]
    ask(explorer, "default_query", None)
    assert explorer.query is None and "the CLS token" in explorer.state["what"]


def test_controls_redraw_the_view(explorer):
    explorer.view = "masks"
    assert len(explorer.tiles) == 4 and explorer.tiles[0][1].startswith("head 0 · ")
    explorer.view = "rollout"
    assert len(explorer.tiles) == 1
    for name, bad, says in [("head", 4, "4 heads"), ("layer", 4, "0 to 3"), ("view", "x", "heads"), ("alpha", 2, "0")]:
        with pytest.raises(attention.InputError, match=says):
            setattr(explorer, name, bad)
    with pytest.raises(attention.InputError, match="grid"):
        explorer.query = [7, 7]
    assert (explorer.head, explorer.layer, explorer.view, explorer.alpha, explorer.query) == (
        0,
        3,
        "rollout",
        0.6,
        None,
    )


def test_a_pass_without_q_and_k_or_too_large_for_the_page_is_refused_saying_why(maps, mnist_vit, monkeypatch):
    with pytest.raises(attention.InputError, match="keep_qk=True"):
        attention.explore(attention.attention_maps(mnist_vit, DIGIT))
    monkeypatch.setattr(widget, "MAX_PAGE_BYTES", 1 << 20)
    with pytest.raises(attention.InputError, match=r"up to 1 MB a view .* bound is 1 MB: use a lower resolution"):
        attention.explore(maps)


def test_the_page_says_what_it_holds(explorer, maps):
    assert f"{widget.page_bytes(maps) / 1024:.0f} kB a view" in explorer.note
    assert widget.page_bytes(maps) >= len(explorer.large) * 3 // 4  # the bound holds the large map's PNG


def test_export_writes_the_spaces_one_file_html(explorer, tmp_path):
    path = explorer.export(tmp_path / "view.html")
    page = path.read_text()
    assert page.startswith("<!DOCTYPE html>") and "mnist_vit" in page and "data:image/png;base64," in page
    assert "http://" not in page and "https://" not in page and "<script" not in page
    assert ask(explorer, "export", None).startswith("Written: ")


def test_a_saved_notebook_keeps_a_picture_of_the_view(explorer):
    data, _ = explorer._repr_mimebundle_()
    assert data["application/vnd.jupyter.widget-view+json"]["model_id"] == explorer.model_id
    assert data["image/png"].startswith(b"\x89PNG")


def test_the_spaces_live_script_is_inlined_verbatim():
    script = (resources.files("attention.vit.serve") / "live.js").read_text()
    assert script in widget.esm() and "/*LIVE_JS*/" not in widget.esm()


def test_the_notebook_package_knows_nothing_of_gradio():
    import ast
    from pathlib import Path

    for path in Path(widget.__file__).parent.glob("*.py"):
        for node in ast.walk(ast.parse(path.read_text())):
            names = [a.name for a in node.names] if isinstance(node, ast.Import) else []
            names += [node.module or ""] if isinstance(node, ast.ImportFrom) else []
            assert not [n for n in names if n.split(".")[0] == "gradio" or n.startswith("attention.ui")], path
