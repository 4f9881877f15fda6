"""The MNIST retrieval tab's trained sections (no Gradio here): both trained models look up a held-out
digit or a visitor's sketch in the database, and a visitor retrains their own copy of a model.

A visitor's retrained models live in their own state, `Retrained`: {model name: (config,
state_dict)}; `models_for` picks them over the shipped ones for that visitor only.
"""

from __future__ import annotations

import copy
from collections.abc import Callable, Iterator
from typing import NamedTuple

import numpy as np
import torch

from attention import mnist
from attention.errors import ImageError, check_int
from attention.render import upsample
from attention.retrieval import lookup, models, train
from attention.retrieval.panels import MATCH_SCALE, database, digit_picture
from attention.retrieval.plots import loss_figure, pixels, weights_figure

RETRAIN_MAX_EPOCHS = 5  # what a visitor may retrain in the app
SHIPPED, MINE = "shipped", "your retrained copy"  # where a model's weights come from

Retrained = dict[str, tuple[dict, dict[str, torch.Tensor]]]


# ---- trained retrieval ------------------------------------------------------------------
def models_for(state: Retrained | None) -> dict[str, tuple[models.Retriever, str]]:
    """{name: (model in eval mode, origin)} for every model in MODEL_NAMES: the visitor's retrained
    copy where `state` holds one (origin MINE), else the shipped model (origin SHIPPED)."""
    out = {}
    for name in models.MODEL_NAMES:
        if state and name in state:
            config, weights = state[name]
            model = models.build(config)
            model.load_state_dict(weights)
            out[name] = (model.eval(), MINE)
        else:
            out[name] = (models.load(name)[0], SHIPPED)
    return out


class ModelAnswer(NamedTuple):
    """One trained model's answer: retrieved uint8 (224, 224), its weights plot uint8 (H, W, 3), and
    the top 10 as [(uint8 (112, 112), "#rank · label · weight")]."""

    retrieved: np.ndarray
    plot: np.ndarray
    top10: list


class TrainedView(NamedTuple):
    """Both models' answers to one query: query uint8 (224, 224); models {name: ModelAnswer} in
    MODEL_NAMES order; info {"query_label", "query": 28 x 28 pixels (lists of ints), name: {"origin",
    "top10": [{position, label, weight}], "top1_label", "weights": (N,)}}."""

    query: np.ndarray
    models: dict[str, ModelAnswer]
    info: dict


def _trained(
    db: lookup.Database, query: np.ndarray, label: int | None, state: Retrained | None, plot_height: int | None
) -> TrainedView:
    answers, info = {}, {"query_label": label, "query": np.asarray(query).tolist()}
    for name, (model, origin) in models_for(state).items():
        lk, top = lookup.trained_lookup(model, query, db)
        fig = weights_figure(
            lk.weights[0],
            db.labels,
            title=f"{name} ({origin}): top label {top[0].label}",
            highlight=top[0].position,
        )
        gallery = [
            (upsample(db.images[m.position], MATCH_SCALE), f"#{r + 1} · {m.label} · {m.weight:.2f}")
            for r, m in enumerate(top)
        ]
        dpi = plot_height / fig.get_figheight() if plot_height else None
        answers[name] = ModelAnswer(digit_picture(lk.retrieved_images()[0]), pixels(fig, dpi), gallery)
        info[name] = {
            "origin": origin,
            "top10": [m.__dict__ for m in top],
            "top1_label": top[0].label,
            "weights": lk.weights[0].tolist(),
        }
    return TrainedView(digit_picture(query), answers, info)


def trained_view(
    n: int, seed: int, query_index: int, state: Retrained | None = None, plot_height: int | None = None
) -> TrainedView:
    """Both trained models look up held-out digit `query_index` in the database (see TrainedView); the
    weights plots `plot_height` px tall (default: `plots.PLOT_DPI`)."""
    query, label = lookup.heldout_query(query_index, lookup.pools(full=True))
    return _trained(database(n, seed), query, label, state, plot_height)


def sketch_view(
    n: int, seed: int, sketch: np.ndarray | dict | None, state: Retrained | None = None, plot_height: int | None = None
) -> TrainedView:
    """As `trained_view`, for a drawing (see `mnist.normalise_sketch`; query_label None).

    sketch: an image array, or a layered drawing as a dict holding the flattened image under
    "composite". Raises ImageError when there is no drawing or it is blank.
    """
    image = sketch.get("composite") if isinstance(sketch, dict) else sketch
    if image is None:
        raise ImageError("the sketch is empty: draw one digit on the sketchpad, then press the button")
    db = database(n, seed)
    return _trained(db, mnist.normalise_sketch(image), None, state, plot_height)


# ---- retraining a visitor's copy ----------------------------------------------------------
def loss_plot(progress: dict) -> np.ndarray:
    """The loss curve of a retrain's `progress` (see `retrain`): uint8 (H, W, 3)."""
    title = f"{progress['model']}: training loss"
    return pixels(loss_figure(progress["losses"], title, progress["total"] // progress["epochs"]))


def retrain(
    model_name: str, epochs: int, seed: int, state: Retrained | None, on_step: Callable[[int, int], None] | None = None
) -> Iterator[tuple[str, dict | None, Retrained | None]]:
    """Train a fresh copy of `model_name` ("lab" or "cnn") for 1 to RETRAIN_MAX_EPOCHS epochs from `seed`.

    Calls on_step(step, total) after every step; yields (Markdown status, progress, None) every
    10 steps and at the end, with progress = {"model", "epochs", "seed", "step", "total", "losses":
    every step's loss so far} (JSON-ready), then (final status, None, new state): a new dict holding
    `state`'s entries and this copy. Neither `state` nor the shipped model changes.
    """
    config = models.load(model_name)[1]
    epochs = check_int(epochs, "the number of epochs", 1, RETRAIN_MAX_EPOCHS)
    seed = check_int(seed, "the training seed", 0, 2**31 - 1)
    config = {**config, "seed": seed, "epochs": epochs}
    model = train.fresh_model(config, seed)  # from scratch: the shipped model is untouched
    losses = []
    for step, total, loss in train.train_steps(
        model, config["kind"], epochs, seed, config["lr"], config.get("class_loss_weight", 1.0)
    ):
        losses.append(float(loss))
        if on_step:
            on_step(step, total)
        if step % 10 == 0 or step == total:
            progress = {"model": model_name, "epochs": epochs, "seed": seed, "step": step, "total": total}
            yield (
                f"Training your copy of **{model_name}**: step {step}/{total}, loss {loss:.4f}",
                {**progress, "losses": list(losses)},
                None,
            )
    state = {**(state or {}), model_name: (config, copy.deepcopy(model.state_dict()))}
    yield (
        (
            f"Done: your copy of **{model_name}** ({epochs} epoch{'s' if epochs != 1 else ''}, seed {seed}) now "
            "answers your queries above; the shipped model and other visitors are unaffected."
        ),
        None,
        state,
    )
