"""What one visitor's changes cost the server in repeated work: SHA-1 calls, checks of view, layer
and head, and forward passes, counted on one upload and five changes through the ViT tab.

    python -m bench.bench_hot_paths                 # this checkout's code (offline: mnist_vit, random digit)

The tab is built in a `gr.Blocks` of its own and every event is run as Gradio would: the event's
function with its inputs' current values, its outputs written back, then the functions chained on
its success (the compare panel with a second model picked, the open feature panel, "Why this
class?"), in one visitor's session. Counted by wrapping, in every loaded `attention` module,
`hashlib.sha1`, the view/layer/head validators and the forward (`passes.forward`; the relevance
panel's forward and backward separately). Printed per event and in total, then as one line
`counts: sha1=... view=... layer=... head=... forwards=... relevance=...`; then one visitor's video
(12 frames): probes of the file, preprocessings built, view and head checks, layer rows computed.
Compare two checkouts with `git stash` or a worktree of main.
"""

from __future__ import annotations

import argparse
import collections
import contextlib
import functools
import os
import sys
import tempfile
import types

os.environ.setdefault("HF_HUB_OFFLINE", "1")  # the shipped mnist_vit, no network

COUNTS: collections.Counter = collections.Counter()
VALIDATORS = {  # module, function -> what it checks (the names any checkout of this project has used)
    ("attention.vit.draw.views", "check_view"): "view",
    ("attention.vit.engine.video", "check_video_view"): "view",
    ("attention.vit.engine.video", "check_head"): "head",
}


def _counted(fn, name: str):
    @functools.wraps(fn)
    def wrapper(*args, **kwargs):
        COUNTS[name(args, kwargs) if callable(name) else name] += 1
        return fn(*args, **kwargs)

    return wrapper


def _index_kind(args, kwargs) -> str:
    """parse_index(value, what): 'layer' or 'head' by its `what`."""
    what = kwargs.get("what", args[1] if len(args) > 1 else "Layer")
    return str(what).lower()


def _replace_everywhere(original, wrapper) -> None:
    """Bind `wrapper` wherever a loaded attention module binds `original` (imported by name or not)."""
    for mod in list(sys.modules.values()):
        if getattr(mod, "__name__", "").startswith("attention") and isinstance(mod, types.ModuleType):
            for k, v in list(vars(mod).items()):
                if v is original:
                    setattr(mod, k, wrapper)


def instrument() -> None:
    """Wrap sha1, the validators and the forwards in every loaded `attention` module."""
    import hashlib

    sha1 = _counted(hashlib.sha1, "sha1")
    counting = types.SimpleNamespace(**{k: getattr(hashlib, k) for k in dir(hashlib) if not k.startswith("__")})
    counting.sha1 = sha1
    for mod in list(sys.modules.values()):
        if getattr(mod, "__name__", "").startswith("attention") and getattr(mod, "hashlib", None) is hashlib:
            mod.hashlib = counting
    for (mod_name, fn_name), what in VALIDATORS.items():
        fn = getattr(sys.modules.get(mod_name), fn_name, None)
        if fn is not None:
            _replace_everywhere(fn, _counted(fn, what))
    inputs = sys.modules["attention.vit.serve.inputs"]
    _replace_everywhere(inputs.parse_index, _counted(inputs.parse_index, _index_kind))
    for mod_name, fn_name in (("attention.vit.checks", "check_layer"), ("attention.vit.checks", "check_head")):
        fn = getattr(sys.modules.get(mod_name), fn_name, None)  # a checkout with one validator module
        if fn is not None:
            _replace_everywhere(fn, _counted(fn, fn_name.split("_")[1]))
    passes = sys.modules["attention.vit.serve.passes"]
    _replace_everywhere(passes.forward, _counted(passes.forward, "forwards"))
    service = sys.modules["attention.vit.relevance.service"]
    service._compute = _counted(service._compute, "relevance")


class Session:
    """One visitor's page: every component's value, and the events of the tab as Gradio chains them."""

    def __init__(self, demo):
        self.demo = demo
        self.values = {b._id: getattr(b, "value", None) for b in demo.blocks.values()}
        for b in demo.blocks.values():
            if type(b).__name__ == "State":
                self.values[b._id] = b.value
        self.fns = list(demo.fns.values())

    def _run(self, dep) -> bool:
        import gradio as gr

        args = [self.values.get(c._id) for c in dep.inputs]
        kwargs = {}
        if dep.collects_event_data:
            args.append(None)
        try:
            out = dep.fn(*args, **kwargs)
        except gr.Error as e:
            print(f"    {getattr(dep.fn, '__name__', dep.fn)}: refused: {e}")
            return False
        if isinstance(out, dict) and not (out.get("__type__") == "update"):
            pairs = [(k._id, v) for k, v in out.items()]
        elif len(dep.outputs) == 1:
            pairs = [(dep.outputs[0]._id, out)]
        else:
            pairs = [(c._id, v) for c, v in zip(dep.outputs, out or [])]
        for cid, v in pairs:
            if isinstance(v, dict) and v.get("__type__") == "update":
                if "value" in v:
                    self.values[cid] = v["value"]
            elif not (isinstance(v, dict) and v.get("__type__") == "skip"):
                self.values[cid] = v
        return True

    def fire(self, component, event: str, value=None, others: dict | None = None) -> None:
        """The visitor sets `component` (and `others`: component -> value) and fires its `event`."""
        if value is not None:
            self.values[component._id] = value
        for c, v in (others or {}).items():
            self.values[c._id] = v
        firsts = [d for d in self.fns if (component._id, event) in d.targets and d.fn is not None and d.queue]
        self._chain(firsts)

    def _chain(self, deps) -> None:
        for dep in deps:
            ok = self._run(dep)
            after = [
                d
                for d in self.fns
                if d.trigger_after == dep._id and d.fn is not None and (ok or not d.trigger_only_on_success)
            ]
            self._chain([d for d in after if not d.trigger_only_on_failure or not ok])


def image(path: str) -> None:
    """A picture no one else has (not a shipped example): the visitor's own upload."""
    import numpy as np
    from PIL import Image

    rng = np.random.default_rng(0)
    Image.fromarray(rng.integers(0, 255, (28, 28), dtype=np.uint8)).save(path)


def run() -> dict[str, int]:
    import gradio as gr
    from gradio.context import LocalContext

    import attention.ui.vit.tab as vit_tab
    import attention.vit.relevance.service  # noqa: F401  (loaded for instrument)
    from attention.vit.serve.inputs import example_digests

    with gr.Blocks() as demo:
        vit_tab.build()
    example_digests()  # once per process (the shipped examples' digests): not a visitor's cost
    instrument()
    blocks = {getattr(b, "elem_id", None): b for b in demo.blocks.values()}
    s = Session(demo)
    LocalContext.request.set(types.SimpleNamespace(session_hash="bench-visitor", headers={}, query_params={}))
    comp, feats_open = blocks["vit-compare"], None
    for b in demo.blocks.values():
        if type(b).__name__ == "State" and b.value is False:
            feats_open = b  # the feature panel's "open" flag (the only State starting False)
    s.values[comp._id] = s.values[blocks["vit-model"]._id]  # a second model: the compare panel follows
    s.values[feats_open._id] = True  # the feature panel is open: it follows too
    path = os.path.join(tempfile.mkdtemp(prefix="bench_hot_"), "upload.png")
    image(path)
    steps = [
        ("upload", blocks["vit-image"], "upload", path, {}),
        ("layer 1", blocks["vit-layer"], "release", 1, {}),
        ("head 2", blocks["vit-head"], "release", 2, {}),
        ("view mean", blocks["vit-view"], "input", "mean", {}),
        ("query (3, 4)", blocks["vit-qrow"], "submit", 3, {blocks["vit-qcol"]: 4}),
        ("threshold 0.5", blocks["vit-threshold"], "release", 0.5, {}),
    ]
    keys = ("sha1", "view", "layer", "head", "forwards", "relevance")
    print(f"{'event':<16}" + "".join(f"{k:>10}" for k in keys))
    total: collections.Counter = collections.Counter()
    for name, comp_, event, value, others in steps:
        COUNTS.clear()
        s.fire(comp_, event, value, others)
        total.update(COUNTS)
        print(f"{name:<16}" + "".join(f"{COUNTS[k]:>10}" for k in keys))
    print(f"{'total':<16}" + "".join(f"{total[k]:>10}" for k in keys))
    print("counts: " + " ".join(f"{k}={total[k]}" for k in keys))
    return {k: total[k] for k in keys}


def video() -> dict[str, int]:
    """After `run` (its counting wrappers in place): one visitor's video (12 frames of a moving digit,
    one head's view, batches of 4) through the video job: probes of the file, preprocessings built,
    view and head checks, layers whose rows each forward computes (mnist_vit has 4)."""
    from attention import videos
    from attention.vit.engine import preprocess, rows
    from attention.vit.serve import video as vit_video
    from tests.video_clips import moving_digit

    COUNTS.clear()
    videos.probe = _counted(videos.probe, "probes")
    of = preprocess.Preprocess.of.__func__
    preprocess.Preprocess.of = classmethod(_counted(of, "preprocessings"))
    rows.batch_scores = _counted(rows.batch_scores, "layer rows")
    # the view and head validators are counted already (`instrument`, called by `run`)
    path = os.path.join(tempfile.mkdtemp(prefix="bench_hot_"), "clip.mp4")
    moving_digit(path, n=12, fps=10)
    vit_video.visitor_video(path, "mnist_vit", view="head", head=1, batch_size=4)
    keys = ("probes", "preprocessings", "view", "head", "layer rows")
    print("video (12 frames, 3 forwards): " + " ".join(f"{k.replace(' ', '_')}={COUNTS[k]}" for k in keys))
    return {k: COUNTS[k] for k in keys}


def main(argv: list[str] | None = None) -> None:
    argparse.ArgumentParser(description=__doc__.split("\n\n")[0]).parse_args(argv)
    with contextlib.redirect_stderr(sys.stderr):
        run()
        video()


if __name__ == "__main__":
    main()
