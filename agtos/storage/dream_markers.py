"""The Dreamer's run-once markers: one SET NX key per consolidated episode (or session)."""

from __future__ import annotations

from agtos.storage.keys import GlobalKeys
from agtos.storage.redis_conn import RedisConnector

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
