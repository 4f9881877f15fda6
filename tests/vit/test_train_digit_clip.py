"""digit_clip's training (weights/train_digit_clip.py): canvases with digits in known places, each patch labelled
with the digit whose ink it holds, and losses that are low only when the image names the digits it holds and
each ink patch names its own digit over a background threshold that every blank patch stays under."""

from __future__ import annotations

import pytest
import torch

from weights.digit_clip_dense import dense_loss, present_loss
from weights.train_digit_clip import (
    BACKGROUND,
    CELL,
    INK,
    PATCH,
    canvases,
    caption_loss,
    group,
    patch_labels,
)


def squares(copies: int = 3) -> tuple[torch.Tensor, torch.Tensor]:
    """Digits of class c drawn as a full square of value c + 1 (every pixel ink), copies of each class."""
    y = torch.arange(10).repeat(copies)
    return (y.float() + 1)[:, None, None, None].expand(-1, 1, CELL, CELL).clone(), y


def test_each_canvas_holds_its_digits_where_it_says_on_a_blank_background():
    x, y = squares()
    img, present, placed = canvases(x, y, 40, torch.Generator().manual_seed(0), (2, 3), (1, 3))
    for i, digits in enumerate(placed):
        assert sorted(c for c, *_ in digits) == present[i].nonzero()[:, 0].tolist()  # distinct classes
        for c, _, top, left in digits:
            assert (img[i, 0, top : top + CELL, left : left + CELL] == c + 1).all()
        assert (img[i, 0] == BACKGROUND).sum() == img[i, 0].numel() - CELL * CELL * len(digits)


def test_each_patch_is_labelled_with_the_digit_whose_ink_it_holds_and_blank_ones_with_none():
    digit = torch.full((1, CELL, CELL), BACKGROUND)
    digit[0, 8:12, 4:24] = 2.5  # a bar of ink: patch rows 2, patch cols 1 to 5
    other = torch.full((1, CELL, CELL), BACKGROUND)
    other[0, 0:4, 0:4] = 2.5
    faint = torch.full((1, CELL, CELL), BACKGROUND + 0.1)  # under the ink threshold: blank
    labels = patch_labels([(7, digit, 0, 28), (2, other, 28, 0), (5, faint, 28, 28)], (56, 56))
    assert labels.shape == (56 // PATCH, 56 // PATCH)
    want = torch.full_like(labels, -1)
    want[2, 8:13] = 7  # the first digit sits 28 px to the right: 7 patches
    want[7, 0] = 2
    assert torch.equal(labels, want)


def test_a_step_group_of_large_single_digits_labels_their_ink_at_that_scale():
    x, y = squares(1)
    x[:, :, :, 14:] = BACKGROUND  # ink on the left half only
    img, present, labels = group(x, y, torch.Generator().manual_seed(0), 2, 5)
    assert img.shape == (5, 1, 56, 56) and labels.shape == (5, 14 * 14)
    for i in range(5):
        (c,) = present[i].nonzero()[:, 0].tolist()
        ink = (img[i, 0] > BACKGROUND + INK).reshape(14, 4, 14, 4).any(3).any(1)  # patches of the 56 px image
        assert ink.sum() > 40 and not ink[:, 11:].any()  # the left half's ink, scaled 2x (and jittered)
        assert torch.equal(labels[i].reshape(14, 14), torch.where(ink, c, -1))


def test_the_caption_loss_pushes_down_only_absent_digits():
    present = torch.zeros(1, 10, dtype=torch.bool)
    present[0, [2, 5]] = True
    right = torch.full((1, 10), -5.0)
    right[0, [2, 5]] = 5.0
    assert caption_loss(right, present) < 0.01
    lower = right.clone()
    lower[0, 5] = 3.0  # one present digit below the other: not a fault, both over every absent one
    assert caption_loss(lower, present) < 0.01
    wrong = right.clone()
    wrong[0, 7] = 6.0  # an absent digit over a present one
    assert caption_loss(wrong, present) > 1.0


def test_the_dense_loss_is_low_only_when_ink_names_its_digit_and_blank_stays_under_the_threshold():
    labels = torch.tensor([[3, -1, 5]])
    threshold = torch.tensor(0.2)
    right = torch.full((1, 3, 10), -0.5)
    right[0, 0, 3] = right[0, 2, 5] = 0.9
    assert dense_loss(right, threshold, labels) < 0.01
    other = right.clone()
    other[0, 0, 3], other[0, 0, 4] = -0.5, 0.9  # an ink patch naming another digit
    loud = right.clone()
    loud[0, 1, 7] = 0.9  # a blank patch naming a digit
    faint = right.clone()
    faint[0, 0, 3] = 0.1  # an ink patch under the threshold
    for bad in (other, loud, faint):
        assert dense_loss(bad, threshold, labels) > 0.4


@pytest.mark.slow
def test_the_dense_loss_reads_the_tokens_each_rule_draws_its_map_from():
    # The map the app draws under each rule (text_relevance) is the cosine of the tokens `digit_clip_dense` trains.
    import torch.nn.functional as F
    from PIL import Image

    from attention.planted import planted_batch
    from attention.vit.text import text_relevance
    from attention.vit.text.digit_clip import caption, load_digit_clip
    from attention.vit.text.tower import ready
    from weights.digit_clip_dense import rule_tokens, tokens_and_block_in

    clip, rules = load_digit_clip(), ("maskclip", "clearclip", "naclip")
    p = next(iter(planted_batch(1, (2, 3), (2, 3), 0)))  # a non-square grid: 14 x 21 patches
    prompts = [caption(int(c)) for c in p.classes]
    tr = text_relevance(clip, Image.fromarray(p.image), prompts, rules=rules, resolution="native")
    tower = ready(clip)
    img = (torch.from_numpy(p.image).float()[None, None] / 255 - 0.1307) / 0.3081
    with torch.no_grad():
        text = F.normalize(clip.encode_text(clip.tokenizer(prompts)), dim=-1)
        final, block_in = tokens_and_block_in(tower.trunk, img)
        assert torch.allclose(final, tower.trunk.forward_features(img), atol=1e-6)
        for rule in rules:
            each = F.normalize(tower.embed_each(rule_tokens(tower.trunk, block_in[0], rule, tr.grid)), dim=-1)
            maps = (each @ text.T).T.reshape(len(prompts), *tr.grid).numpy()
            assert abs(maps - tr.maps(rule)).max() < 1e-5, rule


def test_the_present_loss_is_low_only_when_each_ink_patch_names_its_own_digit_over_the_others_on_its_canvas():
    present = torch.zeros(1, 10, dtype=torch.bool)
    present[0, [3, 5]] = True
    labels = torch.tensor([[3, -1, 5]])
    right = torch.full((1, 3, 10), 0.9)  # absent captions as high as any: not this loss's business
    right[0, 0, 5] = right[0, 2, 3] = 0.5
    assert present_loss(right, labels, present) < 0.01
    mixed = right.clone()
    mixed[0, 0, 5] = mixed[0, 2, 3] = 0.88  # each ink patch names both digits of its canvas: mixed
    assert present_loss(mixed, labels, present) > 0.4
    assert present_loss(right, torch.full_like(labels, -1), present) == 0
