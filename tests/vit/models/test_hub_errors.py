"""Spec of attention.vit.models.hub_errors through load_vit: every way a hub load fails gets a ModelLoadError
saying what failed, why, and the fix. The errors are the real ones: huggingface-hub's own exception
classes raised from timm's download call (monkeypatched), or a crafted cache read by the real code."""

from __future__ import annotations

import json

import httpx
import pytest
import timm
from huggingface_hub import errors as hub

from attention.errors import ModelLoadError
from attention.vit.models import hub_errors, weights
from attention.vit.models.loader import load_vit
from tests.hub_cache import safetensors_bytes, temporary_hf_home

REPO = "testorg/some-vit"


def response(status: int) -> httpx.Response:
    return httpx.Response(status, request=httpx.Request("GET", f"https://huggingface.co/{REPO}/resolve/main/x"))


@pytest.fixture
def online(monkeypatch, tmp_path):
    """An empty HF cache, the hub 'reachable', and `fail(exc)`: timm's download raises `exc`."""
    with temporary_hf_home(tmp_path / "hf") as add:
        monkeypatch.setattr(weights, "hub_reachable", lambda timeout=1.5: True)

        def fail(exc: BaseException) -> None:
            def download(*args, **kwargs):
                raise exc

            monkeypatch.setattr(timm.models._hub, "hf_hub_download", download)

        yield fail, add


def failure(name: str = f"hf-hub:{REPO}") -> str:
    with pytest.raises(ModelLoadError) as e:
        load_vit(name, device="cpu")
    return str(e.value)


@pytest.mark.parametrize("token", [None, "hf_not_a_real_token"])
def test_a_gated_repo_says_accept_the_licence_and_set_hf_token(online, monkeypatch, token):
    fail, _ = online
    if token:
        monkeypatch.setenv("HF_TOKEN", token)
    else:
        monkeypatch.delenv("HF_TOKEN", raising=False)
        monkeypatch.setattr("huggingface_hub.get_token", lambda: None)
    fail(hub.GatedRepoError("Access to model testorg/some-vit is restricted.", response=response(403)))
    msg = failure()
    assert "gated" in msg and "accept the licence at https://huggingface.co/testorg/some-vit" in msg
    assert "HF_TOKEN" in msg and "secret" in msg
    assert ("has no access" in msg) == bool(token) and ("no Hugging Face token is set" in msg) == (not token)
    assert "Download it once" not in msg


def test_a_plain_403_is_read_as_gated_too(online):
    fail, _ = online
    fail(hub.HfHubHTTPError("403 Forbidden", response=response(403)))
    assert "gated" in failure()


def test_a_missing_repo_says_check_the_id(online):
    fail, _ = online
    fail(hub.RepositoryNotFoundError("Repository Not Found for url", response=response(401)))
    msg = failure()
    assert f"No model repo {REPO!r} on the Hugging Face Hub" in msg and "private" in msg and "gated" not in msg


def test_a_repo_without_timm_files_says_so(online):
    fail, _ = online
    fail(hub.RemoteEntryNotFoundError("404 Client Error: Entry Not Found", response=response(404)))
    msg = failure()
    assert "holds no timm model" in msg and "config.json" in msg and "arch=" in msg


@pytest.mark.parametrize(
    "exc", [httpx.ConnectError("[Errno -3] Temporary failure in name resolution"), TimeoutError("timed out")]
)
def test_a_network_failure_says_check_the_network(online, exc):
    fail, _ = online
    fail(exc)
    msg = failure()
    assert "the network failed" in msg and "proxy" in msg and "mnist_vit" in msg


def test_a_hub_outage_says_try_later(online):
    fail, _ = online
    fail(hub.HfHubHTTPError("503 Service Unavailable", response=response(503)))
    assert "try again in a few minutes" in failure()


def test_a_file_missing_from_the_cache_while_offline_says_download_it_once(tmp_path):
    """A crafted cache: the weights are there, config.json is not; HF_HUB_OFFLINE=1 (the suite's)."""
    with temporary_hf_home(tmp_path / "hf") as add:
        add(REPO, {"model.safetensors": b"x"})
        msg = failure()
    assert "Not in the local Hugging Face cache: config.json of 'hf-hub:testorg/some-vit'" in msg
    assert "HF_HUB_OFFLINE=1 is set" in msg
    assert f"hf download {REPO}" in msg


@pytest.mark.parametrize(
    "arch, fragment",
    [
        # BEiT and the relpos ViTs load at their trained size (tests/vit/engine/test_families.py); NaFlexVit does not
        ("naflexvit_base_patch16_gap", "only for one fixed input size"),
        ("vit_future_patch16_999", f"timm {timm.__version__} does not know it"),
    ],
)
def test_an_architecture_timm_cannot_build_as_asked_says_so_not_download(tmp_path, arch, fragment):
    args = {"embed_dim": 32, "depth": 1, "num_heads": 2}
    cfg = {"architecture": arch, "num_classes": 0, "model_args": args, "pretrained_cfg": {"num_classes": 0}}
    with temporary_hf_home(tmp_path / "hf") as add:
        weights = safetensors_bytes(timm.create_model(arch, num_classes=0, **args)) if timm.is_model(arch) else b"x"
        add(REPO, {"config.json": json.dumps(cfg).encode(), "model.safetensors": weights})
        msg = failure()
    assert f"Cannot build architecture {arch!r}" in msg and fragment in msg
    assert "Download it once" not in msg and "hf download" not in msg


def test_unreadable_cached_weights_say_delete_the_cached_copy(tmp_path):
    cfg = {"architecture": "vit_tiny_patch16_224", "num_classes": 0, "model_args": {"depth": 1}, "pretrained_cfg": {}}
    with temporary_hf_home(tmp_path / "hf") as add:
        add(REPO, {"config.json": json.dumps(cfg).encode(), "model.safetensors": b"not safetensors"})
        msg = failure()
    assert "cannot be read" in msg and "models--testorg--some-vit" in msg


def test_every_kind_in_the_table_is_reachable():
    assert {hub_errors.kind_of(e) for e in [hub.LocalEntryNotFoundError("x"), hub.OfflineModeIsEnabled("x")]} == {
        "offline"
    }
    assert hub_errors.kind_of(RuntimeError("Unknown model (x)")) == "architecture"
    assert hub_errors.kind_of(RuntimeError("Error(s) in loading state_dict: size mismatch")) == "weights"
