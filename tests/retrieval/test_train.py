"""Seeded training of the retrieval models, and the shipped weights it wrote."""

from __future__ import annotations

import json

import pytest
import torch

from attention.errors import InputError
from attention.retrieval import models, train


def _train_lab(seed: int) -> tuple[dict, list[float]]:
    config = train.CONFIGS["lab"]
    model = train.fresh_model(config, seed)
    losses = [loss for *_, loss in train.train_steps(model, "lab", 1, seed, config["lr"])]
    return model.state_dict(), losses


def test_training_is_reproducible_from_its_seed_and_reduces_the_loss():
    a, losses_a = _train_lab(3)
    b, losses_b = _train_lab(3)
    assert losses_a == losses_b and all(torch.equal(a[k], b[k]) for k in a)
    assert len(losses_a) == -(-(4000 - 100) // train.BATCH)  # train part minus the lab database
    assert sum(losses_a[-10:]) < sum(losses_a[:10])
    c, _ = _train_lab(4)
    assert not torch.equal(a["embedding.weight"], c["embedding.weight"])


def test_class_loss_rewards_weight_on_the_query_class():
    model = models.build(train.CONFIGS["cnn"])
    db = torch.rand(4, 784)
    db_labels = torch.tensor([0, 1, 2, 3])
    q, q_labels = db[:2].clone(), torch.tensor([0, 1])

    def with_weights(w):
        model.forward = lambda queries, database: w
        return train.loss_fn(model, "cnn", q, q_labels, db, db_labels).item()

    right = with_weights(torch.tensor([[0.97, 0.01, 0.01, 0.01], [0.01, 0.97, 0.01, 0.01]]))
    wrong = with_weights(torch.tensor([[0.01, 0.01, 0.97, 0.01], [0.01, 0.01, 0.01, 0.97]]))
    assert right < 0.1 < 3 < wrong


@pytest.mark.parametrize("name", models.MODEL_NAMES)
def test_shipped_weights_are_small_safetensors_with_their_config(name):
    path = models.WEIGHTS_DIR / f"retrieval_{name}.safetensors"
    assert path.stat().st_size < 1_000_000
    config = json.loads(path.with_suffix(".json").read_text())
    assert config["kind"] == name and "seed" in config and "epochs" in config
    model, _ = models.load(name)
    assert sum(p.numel() for p in model.parameters()) * 4 < 1_000_000


def test_lab_model_is_the_labs_architecture():
    model, config = models.load("lab")
    assert isinstance(model.embedding, torch.nn.Linear) and model.embedding.in_features == 784
    assert config["embed_dim"] == model.embedding.out_features == 32
    assert model.attn.num_heads == 1 and model.attn.batch_first


def test_bad_training_arguments_are_refused():
    model = models.build(train.CONFIGS["lab"])
    with pytest.raises(InputError, match="epochs"):
        next(train.train_steps(model, "lab", 0))
    with pytest.raises(InputError, match="'lab' or 'cnn'"):
        next(train.train_steps(model, "vit", 1))
