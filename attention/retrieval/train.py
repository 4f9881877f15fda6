"""Seeded training of the two retrieval models (see `attention.retrieval` for the protocol).

- lab: the lab's recipe. One fixed database (N = 100, seed 42, from the train part);
  queries are the other train-part digits, in shuffled mini-batches; loss = MSE between
  `weights @ database` and the query image.
- cnn: a fresh random database (N = 100) from the train part at every step, queries are
  other train-part digits; loss = MSE + the class loss of Matching Networks: the weights
  summed per database label form a class distribution p, and -log p[query label] is added.

`python -m attention.retrieval train` trains both (a couple of CPU minutes, one thread),
writes retrained/retrieval_{lab,cnn}.safetensors + .json (weights/ with --replace), and
prints the evaluation.
The app reuses `train_steps` to retrain a visitor's own copy for a few epochs.
"""

from __future__ import annotations

import time
from collections.abc import Iterator

import numpy as np
import torch
import torch.nn.functional as F

from attention.errors import InputError, check_int
from attention.retrieval import lookup, models
from attention.retrieval.models import Retriever, as_pixels

BATCH, DB_SIZE = 64, 100
CONFIGS = {
    "lab": {"kind": "lab", "embed_dim": 32, "num_heads": 1, "epochs": 20, "lr": 1e-3, "seed": 0},
    "cnn": {
        "kind": "cnn",
        "embed_dim": 64,
        "num_heads": 4,
        "channels": 16,
        "epochs": 25,
        "lr": 2e-3,
        "class_loss_weight": 1.0,
        "seed": 0,
    },
}
MAX_EPOCHS = 60


def loss_fn(
    model: Retriever,
    kind: str,
    queries: torch.Tensor,
    q_labels: torch.Tensor,
    database: torch.Tensor,
    db_labels: torch.Tensor,
    class_loss_weight: float = 1.0,
) -> torch.Tensor:
    """queries (B, 784), database (N, 784) in [0, 1]; labels int64. MSE (+ class NLL for "cnn")."""
    w = model(queries, database)  # (B, N)
    loss = F.mse_loss(w @ database, queries)
    if kind == "cnn":
        p = w @ F.one_hot(db_labels, 10).to(w.dtype)  # (B, 10) class distribution
        loss = loss + class_loss_weight * F.nll_loss(torch.log(p + 1e-8), q_labels)
    return loss


def train_steps(
    model: Retriever, kind: str, epochs: int, seed: int = 0, lr: float = 1e-3, class_loss_weight: float = 1.0
) -> Iterator[tuple[int, int, float]]:
    """Train `model` in place; yields (step, total_steps, loss) after every step.

    Everything random comes from generators seeded with `seed`: same seed, same model.
    """
    epochs = check_int(epochs, "the number of epochs", 1, MAX_EPOCHS)
    pool = lookup.pools()
    images, labels = as_pixels(pool.digits.images), torch.as_tensor(pool.digits.labels)
    g = torch.Generator().manual_seed(seed)
    if kind == "lab":
        db_idx = lookup.draw_database(DB_SIZE, lookup.DEFAULT_SEED, pool).indices
        q_pool = torch.as_tensor(np.setdiff1d(pool.train, db_idx))
    elif kind == "cnn":
        q_pool = torch.as_tensor(pool.train)
    else:
        raise InputError(f"unknown model kind {kind!r}: expected 'lab' or 'cnn'")
    per_epoch = int(np.ceil(len(q_pool) / BATCH))
    total = epochs * per_epoch
    opt = torch.optim.Adam(model.parameters(), lr=lr)
    sched = torch.optim.lr_scheduler.OneCycleLR(opt, max_lr=lr, total_steps=total) if kind == "cnn" else None
    model.train()
    step = 0
    for _ in range(epochs):
        perm = q_pool[torch.randperm(len(q_pool), generator=g)]
        for b in range(per_epoch):
            q = perm[b * BATCH : (b + 1) * BATCH]
            if kind == "cnn":  # a fresh database from the train part, disjoint from the queries
                rest = torch.as_tensor(np.setdiff1d(pool.train, q.numpy()))
                d = rest[torch.randperm(len(rest), generator=g)[:DB_SIZE]]
            else:
                d = torch.as_tensor(db_idx)
            loss = loss_fn(model, kind, images[q], labels[q], images[d], labels[d], class_loss_weight)
            opt.zero_grad()
            loss.backward()
            opt.step()
            if sched:
                sched.step()
            step += 1
            yield step, total, loss.item()
    model.eval()


def fresh_model(config: dict, seed: int) -> Retriever:
    """An untrained model for `config`, its parameters initialised from `seed` (global RNG untouched)."""
    with torch.random.fork_rng():
        torch.manual_seed(seed)
        return models.build(config)


def train(name: str, config: dict | None = None, log_every: int = 200) -> tuple[Retriever, dict]:
    """Train model `name` ("lab" or "cnn") from scratch with its config; returns (model, config)."""
    config = dict(config or CONFIGS[name])
    model = fresh_model(config, config["seed"])
    t0, losses = time.time(), []
    for step, total, loss in train_steps(
        model, config["kind"], config["epochs"], config["seed"], config["lr"], config.get("class_loss_weight", 1.0)
    ):
        losses.append(loss)
        if step % log_every == 0 or step == total:
            print(
                f"[{name}] step {step}/{total} loss {np.mean(losses[-log_every:]):.4f} ({time.time() - t0:.0f} s)",
                flush=True,
            )
    config["train_seconds"] = round(time.time() - t0, 1)
    config["final_loss"] = round(float(np.mean(losses[-50:])), 5)
    return model, config
