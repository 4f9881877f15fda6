"""Spec of the repository's front door: README's two commands, CI running the second verbatim,
Spaces front matter matching the pinned gradio and the registry."""

from __future__ import annotations

import re
from pathlib import Path

from attention.vit.models.loader import DEFAULT_MODEL, REGISTRY

ROOT = Path(__file__).resolve().parent.parent
README = (ROOT / "README.md").read_text()


def commands() -> list[str]:
    return re.findall(r"```bash\n(.+?)\n```", README)


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
    assert set(re.findall(r"^  - (\S+)$", preload, re.M)) == hub_ids  # every model it offers is in the image
    assert REGISTRY[DEFAULT_MODEL].hub_id in hub_ids


def test_readme_api_snippet_runs_against_the_app(app_url, monkeypatch, capsys):
    """The gradio_client example in README, executed as written (only the URL is the test app's)."""
    snippet = next(b for b in re.findall(r"```python\n(.+?)\n```", README, re.S) if "gradio_client" in b)
    monkeypatch.chdir(ROOT)
    exec(compile(snippet.replace("http://127.0.0.1:7860/", app_url), "README.md", "exec"), {})
    out = [line for line in capsys.readouterr().out.splitlines() if not line.startswith("Loaded as API")]
    assert out[0].startswith("['head 0") and "mean of heads" in out[0]
    assert out[1] == "(4, 7, 7) float32"
    assert out[2:4] == ["True", "1.0"]
