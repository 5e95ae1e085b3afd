"""Small behaviours of the core that `make mutation` found no test for (docs/testing.md): a working
memory reset, the turn store refusing record-style writes, the opt-out set's key and states. Real
Redis, literal expectations."""

from __future__ import annotations

import re

import pytest
import redis

from agtos.config import Settings, SettingsError, WorkingMemoryConfig
from agtos.memory.coordinator import MemoryCoordinator
from agtos.memory.working import WorkingMemory, _bounded
from agtos.schemas import Role, Turn
from agtos.storage.keys import GlobalKeys
from agtos.storage.opt_outs import OptOutStore
from agtos.storage.redis_conn import RedisConnector
from agtos.tasks.summarize import ExtractiveSummariser


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
