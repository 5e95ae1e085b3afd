"""A session's last end that took turns, kept so that an end finding none can say where they went.

A client ends session S, the answer is lost, it ends S again: the journal is empty by then, so the
second end answers ``session has no turns``, and nothing told the client which episode its turns had
become (issue 15). Each end that takes turns writes what it did (episode id, verdict, when; the queue
entry in queue mode) to the session's ``…:session:<id>:ended`` key, before the journal is cleared,
for as long as a journal lives (AGTOS_SESSION_JOURNAL_TTL_HOURS); an end that finds no turns reads it
back, with the episode's state now: ``done`` (stored), ``queued`` (its job still queued), ``skipped``
(not worth an episode) or ``gone`` (expired since, or dropped by an opt-out). Forgetting the episode
deletes the record that names it (:meth:`SessionEnds.forget_episode`): a forget leaves no trace of the
episode, its id included, so a retry after it answers as an end of a session that never took turns.
"""

from __future__ import annotations

import json
import time
from dataclasses import dataclass
from typing import Literal

from agtos.storage.keys import GlobalKeys, InvalidIdentifier
from agtos.storage.redis_conn import RedisConnector

LastEndStatus = Literal["done", "queued", "skipped", "gone"]

#: KEYS: the episode's record, the session's last-end key; ARGV: the record (JSON), its TTL (s). Written
#: only while the episode is stored: a forget (one, or all) landing first leaves no record naming it.
_RECORD_WHILE_STORED_LUA = """
if redis.call('EXISTS', KEYS[1]) == 0 then return 0 end
redis.call('SET', KEYS[2], ARGV[1], 'EX', ARGV[2])
return 1
"""


@dataclass(frozen=True)
class LastEnd:
    """What the session's last end that took turns did, as it stands now."""

    episode_id: str | None
    status: LastEndStatus
    saved: bool
    reason: str
    turns_accepted: int
    ended_at: int  # ms since the epoch


@dataclass(frozen=True)
class RecordedEnd:
    """:class:`LastEnd` as the end wrote it, with its queue entry (queue mode)."""

    end: LastEnd
    entry_id: str | None


class SessionEnds:
    """The last end of each session, one short-lived key per session (the user's, deleted by forget-all)."""

    def __init__(self, connector: RedisConnector, keys: GlobalKeys, ttl_s: int) -> None:
        self.connector = connector
        self.keys = keys
        self.ttl_s = ttl_s

    def record(
        self,
        user_id: str,
        session_id: str,
        episode_id: str | None,
        reason: str,
        turns: int,
        entry_id: str | None = None,
    ) -> bool:
        """An end took ``turns`` turns: stored as ``episode_id`` (inline), queued as ``entry_id``, or
        skipped (``episode_id`` None, with its ``reason``). False, nothing written: the stored episode
        was forgotten (one forget, or forget-all) before this write (checked in the same atomic step)."""
        status = "skipped" if episode_id is None else "queued" if entry_id else "done"
        payload = {
            "episodeId": episode_id,
            "status": status,
            "reason": reason,
            "turns": turns,
            "endedAt": int(time.time() * 1000),
            "entry": entry_id,
        }
        uk = self.keys.user(user_id)
        key, value = uk.session_ended(session_id), json.dumps(payload)
        if episode_id is None or entry_id:  # skipped, or queued: no episode is stored yet
            self.connector.run(lambda r: r.set(key, value, ex=self.ttl_s))
            return True
        keys = (uk.episode(episode_id), key)
        return bool(self.connector.run(lambda r: r.eval(_RECORD_WHILE_STORED_LUA, 2, *keys, value, self.ttl_s)))

    def recorded(self, user_id: str, session_id: str) -> RecordedEnd | None:
        """The last end as written, or None (none within the key's lifetime)."""
        raw = self.connector.run(lambda r: r.get(self.keys.user(user_id).session_ended(session_id)))
        if raw is None:
            return None
        data = json.loads(raw)
        episode_id = data["episodeId"]
        end = LastEnd(
            episode_id, data["status"], episode_id is not None, data["reason"], data["turns"], data["endedAt"]
        )
        return RecordedEnd(end, data["entry"])

    def forget_episode(self, user_id: str, session_id: str, episode_id: str) -> bool:
        """Delete the session's last-end record when it names ``episode_id`` (the episode is forgotten)."""
        try:
            key = self.keys.user(user_id).session_ended(session_id)
        except InvalidIdentifier:  # no session id ('' on an episode ingested directly) or one no end could take
            return False
        raw = self.connector.run(lambda r: r.get(key))
        if raw is None or json.loads(raw).get("episodeId") != episode_id:
            return False
        return bool(self.connector.run(lambda r: r.delete(key)))
