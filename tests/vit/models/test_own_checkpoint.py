"""The operator's checkpoint registered (`own_checkpoint.register_checkpoint`, through `registry.register`): a file
that cannot be loaded leaves the registry and the default model as they were."""

from __future__ import annotations

import pytest

from attention.errors import AttentionError
from attention.vit.models import registry
from attention.vit.models.checkpoint import alias_for
from attention.vit.models.own_checkpoint import register_checkpoint


def test_a_checkpoint_that_cannot_be_loaded_is_not_left_in_the_registry(tmp_path):
    path = tmp_path / "broken.pth"
    path.write_bytes(b"not a checkpoint")
    before, default = dict(registry.REGISTRY), registry.default_model()
    with pytest.raises(AttentionError):
        register_checkpoint(path, "vit_tiny_patch16_224", default=True)
    assert alias_for(path) not in registry.REGISTRY
    assert registry.REGISTRY == before and registry.default_model() == default
