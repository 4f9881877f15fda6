"""Prompts a visitor types, checked once: how many, how long, and that the model's tokenizer keeps them whole.

items = check_prompts("a cat, a remote", clip)     # ["a cat", "a remote"]
ids = tokenize(clip, items)                         # LongTensor (P, context_length)
"""

from __future__ import annotations

import torch

from attention.errors import InputError
from attention.vit.engine.request import FIND_PROMPT_CHARS, FIND_PROMPTS

# prompts per request (each adds one row of dA per layer and chunk: memory and time grow with it), characters per
# prompt: the request's (`attention.vit.engine.request`)
MAX_PROMPTS, MAX_PROMPT_CHARS = FIND_PROMPTS, FIND_PROMPT_CHARS


def tokenizer_of(clip: torch.nn.Module):
    """The model's tokenizer: the one its loader attached (`clip.tokenizer`), else open_clip's CLIP BPE
    tokenizer at the model's context length (what open_clip's own CLIP configs use)."""
    tok = clip.__dict__.get("tokenizer")
    if tok is not None:
        return tok
    from open_clip.tokenizer import SimpleTokenizer

    ctx = getattr(clip, "context_length", None) or getattr(getattr(clip, "text", None), "context_length", 77)
    tok = SimpleTokenizer(context_length=int(ctx))
    clip.__dict__["tokenizer"] = tok
    return tok


def _length(tok, text: str) -> int | None:
    """Tokens `text` takes with start and end tokens, where the tokenizer says (None: it does not)."""
    if hasattr(tok, "encode"):
        return len(tok.encode(text)) + 2
    inner = getattr(tok, "tokenizer", None)
    if inner is not None and callable(inner):
        return len(inner(text)["input_ids"])
    return None


def check_prompts(prompts: str | list[str] | tuple[str, ...], clip: torch.nn.Module | None = None) -> list[str]:
    """The prompts as a list of stripped strings: a list, or one string split at commas. InputError for none,
    an empty one, one over MAX_PROMPT_CHARS characters or over the model's context length in tokens, or more
    than MAX_PROMPTS."""
    if isinstance(prompts, str):
        items = prompts.split(",")
    elif isinstance(prompts, (list, tuple)) and all(isinstance(p, str) for p in prompts):
        items = list(prompts)
    else:
        raise InputError("Prompts must be text: one string of comma-separated prompts, or a list of strings.")
    items = [p.strip() for p in items]
    if not any(items):
        raise InputError("No prompt: type what to find, e.g. 'a cat' or 'a cat, a remote' (comma-separated).")
    if len(items) > MAX_PROMPTS:
        raise InputError(f"{len(items)} prompts is too many; accepted: 1 to {MAX_PROMPTS}, comma-separated.")
    tok = tokenizer_of(clip) if clip is not None else None
    ctx = getattr(tok, "context_length", None)
    for i, p in enumerate(items, 1):
        if not p:
            raise InputError(
                f"Prompt {i} is empty (two commas in a row, or one at an end); accepted: 1 to "
                f"{MAX_PROMPT_CHARS} characters each."
            )
        if len(p) > MAX_PROMPT_CHARS:
            raise InputError(f"Prompt {i} has {len(p)} characters; accepted: at most {MAX_PROMPT_CHARS} each.")
        n = _length(tok, p) if tok is not None else None
        if n is not None and ctx and n > ctx:
            raise InputError(
                f"Prompt {i} ({p[:40]!r}) takes {n} tokens; this model reads at most {ctx}, so it would be cut: "
                "shorten it."
            )
    return items


def tokenize(clip: torch.nn.Module, prompts: list[str]) -> torch.Tensor:
    """LongTensor (P, context_length): `prompts` through the model's tokenizer."""
    return tokenizer_of(clip)(prompts)
