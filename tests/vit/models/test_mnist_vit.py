"""`python -m weights.train_mnist_vit`: the shipped accuracy is what its config says; retraining
writes elsewhere unless told to replace the shipped weights."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from weights import train_mnist_vit as mnist_vit

WEIGHTS = Path(__file__).resolve().parents[3] / "weights"


def test_evaluate_prints_the_shipped_heldout_accuracy(capsys):
    assert mnist_vit.main(["evaluate"]) == 0
    name, value = capsys.readouterr().out.strip().split("=")
    assert name == "mnist_vit_heldout_accuracy"
    assert float(value) == pytest.approx(json.loads((WEIGHTS / "mnist_vit.json").read_text())["heldout_accuracy"])
    assert float(value) > 0.95


def test_help_does_not_start_training(capsys):
    for argv in (["--help"], ["train", "--help"]):
        with pytest.raises(SystemExit) as e:
            mnist_vit.main(argv)
        assert e.value.code == 0
    with pytest.raises(SystemExit) as e:  # no command: usage, not a 15-minute retrain
        mnist_vit.main([])
    assert e.value.code == 2


@pytest.mark.slow
def test_train_writes_to_its_output_folder(tmp_path):
    before = (WEIGHTS / "mnist_vit.safetensors").read_bytes()
    assert mnist_vit.main(["train", "--epochs", "1", "--threads", "2", "--out", str(tmp_path)]) == 0
    config = json.loads((tmp_path / "mnist_vit.json").read_text())
    assert config["train"] == {"epochs": 1, "seed": 0} and 0 <= config["heldout_accuracy"] <= 1
    assert (tmp_path / "mnist_vit.safetensors").stat().st_size > 0
    assert (WEIGHTS / "mnist_vit.safetensors").read_bytes() == before
