"""One end at a time per live session, across API processes and the idle sweeper.

An end reads the session's journal, stores (inline) or queues (queue mode) what it read, then
clears exactly that. Two ends of one session overlapping there both read the turns the first had
not cleared yet and stored them twice, as two episodes (probe of ``agtos serve``: 4 appending and
2 ending clients, 60 turns, 61-64 taken into episodes). The lock is a :class:`UserLock` (``SET NX
PX`` key with a random token, released only by its holder; a holder that dies lets it expire).
"""

from __future__ import annotations

from agtos.storage.keys import GlobalKeys
from agtos.storage.redis_conn import RedisConnector
from agtos.storage.user_lock import LOCK_MS, UserLock

KIND = "ending"


class SessionEndLock(UserLock):
    """``held(user_id, session_id)``: the session's end lock (an inline end stores its episode within ``lock_ms``)."""

    def __init__(self, connector: RedisConnector, keys: GlobalKeys, lock_ms: int = LOCK_MS) -> None:
        super().__init__(connector, keys, KIND, lock_ms)
