"""Spec of attention.vit.models.sources' start-up choice: the default model when its weights are at hand, else
the shipped one with a notice, decided without waiting on the network."""

from __future__ import annotations

import time

from attention.vit.models import sources


def test_startup_offline_picks_the_shipped_model_with_a_notice_and_no_network_wait():
    t = time.perf_counter()
    s = sources.startup_model()
    assert time.perf_counter() - t < 1.0  # HF_HUB_OFFLINE=1: no connect attempted
    assert s.model == "mnist_vit" and not s.default_available
    assert "dino_vits16" in s.notice and "timm/vit_small_patch16_224.dino" in s.notice and "mnist_vit" in s.notice


def test_startup_online_keeps_the_default(monkeypatch):
    monkeypatch.setattr(sources, "available", lambda name: name == "dino_vits16")
    s = sources.startup_model()
    assert (s.model, s.default_available, s.notice) == ("dino_vits16", True, None)
