"""Spec of the repository's front door: README's two commands, CI running the second verbatim,
Spaces front matter matching the pinned gradio and the registry, README's package and API snippets and
docs/api.md's full API example run as written."""

from __future__ import annotations

import re
from pathlib import Path

from attention.vit.models.loader import DEFAULT_MODEL
from attention.vit.models.registry import REGISTRY

ROOT = Path(__file__).resolve().parent.parent
README = (ROOT / "README.md").read_text()
API_PAGE = (ROOT / "docs" / "api.md").read_text()


def commands() -> list[str]:
    return re.findall(r"```bash\n(.+?)\n```", README)


def python_block(text: str, containing: str) -> str:
    """The first ```python block of `text` that contains `containing`."""
    return next(b for b in re.findall(r"```python\n(.+?)\n```", text, re.S) if containing in b)


def run_snippet(snippet: str, where: str, capsys, app_url: str | None = None) -> list[str]:
    """`snippet` executed from the repository root (the app's URL swapped for the test app's); its printed lines."""
    if app_url:
        snippet = snippet.replace("http://127.0.0.1:7860/", app_url)
    exec(compile(snippet, where, "exec"), {})
    return [line for line in capsys.readouterr().out.splitlines() if not line.startswith("Loaded as API")]


def test_readme_opens_with_install_and_run_then_test_commands():
    run, test = commands()[:2]
    assert run == "pip install -r requirements.txt && python app.py"
    assert test.startswith("pip install -r requirements-dev.txt && ") and "pytest" in test


def test_ci_runs_the_readme_test_command_verbatim():
    ci = (ROOT / ".ci" / "run").read_text().splitlines()
    assert commands()[1] in ci


def test_spaces_front_matter_matches_requirements_and_registry():
    front = README.split("---")[1]
    pinned = re.search(r"^gradio\[mcp\]==([\d.]+)$", (ROOT / "requirements.txt").read_text(), re.M).group(1)
    assert re.search(rf"^sdk_version: {re.escape(pinned)}$", front, re.M)
    assert re.search(r'^python_version: "3\.\d+"$', front, re.M)
    assert "sdk: gradio" in front and "app_file: app.py" in front
    hub_ids = {s.hub_id for s in REGISTRY.values() if s.hub_id}
    models, preload = front.split("preload_from_hub:")
    assert set(re.findall(r"^  - (\S+)$", models, re.M)) == hub_ids  # the model cards the Space links to
    gated = {s.hub_id for s in REGISTRY.values() if s.gated}  # the image build holds no token that accepted a licence
    assert gated and set(re.findall(r"^  - (\S+)$", preload, re.M)) == hub_ids - gated  # what it offers is in the image
    assert REGISTRY[DEFAULT_MODEL].hub_id in hub_ids


def test_readme_package_snippet_runs_as_written(monkeypatch, capsys):
    """The package in ten lines, executed as written: it prints what its comments say."""
    snippet = python_block(README, "import attention")
    monkeypatch.chdir(ROOT)
    out = run_snippet(snippet, "README.md", capsys)
    assert out == ["(4, 7, 7) (4, 4, 7, 7)", "(3, '3')"]
    assert "# (4, 7, 7) (4, 4, 7, 7)" in snippet and "# (3, '3')" in snippet


def test_readme_api_snippet_runs_against_the_app(app_url, monkeypatch, capsys):
    """README's short gradio_client example, executed as written (only the URL is the test app's)."""
    snippet = python_block(README, "gradio_client")
    monkeypatch.chdir(ROOT)
    assert run_snippet(snippet, "README.md", capsys, app_url) == ["[7, 7]"]
    assert "# [7, 7]" in snippet


def test_api_page_snippet_runs_against_the_app(app_url, monkeypatch, capsys):
    """The full gradio_client example of docs/api.md, executed as written (only the URL is the test app's)."""
    snippet = python_block(API_PAGE, "gradio_client")
    monkeypatch.chdir(ROOT)
    out = run_snippet(snippet, "docs/api.md", capsys, app_url)
    assert out[0].startswith("['head 0") and "mean of heads" in out[0]
    assert out[1] == "(4, 7, 7) float32"
    assert out[2:4] == ["True", "1.0"]
