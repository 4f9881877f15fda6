"""The default model is read through a function (issue 31, item 7): after `python app.py --model ckpt.pth`
(`register_checkpoint(default=True)`), `load_vit()`, `attention.DEFAULT_MODEL`, `attention.vit.DEFAULT_MODEL`,
the start-up model and the command line's `--model` default all name the operator's checkpoint."""

from __future__ import annotations

import timm
import torch

import attention
import attention.vit
from attention.vit.models import loader as models


def test_the_default_model_follows_the_operators_checkpoint(tmp_path):
    from attention.__main__ import _parser
    from attention.vit.models.own_checkpoint import register_checkpoint
    from attention.vit.models.sources import startup_model

    torch.manual_seed(0)
    src = timm.create_model("vit_tiny_patch16_224", pretrained=False, num_classes=0)
    torch.save(src.state_dict(), tmp_path / "ckpt.pth")
    saved = dict(models.REGISTRY)
    assert attention.DEFAULT_MODEL == attention.vit.DEFAULT_MODEL == models.DEFAULT_MODEL == "dino_vits16"
    try:
        alias = register_checkpoint(tmp_path / "ckpt.pth", "vit_tiny_patch16_224", default=True)
        assert alias == "ckpt:ckpt"
        assert attention.DEFAULT_MODEL == attention.vit.DEFAULT_MODEL == models.DEFAULT_MODEL == alias
        assert models.default_model() == alias
        model = models.load_vit(device="cpu")  # no name: the default now
        assert model.alias == alias
        torch.testing.assert_close(model.pos_embed, src.pos_embed)
        assert startup_model().model == alias
        args = _parser().parse_args(["maps", "cat.png"])
        assert args.model == alias
    finally:
        models.REGISTRY.clear()
        models.REGISTRY.update(saved)
        models.DEFAULT_MODEL = "dino_vits16"  # through set_default_model
        models.clear_cache()
    assert attention.DEFAULT_MODEL == "dino_vits16"
