"""The Dreamer's run-once markers: one SET NX key per consolidated episode (or session); and the user's
"dream pending" mark (``<prefix>:u:{<user>}:dream:pending``, under the user's keys: forget-all's SCAN removes
it), written with a session end's episode (:meth:`EpisodeStore.save_unless_opted_out`, one atomic step) and
cleared by a run that read the episodes after it was set and succeeded, so a run that gave up, failed or never
started (Redis away, the process killed after the store) is retried by the maintenance sweep."""

from __future__ import annotations

import secrets
from dataclasses import dataclass

from agtos.storage.keys import GlobalKeys
from agtos.storage.redis_conn import RedisConnector, as_text
from agtos.storage.user_lock import release

MARKER_TTL_S = 7 * 86_400


@dataclass(frozen=True)
class PendingMark:
    """A user's "dream pending" mark to write: its key, a fresh token, its lifetime."""

    key: str
    token: str
    ttl_s: int = MARKER_TTL_S


class DreamMarkers:
    def __init__(self, connector: RedisConnector, keys: GlobalKeys) -> None:
        self.connector = connector
        self.keys = keys

    def _key(self, user_id: str, ended: str) -> str:
        return self.keys.user(user_id).record("dreamed", ended)

    def claim(self, user_id: str, ended: str) -> bool:
        """True for the first caller per ``ended`` (an episode or session id), for ``MARKER_TTL_S``."""
        key = self._key(user_id, ended)
        return bool(self.connector.run(lambda r: r.set(key, b"1", nx=True, ex=MARKER_TTL_S)))

    def forget(self, user_id: str, episode_id: str) -> None:
        """Drop the marker of a forgotten episode (its key names the episode)."""
        key = self._key(user_id, episode_id)
        self.connector.run(lambda r: r.delete(key))

    def _pending_key(self, user_id: str) -> str:
        return self.keys.user(user_id).record("dream", "pending")

    def new_mark(self, user_id: str) -> PendingMark:
        """A fresh mark for the user (not written: an episode's store writes it with the episode)."""
        return PendingMark(self._pending_key(user_id), secrets.token_hex(8))

    def mark_pending(self, user_id: str) -> str:
        """Mark the user's episodes as waiting for a Dreamer run (for ``MARKER_TTL_S``, the retries' bound);
        returns the mark's token, which :meth:`clear_pending` compares."""
        mark = self.new_mark(user_id)
        self.connector.run(lambda r: r.set(mark.key, mark.token, ex=mark.ttl_s))
        return mark.token

    def pending(self, user_id: str) -> str | None:
        """The token of the user's pending mark, or None."""
        key = self._pending_key(user_id)
        found = self.connector.run(lambda r: r.get(key))
        return None if found is None else as_text(found)

    def clear_pending(self, user_id: str, token: str) -> None:
        """Drop the mark if it is still ``token``'s (a run that read the episodes after it was set succeeded);
        one set again meanwhile (a later session end) stays for that run."""
        release(self.connector, self._pending_key(user_id), token)
