"""The retrieval API's answers: one picture and one JSON each, and the numbers are in the JSON."""

from __future__ import annotations

import os
import time

import numpy as np
import pytest
from PIL import Image

from attention import retrieval
from attention.crowd import cache
from attention.errors import InputError
from attention.retrieval import answers, panels, trained_panels

POOL = retrieval.pools(full=True)


def test_database_answer_lists_every_label_where_the_sheet_shows_it():
    grid, info = answers.database(30, 4)
    db = panels.database(30, 4)
    assert info["n"] == 30 and info["seed"] == 4 and info["labels"] == db.labels.tolist()
    assert info["columns"] == panels.database_columns(30)[0] and info["source"] == db.source
    assert info["train_pool"] == len(POOL.train) and info["heldout_pool"] == len(POOL.heldout)
    np.testing.assert_array_equal(grid, panels.database_view(30, 4).grid)


def test_hard_and_soft_answers_are_the_retrieved_digit_and_the_views_numbers():
    digit, info = answers.hard(50, 1, 9, 2)
    assert info == panels.hard_view(50, 1, 9, 2).info
    k = panels.DIGIT_SCALE
    np.testing.assert_array_equal(digit[::k, ::k], panels.database(50, 1).images[9])
    digit, info = answers.soft(50, 1, 8, 3, 2.0)
    view = panels.soft_view(50, 1, 8, 3, 2.0)
    assert info == view.info
    np.testing.assert_array_equal(digit, view.retrieved)


def test_many_answer_is_the_many_view():
    grid, info = answers.many(40, 2, 8, 1, 2.0, 5)
    view = panels.many_view(40, 2, 8, 1, 2.0, 5)
    np.testing.assert_array_equal(grid, view.grid)
    assert info == view.info


def test_trained_sheet_shows_the_query_each_models_answer_and_top10():
    sheet, info = answers.trained(60, 3, 5)
    view = trained_panels.trained_view(60, 3, 5, plot_height=answers.PLOT_HEIGHT)
    assert info == view.info
    assert sheet.dtype == np.uint8 and sheet.ndim == 3 and sheet.shape[2] == 3
    top = answers.PAD + answers.HEADING
    side = view.query.shape[0]
    for i, picture in enumerate([view.query] + [view.models[name].retrieved for name in view.models]):
        x = answers.PAD + i * (side + answers.GAP)
        np.testing.assert_array_equal(sheet[top : top + side, x : x + side, 0], picture)
    tile, plot = panels.MATCH_SCALE * 28, view.models["lab"].plot
    y = top + side + 2 * answers.GAP + answers.HEADING  # the lab block, under its heading
    assert plot.shape[0] == answers.PLOT_HEIGHT and info == trained_panels.trained_view(60, 3, 5).info
    x = answers.PAD + plot.shape[1] + answers.GAP  # right of its plot
    for r, (img, _) in enumerate(view.models["lab"].top10):  # 5 a row, each captioned below
        ty, tx = y + (r // 5) * (tile + answers.CAPTION + answers.GAP), x + (r % 5) * (tile + answers.GAP)
        np.testing.assert_array_equal(sheet[ty : ty + tile, tx : tx + tile, 0], img)


def test_sketch_answer_names_its_query_as_the_models_see_it():
    q, _ = retrieval.heldout_query(3, POOL)
    drawing = np.kron(255 - q, np.ones((8, 8), np.uint8))  # dark ink on white, 224 x 224
    sheet, info = answers.sketch(40, 1, {"composite": drawing})
    assert info["query_label"] is None and np.array(info["query"]).shape == (28, 28)
    assert sheet.shape[2] == 3


def test_saved_pngs_are_exact_and_old_ones_are_swept(tmp_path, monkeypatch):
    monkeypatch.setattr(answers, "OUTPUT_DIR", tmp_path)
    cache._sweep_gates.pop(tmp_path, None)  # not swept yet
    old = tmp_path / "old.png"
    old.write_bytes(b"x")
    os.utime(old, (time.time() - 10**6, time.time() - 10**6))
    img = np.random.default_rng(0).integers(0, 256, (30, 40, 3), dtype=np.uint8)
    path = answers.save_png(img, "sheet")
    np.testing.assert_array_equal(np.asarray(Image.open(path)), img)
    assert not old.exists() and os.path.dirname(path) == str(tmp_path)


@pytest.mark.parametrize("call", [lambda: answers.trained(100, 42, 10**6), lambda: answers.hard(10, 42, 10, 0)])
def test_bad_input_is_refused_by_the_package(call):
    with pytest.raises(InputError, match="expected"):
        call()
