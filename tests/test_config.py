"""Spec of attention.config: every setting comes from one environment variable, read once; a bad
value stops start-up with a message naming the variable and what is accepted."""

from __future__ import annotations

import pytest

from attention.config import ConfigError, Settings
from attention.errors import AttentionError


def test_defaults_bound_everything_a_visitor_can_make_the_server_hold():
    s = Settings()
    assert s.max_tokens == 16_384 and s.state_mb == 1024 and s.state_ttl == 1800 and s.max_models == 3
    assert s.max_sessions == 1000 and s.max_upload_mb == 20 and s.cache_age == 900 and not s.allow_downloads
    assert s.budget_gflop("cpu") == s.gflop_cpu and s.budget_gflop("cuda:0") == s.gflop_gpu > s.gflop_cpu
    assert s.state_idle == 30 and s.state_idle_mb == 64 and s.memory_every == 10 and s.malloc_arenas == 2
    assert s.malloc_mmap_kb == 1024
    assert s.pass_store() == dict(
        max_bytes=1 << 30, ttl=1800, max_owner_bytes=1 << 28, idle=30, idle_bytes=1 << 26, max_group_bytes=384 << 20
    )


def test_settings_are_read_from_the_environment(monkeypatch):
    monkeypatch.setenv("ATTENTION_MAX_GFLOP_CPU", "50")
    monkeypatch.setenv("ATTENTION_STATE_MB", "256")
    monkeypatch.setenv("ATTENTION_MAX_MODELS", "1")
    monkeypatch.setenv("ATTENTION_ALLOW_DOWNLOADS", "yes")
    monkeypatch.setenv("ATTENTION_STATE_IDLE", "120")
    monkeypatch.setenv("ATTENTION_MALLOC_ARENAS", "0")
    monkeypatch.setenv("ATTENTION_MALLOC_MMAP_KB", "0")
    s = Settings.from_env()
    assert (s.gflop_cpu, s.state_mb, s.max_models, s.allow_downloads) == (50.0, 256.0, 1, True)
    assert (s.state_idle, s.malloc_arenas, s.malloc_mmap_kb) == (120.0, 0, 0)


@pytest.mark.parametrize(
    "var, value",
    [
        ("ATTENTION_MAX_MODELS", "many"),
        ("ATTENTION_MAX_MODELS", "0"),
        ("ATTENTION_HEAVY_THREADS", "-1"),
        ("ATTENTION_HEAVY_NICE", "20"),  # over the lowest priority Linux has
        ("ATTENTION_MCP_SLOTS", "0"),  # no MCP tool call would ever run
        ("ATTENTION_MCP_SLOTS", "65"),
        ("ATTENTION_STATE_MB", "-1"),
        ("ATTENTION_STATE_IDLE", "0"),
        ("ATTENTION_MALLOC_ARENAS", "-2"),
        ("ATTENTION_MALLOC_MMAP_KB", "65536"),
        ("ATTENTION_MAX_GFLOP_CPU", "lots"),
        ("ATTENTION_MAX_PIXELS", "200000000"),  # over PIL's own refusal: our limit could never be reached
    ],
)
def test_a_bad_value_names_the_variable_and_what_is_accepted(monkeypatch, var, value):
    monkeypatch.setenv(var, value)
    with pytest.raises(ConfigError, match=f"{var}='{value}' is (not accepted|out of range); expected"):
        Settings.from_env()


@pytest.mark.parametrize(
    "value, expected", [("1", True), ("true", True), ("YES", True), ("on", True), ("0", False), ("Off", False)]
)
def test_switches_read_yes_and_no_words(monkeypatch, value, expected):
    for var in ("ATTENTION_OFFLINE", "ATTENTION_ALLOW_DOWNLOADS", "ATTENTION_MCP"):
        monkeypatch.setenv(var, value)
    s = Settings.from_env()
    assert s.offline is expected and s.allow_downloads is expected and s.mcp is expected


def test_an_unset_or_empty_switch_keeps_its_default(monkeypatch):
    for var in ("ATTENTION_OFFLINE", "ATTENTION_ALLOW_DOWNLOADS", "ATTENTION_MCP"):
        monkeypatch.setenv(var, " ")
    s = Settings.from_env()
    assert (s.offline, s.allow_downloads, s.mcp) == (False, False, True)


@pytest.mark.parametrize("var", ["ATTENTION_OFFLINE", "ATTENTION_ALLOW_DOWNLOADS", "ATTENTION_MCP"])
@pytest.mark.parametrize("value", ["ture", "2", "enabled", "nein"])
def test_a_switch_with_a_junk_value_is_refused_not_read_as_off(monkeypatch, var, value):
    monkeypatch.setenv(var, value)
    with pytest.raises(ConfigError, match=f"{var}='{value}' is not accepted; expected one of 1/true/yes/on"):
        Settings.from_env()


def test_a_config_error_is_an_ordinary_attention_error_not_a_silent_exit():
    assert issubclass(ConfigError, AttentionError) and not issubclass(ConfigError, SystemExit)


def test_the_guards_limits_have_stated_defaults_and_come_from_the_environment(monkeypatch):
    s = Settings()
    assert (s.guard, s.max_body_kb, s.live_body_kb, s.new_sessions_per_min) == (True, 1024, 16, 30)
    assert (s.live_per_s, s.upload_mb_per_min, s.temp_mb) == (20, 120, 4096)
    monkeypatch.setenv("ATTENTION_GUARD", "0")
    monkeypatch.setenv("ATTENTION_LIVE_PER_S", "5")
    monkeypatch.setenv("ATTENTION_TEMP_MB", "100")
    s = Settings.from_env()
    assert (s.guard, s.live_per_s, s.temp_mb) == (False, 5.0, 100.0)
    monkeypatch.setenv("ATTENTION_MAX_BODY_KB", "0")
    with pytest.raises(ConfigError, match="ATTENTION_MAX_BODY_KB='0' is out of range"):
        Settings.from_env()


def test_heavy_threads_are_torchs_own_unless_set(monkeypatch):
    monkeypatch.delenv("ATTENTION_HEAVY_THREADS", raising=False)
    assert Settings.from_env().heavy_threads == Settings().heavy_threads == 0  # 0: as torch has them
    monkeypatch.setenv("ATTENTION_HEAVY_THREADS", "3")
    assert Settings.from_env().heavy_threads == 3


def test_heavy_jobs_run_niced_unless_set_to_zero(monkeypatch):
    monkeypatch.delenv("ATTENTION_HEAVY_NICE", raising=False)
    assert Settings.from_env().heavy_nice == Settings().heavy_nice == 10
    monkeypatch.setenv("ATTENTION_HEAVY_NICE", "0")
    assert Settings.from_env().heavy_nice == 0  # off: heavy jobs in the threads they ran in before


def test_mcp_tool_calls_have_one_slot_unless_set(monkeypatch):
    monkeypatch.delenv("ATTENTION_MCP_SLOTS", raising=False)
    assert Settings.from_env().mcp_slots == Settings().mcp_slots == 1
    monkeypatch.setenv("ATTENTION_MCP_SLOTS", "4")
    assert Settings.from_env().mcp_slots == 4
