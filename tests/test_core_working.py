"""Working memory: the fold (summary + the last 6 turns), its limits as literals, and the per-process store."""

from __future__ import annotations

from agtos.config import WorkingMemoryConfig
from agtos.memory.working import WorkingMemory, WorkingMemoryStore
from agtos.schemas import Role, Turn
from agtos.tasks.summarize import ExtractiveSummariser
from agtos.tasks.tokens import count_tokens


class RecordingSummariser:
    """Records what it was asked to fold and answers a fixed text (``""`` allowed)."""

    def __init__(self, answer: str = "they talked") -> None:
        self.answer = answer
        self.calls: list[list[str]] = []

    def summarise(self, turns: list[Turn]) -> str:
        self.calls.append([t.content for t in turns])
        return self.answer


def turns(n: int, start: int = 0) -> list[Turn]:
    return [
        Turn(role=Role.user if i % 2 == 0 else Role.assistant, content=f"message number {i}", timestamp=1_000 + i)
        for i in range(start, start + n)
    ]


def test_fold_at_the_31st_message_summarises_the_first_25_into_one_system_turn() -> None:
    summariser = RecordingSummariser()
    wm = WorkingMemory(WorkingMemoryConfig(), summariser)
    history = turns(31)
    assert [wm.add(t) for t in history[:30]] == [False] * 30
    assert wm.add(history[30]) is True
    assert summariser.calls == [[f"message number {i}" for i in range(25)]]
    summary, *recent = wm.messages
    assert summary.role == "system" and summary.is_summary
    assert summary.content == "Summary of earlier conversation: they talked"
    assert summary.timestamp == 1_024  # the last folded turn's time
    assert recent == history[25:]
    assert wm.compactions == 1
    assert wm.token_count == sum(count_tokens(t.content) for t in wm.messages)


def test_empty_summary_gets_a_placeholder() -> None:
    wm = WorkingMemory(WorkingMemoryConfig(maxMessages=3, preserveRecentCount=1), RecordingSummariser(""))
    for t in turns(4):
        wm.add(t)
    assert wm.messages[0].content == "Summary of earlier conversation: (earlier turns had no content)"


def test_token_limit_is_inclusive_at_4000() -> None:
    word = "hello"
    assert count_tokens(word) == 1
    wm = WorkingMemory(WorkingMemoryConfig(), RecordingSummariser())
    assert wm.add(Turn(role=Role.user, content=" ".join([word] * 3999))) is False
    assert wm.add(Turn(role=Role.user, content=word)) is False  # exactly 4,000 tokens: still within the limit
    assert wm.token_count == 4000
    assert wm.add(Turn(role=Role.user, content=word)) is True  # 4,001: fold


def test_compact_keeps_everything_when_there_is_no_more_than_the_recent_window() -> None:
    summariser = RecordingSummariser()
    wm = WorkingMemory(WorkingMemoryConfig(), summariser)
    for t in turns(6):
        wm.add(t)
    wm.compact()
    assert summariser.calls == [] and wm.compactions == 0 and len(wm.messages) == 6
    wm.add(turns(1, start=6)[0])
    wm.compact()
    assert summariser.calls == [["message number 0"]] and len(wm.messages) == 7


def test_keep_zero_folds_every_turn() -> None:
    summariser = RecordingSummariser()
    wm = WorkingMemory(WorkingMemoryConfig(maxMessages=2, preserveRecentCount=0), summariser)
    for t in turns(3):
        wm.add(t)
    assert len(wm.messages) == 1 and wm.messages[0].is_summary
    assert summariser.calls == [[f"message number {i}" for i in range(3)]]


def test_tool_results_and_snapshot() -> None:
    wm = WorkingMemory(WorkingMemoryConfig(), ExtractiveSummariser())
    tool = Turn(role=Role.tool, content="42 rows", name="sql", timestamp=5)
    wm.add(Turn(role=Role.user, content="count the rows", timestamp=4))
    wm.add(tool)
    wm.task_state["step"] = 2
    assert wm.tool_results() == [tool]
    snap = wm.snapshot()
    assert snap["messageCount"] == 2
    assert snap["tokenCount"] == count_tokens("count the rows") + count_tokens("42 rows")
    assert snap["compactions"] == 0
    assert snap["taskState"] == {"step": 2}
    assert [m["content"] for m in snap["messages"]] == ["count the rows", "42 rows"]
    assert snap["messages"][1]["name"] == "sql"


def store(capacity: int = 10_000) -> WorkingMemoryStore:
    config = WorkingMemoryConfig(maxMessages=5, preserveRecentCount=2)
    return WorkingMemoryStore(config, ExtractiveSummariser(), capacity)


def test_store_creates_once_per_user_and_session_with_its_config() -> None:
    s = store()
    assert s.capacity == 10_000
    # issue 15: the default cap of in-process sessions is AGTOS_WM_MAX_SESSIONS = 1,000 (was 10,000)
    assert WorkingMemoryStore(WorkingMemoryConfig(), ExtractiveSummariser()).capacity == 1_000
    assert WorkingMemoryStore(WorkingMemoryConfig(maxSessions=3), ExtractiveSummariser()).capacity == 3
    assert s.get("alice", "s1") is None
    wm = s.get_or_create("alice", "s1")
    assert wm.config.maxMessages == 5 and wm.messages == []
    assert s.get_or_create("alice", "s1") is wm
    assert s.get("alice", "s1") is wm
    assert s.get_or_create("alice", "s2") is not wm
    assert s.get_or_create("bob", "s1") is not wm
    folding = WorkingMemoryStore(WorkingMemoryConfig(maxMessages=2, preserveRecentCount=1), RecordingSummariser())
    session = folding.get_or_create("alice", "s1")
    for t in turns(3):
        session.add(t)
    assert session.messages[0].content == "Summary of earlier conversation: they talked"  # the store's summariser


def test_store_evicts_the_least_recently_used_session_past_capacity() -> None:
    s = store(capacity=2)
    a = s.get_or_create("u", "a")
    s.get_or_create("u", "b")
    assert s.get("u", "a") is a  # a is now the most recent
    s.get_or_create("u", "c")
    assert s.active_sessions() == [("u", "a"), ("u", "c")]
    s.get_or_create("u", "a")  # touching an existing session also refreshes it
    s.get_or_create("u", "d")
    assert s.active_sessions() == [("u", "a"), ("u", "d")]


def test_store_drop_and_listing_are_per_user() -> None:
    s = store()
    for user, session in [("al", "s1"), ("al", "s2"), ("alice", "s1"), ("bob", "s1")]:
        s.get_or_create(user, session)
    assert s.active_sessions("al") == [("al", "s1"), ("al", "s2")]
    s.drop("al", "s1")
    assert s.active_sessions() == [("al", "s2"), ("alice", "s1"), ("bob", "s1")]
    s.drop("al")
    assert s.active_sessions() == [("alice", "s1"), ("bob", "s1")]
    s.drop("nobody")
    assert s.active_sessions("alice") == [("alice", "s1")]
