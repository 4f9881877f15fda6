"""`python -m attention.retrieval`: evaluate prints README's table; train never overwrites the
shipped weights unless told to."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from attention.retrieval import __main__ as cli
from attention.retrieval import train

ROOT = Path(__file__).resolve().parents[2]


def _printed(capsys) -> dict[str, str]:
    return dict(line.split("=") for line in capsys.readouterr().out.strip().splitlines() if "=" in line)


def _readme_table_names() -> list[str]:
    section = ROOT.joinpath("README.md").read_text().split("## MNIST retrieval models")[1].split("\n## ")[0]
    return re.findall(r"^\| `(\w+)`", section, flags=re.M)


def test_evaluate_prints_exactly_the_readme_table(capsys):
    assert cli.main(["evaluate", "--n", "20", "--queries", "40"]) == 0
    values = _printed(capsys)
    assert list(values) == _readme_table_names()
    for key, value in values.items():
        assert key == "queries" or 0 <= float(value) <= 1
    assert values["queries"] == "40"


def test_help_exits_cleanly(capsys):
    for argv in (["--help"], ["evaluate", "--help"], ["train", "--help"]):
        with pytest.raises(SystemExit) as e:
            cli.main(argv)
        assert e.value.code == 0
    assert "--replace" in capsys.readouterr().out


def test_train_writes_to_its_output_folder_not_the_shipped_weights(tmp_path, monkeypatch, capsys):
    shipped = ROOT / "weights" / "retrieval_lab.safetensors"
    before = shipped.read_bytes()
    monkeypatch.setitem(train.CONFIGS, "lab", {**train.CONFIGS["lab"], "epochs": 1})
    assert cli.main(["train", "--models", "lab", "--out", str(tmp_path / "out")]) == 0
    assert (tmp_path / "out" / "retrieval_lab.safetensors").stat().st_size > 0
    assert (tmp_path / "out" / "retrieval_lab.json").exists()
    assert shipped.read_bytes() == before
    assert "top1_class_agreement" in _printed(capsys)
