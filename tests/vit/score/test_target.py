"""What a score reads of a CLIP-like model (`attention.vit.score.target`): the probability of each prompt is
open_clip's own image-text logit (scale * cosine of `encode_image` and `encode_text`, + SigLIP's bias) through a
softmax over the prompts (CLIP) or a sigmoid per prompt (SigLIP), on tiny random open_clip models."""

from __future__ import annotations

import open_clip
import pytest
import torch

from attention.vit.score import scorer
from tests.vit.test_text_relevance import PROMPTS, tiny


@pytest.mark.parametrize("kind", ["clip", "siglip"])
def test_probabilities_are_open_clips_own_logits_over_the_prompts(kind):
    clip = tiny(kind)
    sc = scorer(clip, PROMPTS)
    x = torch.randn(2, 3, 64, 64, generator=torch.Generator().manual_seed(2))
    with torch.no_grad():
        image = clip.encode_image(x, normalize=True)
        text = clip.encode_text(open_clip.tokenize(PROMPTS, context_length=16), normalize=True)
        z = clip.logit_scale.exp() * image @ text.T
        want = torch.sigmoid(z + clip.logit_bias) if kind == "siglip" else torch.softmax(z, -1)
    assert sc.kind == kind and sc.labels == tuple(PROMPTS)
    torch.testing.assert_close(sc.predict(x), want, rtol=1e-5, atol=1e-6)
