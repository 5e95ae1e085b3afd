"""Working memory compaction at the message and token limits."""

from __future__ import annotations

from agtos.config import WorkingMemoryConfig
from agtos.memory.working import WorkingMemory
from agtos.schemas import Role, Turn
from agtos.tasks.summarize import ExtractiveSummariser
from agtos.tasks.tokens import count_tokens


def make_memory(**limits: int) -> WorkingMemory:
    return WorkingMemory(WorkingMemoryConfig(**limits), ExtractiveSummariser())


def turn(i: int, words: int = 5) -> Turn:
    role = Role.user if i % 2 == 0 else Role.assistant
    return Turn(role=role, content=f"message {i} about topic{i} " + "word " * words)


def test_thirty_messages_stay_verbatim() -> None:
    wm = make_memory()
    for i in range(30):
        assert wm.add(turn(i)) is False
    assert len(wm.messages) == 30 and wm.compactions == 0


def test_31st_message_triggers_summary_keeping_last_six() -> None:
    wm = make_memory()
    turns = [turn(i) for i in range(31)]
    for t in turns[:30]:
        wm.add(t)
    assert wm.add(turns[30]) is True
    assert len(wm.messages) == 7
    summary, recent = wm.messages[0], wm.messages[1:]
    assert summary.is_summary and summary.role == "system"
    assert summary.content.startswith("Summary of earlier conversation: ")
    assert [t.content for t in recent] == [t.content for t in turns[-6:]]
    assert wm.token_count == sum(count_tokens(t.content) for t in wm.messages)


def test_token_limit_triggers_summary_before_message_limit() -> None:
    wm = make_memory()
    big = [Turn(role=Role.user, content="lorem ipsum dolor sit amet " * 60) for _ in range(12)]
    per_turn = count_tokens(big[0].content)
    assert per_turn * 12 > 4000  # the 12 turns pass the token limit well before 30 messages
    compacted_at = None
    for i, t in enumerate(big):
        if wm.add(t):
            compacted_at = i + 1
            break
    assert compacted_at is not None and compacted_at * per_turn > 4000 >= (compacted_at - 1) * per_turn
    assert len(wm.messages) == 7 and wm.messages[0].is_summary
    assert all(not t.is_summary for t in wm.messages[1:])


def test_repeated_compaction_folds_previous_summary() -> None:
    wm = make_memory(maxMessages=10, preserveRecentCount=3)
    for i in range(25):
        wm.add(turn(i))
    assert wm.compactions >= 2
    assert sum(1 for t in wm.messages if t.is_summary) == 1
    assert wm.messages[-1].content == turn(24).content


def test_token_counts_come_from_the_real_tokenizer() -> None:
    assert count_tokens("") == 0
    assert count_tokens("hello world") == 2
    assert count_tokens("tokenization") > 1  # WordPiece splits it
