"""The model view: every layer x every head of one query, one sheet, no new forward pass."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from attention.errors import InputError
from attention.render import colorize
from attention.vit.draw import modelview


def tile_at(sheet: np.ndarray, layer: int, head: int, side: int, pad: int = 4, cap: int = 14) -> np.ndarray:
    y, x = pad + layer * (side + cap + pad), pad + head * (side + pad)
    return sheet[y : y + side, x : x + side]


def test_rows_are_layers_and_columns_are_heads(digit_pass):
    sheet = modelview.model_view(digit_pass, tile=140)  # 7x7 grid: 20 px per patch, 140 px tiles
    L, H = digit_pass.num_layers, digit_pass.num_heads
    assert sheet.dtype == np.uint8 and sheet.shape == (4 + L * (140 + 14 + 4), 4 + H * (140 + 4), 3)


def test_each_tile_is_that_layers_head_map_of_the_query(digit_pass):
    q = (3, 2)
    sheet = modelview.model_view(digit_pass, q, tile=140, alpha=1.0)  # maps only: tiles are the colour maps
    for layer in (0, digit_pass.num_layers - 1):
        maps = digit_pass.at(q, layer).maps  # (H, 7, 7)
        for head in range(digit_pass.num_heads):
            want = np.repeat(np.repeat(colorize(maps[head]), 20, 0), 20, 1).astype(int)
            got = tile_at(sheet, layer, head, 140).astype(int)
            inside = np.ones((7, 7), bool)
            inside[q] = False  # the query patch is outlined
            keep = np.repeat(np.repeat(inside, 20, 0), 20, 1)
            assert np.abs(got - want)[keep].max() <= 1


def test_the_query_patch_is_outlined_in_cyan(digit_pass):
    sheet = modelview.model_view(digit_pass, (3, 2), tile=140, alpha=1.0)
    tile = tile_at(sheet, 1, 1, 140)
    assert (tile[60, 40:60] == (0, 255, 255)).all()  # top edge of patch (3, 2): y = 3 * 20, x = 2 * 20 ..
    cls = tile_at(modelview.model_view(digit_pass, "cls", tile=140, alpha=1.0), 1, 1, 140)
    assert not (cls == (0, 255, 255)).all(-1).any()


def test_it_runs_no_forward_pass(digit_pass, monkeypatch):
    monkeypatch.setattr(torch.nn.Module, "__call__", lambda *a, **k: pytest.fail("a forward pass ran"))
    modelview.model_view(digit_pass, (6, 6))


@pytest.mark.parametrize("tile", [8, 2048])
def test_a_tile_size_out_of_range_is_refused(digit_pass, tile):
    with pytest.raises(InputError, match="accepted: 16 to 512"):
        modelview.model_view(digit_pass, tile=tile)
