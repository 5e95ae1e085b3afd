"""Settings: every documented environment variable and default, written out as literals from the README."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from agtos.config import (
    EmbeddingConfig,
    LLMSlot,
    MaintenanceConfig,
    Settings,
    WorkingMemoryConfig,
    load_llm_slots,
)


@pytest.fixture
def clean_env(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> Path:
    """No AGTOS_* / REDIS_URL variables and a fresh home (so no real ~/.agtos/config.json is read)."""
    import os

    for name in list(os.environ):
        if name.startswith("AGTOS_") or name in ("REDIS_URL", "XDG_DATA_HOME"):
            monkeypatch.delenv(name)
    monkeypatch.setenv("HOME", str(tmp_path))
    return tmp_path


def test_defaults_without_any_variable(clean_env: Path) -> None:
    s = Settings.from_env()
    assert s.redis_url is None
    assert s.data_dir == clean_env / ".local" / "share" / "agtos"
    assert s.config_dir == clean_env / ".agtos"
    assert (s.key_prefix, s.default_user, s.port) == ("agtos", "default", 4102)
    assert s.episode_ttl_days == 30.0 and s.episode_ttl_seconds == 2_592_000
    assert s.session_journal_ttl_hours == 48.0 and s.session_journal_ttl_seconds == 172_800
    assert s.working == WorkingMemoryConfig(maxHistoryTokens=4000, maxMessages=30, preserveRecentCount=6)
    assert s.llm_slots == {}
    assert s.redis_timeout_s == 1.0
    assert s.embedding == EmbeddingConfig(provider="onnx", model=None, base_url=None, api_key="", quantize=None)
    assert (s.search_mode, s.similarity_threshold, s.query_expansion) == ("hybrid", 0.15, False)
    assert (s.hnsw_build_threads, s.hnsw_ef_search) == (1, 256)
    assert s.background_work_policy == "auto"
    assert (s.query_ingest_threshold, s.query_ingest_max_per_session) == (6, 5)
    assert s.session_idle_minutes == 30.0
    assert s.worker_yield_max_s == 2.0
    assert (s.dreamer_retries, s.dreamer_retry_delay_s) == (5, 60.0)
    assert s.max_body_bytes == 1_048_576
    m = s.maintenance
    assert (m.enabled, m.staleThresholdDays, m.jaccardThreshold) == (True, 30.0, 0.85)
    assert (m.orphanImportanceThreshold, m.pruneConfidenceThreshold) == (3.0, 0.3)
    assert (m.nli_enabled, m.nli_model_dir, m.timezone) == (True, None, "UTC")
    assert (m.guard_retries, m.guard_delay_s) == (3, 60.0)
    assert s == Settings(data_dir=s.data_dir, config_dir=s.config_dir)  # the dataclass defaults agree


def test_dataclass_defaults_match_the_documented_values() -> None:
    assert WorkingMemoryConfig() == WorkingMemoryConfig(maxHistoryTokens=4000, maxMessages=30, preserveRecentCount=6)
    assert LLMSlot() == LLMSlot(provider="none", model="", base_url="", api_key="", timeout_s=60.0)
    m = MaintenanceConfig()
    assert (m.decayFactor, m.candidate_top_k, m.candidate_cap, m.candidate_query_limit, m.judge_batch_size) == (
        0.9,
        5,
        500,
        2_000,
        10,
    )
    assert Settings().episode_ttl_seconds == 2_592_000


# (variable, raw value, settings path, expected)
ENV_CASES: list[tuple[str, str, str, Any]] = [
    ("REDIS_URL", "redis://h:1/2", "redis_url", "redis://h:1/2"),
    ("AGTOS_DATA_DIR", "/srv/agtos-data", "data_dir", Path("/srv/agtos-data")),
    ("AGTOS_KEY_PREFIX", "tenant7", "key_prefix", "tenant7"),
    ("AGTOS_DEFAULT_USER", "bob", "default_user", "bob"),
    ("AGTOS_EPISODE_TTL_DAYS", "7", "episode_ttl_seconds", 604_800),
    ("AGTOS_EPISODE_TTL_DAYS", "0.5", "episode_ttl_days", 0.5),
    ("AGTOS_SESSION_JOURNAL_TTL_HOURS", "2", "session_journal_ttl_seconds", 7_200),
    ("AGTOS_WM_MAX_HISTORY_TOKENS", "1234", "working.maxHistoryTokens", 1234),
    ("AGTOS_WM_MAX_MESSAGES", "12", "working.maxMessages", 12),
    ("AGTOS_WM_PRESERVE_RECENT", "3", "working.preserveRecentCount", 3),
    ("AGTOS_REDIS_TIMEOUT_S", "2.5", "redis_timeout_s", 2.5),
    # 0 is "catch up at once", not "never" (README: off or a negative number is never)
    ("AGTOS_READ_CATCHUP_AFTER_S", "0", "read_catchup_after_s", 0.0),
    ("AGTOS_READ_CATCHUP_AFTER_S", "0.5", "read_catchup_after_s", 0.5),
    ("AGTOS_READ_CATCHUP_AFTER_S", "OFF", "read_catchup_after_s", None),
    ("AGTOS_READ_CATCHUP_AFTER_S", "-0.001", "read_catchup_after_s", None),
    ("AGTOS_PORT", "8080", "port", 8080),
    ("AGTOS_EMBEDDING_PROVIDER", " Ollama ", "embedding.provider", "ollama"),
    ("AGTOS_EMBEDDING_MODEL", "nomic-embed-text", "embedding.model", "nomic-embed-text"),
    ("AGTOS_EMBEDDING_BASE_URL", "http://e:1", "embedding.base_url", "http://e:1"),
    ("AGTOS_EMBEDDING_API_KEY", "sk-e", "embedding.api_key", "sk-e"),
    ("AGTOS_EMBEDDING_QUANTIZE", "int8", "embedding.quantize", "int8"),
    ("AGTOS_MEMORY_SEARCH_MODE", " BM25 ", "search_mode", "bm25"),
    ("AGTOS_MEMORY_SIMILARITY_THRESHOLD", "0.4", "similarity_threshold", 0.4),
    ("AGTOS_HNSW_BUILD_THREADS", "0", "hnsw_build_threads", 0),
    ("AGTOS_HNSW_EF_SEARCH", "64", "hnsw_ef_search", 64),
    ("AGTOS_MEMORY_QUERY_EXPANSION", "true", "query_expansion", True),
    ("AGTOS_BACKGROUND_WORK_POLICY", "idle-only", "background_work_policy", "idle-only"),
    ("AGTOS_BACKGROUND_RECENT_SESSION_S", "5", "background_recent_session_s", 5.0),
    ("AGTOS_QUERY_INGEST_THRESHOLD", "9", "query_ingest_threshold", 9),
    ("AGTOS_QUERY_INGEST_MAX_PER_SESSION", "2", "query_ingest_max_per_session", 2),
    ("AGTOS_SESSION_IDLE_MINUTES", "0", "session_idle_minutes", 0.0),
    ("AGTOS_WORKER_YIELD_MAX_S", "0", "worker_yield_max_s", 0.0),
    ("AGTOS_WORKER_YIELD_MAX_S", "7.5", "worker_yield_max_s", 7.5),
    ("AGTOS_DREAMER_RETRIES", "1", "dreamer_retries", 1),
    ("AGTOS_DREAMER_RETRY_DELAY_S", "0.5", "dreamer_retry_delay_s", 0.5),
    ("AGTOS_MAINTENANCE_ENABLED", "false", "maintenance.enabled", False),
    ("AGTOS_MAINTENANCE_STALE_DAYS", "10", "maintenance.staleThresholdDays", 10.0),
    ("AGTOS_MAINTENANCE_JACCARD", "0.7", "maintenance.jaccardThreshold", 0.7),
    ("AGTOS_MAINTENANCE_ORPHAN_IMPORTANCE", "5", "maintenance.orphanImportanceThreshold", 5.0),
    ("AGTOS_MAINTENANCE_PRUNE_CONFIDENCE", "0.1", "maintenance.pruneConfidenceThreshold", 0.1),
    ("AGTOS_NLI_ENABLED", "0", "maintenance.nli_enabled", False),
    ("AGTOS_NLI_MODEL_DIR", "/models/nli", "maintenance.nli_model_dir", "/models/nli"),
    ("AGTOS_MAINTENANCE_TIMEZONE", "Europe/Berlin", "maintenance.timezone", "Europe/Berlin"),
    ("AGTOS_MAINTENANCE_GUARD_RETRIES", "7", "maintenance.guard_retries", 7),
    ("AGTOS_MAINTENANCE_GUARD_DELAY_S", "1.5", "maintenance.guard_delay_s", 1.5),
    ("AGTOS_MAX_BODY_BYTES", "2048", "max_body_bytes", 2048),
]


def lookup(settings: Settings, path: str) -> Any:
    value: Any = settings
    for part in path.split("."):
        value = getattr(value, part)
    return value


@pytest.mark.parametrize(("name", "raw", "path", "expected"), ENV_CASES, ids=[f"{c[0]}={c[1]}" for c in ENV_CASES])
def test_each_variable_changes_its_setting(
    clean_env: Path, monkeypatch: pytest.MonkeyPatch, name: str, raw: str, path: str, expected: Any
) -> None:
    default = lookup(Settings.from_env(), path)
    monkeypatch.setenv(name, raw)
    assert lookup(Settings.from_env(), path) == expected != default


def test_config_dir_variable_moves_the_slot_file(clean_env: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    conf = clean_env / "elsewhere"
    conf.mkdir()
    (conf / "config.json").write_text(json.dumps({"slots": {"summarize": {"provider": "ollama"}}}))
    monkeypatch.setenv("AGTOS_CONFIG_DIR", str(conf))
    s = Settings.from_env()
    assert s.config_dir == conf
    assert s.llm_slots == {"summarize": LLMSlot(provider="ollama")}


@pytest.mark.parametrize("raw", ["1", "true", "TRUE", " yes ", "On"])
def test_boolean_variables_accept_the_usual_true_spellings(
    clean_env: Path, monkeypatch: pytest.MonkeyPatch, raw: str
) -> None:
    monkeypatch.setenv("AGTOS_MEMORY_QUERY_EXPANSION", raw)
    assert Settings.from_env().query_expansion is True


@pytest.mark.parametrize("raw", ["0", "false", "No", " off "])
def test_other_boolean_spellings_are_false(clean_env: Path, monkeypatch: pytest.MonkeyPatch, raw: str) -> None:
    monkeypatch.setenv("AGTOS_MAINTENANCE_ENABLED", raw)
    assert Settings.from_env().maintenance.enabled is False


@pytest.mark.parametrize("raw", ["", "   "])
def test_blank_boolean_keeps_the_default(clean_env: Path, monkeypatch: pytest.MonkeyPatch, raw: str) -> None:
    monkeypatch.setenv("AGTOS_MAINTENANCE_ENABLED", raw)
    monkeypatch.setenv("AGTOS_MEMORY_QUERY_EXPANSION", raw)
    s = Settings.from_env()
    assert s.maintenance.enabled is True and s.query_expansion is False


def test_empty_numeric_and_text_variables_keep_their_defaults(clean_env: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    for name in ("AGTOS_WM_MAX_MESSAGES", "AGTOS_EPISODE_TTL_DAYS", "REDIS_URL", "AGTOS_MEMORY_SEARCH_MODE"):
        monkeypatch.setenv(name, "")
    monkeypatch.setenv("AGTOS_EMBEDDING_PROVIDER", "")
    s = Settings.from_env()
    assert (s.working.maxMessages, s.episode_ttl_seconds, s.redis_url) == (30, 2_592_000, None)
    assert (s.search_mode, s.embedding.provider) == ("hybrid", "onnx")


def test_ttl_floors() -> None:
    assert Settings(episode_ttl_days=1e-9).episode_ttl_seconds == 1
    assert Settings(episode_ttl_days=2.5).episode_ttl_seconds == 216_000
    assert Settings(session_journal_ttl_hours=1e-9).session_journal_ttl_seconds == 60
    assert Settings(session_journal_ttl_hours=0.02).session_journal_ttl_seconds == 72
    assert Settings(session_journal_ttl_hours=1 / 60).session_journal_ttl_seconds == 60


@pytest.mark.parametrize(
    ("changes", "message"),
    [
        ({"search_mode": "fuzzy"}, "AGTOS_MEMORY_SEARCH_MODE must be one of"),
        ({"hnsw_build_threads": -1}, r"AGTOS_HNSW_BUILD_THREADS must be >= 0 \(0: all cores\)"),
        ({"hnsw_ef_search": 9}, "AGTOS_HNSW_EF_SEARCH must be between 10 and 4096"),
        ({"hnsw_ef_search": 4097}, "AGTOS_HNSW_EF_SEARCH must be between 10 and 4096"),
        ({"similarity_threshold": -0.01}, "AGTOS_MEMORY_SIMILARITY_THRESHOLD must be between 0 and 1"),
        ({"similarity_threshold": 1.01}, "AGTOS_MEMORY_SIMILARITY_THRESHOLD must be between 0 and 1"),
        ({"embedding": {"quantize": "int4"}}, "AGTOS_EMBEDDING_QUANTIZE"),
        ({"worker_yield_max_s": -0.1}, r"AGTOS_WORKER_YIELD_MAX_S must be >= 0 \(0: never waits\)"),
        # whole messages: the choices listed, no "(None)" hint on a field without a description, and a
        # nested section's field named by its own variable
        (
            {"search_mode": "fuzzy"},
            "AGTOS_MEMORY_SEARCH_MODE must be one of 'hybrid', 'vector' or 'bm25', not 'fuzzy'$",
        ),
        ({"hnsw_ef_search": 9}, "AGTOS_HNSW_EF_SEARCH must be between 10 and 4096, not 9$"),
        ({"embedding": {"threads": 0}}, "AGTOS_EMBEDDING_THREADS must be >= 1, not 0$"),
    ],
)
def test_invalid_settings_are_rejected(changes: dict[str, Any], message: str) -> None:
    with pytest.raises(ValueError, match="^" + message):
        Settings(**changes)


def test_boundary_settings_are_accepted() -> None:
    for changes in (
        {"hnsw_ef_search": 10},
        {"hnsw_ef_search": 4096},
        {"similarity_threshold": 0.0},
        {"similarity_threshold": 1.0},
        {"hnsw_build_threads": 0},
        {"worker_yield_max_s": 0.0},
        {"search_mode": "vector"},
    ):
        assert Settings(**changes)
    assert Settings().with_overrides(search_mode="bm25", port=1).search_mode == "bm25"


def test_llm_slot_falls_back_to_default_then_to_none() -> None:
    own, default = LLMSlot(provider="openai", model="m1"), LLMSlot(provider="ollama", model="m2")
    s = Settings(llm_slots={"summarize": own, "default": default})
    assert s.llm_slot("summarize") is own
    assert s.llm_slot("dialectic") is default
    assert Settings().llm_slot("summarize") == LLMSlot(provider="none")


def test_slot_file_then_env_fallbacks(clean_env: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    conf = clean_env / "config.json"
    conf.write_text(
        json.dumps(
            {
                "slots": {
                    "default": {"provider": "ollama", "model": "llama3", "unknown_key": 1},
                    "consolidation": {"provider": "openai", "timeout_s": 5},
                }
            }
        )
    )
    monkeypatch.setenv("AGTOS_LLM_PROVIDER", "openai")  # ignored: the file names the default slot
    monkeypatch.setenv("AGTOS_CONSOLIDATION_PROVIDER", "ollama")  # ignored: the file names this slot
    monkeypatch.setenv("AGTOS_SUMMARIZE_PROVIDER", " OLLAMA ")
    monkeypatch.setenv("AGTOS_SUMMARIZE_MODEL", "qwen")
    monkeypatch.setenv("AGTOS_SUMMARIZE_BASE_URL", "http://llm:11434")
    monkeypatch.setenv("AGTOS_SUMMARIZE_API_KEY", "k")
    monkeypatch.setenv("AGTOS_SUMMARIZE_TIMEOUT_S", "12")
    monkeypatch.setenv("AGTOS_MAINTENANCE_PROVIDER", "openai")
    monkeypatch.setenv("AGTOS_DIALECTIC_PROVIDER", "openai")
    monkeypatch.setenv("AGTOS_EXPANSION_PROVIDER", "openai")
    slots = load_llm_slots(conf)
    assert slots == {
        "default": LLMSlot(provider="ollama", model="llama3"),
        "consolidation": LLMSlot(provider="openai", timeout_s=5),
        "summarize": LLMSlot(provider="ollama", model="qwen", base_url="http://llm:11434", api_key="k", timeout_s=12.0),
        "maintenance": LLMSlot(provider="openai"),
        "dialectic": LLMSlot(provider="openai"),
        "expansion": LLMSlot(provider="openai"),
    }


def test_env_default_slot_without_a_file(clean_env: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("AGTOS_LLM_PROVIDER", "openai")
    monkeypatch.setenv("AGTOS_LLM_MODEL", "gpt-4o-mini")
    assert load_llm_slots(clean_env / "missing.json") == {"default": LLMSlot(provider="openai", model="gpt-4o-mini")}
    empty = clean_env / "empty.json"
    empty.write_text("{}")
    monkeypatch.delenv("AGTOS_LLM_PROVIDER")
    assert load_llm_slots(empty) == {}


def test_invalid_slot_file_names_the_file(clean_env: Path) -> None:
    bad = clean_env / "config.json"
    bad.write_text("{not json")
    with pytest.raises(ValueError, match=r"^config file .*config\.json is not valid JSON"):
        load_llm_slots(bad)


def test_bad_boolean_and_host_list(clean_env: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("AGTOS_MAINTENANCE_ENABLED", "banana")
    with pytest.raises(ValueError, match=r"^AGTOS_MAINTENANCE_ENABLED='banana' is not a boolean"):
        Settings.from_env()
    monkeypatch.delenv("AGTOS_MAINTENANCE_ENABLED")
    monkeypatch.setenv("AGTOS_BACKGROUND_LOCAL_HOSTS", "Box1, GPU-Host ,,")
    assert Settings.from_env().background_local_hosts == frozenset({"box1", "gpu-host"})


@pytest.mark.parametrize(
    ("name", "raw", "message"),
    [
        ("AGTOS_WM_MAX_MESSAGES", "12.5", r"^AGTOS_WM_MAX_MESSAGES='12\.5' is not an integer$"),
        ("AGTOS_EPISODE_TTL_DAYS", "soon", r"^AGTOS_EPISODE_TTL_DAYS='soon' is not a number$"),
    ],
)
def test_bad_numbers_name_the_variable(
    clean_env: Path, monkeypatch: pytest.MonkeyPatch, name: str, raw: str, message: str
) -> None:
    monkeypatch.setenv(name, raw)
    with pytest.raises(ValueError, match=message):
        Settings.from_env()


def test_env_fields_declared_at_run_time_read_their_variable(clean_env: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """``env()`` is how every setting is declared: a field read from its variable, with its default
    (or default factory) and its bounds. Declared here, while the test runs, so a slip in ``env`` shows
    even though the real sections were built at import (mutmut's forkserver imports before a mutant)."""
    from agtos.config import SettingsError, _Section, env

    class Probe(_Section):
        count: int = env("AGTOS_PROBE_COUNT", 5, ge=1)
        home: Path = env("AGTOS_PROBE_HOME", default_factory=lambda: Path("/srv/probe"))

    assert (Probe.from_env().count, Probe.from_env().home) == (5, Path("/srv/probe"))
    monkeypatch.setenv("AGTOS_PROBE_COUNT", "7")
    monkeypatch.setenv("AGTOS_PROBE_HOME", "/var/probe")
    assert (Probe.from_env().count, Probe.from_env().home) == (7, Path("/var/probe"))
    assert Probe(count=9).count == 9  # by field name too
    monkeypatch.setenv("AGTOS_PROBE_COUNT", "0")
    with pytest.raises(SettingsError, match="AGTOS_PROBE_COUNT"):
        Probe.from_env()
