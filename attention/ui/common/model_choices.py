"""Which models a visitor can pick here, said to the visitor (never the operator's fix).

Every model list of the app (the ViT tab, its second model, the Video tab) shows each registered
model with a mark when its weights are not on this server and cannot be fetched now (offline, not
in the local Hugging Face cache); a refused load of such a model is said in one visitor-facing
line. The operator's instructions (`hf download`, HF_HOME) go to the log (`log_operator_notice`) and
docs/package.md, not to the page.

    gr.Dropdown(choices(), ...)            # [(label, alias)], unavailable ones marked
    visitor_text(err, "dino_vits16")       # the toast's text for a typed error
"""

from __future__ import annotations

import logging

from attention.errors import AttentionError, ModelLoadError
from attention.vit.models import loader as models
from attention.vit.models import registry as model_registry
from attention.vit.models import sources as model_sources
from attention.vit.models.sources import Startup

log = logging.getLogger(__name__)

UNAVAILABLE = "not on this server"  # the mark of a model whose weights are not here
REASON = "its weights are not downloaded on this server, which is offline"


def unavailable(name: str) -> bool:
    """True when `name` cannot load here now (`model_sources.available`: not cached, not shipped, hub not reachable)."""
    return not model_sources.available(name)


def label(alias: str) -> str:
    """A registry model's line in a model list: alias, description, and the mark when it cannot load here."""
    spec = models.REGISTRY[alias]
    mark = f" · {UNAVAILABLE}" if unavailable(alias) else ""  # (no emoji: phones without its font draw a box)
    return f"{alias} · {spec.description}{mark}"


def choices(extra: tuple[str, ...] = ()) -> list[tuple[str, str]]:
    """The model list: `extra` (plain values, e.g. "(none)") then every registered model, the
    unavailable ones marked, those that can load first."""
    ok = [a for a in models.REGISTRY if not unavailable(a)]
    rest = [a for a in models.REGISTRY if a not in ok]
    return [(e, e) for e in extra] + [(label(a), a) for a in ok + rest]


def visitor_text(e: AttentionError, model: str | None = None) -> str:
    """What the visitor is told for `e`: a model that cannot load here in one line (the operator's
    message, with its fix, is logged); any other refusal as it is."""
    name = (model or "").strip()
    if isinstance(e, ModelLoadError) and name and unavailable(name):
        log.info("model %r refused to a visitor: %s", name, e)
        return (
            f"{name} cannot run here: {REASON}. Pick a model that is not marked '{UNAVAILABLE}', "
            f"e.g. {model_registry.OFFLINE_MODEL}."
        )
    return str(e)


def visitor_notice(s: Startup) -> str | None:
    """The short notice over the tab when the default model cannot load here (None: it can)."""
    if s.notice is None:
        return None
    return (
        f"Offline: models marked '{UNAVAILABLE}' in the Model box cannot run here, so this page starts with "
        f"{s.model} (a model trained on digits) and digit examples."
    )


def log_operator_notice(s: Startup) -> None:
    """The start-up notice with the operator's fix, in the log (once per build)."""
    if s.notice is not None:
        repo = model_sources.hub_id(models.DEFAULT_MODEL)
        log.warning(
            "%s To serve it: `hf download %s` where the hub is reachable, then run with the same HF_HOME.",
            s.notice,
            repo,
        )


def digits_only_note(model: str | None, image, digest: str | None = None) -> str | None:
    """A note for a picture that is not a shipped digit going through mnist_vit, which knows only
    digits (its maps and its class say little about anything else); None otherwise. digest: the
    picture's content digest when known (the pass's key: the file is not hashed again)."""
    from attention.vit.serve.inputs import example_digests
    from attention.vit.serve.permalink import example_name

    if (model or "").strip() != model_registry.OFFLINE_MODEL or image is None:
        return None
    try:
        name = example_name(image) if digest is None else example_digests().get(digest)
    except (OSError, AttentionError):
        return None
    if name is not None and name.startswith("digit_"):
        return None
    return (
        f"⚠️ {model_registry.OFFLINE_MODEL} was trained only on handwritten digits (white on black, 28×28 px): on "
        "any other picture its maps and its class say little. For photos, pick a model not marked "
        f"'{UNAVAILABLE}'."
    )
