"""Why a model could not be loaded from the Hugging Face Hub, said truly: what failed, why, the fix.

timm and huggingface-hub raise many kinds of errors for one request; `explain` reads the chain of
causes and names the one that matters:

    kind            raised as (huggingface_hub.errors unless named)            the fix the message gives
    "offline"       LocalEntryNotFoundError, OfflineModeIsEnabled               download once where the hub is
                                                                                reachable, or unset HF_HUB_OFFLINE
    "gated"         GatedRepoError, or an HTTP 401/403                          accept the licence, set HF_TOKEN
    "not_found"     RepositoryNotFoundError, RevisionNotFoundError              check the repo id (or a token)
    "no_weights"    RemoteEntryNotFoundError (no config.json / weights file)    a timm repo is needed
    "network"       httpx/requests connection errors, timeouts, OSError(net)    check the network or proxy
    "hub"           any other HTTP error (5xx, 429)                             try again later
    "architecture"  timm cannot build the config's architecture                 upgrade timm / another model
    "weights"       the weights file is unreadable or does not fit              delete the cached copy

    raise explain(err, "hf-hub:org/repo", "org/repo") from err   # a ModelLoadError
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path

from attention.errors import ModelLoadError, without_unsafe_advice


def _chain(e: BaseException) -> Iterator[BaseException]:
    """`e` and its causes (`raise ... from`, then the context), each once."""
    seen: set[int] = set()
    while e is not None and id(e) not in seen:
        seen.add(id(e))
        yield e
        e = e.__cause__ or e.__context__


def _status(e: BaseException) -> int | None:
    response = getattr(e, "response", None)
    code = getattr(response, "status_code", None)
    return int(code) if isinstance(code, int) else None


def kind_of(e: BaseException) -> str:
    """Which failure `e` is (a key of the table in this module's docstring)."""
    from huggingface_hub import errors as hub

    chain = list(_chain(e))
    for err in chain:  # the most specific hub error wins, wherever it sits in the chain
        if (
            isinstance(err, hub.GatedRepoError)
            or _status(err) in (401, 403)
            and not isinstance(err, hub.RepositoryNotFoundError)
        ):
            return "gated"
        if isinstance(err, (hub.RepositoryNotFoundError, hub.RevisionNotFoundError)):
            return "not_found"
        if isinstance(err, (hub.LocalEntryNotFoundError, hub.OfflineModeIsEnabled)):
            return "offline"
        if isinstance(err, hub.RemoteEntryNotFoundError):
            return "no_weights"
    for err in chain:
        if _is_network(err):
            return "network"
        if isinstance(err, hub.HfHubHTTPError):
            return "hub"
    first = chain[0]
    text = str(first)
    if any(type(err).__name__ == "SafetensorError" for err in chain) or "size mismatch" in text or "state_dict" in text:
        return "weights"
    if isinstance(first, (TypeError, KeyError, ValueError, AttributeError, AssertionError, NotImplementedError)) or (
        isinstance(first, RuntimeError) and text.startswith("Unknown model")
    ):
        return "architecture"
    return "weights" if isinstance(first, (OSError, RuntimeError, EOFError)) else "architecture"


def _is_network(err: BaseException) -> bool:
    names = {c.__name__ for c in type(err).__mro__}
    return bool(
        names & {"ConnectError", "ConnectTimeout", "ReadTimeout", "TimeoutException", "NetworkError", "ProxyError"}
        or isinstance(err, (ConnectionError, TimeoutError))
        or type(err).__name__ == "gaierror"
    )


def _fallback() -> str:
    """The model that ships with the app (`models.OFFLINE_MODEL`), for messages."""
    from attention.vit.models.registry import OFFLINE_MODEL

    return OFFLINE_MODEL


def offline(name: str, repo: str | None, why: str, missing: str = "the weights") -> ModelLoadError:
    """The files (`missing`) of `name` are not cached and cannot be fetched now (`why`: HF_HUB_OFFLINE, or
    unreachable)."""
    return ModelLoadError(
        f"Not in the local Hugging Face cache: {missing} of {name!r} ({repo}), and {why}. Fix: download them once "
        f"with `hf download {repo}` where the hub is reachable, then run with the same HF_HOME (or unset "
        f"HF_HUB_OFFLINE when there is a network); offline, pick '{_fallback()}', which ships with the app."
    )


def _missing(name: str, repo: str | None) -> str:
    """Which of the files a load of `name` reads are absent from the cache, as a phrase ("config.json")."""
    from huggingface_hub import try_to_load_from_cache

    if not repo:
        return "the weights"
    files = ["config.json"] if name.startswith("hf-hub:") else []  # timm names carry their config in timm
    gone = [f for f in files if not isinstance(try_to_load_from_cache(repo, f), str)]
    weights = ("model.safetensors", "pytorch_model.bin")
    if not any(isinstance(try_to_load_from_cache(repo, f), str) for f in weights):
        gone.append("the weights (model.safetensors)")
    return " and ".join(gone) if gone else "the files"


def architecture_of(timm_name: str) -> str | None:
    """The timm architecture `timm_name` builds: the name itself, or for `hf-hub:` the cached config's."""
    if not timm_name.startswith("hf-hub:"):
        return timm_name.split(".")[0]
    from huggingface_hub import try_to_load_from_cache

    path = try_to_load_from_cache(timm_name[len("hf-hub:") :], "config.json")
    try:
        return json.loads(Path(path).read_text()).get("architecture") if isinstance(path, str) else None
    except (OSError, ValueError, AttributeError):
        return None


def explain(e: BaseException, name: str, repo: str | None, arch: str | None = None) -> ModelLoadError:
    """A ModelLoadError saying what failed loading `name` (weights from `repo`; `arch`: the timm
    architecture, when known), why and the fix, for any error timm or huggingface-hub raised."""
    import timm

    kind = kind_of(e)
    text = without_unsafe_advice(str(e))  # never torch's advice to load with weights_only=False
    detail = f"{type(e).__name__}: {text.splitlines()[0] if text else ''}".rstrip(": ")
    url = f"https://huggingface.co/{repo}"
    if kind == "offline":
        from huggingface_hub import constants

        why = "HF_HUB_OFFLINE=1 is set" if constants.HF_HUB_OFFLINE else "the Hugging Face Hub cannot be reached"
        return offline(name, repo, why, _missing(name, repo))
    if kind == "gated":
        from huggingface_hub import get_token

        token = (
            "the token this process holds has no access: accept the licence with that token's account"
            if get_token()
            else "no Hugging Face token is set"
        )
        return ModelLoadError(
            f"Weights of {name!r} are gated: {repo} asks each user to accept its licence first, and {token}. "
            f"Fix: accept the licence at {url}, then set HF_TOKEN to a token of that account (on a Space: a "
            f"secret named HF_TOKEN in the Space's settings), or run `hf auth login`. ({detail})"
        )
    if kind == "not_found":
        return ModelLoadError(
            f"No model repo {repo!r} on the Hugging Face Hub (or it is private and no token with access is set). "
            f"Fix: check the id at {url} (accepted: 'hf-hub:org/repo', e.g. 'hf-hub:timm/vit_small_patch16_224.dino'); "
            f"for a private repo set HF_TOKEN. ({detail})"
        )
    if kind == "no_weights":
        return ModelLoadError(
            f"{repo} holds no timm model: it lacks config.json or model.safetensors / pytorch_model.bin. "
            f"Fix: use a repo made for timm (e.g. under timm/, or pushed with timm's push_to_hf_hub), or load your "
            f"own checkpoint with load_vit(path, arch=...). ({detail})"
        )
    if kind == "network":
        return ModelLoadError(
            f"Weights of {name!r} ({repo}) could not be downloaded: the network failed ({detail}). Fix: check the "
            f"connection or proxy (HF_ENDPOINT, HTTPS_PROXY) and try again; offline, pick '{_fallback()}'."
        )
    if kind == "hub":
        return ModelLoadError(
            f"The Hugging Face Hub refused {repo} for now ({detail}). Fix: try again in a few minutes; "
            f"see https://status.huggingface.co."
        )
    if kind == "weights":
        return ModelLoadError(
            f"The weights of {name!r} ({repo}) cannot be read or do not fit its architecture ({detail}). Fix: "
            f"delete the cached copy (`hf cache delete`, or the folder models--{(repo or '').replace('/', '--')} in "
            f"HF_HOME/hub) and download it again."
        )
    what = f"architecture {arch!r}" if arch else "the architecture of its config"
    if "dynamic_img_size" in str(e):
        why = (
            "timm builds it only for one fixed input size (its class takes no dynamic_img_size), and the "
            "explorer needs images of any size"
        )
        fix = "pick a ViT that takes any size (VisionTransformer, Eva: e.g. dino_vits16, dinov3_vits16)"
    elif str(e).startswith("Unknown model"):
        why = f"timm {timm.__version__} does not know it"
        fix = "upgrade timm (`pip install -U timm`), or pick another model"
    else:
        why = "timm cannot build it from the repo's config"
        fix = "check the config's architecture and model_args, or pick another model"
    return ModelLoadError(f"Cannot build {what} of {name!r} ({repo}): {why} ({detail}). Fix: {fix}.")
