"""Spec of your own checkpoint in the explorer (attention.vit.models.checkpoint): a DINO-format checkpoint written
here (teacher/student keys, `module.backbone.` prefixes, DINO's head, argparse args) loads through the
package, the CLI and `python app.py --model`, giving the maps of the same weights loaded through the hub
path; bad checkpoints get typed messages; a visitor's model name is never read as a path."""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
import timm
import torch
from PIL import Image

from attention.errors import CheckpointError, ModelLoadError
from attention.vit.engine.extract import attention_maps
from attention.vit.models import loader as models
from attention.vit.models import sources as model_sources
from attention.vit.models.loader import load_vit
from attention.vit.models.own_checkpoint import register_checkpoint
from bench.common import answers, free_port
from tests.hub_cache import safetensors_bytes, temporary_hf_home

ROOT = Path(__file__).resolve().parents[3]
ARCH = "vit_tiny_patch16_224"  # 12 layers, 3 heads, width 192: 5.7 M parameters


def vit(seed: int) -> torch.nn.Module:
    torch.manual_seed(seed)
    return timm.create_model(ARCH, pretrained=False, num_classes=0).eval()


@pytest.fixture(scope="module")
def weights():
    """(teacher, student): two ViTs with different random weights."""
    return vit(1), vit(2)


def dino_checkpoint(path: Path, teacher: torch.nn.Module, student: torch.nn.Module) -> Path:
    """A checkpoint as DINO's main_dino.py saves it: DDP-wrapped MultiCropWrappers (module.backbone.*,
    module.head.*) for the student, backbone.* and head.* for the teacher, plus epoch and argparse args."""
    head = {"head.mlp.0.weight": torch.randn(16, 192), "head.last_layer.weight_g": torch.randn(8, 1)}
    torch.save(
        {
            "student": {**{f"module.backbone.{k}": v for k, v in student.state_dict().items()}, **head},
            "teacher": {**{f"module.backbone.{k}": v for k, v in teacher.state_dict().items()}, **head},
            "epoch": 100,
            "args": argparse.Namespace(arch="vit_tiny", patch_size=16),
        },
        path,
    )
    return path


@pytest.fixture
def registry():
    """Restores the registry and the default model after a test registers a checkpoint."""
    saved, default = dict(models.REGISTRY), models.DEFAULT_MODEL
    yield models.REGISTRY
    models.REGISTRY.clear()
    models.REGISTRY.update(saved)
    models.DEFAULT_MODEL = default
    models.clear_cache()


@pytest.fixture(scope="module")
def via_hub(tmp_path_factory, weights):
    """Maps of the teacher's weights loaded 'directly': through load_vit's hub path from a hub-cache fixture."""
    img = photo()
    own = timm.models.get_pretrained_cfg(ARCH).to_dict()  # the architecture's preprocessing, as a checkpoint gets it
    cfg = {"architecture": ARCH, "num_classes": 0, "model_args": {}, "pretrained_cfg": {**own, "num_classes": 0}}
    with temporary_hf_home(tmp_path_factory.mktemp("hf")) as add:
        add(
            "testorg/teacher",
            {"config.json": json.dumps(cfg).encode(), "model.safetensors": safetensors_bytes(weights[0])},
        )
        model = load_vit("hf-hub:testorg/teacher", device="cpu")
        yield {res: attention_maps(model, img, resolution=res, query=(2, 3)) for res in ("auto", 96)}


def photo() -> Image.Image:
    return Image.fromarray((np.random.default_rng(7).random((90, 120, 3)) * 255).astype(np.uint8))


@pytest.mark.slow
def test_a_dino_checkpoint_loads_the_teacher_by_default_and_reports_what_it_did(tmp_path, weights, via_hub):
    path = dino_checkpoint(tmp_path / "checkpoint.pth", *weights)
    model = load_vit(str(path), device="cpu", arch=ARCH)
    for k, v in weights[0].state_dict().items():
        torch.testing.assert_close(model.state_dict()[k], v)
    report = str(model.checkpoint_report)
    assert "weights from key 'teacher'" in report and "'module.', 'backbone.'" in report
    assert "2 tensors not in the architecture left out (head.mlp.0.weight, head.last_layer.weight_g)" in report
    for res, want in via_hub.items():  # the same weights loaded directly give the same maps
        got = attention_maps(model, photo(), resolution=res, query=(2, 3))
        assert got.grid == want.grid
        np.testing.assert_array_equal(got.weights, want.weights)


def test_checkpoint_key_picks_the_student_and_safetensors_files_load(tmp_path, weights):
    path = dino_checkpoint(tmp_path / "checkpoint.pth", *weights)
    student = load_vit(str(path), device="cpu", arch=ARCH, checkpoint_key="student")
    torch.testing.assert_close(student.blocks[5].attn.qkv.weight, weights[1].blocks[5].attn.qkv.weight)
    st = tmp_path / "finetuned.safetensors"
    st.write_bytes(safetensors_bytes(weights[1]))
    model = load_vit(str(st), device="cpu", arch=ARCH, family="dino")
    torch.testing.assert_close(model.pos_embed, weights[1].pos_embed)
    assert (model.crop_rule, model.pos_embed_rule, models.default_resolution(model)) == ("top-left", "dino", 480)
    with pytest.raises(CheckpointError, match="has no key 'ema'; its top-level keys: student, teacher, epoch, args"):
        load_vit(str(path), device="cpu", arch=ARCH, checkpoint_key="ema")


def test_a_checkpoint_for_another_architecture_names_the_first_mismatched_tensor_and_both_shapes(tmp_path, weights):
    path = dino_checkpoint(tmp_path / "checkpoint.pth", *weights)
    with pytest.raises(CheckpointError) as e:
        load_vit(str(path), device="cpu", arch="vit_small_patch16_224")
    assert "tensor 'cls_token' is (1, 1, 192) in the checkpoint and (1, 1, 384) in vit_small_patch16_224" in str(
        e.value
    )


def test_missing_tensors_are_named(tmp_path, weights):
    sd = {k: v for k, v in weights[0].state_dict().items() if not k.startswith("blocks.11.")}
    torch.save(sd, tmp_path / "cut.pth")
    with pytest.raises(CheckpointError, match=r"lacks 12 of the 150 tensors vit_tiny_patch16_224 needs: blocks\.11\."):
        load_vit(str(tmp_path / "cut.pth"), device="cpu", arch=ARCH)


class Payload:
    """Unpickling this would create a file: the proof that a refused checkpoint was never executed."""

    def __init__(self, target: str):
        self.target = target

    def __reduce__(self):
        return (Path(self.target).touch, ())


@pytest.mark.slow
def test_a_pickle_holding_an_arbitrary_object_is_refused_unexecuted(tmp_path, weights):
    target = tmp_path / "pwned"
    torch.save({"model": weights[0].state_dict(), "extra": Payload(str(target))}, tmp_path / "evil.pth")
    with pytest.raises(CheckpointError, match="holds Python objects other than tensors") as e:
        load_vit(str(tmp_path / "evil.pth"), device="cpu", arch=ARCH)
    assert "refused unread" in str(e.value) and "safetensors" in str(e.value)
    assert not target.exists()


@pytest.mark.slow
@pytest.mark.parametrize(
    "content, arch, fragment",
    [
        (None, ARCH, "No checkpoint file at"),
        (b"not a checkpoint", ARCH, "is not a PyTorch checkpoint"),
        (b"ok", "resnet_nope_999", "Architecture 'resnet_nope_999' is not a timm model"),
    ],
)
def test_unreadable_files_and_unknown_architectures_are_typed_errors(tmp_path, content, arch, fragment):
    path = tmp_path / "ckpt.pth"
    if content is not None:
        path.write_bytes(content)
    with pytest.raises(CheckpointError, match=fragment):
        load_vit(str(path), device="cpu", arch=arch)


def test_a_visitors_model_name_is_never_read_as_a_path(tmp_path, weights, registry):
    from attention.vit.serve import passes

    path = dino_checkpoint(tmp_path / "checkpoint.pth", *weights)
    for name in (str(path), f"file://{path}", "../checkpoint.pth"):
        with pytest.raises(ModelLoadError, match="Unknown model"):
            models.check_allowed(name)
        with pytest.raises(ModelLoadError):
            passes.get_pass(photo(), name, "auto", shared=True)
    alias = register_checkpoint(path, ARCH, default=True)  # the operator's: a registry entry, the default
    assert alias == "ckpt:checkpoint" and models.DEFAULT_MODEL == alias and models.check_allowed(alias) == alias
    assert models.is_cached(alias) and model_sources.available(alias) and model_sources.hub_id(alias) is None


@pytest.mark.slow
def test_the_cli_takes_weights_and_arch(tmp_path, weights, via_hub, registry, capsys):
    from attention.__main__ import main

    path = dino_checkpoint(tmp_path / "checkpoint.pth", *weights)
    photo().save(tmp_path / "cat.png")
    out = tmp_path / "out"
    argv = ["maps", str(tmp_path / "cat.png"), "--weights", str(path), "--arch", ARCH, "--query", "2,3"]
    assert main([*argv, "--resolution", "96", "--out", str(out)]) == 0
    assert "ckpt:checkpoint" in capsys.readouterr().err
    with np.load(out / "cat" / "attention.npz") as z:
        np.testing.assert_array_equal(z["weights"], via_hub[96].weights)
    img = str(tmp_path / "cat.png")
    assert main(["maps", img, "--weights", str(path), "--out", str(out)]) == 2
    assert "Give both the checkpoint file and --arch" in capsys.readouterr().err
    assert main(["maps", img, "--weights", str(path), "--arch", "vit_small_patch16_224", "--out", str(out)]) == 2
    assert "'cls_token' is (1, 1, 192)" in capsys.readouterr().err


@pytest.mark.slow
@pytest.mark.subprocess
def test_python_app_py_model_serves_the_checkpoint_as_the_default(tmp_path, weights, via_hub):
    from gradio_client import Client, handle_file

    path = dino_checkpoint(tmp_path / "checkpoint.pth", *weights)
    photo().save(tmp_path / "cat.png")
    port = free_port()
    env = {
        **os.environ,
        "GRADIO_SERVER_PORT": str(port),
        "GRADIO_TEMP_DIR": str(tmp_path / "gr"),
        "HF_HUB_OFFLINE": "1",
    }
    log = open(tmp_path / "app.log", "w")
    proc = subprocess.Popen(
        [sys.executable, "app.py", "--model", str(path), "--arch", ARCH], cwd=ROOT, env=env, stdout=log, stderr=log
    )
    try:
        url = f"http://127.0.0.1:{port}/"  # answers: False at once if app.py exits, else once it answers or in 240 s
        assert answers(url + "gradio_api/info", 240, 0.5, proc), (
            "app.py did not start:\n" + (tmp_path / "app.log").read_text()
        )
        client = Client(url, verbose=False)
        _, npz, info = client.predict(
            handle_file(str(tmp_path / "cat.png")),
            resolution="96",
            query_row=2,
            query_col=3,
            api_name="/attention_maps",
        )
        assert info["model"] == "ckpt:checkpoint"  # the default model, unasked
        with np.load(npz) as z:
            np.testing.assert_allclose(z["weights"], via_hub[96].weights, atol=1e-6)
    finally:
        proc.terminate()
        proc.wait(30)
        log.close()
    bad = subprocess.run(
        [sys.executable, "app.py", "--model", str(path), "--arch", "vit_small_patch16_224"],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=240,
    )
    assert bad.returncode == 1 and "error: Checkpoint" in bad.stderr and "Traceback" not in bad.stderr
