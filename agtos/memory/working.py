"""Working memory: the in-process buffer of a live session, compacted by summarisation."""

from __future__ import annotations

import threading
from collections import OrderedDict
from dataclasses import dataclass, field
from typing import Any

from agtos.config import WorkingMemoryConfig
from agtos.schemas import Role, Turn
from agtos.tasks.summarize import Summariser
from agtos.tasks.text import sentences
from agtos.tasks.tokens import count_tokens

SUMMARY_PREFIX = "Summary of earlier conversation: "
MAX_SUMMARY_TEXT_CHARS = 1_200  # a rolling summary keeps its newest sentences within this


@dataclass
class WorkingMemory:
    """Recent turns, tool results and task state of one session.

    When the history passes ``maxMessages`` or ``maxHistoryTokens``, every turn but
    the last ``preserveRecentCount`` is folded into one summary message.
    """

    config: WorkingMemoryConfig
    summariser: Summariser
    messages: list[Turn] = field(default_factory=list)
    task_state: dict[str, Any] = field(default_factory=dict)
    compactions: int = 0
    journal_len: int = 0  # entries of the session's Redis journal these messages reflect
    began_ms: int = 0  # Redis clock at the first turn of a session held here only (an opted-out user's)
    lock: threading.RLock = field(default_factory=threading.RLock, repr=False, compare=False)
    _tokens: list[int] = field(default_factory=list)

    @property
    def token_count(self) -> int:
        return sum(self._tokens)

    def add(self, turn: Turn) -> bool:
        """Append a turn; returns True when this triggered a compaction."""
        self.messages.append(turn)
        self._tokens.append(count_tokens(turn.content))
        if self.over_limit():
            self.compact()
            return True
        return False

    def reset(self) -> None:
        """Forget every message (the session is rebuilt from its journal next)."""
        self.messages, self._tokens, self.compactions, self.journal_len = [], [], 0, 0

    def over_limit(self) -> bool:
        return len(self.messages) > self.config.maxMessages or self.token_count > self.config.maxHistoryTokens

    def compact(self) -> None:
        """Summarise all but the most recent turns into a single summary message.

        An earlier summary is carried over as text, never summarised again as a turn."""
        keep = max(0, self.config.preserveRecentCount)
        if len(self.messages) <= keep:
            return
        older, recent = self.messages[: len(self.messages) - keep], self.messages[len(self.messages) - keep :]
        prior = [t.content.removeprefix(SUMMARY_PREFIX) for t in older if t.is_summary]
        said = [t for t in older if not t.is_summary]
        new_text = self.summariser.summarise(said) if said else ""
        summary_text = _bounded(" ".join([*prior, new_text]).strip()) or "(earlier turns had no content)"
        summary = Turn(
            role=Role.system,
            content=SUMMARY_PREFIX + summary_text,
            timestamp=older[-1].timestamp,
            is_summary=True,
        )
        self.messages = [summary, *recent]
        self._tokens = [count_tokens(t.content) for t in self.messages]
        self.compactions += 1

    def tool_results(self) -> list[Turn]:
        return [t for t in self.messages if t.role == Role.tool.value]

    def snapshot(self) -> dict[str, Any]:
        return {
            "messages": [t.model_dump() for t in self.messages],
            "messageCount": len(self.messages),
            "tokenCount": self.token_count,
            "compactions": self.compactions,
            "taskState": self.task_state,
        }


def _bounded(text: str, limit: int = MAX_SUMMARY_TEXT_CHARS) -> str:
    """The newest whole sentences of a rolling summary that fit in ``limit`` characters."""
    if len(text) <= limit:
        return text
    kept: list[str] = []
    for sentence in reversed(sentences(text)):
        if sum(len(s) + 1 for s in kept) + len(sentence) > limit:
            break
        kept.insert(0, sentence)
    return " ".join(kept) or text[-limit:]


class WorkingMemoryStore:
    """Live sessions of this process, least recently used evicted past ``capacity``
    (``maxSessions``); an evicted session is replayed from its Redis journal when asked for."""

    def __init__(self, config: WorkingMemoryConfig, summariser: Summariser, capacity: int | None = None):
        self.config = config
        self.summariser = summariser
        self.capacity = capacity or config.maxSessions
        self._sessions: OrderedDict[tuple[str, str], WorkingMemory] = OrderedDict()
        self._lock = threading.Lock()

    def get(self, user_id: str, session_id: str) -> WorkingMemory | None:
        with self._lock:
            wm = self._sessions.get((user_id, session_id))
            if wm is not None:
                self._sessions.move_to_end((user_id, session_id))
            return wm

    def get_or_create(self, user_id: str, session_id: str) -> WorkingMemory:
        with self._lock:
            key = (user_id, session_id)
            wm = self._sessions.get(key)
            if wm is None:
                wm = WorkingMemory(self.config, self.summariser)
                self._sessions[key] = wm
                while len(self._sessions) > self.capacity:
                    self._sessions.popitem(last=False)
            self._sessions.move_to_end(key)
            return wm

    def discard(self, user_id: str, session_id: str, wm: WorkingMemory) -> None:
        """Drop the session if ``wm`` is still the one held for it."""
        with self._lock:
            if self._sessions.get((user_id, session_id)) is wm:
                del self._sessions[(user_id, session_id)]

    def drop(self, user_id: str, session_id: str | None = None) -> None:
        with self._lock:
            for key in [k for k in self._sessions if k[0] == user_id and session_id in (None, k[1])]:
                del self._sessions[key]

    def active_sessions(self, user_id: str | None = None) -> list[tuple[str, str]]:
        with self._lock:
            return [k for k in self._sessions if user_id in (None, k[0])]
