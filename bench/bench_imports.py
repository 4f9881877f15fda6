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
    ("ground", ("attention.errors", "attention.config")),
    ("serving", ("attention.serving",)),  # server plumbing that is not about ViTs: imports only the ground
    (
        "media",
        (
            "attention.images",
            "attention.videos",
            "attention.video_container",
            "attention.render",
            "attention.mnist",
        ),
    ),
    (
        "vit.models",
        (
            "attention.vit.models",
            "attention.vit.weights",
            "attention.vit.checkpoint",
            "attention.vit.hub_errors",
            "attention.vit.posembed",
            "attention.vit.mnist_vit",
            "attention.vit.relevance.labels",
        ),
    ),
    (
        "vit.engine",
        (
            "attention.vit.capture",
            "attention.vit.rows",
            "attention.vit.extract",
            "attention.vit.query",
            "attention.vit.preprocess",
            "attention.vit.cost",
            "attention.vit.batch",
            "attention.vit.flow",
            "attention.vit.features",
            "attention.vit.video",
            "attention.vit.gpu",
            "attention.vit.relevance.compute",
            "attention.calculator",
            "attention.retrieval.lookup",
            "attention.retrieval.models",
            "attention.retrieval.train",
            "attention.dataset",
        ),
    ),
    (
        "vit.draw",
        (
            "attention.vit.drawing",
            "attention.vit.views",
            "attention.vit.texts",
            "attention.vit.outputs",
            "attention.vit.frames",
            "attention.vit.modelview",
            "attention.vit.feature_views",
            "attention.vit.relevance.views",
            "attention.retrieval",
        ),
    ),
    (
        "vit.serve",
        (
            "attention.vit.passes",
            "attention.vit.live",
            "attention.vit.inputs",
            "attention.vit.permalink",
            "attention.vit.relevance.service",
        ),
    ),
    ("tools", ("attention.vit.compat", "attention.vit.relevance.evaluate", "attention.vit.relevance.__main__")),
    ("ui", ("attention.ui",)),
    ("top", ("attention.__main__", "attention.__init__", "attention.vit.__init__", "attention.vit.relevance.__init__")),
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


def main() -> None:
    files = sorted((ROOT / "attention").rglob("*.py"))
    modules = {module_name(p).removesuffix(".__init__"): p for p in files}
    found = arrows(modules)
    edges: dict[str, set[str]] = defaultdict(set)
    for a, b, _ in found:
        if not (a.startswith(b + ".") or b == "attention"):  # a package's own __init__ is not an arrow back
            edges[a].add(b)
    print(f"{len(modules)} modules, {len(found)} arrows")
    print("\ncycles:")
    for c in cycles(edges):
        print("  " + " <-> ".join(c))
    print("\nupward arrows (lower floor -> higher floor):")
    for a, b, lazy in found:
        fa, fb = floor_of(a), floor_of(b)
        if fb > fa and FLOORS[fb][0] != "top" and not a.startswith(b + "."):
            print(f"  {a} [{FLOORS[fa][0]}] -> {b} [{FLOORS[fb][0]}]" + (" (lazy)" if lazy else ""))
    print(f"\nmodules over {MAX_LINES} lines:")
    for mod, path in sorted(modules.items(), key=lambda kv: -len(kv[1].read_text().splitlines())):
        n = len(path.read_text().splitlines())
        if n > MAX_LINES:
            print(f"  {mod} {n}")
    private = [(a, b) for a, b, _ in found if "_layer_index" in modules[a].read_text() and b.endswith(".extract")]
    print(f"\nmodules importing extract's private _layer_index: {', '.join(sorted({a for a, _ in private}))}")


if __name__ == "__main__":
    main()
