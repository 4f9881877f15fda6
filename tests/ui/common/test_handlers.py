"""The UI's handlers take their inputs by name (Gradio's `inputs_kwargs`), each read once into a request at the
edge, never as a long row of positional values whose order must match a list of components elsewhere: no
function of `attention/ui/` takes more than 8 positional parameters, except the public API endpoints, whose
parameters are the API's and MCP's (their names and order are what `gradio_client` callers send)."""

from __future__ import annotations

import ast
from pathlib import Path

ROOT = Path(__file__).resolve().parents[3]
MOST = 8
# the public endpoints: their parameters are the wire (`client.predict(image, model, layer, ...)`), kept stable
ENDPOINTS = {
    ("attention/ui/vit/api.py", "attention_maps"),
    ("attention/ui/vit/stepwise_api.py", "explain_row"),
    ("attention/ui/vit/stepwise_api.py", "export_view_api"),
    ("attention/ui/vit/text_panel.py", "text_relevance"),
    ("attention/ui/video/api.py", "attention_video"),
}


def long_signatures(path: Path, rel: str) -> list[str]:
    """The functions of `path` with more than MOST positional parameters (self and cls not counted)."""
    out = []
    for n in ast.walk(ast.parse(path.read_text())):
        if isinstance(n, (ast.FunctionDef, ast.AsyncFunctionDef, ast.Lambda)):
            names = [a.arg for a in n.args.posonlyargs + n.args.args if a.arg not in ("self", "cls")]
            name = getattr(n, "name", "<lambda>")
            if len(names) > MOST and (rel, name) not in ENDPOINTS:
                out.append(f"{rel}:{n.lineno} {name}({', '.join(names)})")
    return out


def test_no_handler_takes_more_than_8_positional_parameters():
    found = []
    for p in sorted((ROOT / "attention" / "ui").rglob("*.py")):
        found += long_signatures(p, p.relative_to(ROOT).as_posix())
    assert found == [], "take them by name: inputs_kwargs, read once into a request"


def test_the_endpoints_let_off_are_the_public_ones():
    for rel, name in ENDPOINTS:
        tree = ast.parse((ROOT / rel).read_text())
        fns = [n for n in ast.walk(tree) if isinstance(n, ast.FunctionDef) and n.name == name]
        assert len(fns) == 1, (rel, name)


def test_the_scan_finds_a_long_row(tmp_path):
    src = tmp_path / "m.py"
    src.write_text("class H:\n    def update(self, a, b, c, d, e, f, g, h, i, progress=None):\n        pass\n")
    assert long_signatures(src, "m.py") == ["m.py:2 update(a, b, c, d, e, f, g, h, i, progress)"]
