"""The import structure of `attention/` as it stands: cycles, arrows that run upward between the
floors of the planned split (docs/layout.md), and modules over 300 lines.

    python -m bench.bench_imports            # read from the source (nothing is imported or run)

Every `import` / `from ... import` of an `attention` module is an arrow, the ones inside functions
(lazy imports) too, marked "lazy". A floor is the role a module has in the planned layout (`FLOORS`,
lowest first); an arrow from a lower floor to a higher one runs upward.
"""

from __future__ import annotations

import ast
from collections import defaultdict
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
MAX_LINES = 300

# The planned floors (docs/layout.md), lowest first; a module's floor is the first whose prefix it has.
FLOORS: list[tuple[str, tuple[str, ...]]] = [
    ("ground", ("attention.errors", "attention.config", "attention.validate", "attention.turns", "attention.shows")),
    ("crowd", ("attention.crowd",)),  # crowd control, not about ViTs (guard, admission, lanes): imports only the ground
    (
        "media",
        (
            "attention.images",
            "attention.videos",
            "attention.video_container",
            "attention.render",
            "attention.mnist",
            "attention.planted",
            "attention.npzfile",
        ),
    ),
    ("vit.backbone", ("attention.vit.backbone",)),  # what a model is: its description, read from the module tree
    (
        "vit.models",  # what a model is and where it comes from
        (
            "attention.vit.models",
            "attention.vit.backbone.load",
            "attention.vit.relevance.labels",
            "attention.vit.text.load",
            "attention.vit.text.tower",
            "attention.vit.text.native",
            "attention.vit.text.digit_clip",
        ),
    ),
    (
        "vit.engine",  # one pass of pixels through a model: numbers only
        (
            "attention.vit.engine",
            "attention.vit.relevance.compute",
            "attention.vit.text.compute",
            "attention.vit.text.find",
            "attention.vit.text.openvocab",
            "attention.vit.text.dense",
            "attention.vit.text.proxy",
            "attention.vit.text.patchrow",
            "attention.vit.text.result",
            "attention.vit.text.rows",
            "attention.vit.text.backward",
            "attention.vit.text.record",
            "attention.vit.text.prompts",
            "attention.vit.text.price",
            "attention.calculator",
            "attention.retrieval.lookup",
            "attention.retrieval.models",
            "attention.retrieval.train",
            "attention.dataset",
            "attention.vit.score",
        ),
    ),
    (
        "vit.draw",  # pictures and files of an engine result
        (
            "attention.vit.draw",
            "attention.vit.relevance.views",
            "attention.vit.text.views",
            "attention.vit.score.views",
            "attention.retrieval",
        ),
    ),
    (
        "vit.serve",  # one server's visitors: passes, live route, GPU, inputs, permalinks, the video job
        (
            "attention.vit.serve",
            "attention.vit.relevance.service",
            "attention.vit.text.service",
            "attention.vit.score.service",
        ),
    ),
    ("notebook", ("attention.notebook",)),  # notebooks: rich display of every result, the explorer widget
    ("ui", ("attention.ui",)),
    (
        "top",
        ("attention.__main__", "attention.cli", "attention.vit.text.cli", "attention.vit.score.cli"),
    ),  # the command lines; packages' __init__ too
]


def module_name(path: Path) -> str:
    rel = path.relative_to(ROOT).with_suffix("")
    parts = list(rel.parts)
    return ".".join(parts)


def floor_of(mod: str) -> int:
    """The index in FLOORS of `mod`'s floor (the longest matching prefix wins)."""
    best, best_len = len(FLOORS) - 1, -1
    for i, (_, prefixes) in enumerate(FLOORS):
        for p in prefixes:
            if (mod == p or mod.startswith(p + ".")) and len(p) > best_len:
                best, best_len = i, len(p)
    return best


def arrows(modules: dict[str, Path]) -> list[tuple[str, str, bool]]:
    """(importer, imported, lazy) for every import of a module of `modules`."""
    out = []
    for mod, path in modules.items():
        tree = ast.parse(path.read_text())
        top = {id(n) for n in tree.body}
        package = mod if path.name == "__init__.py" else mod.rsplit(".", 1)[0]
        for node in ast.walk(tree):
            names: list[str] = []
            if isinstance(node, ast.Import):
                names = [a.name for a in node.names]
            elif isinstance(node, ast.ImportFrom):
                base = node.module or ""
                if node.level:
                    base = ".".join(package.split(".")[: len(package.split(".")) - node.level + 1] + [base]).strip(".")
                names = [f"{base}.{a.name}" for a in node.names] + [base]
            for n in names:
                target = n
                while target and target not in modules:
                    target = target.rsplit(".", 1)[0] if "." in target else ""
                if target and target != mod:
                    out.append((mod, target, id(node) not in top))
    return sorted(set(out))


def cycles(edges: dict[str, set[str]]) -> list[list[str]]:
    """The strongly connected components with more than one module (Tarjan)."""
    index, low, stack, on, out, counter = {}, {}, [], set(), [], [0]

    def visit(v: str) -> None:
        index[v] = low[v] = counter[0]
        counter[0] += 1
        stack.append(v)
        on.add(v)
        for w in sorted(edges.get(v, ())):
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            comp = []
            while True:
                w = stack.pop()
                on.discard(w)
                comp.append(w)
                if w == v:
                    break
            if len(comp) > 1:
                out.append(sorted(comp))

    for v in sorted(edges):
        if v not in index:
            visit(v)
    return out


def report() -> dict:
    """The structure of `attention/` as read from the source: modules, arrows (importer, imported, lazy), cycles,
    upward arrows (importer, its floor, imported, its floor, lazy), modules over MAX_LINES lines (name, lines),
    modules on no floor, and the entries at the top level of `attention/vit/`."""
    files = sorted((ROOT / "attention").rglob("*.py"))
    modules = {module_name(p).removesuffix(".__init__"): p for p in files}
    found = arrows(modules)
    edges: dict[str, set[str]] = defaultdict(set)
    for a, b, _ in found:
        if not (a.startswith(b + ".") or b == "attention"):  # a package's own __init__ is not an arrow back
            edges[a].add(b)
    upward = []
    for a, b, lazy in found:
        fa, fb = floor_of(a), floor_of(b)
        if fb > fa and FLOORS[fb][0] != "top" and not a.startswith(b + "."):
            upward.append((a, FLOORS[fa][0], b, FLOORS[fb][0], lazy))
    sizes = {mod: len(path.read_text().splitlines()) for mod, path in modules.items()}
    unplaced = [
        m
        for m, path in sorted(modules.items())
        if path.name not in ("__init__.py", "__main__.py")
        and not any(m.startswith(p) for p in FLOORS[-1][1])
        and floor_of(m) == len(FLOORS) - 1
    ]
    return {
        "modules": modules,
        "arrows": found,
        "cycles": cycles(edges),
        "upward": upward,
        "over": sorted(((m, n) for m, n in sizes.items() if n > MAX_LINES), key=lambda kv: -kv[1]),
        "unplaced": unplaced,
        "vit_entries": sorted(p.name for p in (ROOT / "attention" / "vit").iterdir() if p.name != "__pycache__"),
    }


def main() -> None:
    r = report()
    print(f"{len(r['modules'])} modules, {len(r['arrows'])} arrows")
    print("\ncycles:")
    for c in r["cycles"]:
        print("  " + " <-> ".join(c))
    print("\nupward arrows (lower floor -> higher floor):")
    for a, fa, b, fb, lazy in r["upward"]:
        print(f"  {a} [{fa}] -> {b} [{fb}]" + (" (lazy)" if lazy else ""))
    print(f"\nmodules over {MAX_LINES} lines:")
    for mod, n in r["over"]:
        print(f"  {mod} {n}")
    print(f"\nmodules on no floor of the plan (read as the top floor): {', '.join(r['unplaced']) or 'none'}")
    entries = r["vit_entries"]
    print(f"\nattention/vit/ top level: {len(entries)} entries ({', '.join(entries)})")


if __name__ == "__main__":
    main()
