"""What the retrieval tab shows: each section's pictures and JSON agree with the lookup they show, and the
first screen is computed once, when asked for."""

from __future__ import annotations

import random

import numpy as np
import pytest
import torch

from attention import retrieval
from attention.errors import ImageError, InputError
from attention.retrieval import first_screen, models, panels, trained_panels
from attention.retrieval.plots import PAD_GRAY

POOL = retrieval.pools(full=True)


def _tile(sheet: np.ndarray, i: int, ncols: int, k: int, pad: int = 2) -> np.ndarray:
    """Digit i of a padded sheet (make_grid layout), downscaled back to 28 x 28."""
    r, c = divmod(i, ncols)
    y, x = k * (pad + r * (28 + pad)), k * (pad + c * (28 + pad))
    return sheet[y : y + 28 * k : k, x : x + 28 * k : k]


@pytest.mark.parametrize("n,ncols,k", [(23, 20, 2), (100, 20, 2), (401, 40, 1)])
def test_database_sheet_puts_item_i_where_the_note_says(n, ncols, k):
    sheet, note = panels.database_view(n, 5)
    db = panels.database(n, 5)
    assert panels.database_columns(n) == (ncols, k)
    for i in (0, 9, 10, n - 1):
        np.testing.assert_array_equal(_tile(sheet, i, ncols, k), db.images[i])
    rows = -(-n // ncols)
    assert sheet.shape == (k * (rows * 30 + 2), k * (ncols * 30 + 2))
    assert sheet[0, 0] == PAD_GRAY
    assert f"**{n}**" in note and "seed 5" in note and db.source in note and f"*i* // {ncols}" in note
    assert f"{len(POOL.train):,}" in note and f"{len(POOL.heldout):,}" in note


@pytest.mark.parametrize("n,index", [(7, 6), (50, 0)])
def test_hard_view_shows_the_one_key_the_query_hits_and_says_the_answer_is_exact(n, index):
    view = panels.hard_view(n, 42, index, 3)
    row, info = view.info["row_in_shuffled_store"], view.info
    assert info["index"] == index and info["order"][row] == index
    assert info["retrieved_equals_database_image"] is True
    assert info["label"] == int(panels.database(n, 42).labels[index])
    k = view.keys.shape[0] // n
    keys = view.keys[::k, ::k] / 255  # the key matrix shown, one row per store row
    np.testing.assert_array_equal(keys, np.eye(n)[info["order"]])
    assert keys[row, index] == 1 and keys[:, index].sum() == 1
    assert view.plot.dtype == np.uint8 and view.plot.ndim == 3 and view.plot.shape[2] == 3  # rendered


@pytest.mark.parametrize("scale", [0.0, 3.0])
def test_soft_view_info_is_a_weighting_and_its_image_is_the_weighted_average(scale):
    view = panels.soft_view(40, 1, 8, 2, scale)
    w = np.array(view.info["weights"])
    assert len(w) == 40 and w.sum() == pytest.approx(1.0) and view.info["sum"] == pytest.approx(1.0)
    assert view.info["argmax"] == int(np.argmax(w)) and view.info["max_weight"] == w.max()
    assert 1.0 <= view.info["effective_items"] <= 40
    if scale == 0:
        assert view.info["effective_items"] == pytest.approx(40)  # equal weights: all items count
    average = w @ panels.database(40, 1).images.reshape(40, -1).astype(float)
    k = panels.DIGIT_SCALE
    np.testing.assert_allclose(view.retrieved[::k, ::k].ravel(), average, atol=0.51)


def test_many_view_shows_one_retrieval_per_query_row_by_row():
    grid, info = panels.many_view(30, 2, 8, 1, 2.0, 10)
    lk = retrieval.multi_lookup(panels.database(30, 2), 10, 8, 1, 2.0)
    assert info["num_q"] == 10 and np.allclose(info["sums"], 1)
    np.testing.assert_allclose(info["max_weights"], lk.weights.max(1))
    assert info["argmax"] == lk.weights.argmax(1).tolist()
    for q in (0, 7, 8, 9):  # 8 a row: query 8 starts the second row
        np.testing.assert_array_equal(_tile(grid, q, 8, 3), lk.retrieved_images()[q])


def _visitor_copy(name: str, seed: int) -> trained_panels.Retrained:
    """A visitor's state holding an untrained copy of `name`, initialised from `seed`."""
    config = models.load(name)[1]
    torch.manual_seed(seed)
    return {name: (config, models.build(config).state_dict())}


def test_models_chooser_gives_each_visitor_their_own_copy_and_everyone_else_the_shipped_ones():
    mine, theirs = _visitor_copy("lab", 1), _visitor_copy("lab", 2)
    shipped = {name: models.load(name)[0] for name in models.MODEL_NAMES}
    for state in (None, {}):
        assert trained_panels.models_for(state) == {n: (m, trained_panels.SHIPPED) for n, m in shipped.items()}
    chosen = trained_panels.models_for(mine)
    assert chosen["lab"][1] == trained_panels.MINE and chosen["cnn"] == (shipped["cnn"], trained_panels.SHIPPED)
    assert not chosen["lab"][0].training
    for key, value in chosen["lab"][0].state_dict().items():
        assert torch.equal(value, mine["lab"][1][key])
    other = trained_panels.models_for(theirs)["lab"][0]
    assert not torch.equal(other.embedding.weight, chosen["lab"][0].embedding.weight)
    assert not torch.equal(shipped["lab"].embedding.weight, chosen["lab"][0].embedding.weight)


def test_trained_view_captions_and_plots_agree_with_its_json():
    out = trained_panels.trained_view(60, 3, 5, _visitor_copy("lab", 1))
    names = models.MODEL_NAMES
    assert list(out.models) == list(names)
    info = out.info
    query, label = retrieval.heldout_query(5, POOL)
    np.testing.assert_array_equal(out.query[:: panels.DIGIT_SCALE, :: panels.DIGIT_SCALE], query)
    assert info["query_label"] == label and info["query"] == query.tolist()
    db = panels.database(60, 3)
    for name in names:
        retrieved, plot, gallery = out.models[name]
        top, weights = info[name]["top10"], np.array(info[name]["weights"])
        assert info[name]["origin"] == (trained_panels.MINE if name == "lab" else trained_panels.SHIPPED)
        assert [c for _, c in gallery] == [f"#{r + 1} · {m['label']} · {m['weight']:.2f}" for r, m in enumerate(top)]
        for (img, _), m in zip(gallery, top):
            np.testing.assert_array_equal(img[:: panels.MATCH_SCALE, :: panels.MATCH_SCALE], db.images[m["position"]])
        assert len(weights) == 60 and weights.sum() == pytest.approx(1.0)
        assert [m["weight"] for m in top] == sorted(weights, reverse=True)[:10]  # the JSON holds every weight
        average = weights @ db.images.reshape(60, -1).astype(float)
        np.testing.assert_allclose(retrieved[:: panels.DIGIT_SCALE, :: panels.DIGIT_SCALE].ravel(), average, atol=0.51)
        assert plot.dtype == np.uint8 and plot.shape[2] == 3


def test_a_sketch_is_the_same_query_as_a_bare_image_or_an_editor_value():
    q, _ = retrieval.heldout_query(3, POOL)
    drawing = np.kron(255 - q, np.ones((8, 8), np.uint8))  # dark ink on white, 224 x 224
    bare, editor = (
        trained_panels.sketch_view(40, 1, drawing),
        trained_panels.sketch_view(40, 1, {"composite": drawing, "layers": []}),
    )
    np.testing.assert_array_equal(bare[0], editor[0])
    assert bare[-1] == editor[-1] and bare[-1]["query_label"] is None
    with pytest.raises(ImageError, match="empty"):
        trained_panels.sketch_view(40, 1, {"composite": None})


def test_random_heldout_index_is_seedable_and_in_range():
    picks = [panels.random_heldout_index(random.Random(s)) for s in range(200)]
    assert picks == [panels.random_heldout_index(random.Random(s)) for s in range(200)]
    count = panels.heldout_count()
    assert count == len(POOL.heldout)
    assert all(0 <= p < count for p in picks) and max(picks) > 0.9 * count  # spans the whole held-out part


def test_retrain_streams_progress_then_returns_a_new_state_and_leaves_the_old_one_alone():
    before = _visitor_copy("cnn", 4)
    calls = []
    updates = list(trained_panels.retrain("lab", 1, 3, before, on_step=lambda step, total: calls.append((step, total))))
    total = calls[-1][1]
    assert [s for s, _ in calls] == list(range(1, total + 1))
    *streamed, (final_msg, final_progress, state) = updates
    assert len(streamed) == total // 10 + (total % 10 > 0)
    assert all(progress is not None and st is None for _, progress, st in streamed)
    last = streamed[-1][1]
    assert last["step"] == last["total"] == total and len(last["losses"]) == total and last["epochs"] == 1
    assert [len(p["losses"]) for _, p, _ in streamed] == [p["step"] for _, p, _ in streamed]
    assert trained_panels.loss_plot(last).shape[2] == 3
    assert "Done" in final_msg and final_progress is None
    assert "(1 epoch, seed 3)" in final_msg  # one epoch, not "1 epochs"
    assert set(before) == {"cnn"} and set(state) == {"cnn", "lab"} and state["cnn"] is before["cnn"]
    assert state["lab"][0]["epochs"] == 1 and state["lab"][0]["seed"] == 3
    assert trained_panels.models_for(state)["lab"][1] == trained_panels.MINE


@pytest.mark.parametrize(
    "args,words", [(("lab", 6, 1), "1 to 5"), (("lab", 1, -1), "training seed"), (("vit", 1, 1), "lab")]
)
def test_retrain_refuses_bad_arguments_before_training(args, words):
    with pytest.raises(InputError, match=words):
        next(trained_panels.retrain(*args, None, on_step=lambda *a: pytest.fail("trained anyway")))


def test_the_first_screen_is_every_section_at_its_defaults_computed_once():
    first_screen.first_screen.cache_clear()
    first = first_screen.first_screen()
    assert first_screen.first_screen() is first  # cached: every visitor's tab is filled from the same one
    np.testing.assert_array_equal(first.database.grid, panels.database_view(100, 42).grid)
    assert first.hard.info == panels.hard_view(100, 42, 7, 0).info
    assert first.soft.info == panels.soft_view(100, 42, 16, 0, 1.0).info
    assert first.many.info == panels.many_view(100, 42, 16, 0, 1.0, 16).info
    assert first.trained.info == trained_panels.trained_view(100, 42, 0).info


def test_a_weights_plot_title_wider_than_its_axes_is_drawn_whole():
    from attention.retrieval.plots import pixels, weights_figure

    fig = weights_figure(
        np.full(100, 0.01), np.arange(100) % 10, title="scale 17.5: max weight 1.00, effective items 1.0"
    )
    from matplotlib.text import Text

    pixels(fig)
    page = fig.bbox
    texts = [t for t in fig.findobj(Text) if t.get_visible() and t.get_text()]
    assert any(t.get_text().startswith("scale 17.5") for t in texts)
    for t in texts:  # the title, labels, ticks and legend all inside the picture
        box = t.get_window_extent()
        assert page.x0 <= box.x0 and box.x1 <= page.x1 and page.y0 <= box.y0 and box.y1 <= page.y1, t.get_text()


def test_the_hard_plots_highlighted_bar_is_named_by_its_item_not_its_shuffled_row(monkeypatch):
    from attention.retrieval import plots

    figures = []
    draw = plots.weights_figure
    monkeypatch.setattr(panels, "weights_figure", lambda *a, **k: figures.append(draw(*a, **k)) or figures[-1])
    view = panels.hard_view(100, 42, 7, 0)
    row, index = view.info["row_in_shuffled_store"], view.info["index"]
    assert row != index  # shuffled: the bar's x is not the item
    texts = [t.get_text() for t in figures[0].axes[0].texts]
    assert texts == [f"item {index}"], texts
