"""`python -m attention.retrieval`: evaluate prints docs/retrieval.md's table; train never overwrites the
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


def _readme_table() -> dict[str, str]:
    """docs/retrieval.md's table of metrics: metric name -> value as printed there."""
    section = ROOT.joinpath("docs", "retrieval.md").read_text().split("## MNIST retrieval models")[1].split("\n## ")[0]
    return dict(re.findall(r"^\| `(\w+)`.*\| ([0-9.]+) \|$", section, flags=re.M))


def test_evaluate_prints_the_readme_table_with_its_values(capsys):
    assert cli.main(["evaluate"]) == 0
    values = _printed(capsys)
    table = _readme_table()
    assert list(values) == list(table)
    for key, shown in table.items():  # the page rounds to the digits it shows
        digits = len(shown.split(".")[1]) if "." in shown else 0
        assert round(float(values[key]), digits) == float(shown), (key, values[key], shown)


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
