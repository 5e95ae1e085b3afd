"""The Dreamer's run-once markers: one SET NX key per consolidated episode (or session); and the user's
"dream pending" mark (``<prefix>:u:{<user>}:dream:pending``, under the user's keys: forget-all's SCAN removes
it), set before a run and cleared by the run that succeeded, so a run that gave up or failed is retried."""

from __future__ import annotations

import secrets

from agtos.storage.keys import GlobalKeys
from agtos.storage.redis_conn import RedisConnector, as_text
from agtos.storage.user_lock import release

MARKER_TTL_S = 7 * 86_400


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

    def mark_pending(self, user_id: str) -> str:
        """Mark the user's episodes as waiting for a Dreamer run (for ``MARKER_TTL_S``, the retries' bound);
        returns the mark's token, which :meth:`clear_pending` compares."""
        key, token = self._pending_key(user_id), secrets.token_hex(8)
        self.connector.run(lambda r: r.set(key, token, ex=MARKER_TTL_S))
        return token

    def pending(self, user_id: str) -> str | None:
        """The token of the user's pending mark, or None."""
        key = self._pending_key(user_id)
        found = self.connector.run(lambda r: r.get(key))
        return None if found is None else as_text(found)

    def clear_pending(self, user_id: str, token: str) -> None:
        """Drop the mark if it is still ``token``'s (a run that read the episodes after it was set succeeded);
        one set again meanwhile (a later session end) stays for that run."""
        release(self.connector, self._pending_key(user_id), token)
