"""Small behaviours of the core that `make mutation` found no test for (docs/testing.md): a working
memory reset, the turn store refusing record-style writes, the opt-out set's key and states. Real
Redis, literal expectations."""

from __future__ import annotations

import json
import math
import os
import re
import subprocess
import sys
import time
from concurrent.futures import Future
from pathlib import Path
from typing import Any

import numpy as np
import pytest
import redis

from agtos.config import (
    LLMSlot,
    Settings,
    SettingsError,
    WorkingMemoryConfig,
    load_llm_slots,
)
from agtos.memory.coordinator import MemoryCoordinator
from agtos.memory.semantic import PendingEmbedding
from agtos.memory.working import WorkingMemory, _bounded
from agtos.providers.embeddings import EmbeddingError
from agtos.schemas import Role, Turn
from agtos.storage.bm25_index import BM25Index
from agtos.storage.keys import GlobalKeys
from agtos.storage.opt_outs import OptOutStore
from agtos.storage.redis_conn import RedisConnector
from agtos.storage.semantic_store import LiveRead, SearchResult, SemanticStore, live_many
from agtos.storage.session_journal import SessionJournal
from agtos.storage.turns import TurnStore
from agtos.storage.vector_index import VectorIndex
from agtos.tasks.contradiction import verdicts
from agtos.tasks.summarize import ExtractiveSummariser
from agtos.tasks.verbatim_turns import stored_turns, turn_units
from tests.redis_process import RedisClusterProcesses


def test_a_working_memory_reset_forgets_messages_tokens_folds_and_journal_position() -> None:
    wm = WorkingMemory(WorkingMemoryConfig(maxMessages=3, preserveRecentCount=1), ExtractiveSummariser())
    for i in range(4):
        wm.add(Turn(role=Role.user, content=f"we talked about topic number {i}", timestamp=1_000 + i))
    wm.journal_len, wm.task_state = 4, {"step": 2}
    assert wm.compactions == 1 and wm.token_count > 0
    wm.reset()
    assert (wm.messages, wm.token_count, wm.compactions, wm.journal_len) == ([], 0, 0, 0)
    assert wm.task_state == {"step": 2}  # task state is not part of the journal replay
    assert wm.add(Turn(role=Role.user, content="hello", timestamp=2_000)) is False
    assert (len(wm.messages), wm.snapshot()["messageCount"], wm.compactions) == (1, 1, 0)


class Fixed:
    """A summariser that answers a fixed text and records how many turns it was asked to fold."""

    name = "fixed"

    def __init__(self, answer: str) -> None:
        self.answer = answer
        self.calls: list[int] = []

    def summarise(self, turns: list[Turn]) -> str:
        self.calls.append(len(turns))
        return self.answer


PREFIX = "Summary of earlier conversation: "


def said(i: int) -> Turn:
    return Turn(role=Role.user, content=f"we talked about topic number {i}", timestamp=1_000 + i)


def test_a_fold_carries_the_earlier_summary_as_text_and_never_summarises_it_again() -> None:
    summariser = Fixed("They met.")
    wm = WorkingMemory(WorkingMemoryConfig(maxMessages=3, preserveRecentCount=2), summariser)
    assert [wm.add(said(i)) for i in range(4)] == [False, False, False, True]
    assert [t.content for t in wm.messages] == [PREFIX + "They met.", *(said(i).content for i in (2, 3))]
    wm.compact()  # only the summary is older than the last 2 turns: nothing new to summarise
    assert summariser.calls == [2]
    assert wm.messages[0].content == PREFIX + "They met."
    assert wm.compactions == 2
    wm.add(said(4))  # folds the summary and turn 2: the earlier summary's text, then the new one
    assert summariser.calls == [2, 1]
    assert wm.messages[0].content == PREFIX + "They met. They met."
    assert [t.content for t in wm.messages[1:]] == [said(i).content for i in (3, 4)]


def test_a_fold_with_nothing_said_keeps_a_placeholder() -> None:
    wm = WorkingMemory(WorkingMemoryConfig(maxMessages=3, preserveRecentCount=2), Fixed(""))
    for i in range(4):
        wm.add(said(i))
    assert wm.messages[0].content == PREFIX + "(earlier turns had no content)"


@pytest.mark.parametrize(
    ("limit", "kept"),
    [
        (30, "Red fox. Big cat. Old dog."),  # fits whole
        (20, "Big cat. Old dog."),  # the newest whole sentences, one space between
        (17, "Big cat. Old dog."),  # exactly the limit fits
        (16, "Old dog."),
        (8, "Old dog."),
        (7, "ld dog."),  # no whole sentence fits: the last 7 characters
    ],
)
def test_a_rolling_summary_keeps_its_newest_sentences_within_the_limit(limit: int, kept: str) -> None:
    assert _bounded("Red fox. Big cat. Old dog.", limit) == kept


def test_a_summary_that_fits_exactly_is_kept_as_written() -> None:
    assert _bounded("Red fox.\n\nBig cat.", 18) == "Red fox.\n\nBig cat."  # 18 characters: untouched


def test_a_rolling_summary_stays_within_1200_characters() -> None:
    """README: the rolling summary keeps its newest sentences within 1,200 characters."""
    folds = iter(range(100))

    class Numbered:
        name = "numbered"

        def summarise(self, turns: list[Turn]) -> str:
            return f"Topic {next(folds):03d} " + "x" * 88 + "."  # 99 characters, one sentence

    wm = WorkingMemory(WorkingMemoryConfig(maxMessages=3, preserveRecentCount=2), Numbered())
    for i in range(18):  # 15 folds
        wm.add(said(i))
    assert wm.compactions == 15
    summary = wm.messages[0].content.removeprefix(PREFIX)
    assert len(summary) == 12 * 99 + 11  # 12 sentences of 99 and 11 spaces: 1,199
    assert re.findall(r"Topic \d+", summary) == [f"Topic {n:03d}" for n in range(3, 15)]


@pytest.mark.parametrize("method", ["upsert", "upsert_many"])
def test_the_turn_store_refuses_record_writes(coordinator: MemoryCoordinator, method: str) -> None:
    with pytest.raises(TypeError) as refused:
        getattr(coordinator.semantic.turns, method)("alice", "t1", "text", None, "{}")
    assert str(refused.value) == "turns are stored per episode: use TurnStore.save"


def test_deleting_an_episode_indexed_for_keywords_only_leaves_no_index_entry(
    turn_store: TurnStore, key_prefix: str, raw_redis: redis.Redis
) -> None:
    """Turns saved while the embedder was down (vectors None) are in the BM25 index only: they are read
    back, found with their neighbours, and deleting an episode still finds and removes its entries (no
    vector index to ask)."""
    store = turn_store
    turns = stored_turns("alice", "ep-1", "s-1", [said(i) for i in range(4)])
    turns += stored_turns("alice", "ep-2", "s-2", [said(i) for i in range(3)])
    store.save(turns, turn_units(turns), None)
    assert sorted(store.bm25.ids("alice")) == [*(f"ep-1.t{i}" for i in range(4)), *(f"ep-2.t{i}" for i in range(3))]
    # every turn of each episode asked for, episode by episode
    assert [(t.episode_id, t.position) for t in store.of_episodes("alice", ["ep-2", "ep-1"])] == [
        *(("ep-2", i) for i in range(3)),
        *(("ep-1", i) for i in range(4)),
    ]
    # a hit comes back with one turn either side by default
    (match,) = store.lookup("alice", [SearchResult("ep-1.t2", 1.0, "keyword")])
    assert [t.position for t in match.window] == [1, 2, 3]
    assert store.delete_episode("alice", "ep-1") == 4
    assert sorted(store.bm25.ids("alice")) == ["ep-2.t0", "ep-2.t1", "ep-2.t2"]
    assert list(store.vectors.ids("alice")) == []
    assert raw_redis.exists(f"{key_prefix}:u:{{alice}}:turns:ep-1") == 0
    kept = json.loads(raw_redis.lindex(f"{key_prefix}:u:{{alice}}:turns:ep-2", 0))
    assert "name" not in kept and kept["content"] == said(0).content  # stored without its default fields


def test_a_turn_resave_keeps_the_vectors_of_unchanged_turns_and_refuses_gaps(turn_store: TurnStore) -> None:
    """Saving an episode's turns again while the embedder is down keeps the vectors its unchanged turns
    have; a save without units drops the old ones from both indexes; positions must be 0..n-1."""
    store = turn_store
    turns = stored_turns("alice", "ep-1", "s-1", [said(i) for i in range(3)])
    units = turn_units(turns)
    store.save(turns, units, np.eye(len(units), 384, dtype=np.float32))
    store.save(turns, units, None)
    assert sorted(store.vectors.ids("alice")) == ["ep-1.t0", "ep-1.t1", "ep-1.t2"]
    assert store.save(turns[:2], [], None) == 2  # stored, not indexed
    assert (list(store.bm25.ids("alice")), list(store.vectors.ids("alice"))) == ([], [])
    assert [t.position for t in store.episode_turns("alice", "ep-1")] == [0, 1]
    with pytest.raises(ValueError) as gap:
        store.save([turns[0], turns[2]], [], None)
    assert str(gap.value) == "turns of episode 'ep-1' must have positions 0..1 in order"


def test_a_turn_whose_doc_id_would_pass_128_characters_is_kept_not_indexed_and_logged(
    turn_store: TurnStore, caplog: pytest.LogCaptureFixture
) -> None:
    episode_id = "e" * 126  # "e...e.t0": 129 characters
    turns = stored_turns("alice", episode_id, "s-1", [said(0)])
    with caplog.at_level("WARNING", logger="agtos.storage.turns"):
        assert turn_store.save(turns, turn_units(turns), None) == 1
    assert caplog.messages == [f"turn '{episode_id}.t0' not indexed: its doc id would be longer than 128 characters"]
    assert list(turn_store.bm25.ids("alice")) == []
    assert [t.position for t in turn_store.episode_turns("alice", episode_id)] == [0]


def test_opt_outs_are_one_global_set(settings: Settings, key_prefix: str, raw_redis: redis.Redis) -> None:
    connector = RedisConnector(settings.redis_url, settings.data_dir)
    try:
        store = OptOutStore(connector, GlobalKeys(key_prefix))
        key = f"{key_prefix}:meta:privacy:opt-out"
        assert store.contains("ann") is False
        store.set("ann", True)
        store.set("ann:1", True)
        assert (store.contains("ann"), store.contains("an"), store.contains("ann:1")) == (True, False, True)
        assert raw_redis.smembers(key) == {b"ann", b"ann:1"}
        store.set("ann", False)
        store.set("bob", False)  # never opted out: nothing to remove
        assert store.contains("ann") is False
        assert raw_redis.smembers(key) == {b"ann:1"}
    finally:
        connector.close()


@pytest.mark.parametrize(
    ("section", "values", "message"),
    [
        (Settings, {"port": 0}, "AGTOS_PORT must be between 1 and 65535, not 0"),
        (Settings, {"port": 70_000}, "AGTOS_PORT must be between 1 and 65535, not 70000"),
        (Settings, {"episode_ttl_days": 0}, "AGTOS_EPISODE_TTL_DAYS must be > 0, not 0"),
        (
            Settings,
            {"port": "x", "episode_ttl_days": -1},
            "AGTOS_EPISODE_TTL_DAYS must be > 0, not -1; AGTOS_PORT='x' is not an integer",
        ),
        (
            WorkingMemoryConfig,
            {"maxMessages": 0, "preserveRecentCount": -1},
            "AGTOS_WM_MAX_MESSAGES must be >= 1, not 0; AGTOS_WM_PRESERVE_RECENT must be >= 0, not -1",
        ),
        (
            Settings,
            {"search_mode": "fuzzy"},
            "AGTOS_MEMORY_SEARCH_MODE must be one of 'hybrid', 'vector' or 'bm25', not 'fuzzy'",
        ),
    ],
)
def test_an_invalid_setting_names_its_variable_and_range(section: type, values: dict, message: str) -> None:
    with pytest.raises(SettingsError) as refused:
        section(**values)
    assert str(refused.value) == message


# --- settings (agtos/config.py): the environment, error messages and LLM slots, through Settings.from_env ---


@pytest.fixture
def clean_env(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> pytest.MonkeyPatch:
    """No AGTOS_* / REDIS_URL variable of the caller's shell; the config dir an empty temp dir."""
    for name in list(os.environ):
        if name.upper().startswith("AGTOS_") or name.upper() == "REDIS_URL":
            monkeypatch.delenv(name)
    monkeypatch.setenv("AGTOS_CONFIG_DIR", str(tmp_path))
    return monkeypatch


def test_variable_names_are_case_sensitive(clean_env: pytest.MonkeyPatch) -> None:
    """The README's names are exact: a lower- or mixed-case spelling is another variable, not read."""
    clean_env.setenv("AGTOS_PORT", "5001")
    clean_env.setenv("agtos_hnsw_ef_search", "99")
    clean_env.setenv("Agtos_Memory_Search_Mode", "bm25")
    clean_env.setenv("agtos_wm_max_messages", "9")
    clean_env.setenv("agtos_llm_provider", "ollama")
    settings = Settings.from_env()
    assert (settings.port, settings.hnsw_ef_search, settings.search_mode) == (5001, 256, "hybrid")
    assert settings.working.maxMessages == 30
    assert settings.llm_slots == {}


def as_any(values: dict[str, Any]) -> Any:
    """Values of the wrong kind, on purpose (the type checker would refuse them written out)."""
    return values


def test_an_unknown_setting_is_refused_with_its_name() -> None:
    with pytest.raises(SettingsError) as refused:
        Settings(**as_any({"bogus": 1}))
    assert str(refused.value) == "bogus=1: Extra inputs are not permitted"
    with pytest.raises(SettingsError) as refused:
        WorkingMemoryConfig(maxMessages=8, **as_any({"nope": "x"}))
    assert str(refused.value) == "nope='x': Extra inputs are not permitted"


def test_a_wrong_slot_entry_is_named_by_its_path() -> None:
    with pytest.raises(SettingsError) as refused:
        Settings(llm_slots=as_any({"summarize": 5}))
    assert str(refused.value) == "llm_slots.summarize=5: Input should be a valid dictionary or instance of LLMSlot"


@pytest.mark.parametrize(
    ("variable", "value", "message"),
    [
        # a validator's own message that already names the variable is kept as it is
        ("AGTOS_EMBEDDING_QUANTIZE", "int4", "AGTOS_EMBEDDING_QUANTIZE must be 'int8' or 'none', not 'int4'"),
        # one that does not is prefixed with the variable and the value
        (
            "AGTOS_MAINTENANCE_TIMEZONE",
            "Mars/Olympus",
            "AGTOS_MAINTENANCE_TIMEZONE='Mars/Olympus' is not a known timezone",
        ),
        ("AGTOS_MAINTENANCE_JACCARD", "1.5", "AGTOS_MAINTENANCE_JACCARD must be between 0 and 1, not '1.5'"),
        ("AGTOS_RATE_LIMIT_PER_S", "-1", "AGTOS_RATE_LIMIT_PER_S must be >= 0 (0: no limit), not '-1'"),
        ("AGTOS_SESSION_JOURNAL_TTL_HOURS", "0", "AGTOS_SESSION_JOURNAL_TTL_HOURS must be > 0, not '0'"),
        ("AGTOS_HNSW_EF_SEARCH", "4097", "AGTOS_HNSW_EF_SEARCH must be between 10 and 4096, not '4097'"),
        (
            "AGTOS_INGEST_WORKER",
            "maybe",
            "AGTOS_INGEST_WORKER='maybe' is not a boolean (true/false, 1/0, yes/no, on/off)",
        ),
        (
            "AGTOS_EMBEDDING_PROVIDER",
            "bert",
            "AGTOS_EMBEDDING_PROVIDER must be one of 'onnx', 'local', 'ollama', "
            "'openai', 'openrouter' or 'openai-compatible', not 'bert'",
        ),
    ],
)
def test_an_invalid_variable_stops_from_env_with_its_documented_message(
    clean_env: pytest.MonkeyPatch, variable: str, value: str, message: str
) -> None:
    clean_env.setenv(variable, value)
    with pytest.raises(SettingsError) as refused:
        Settings.from_env()
    assert str(refused.value) == message


def test_the_working_memory_limits_are_checked_together(clean_env: pytest.MonkeyPatch) -> None:
    clean_env.setenv("AGTOS_WM_MAX_MESSAGES", "6")
    clean_env.setenv("AGTOS_WM_PRESERVE_RECENT", "6")
    with pytest.raises(SettingsError) as refused:
        Settings.from_env()
    assert str(refused.value) == "AGTOS_WM_PRESERVE_RECENT must be >= 0 and below AGTOS_WM_MAX_MESSAGES"
    clean_env.setenv("AGTOS_WM_PRESERVE_RECENT", " 5 ")
    assert (Settings.from_env().working.maxMessages, Settings.from_env().working.preserveRecentCount) == (6, 5)


def test_llm_slots_from_their_variables(clean_env: pytest.MonkeyPatch) -> None:
    """AGTOS_LLM_* is the default slot, AGTOS_<SLOT>_* one slot; provider normalised, blanks unset."""
    clean_env.setenv("AGTOS_LLM_PROVIDER", " Ollama ")
    clean_env.setenv("AGTOS_LLM_MODEL", "llama3.2")
    clean_env.setenv("AGTOS_LLM_TIMEOUT_S", "   ")  # blank: the default
    clean_env.setenv("AGTOS_DIALECTIC_PROVIDER", "OPENAI-COMPATIBLE")
    clean_env.setenv("AGTOS_DIALECTIC_MODEL", "qwen")
    clean_env.setenv("AGTOS_DIALECTIC_BASE_URL", " http://127.0.0.1:9/v1 ")
    clean_env.setenv("AGTOS_DIALECTIC_API_KEY", "sk-1")
    clean_env.setenv("AGTOS_DIALECTIC_TIMEOUT_S", "2.5")
    clean_env.setenv("AGTOS_DIALECTIC_MAX_TOKENS", "64")
    clean_env.setenv("AGTOS_EXPANSION_MODEL", "no provider: no slot")
    settings = Settings.from_env()
    assert set(settings.llm_slots) == {"default", "dialectic"}
    default = settings.llm_slot("default")
    assert (default.provider, default.model, default.base_url, default.api_key) == ("ollama", "llama3.2", "", "")
    assert (default.timeout_s, default.max_tokens) == (60.0, 512)
    dialectic = settings.llm_slot("dialectic")
    assert (dialectic.provider, dialectic.model, dialectic.base_url, dialectic.api_key) == (
        "openai-compatible",
        "qwen",
        "http://127.0.0.1:9/v1",
        "sk-1",
    )
    assert (dialectic.timeout_s, dialectic.max_tokens) == (2.5, 64)
    assert settings.llm_slot("expansion") == default  # unset slot: the default one
    assert Settings().llm_slot("expansion") == LLMSlot()
    assert LLMSlot().provider == "none"


@pytest.mark.parametrize(
    ("prefix", "values", "message"),
    [
        (
            "AGTOS_LLM_",
            {"TIMEOUT_S": "0", "MAX_TOKENS": "0"},
            "AGTOS_LLM_TIMEOUT_S must be > 0, not '0'; AGTOS_LLM_MAX_TOKENS must be >= 1, not '0'",
        ),
        ("AGTOS_CONSOLIDATION_", {"TIMEOUT_S": "soon"}, "AGTOS_CONSOLIDATION_TIMEOUT_S='soon' is not a number"),
        ("AGTOS_SUMMARIZE_", {"MAX_TOKENS": "2.5"}, "AGTOS_SUMMARIZE_MAX_TOKENS='2.5' is not an integer"),
    ],
)
def test_an_invalid_slot_variable_is_named_with_its_prefix(
    clean_env: pytest.MonkeyPatch, prefix: str, values: dict[str, str], message: str
) -> None:
    clean_env.setenv(f"{prefix}PROVIDER", "ollama")
    for name, value in values.items():
        clean_env.setenv(prefix + name, value)
    with pytest.raises(SettingsError) as refused:
        Settings.from_env()
    assert str(refused.value) == message


def test_an_invalid_slot_in_the_config_file_names_the_file_and_slot(
    clean_env: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    config = tmp_path / "config.json"
    config.write_text(json.dumps({"slots": {"maintenance": {"provider": "ollama", "timeout_s": -1}}}), encoding="utf-8")
    with pytest.raises(SettingsError) as refused:
        Settings.from_env()
    assert str(refused.value) == f"config file {config}, slot 'maintenance': TIMEOUT_S must be > 0, not -1"


def test_a_config_file_provider_that_is_not_a_string_is_refused(clean_env: pytest.MonkeyPatch, tmp_path: Path) -> None:
    config = tmp_path / "config.json"
    config.write_text(json.dumps({"slots": {"dialectic": {"provider": 5}}}), encoding="utf-8")
    with pytest.raises(SettingsError) as refused:
        Settings.from_env()
    assert str(refused.value) == f"config file {config}, slot 'dialectic': PROVIDER=5: Input should be a valid string"


def test_the_config_file_is_read_as_utf8_whatever_the_locale(tmp_path: Path) -> None:
    """A model name with non-ASCII letters, read by a process whose locale encoding is ASCII."""
    config = tmp_path / "config.json"
    config.write_text(
        json.dumps({"slots": {"summarize": {"provider": "ollama", "model": "modèle-ß"}}}, ensure_ascii=False),
        encoding="utf-8",
    )
    code = (
        "import sys; from pathlib import Path; from agtos.config import load_llm_slots; "
        "print(ascii(load_llm_slots(Path(sys.argv[1]))['summarize'].model))"
    )
    environ = {k: v for k, v in os.environ.items() if not k.startswith(("LC_", "LANG", "PYTHONUTF8"))}
    environ |= {"LC_ALL": "C", "PYTHONCOERCECLOCALE": "0", "PYTHONUTF8": "0", "PYTHONPATH": os.pathsep.join(sys.path)}
    done = subprocess.run(
        [sys.executable, "-c", code, str(config)], env=environ, capture_output=True, text=True, timeout=60, check=False
    )
    assert (done.returncode, done.stdout.strip()) == (0, ascii("modèle-ß")), done.stderr[-2000:]
    assert load_llm_slots(config)["summarize"].model == "modèle-ß"


# -- survivors of the third run (docs/testing.md, "Figures of 2026-12-05, third run") ------------


def test_a_turn_hit_read_past_a_gone_one_carries_its_neighbours(turn_store: TurnStore) -> None:
    """``live_many`` with ``window=1``: when a hit of the first page is gone (here a position past the
    episode's last turn), the next page is read with the same window, so the hit found there carries
    its turn and one neighbour either side (``SearchResult.window``) like a first-page hit."""
    turns = stored_turns("alice", "ep-1", "s-1", [said(i) for i in range(5)])
    turn_store.save(turns, turn_units(turns), None)
    ranked = [SearchResult("ep-1.t9", 0.9, "keyword"), SearchResult("ep-1.t2", 0.5, "keyword")]
    (hits,), _ = live_many("alice", [LiveRead(turn_store, ranked, 1, window=1)])
    assert [h.id for h in hits] == ["ep-1.t2"]
    assert json.loads(hits[0].payload or "")["content"] == "we talked about topic number 2"
    assert hits[0].window is not None
    width, raw = hits[0].window
    assert width == 1
    assert [json.loads(t)["content"] for t in raw] == [f"we talked about topic number {i}" for i in (1, 2, 3)]
    # a plain search reads its hits without neighbours
    assert [h.window for h in turn_store.search("alice", "topic", None, mode="bm25")] == [None] * 5


def test_a_search_given_its_keyword_candidates_does_not_search_bm25_again(settings: Settings, key_prefix: str) -> None:
    """``SemanticStore.search(keyword_hits=...)``: the keyword candidates already found are the
    keyword list (not recomputed): a bm25 search returns exactly them, a hybrid one given none
    fuses the vector list alone although the query's word is in a record."""
    connector = RedisConnector(settings.redis_url, settings.data_dir)
    try:
        keys = GlobalKeys(key_prefix)
        store = SemanticStore(
            connector, keys, "memory", VectorIndex(connector, keys, "memory", 4), BM25Index(connector, keys, "memory")
        )
        for i in (1, 2, 3):
            vector = np.array([1.0, i / 10, 0.0, 0.0], np.float32)
            store.upsert("alice", f"d{i}", f"plain note {i}", vector, json.dumps({"id": f"d{i}"}))
        query = np.array([1.0, 0.0, 0.0, 0.0], np.float32)
        found = store.search("alice", "plain", None, mode="bm25", keyword_hits=[("d2", 3.5)])
        assert [(r.id, r.score, r.match_type) for r in found] == [("d2", 3.5, "keyword")]
        found = store.search("alice", "plain", query, limit=3, keyword_hits=[])
        assert [(r.id, r.match_type) for r in found] == [("d1", "semantic"), ("d2", "semantic"), ("d3", "semantic")]
        ranked = store.rank("alice", "plain", query, limit=3)  # the default mode: hybrid, both lists fused
        assert [(r.id, r.match_type) for r in ranked] == [("d1", "hybrid"), ("d2", "hybrid"), ("d3", "hybrid")]
        # the default limit, 10, ranks pools of 4 x 10 candidates (README: candidate pools of 4 x limit)
        store.upsert_many("carol", [(f"n{i}", f"plain note {i}", "{}") for i in range(45)], None)
        assert len(store.rank("carol", "plain", None)) == 40
    finally:
        connector.close()


def test_nli_logits_whose_width_is_not_the_label_count_are_refused() -> None:
    """One score per label: a row of logits wider or narrower than the labels (a model whose output
    width changes with its input passes the one-pair probe at load) is refused, not truncated."""
    labels = ["contradiction", "entailment", "neutral"]
    for row in ([2.0, 0.0], [2.0, 0.0, 0.0, 1.0]):
        with pytest.raises(ValueError):
            verdicts(np.array([row]), labels)
    (verdict,) = verdicts(np.array([[0.0, 0.0, math.log(2.0)]]), labels)  # softmax: 1/4, 1/4, 1/2
    assert verdict.label == "neutral"
    assert verdict.scores == pytest.approx({"contradiction": 0.25, "entailment": 0.25, "neutral": 0.5})


def test_search_many_defaults_prepared_mirrors_and_a_keyword_search_without_embedder(
    coordinator: MemoryCoordinator,
) -> None:
    """``SemanticMemory.search_many`` by default reads turn hits without neighbours and no related
    episode records; mirrors prepared for other namespaces are prepared again; a vector search in a
    hybrid-default service loads no BM25 mirror; a keyword search does not wait for an embedding
    (one that failed leaves it undegraded)."""
    sem = coordinator.semantic
    turns = stored_turns("alice", "ep-1", "s-1", [said(i) for i in range(3)])
    sem.turns.save(turns, turn_units(turns), None)
    sem.store("episode").upsert("alice", "ep-1", "a chat in the kitchen", None, json.dumps({"id": "ep-1"}))
    found = sem.search_many("alice", "topic", {"episode": 3, "turn": 3}, mode="bm25")
    assert sorted(h.id for h in found["turn"].results) == ["ep-1.t0", "ep-1.t1", "ep-1.t2"]
    assert [h.window for h in found["turn"].results] == [None, None, None]
    assert (found["episode"].results, found["episode"].related) == ([], {})
    # with turn_episodes: the records of the turn hits' episodes that are not episode hits, on the episode result
    more = stored_turns("alice", "ep-2", "s-2", [said(7)])
    sem.turns.save(more, turn_units(more), None)
    sem.store("episode").upsert("alice", "ep-2", "the topic we chose", None, json.dumps({"id": "ep-2"}))
    linked = sem.search_many("alice", "topic", {"episode": 3, "turn": 4}, mode="bm25", turn_episodes=True)
    assert [h.id for h in linked["episode"].results] == ["ep-2"]
    assert (linked["episode"].related, linked["turn"].related) == ({"ep-1": '{"id": "ep-1"}'}, {})
    # live_many reads records named by ``also`` alone too
    assert live_many("alice", [], (sem.store("episode"), ["ep-1", "ep-9"])) == ([], {"ep-1": '{"id": "ep-1"}'})
    other = sem.prepare("alice", ["turn"], "bm25")
    again = sem.search_many("alice", "topic", {"episode": 3, "turn": 3}, mode="bm25", prepared=other)
    # the four turns tie (one BM25 score): a page of three keeps the later said (timestamps 1,007, 1,002, 1,001)
    assert [h.id for h in again["turn"].results] == ["ep-2.t0", "ep-1.t2", "ep-1.t1"]
    failed: Future[list[np.ndarray | None]] = Future()
    failed.set_exception(EmbeddingError("the embedder is down"))
    keyword = sem.search_many(
        "alice", "topic", {"turn": 4}, mode="bm25", embedding=PendingEmbedding(("topic",), failed)
    )
    assert (keyword["turn"].mode, keyword["turn"].degraded) == ("bm25", None)
    assert len(keyword["turn"].results) == 4
    # a vector search whose embedding failed falls back to the keyword search of the same query
    early = PendingEmbedding(("topic",), failed)
    fallen = sem.search_many("alice", "topic", {"turn": 4}, mode="vector", embedding=early)["turn"]
    assert (fallen.mode, fallen.degraded) == ("bm25", "embedder unavailable, keyword search only: the embedder is down")
    assert sorted(h.id for h in fallen.results) == ["ep-1.t0", "ep-1.t1", "ep-1.t2", "ep-2.t0"]
    memories = sem.store("memory")
    memories.upsert("bob", "m1", "Gina adopted a grey cat", sem.embedder.embed_one("Gina adopted a grey cat"), "{}")
    assert memories.bm25._mirrors.peek("bob") is None
    vector = sem.search_many("bob", "which cat did Gina adopt", {"memory": 3}, mode="vector")
    assert [h.id for h in vector["memory"].results] == ["m1"]
    assert memories.bm25._mirrors.peek("bob") is None  # vector mode: no BM25 mirror loaded


# -- survivors of the fourth run (turns.py, contradiction.py; docs/testing.md) -------------------------------


def test_turn_reads_on_a_redis_cluster_carry_their_clipped_neighbours(
    cluster: RedisClusterProcesses, tmp_path: Path
) -> None:
    """On a Redis Cluster the turn reads are one LRANGE (``window`` > 0) or LINDEX each, not the script:
    each hit carries its turn and ``window`` neighbours either side, clipped at the episode's ends."""
    connector = RedisConnector(cluster.url, tmp_path)
    keys = GlobalKeys("m4c")
    vectors, words = VectorIndex(connector, keys, "turn", 384), BM25Index(connector, keys, "turn")
    store = TurnStore(connector, keys, vectors, words, 60)
    turns = stored_turns("alice", "ep-1", "s-1", [said(i) for i in range(5)])
    store.save(turns, turn_units(turns), None)
    ranked = [SearchResult(f"ep-1.t{p}", 0.9 - p / 10, "keyword") for p in (0, 2, 4)]
    (hits, plain), _ = live_many("alice", [LiveRead(store, ranked, 3, window=1), LiveRead(store, ranked, 3)])
    topic = "we talked about topic number {}".format
    assert [json.loads(h.payload or "")["content"] for h in hits] == [topic(0), topic(2), topic(4)]
    windows = [(h.window[0], [json.loads(t)["content"] for t in h.window[1]]) for h in hits if h.window]
    assert windows == [(1, [topic(0), topic(1)]), (1, [topic(1), topic(2), topic(3)]), (1, [topic(3), topic(4)])]
    assert [(json.loads(h.payload or "")["content"], h.window) for h in plain] == [
        (topic(0), None),
        (topic(2), None),
        (topic(4), None),
    ]
    connector.close()


def test_a_turn_hit_one_past_the_last_turn_is_gone_not_an_error(turn_store: TurnStore) -> None:
    """A hit at the position just past an episode's last turn (a shorter re-save) reads a window of
    neighbours without its turn: the hit is gone and the next page is read, as for any gone hit."""
    turns = stored_turns("alice", "ep-1", "s-1", [said(i) for i in range(5)])
    turn_store.save(turns, turn_units(turns), None)
    ranked = [SearchResult("ep-1.t5", 0.9, "keyword"), SearchResult("ep-1.t2", 0.5, "keyword")]
    (hits,), _ = live_many("alice", [LiveRead(turn_store, ranked, 1, window=1)])
    assert [h.id for h in hits] == ["ep-1.t2"]


# -- survivors of the fifth run (session_journal.py; docs/testing.md) ----------------------------------------


def test_a_journal_on_a_redis_cluster_is_indexed_at_its_last_append_until_cleared(
    cluster: RedisClusterProcesses, tmp_path: Path
) -> None:
    """On a Redis Cluster the global index of live journals lives in another slot, written beside the
    script: its score is the last append's time in ms (the idle sweep reads it), and a session end that
    leaves later turns keeps the session indexed; the last clear drops it."""
    connector = RedisConnector(cluster.url, tmp_path)
    store = SessionJournal(connector, GlobalKeys("m5c"), 3_600, None)
    said = [Turn(role=Role.user, content=c, timestamp=1_000) for c in ("a", "b", "c")]
    before = time.time() * 1000
    store.append("alice", "s1", said[:2])
    read = store.read("alice", "s1")
    store.append("alice", "s1", said[2])
    [entry] = store.idle(0)
    assert (entry.user_id, entry.session_id) == ("alice", "s1")
    assert before <= entry.last_append_ms <= time.time() * 1000
    assert store.idle(60) == []  # appended just now, not idle for a minute
    assert store.clear("alice", "s1", read) == 1
    assert [s.session_id for s in store.idle(0)] == ["s1"]
    assert store.clear("alice", "s1", store.read("alice", "s1")) == 0
    assert store.idle(0) == []
    connector.close()
