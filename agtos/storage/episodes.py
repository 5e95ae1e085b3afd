"""Episodes in Redis: one JSON string per episode (with TTL) and a per-user timeline."""

from __future__ import annotations

import json
from collections.abc import Iterable, Iterator

import redis

from agtos.schemas import Episode
from agtos.storage.dream_markers import PendingMark
from agtos.storage.keys import GlobalKeys, UserKeys
from agtos.storage.redis_conn import RedisConnector, members

#: KEYS: the opt-out set, the user's timeline, then each episode's key, then (ARGV[3] not empty) the user's
#: "dream pending" mark; ARGV: the user id, the TTL, the mark's token ('': none) and TTL, then each episode's id,
#: time and JSON. Nothing is written when the user is in the set (returns 0).
SAVE_UNLESS_OPTED_OUT_LUA = """
if redis.call('SISMEMBER', KEYS[1], ARGV[1]) == 1 then return 0 end
local ttl = tonumber(ARGV[2])
local last = #KEYS
if ARGV[3] ~= '' then last = last - 1 end
for i = 3, last do
  local at = 5 + 3 * (i - 3)
  redis.call('SET', KEYS[i], ARGV[at + 2], 'EX', ttl)
  redis.call('ZADD', KEYS[2], ARGV[at + 1], ARGV[at])
end
redis.call('EXPIRE', KEYS[2], ttl)
if ARGV[3] ~= '' then redis.call('SET', KEYS[#KEYS], ARGV[3], 'EX', tonumber(ARGV[4])) end
return 1
"""


class EpisodeStore:
    def __init__(self, connector: RedisConnector, keys: GlobalKeys, ttl_seconds: int) -> None:
        self.connector = connector
        self.keys = keys
        self.ttl_seconds = ttl_seconds

    def save(self, episode: Episode, ttl_seconds: int | None = None, mark: PendingMark | None = None) -> Episode:
        """Store (or overwrite, same id) an episode with its TTL; the timeline key lives as long. ``mark``:
        the user's "dream pending" mark, written in the same transaction."""
        uk = self.keys.user(episode.user_id)
        ttl = ttl_seconds or self.ttl_seconds

        def op(r: redis.Redis) -> None:
            pipe = r.pipeline(transaction=True)
            pipe.set(uk.episode(episode.id), episode.model_dump_json(), ex=ttl)
            pipe.zadd(uk.episode_timeline(), {episode.id: episode.timestamp})
            # plain EXPIRE (no GT/NX): the embedded server is Redis 6.2
            pipe.expire(uk.episode_timeline(), max(ttl, self.ttl_seconds))
            if mark is not None:
                pipe.set(mark.key, mark.token, ex=mark.ttl_s)
            pipe.execute()
            r.sadd(self.keys.users(), episode.user_id)  # a global key: outside the per-user transaction

        self.connector.run(op)
        return episode

    def save_unless_opted_out(
        self, user_id: str, episodes: list[Episode], opt_out_key: str, mark: PendingMark | None = None
    ) -> bool:
        """Store one user's ``episodes`` (as :meth:`save`) in one atomic step with the check that the user
        is not in the set ``opt_out_key`` (the opt-out list); False: they are, nothing was written. An
        opt-out that lands first keeps every record as it was; one that lands after finds them written.
        On a Redis Cluster (the set and the user's keys in other slots) the check comes just before.
        ``mark``: the user's "dream pending" mark, written in the same step (on a Cluster, in the last
        episode's transaction): never after the episodes, never before them."""
        if not episodes:
            return True
        uk = self.keys.user(user_id)
        args = [part for e in episodes for part in (e.id, e.timestamp, e.model_dump_json())]
        keys = [opt_out_key, uk.episode_timeline(), *(uk.episode(e.id) for e in episodes)]
        marking: list[str | int] = ["", 0] if mark is None else [mark.token, mark.ttl_s]
        keys += [] if mark is None else [mark.key]

        if self.connector.mode == "cluster":
            if self.connector.run(lambda r: r.sismember(opt_out_key, user_id)):
                return False
            for at, episode in enumerate(episodes, 1):
                self.save(episode, mark=mark if at == len(episodes) else None)
            return True

        def op(r: redis.Redis) -> bool:
            script = SAVE_UNLESS_OPTED_OUT_LUA
            written = bool(r.eval(script, len(keys), *keys, user_id, self.ttl_seconds, *marking, *args))
            if written:
                r.sadd(self.keys.users(), user_id)  # a global key: outside the script's keys
            return written

        return self.connector.run(op)

    def get(self, user_id: str, episode_id: str) -> Episode | None:
        raw = self.connector.run(lambda r: r.get(self.keys.user(user_id).episode(episode_id)))
        return Episode.model_validate_json(raw) if raw else None

    def existing_ids(self, user_id: str, ids: list[str]) -> set[str]:
        """Which of ``ids`` are stored (and not expired)."""
        if not ids:
            return set()
        uk = self.keys.user(user_id)
        raws = self.connector.run(lambda r: r.mget([uk.episode(i) for i in ids]))
        return {i for i, raw in zip(ids, raws, strict=True) if raw is not None}

    def times(self, user_id: str, ids: list[str]) -> dict[str, int]:
        """The timeline time of each of ``ids`` that is on it (one round trip); expired ones are absent."""
        if not ids:
            return {}
        key = self.keys.user(user_id).episode_timeline()
        scores = self.connector.run(lambda r: r.zmscore(key, ids))
        return {i: int(score) for i, score in zip(ids, scores, strict=True) if score is not None}

    def unchanged_imports(self, user_id: str, digests: dict[str, str]) -> set[str]:
        """Which episode ids of ``digests`` (id → digest of the imported turns) were imported before from
        the same turns: stored and still there, or skipped then as not worth an episode (one round trip)."""
        if not digests:
            return set()
        uk, ids = self.keys.user(user_id), list(digests)

        def op(r: redis.Redis) -> list[list[bytes | None]]:
            pipe = r.pipeline(transaction=False)
            pipe.mget([uk.episode(i) for i in ids])
            pipe.hmget(uk.collection("imports", "digests"), ids)
            return pipe.execute()

        raws, seen = self.connector.run(op)
        return {
            i
            for i, raw, digest in zip(ids, raws, seen, strict=True)
            if digest is not None
            and (digest.decode() == f"skipped:{digests[i]}" or (raw is not None and digest.decode() == digests[i]))
        }

    def record_imports(self, user_id: str, stored: dict[str, str], skipped: dict[str, str]) -> None:
        """Remember the digest of the turns each imported episode id was ``stored`` or ``skipped`` from."""
        if not stored and not skipped:
            return
        key = self.keys.user(user_id).collection("imports", "digests")
        pairs = [*stored.items(), *((i, f"skipped:{d}") for i, d in skipped.items())]
        self.connector.run(lambda r: r.hset(key, items=[part for pair in pairs for part in pair]))

    def session_ids(self, user_id: str, ids: Iterable[str]) -> dict[str, str]:
        """The stored session id of each of ``ids``, in one MGET; an episode gone (forgotten, expired) or
        without a session (imported: '') is left out."""
        wanted = list(dict.fromkeys(ids))
        if not wanted:
            return {}
        uk = self.keys.user(user_id)
        raws = self.connector.run(lambda r: r.mget([uk.episode(i) for i in wanted]))
        found = {i: json.loads(raw).get("session_id") or "" for i, raw in zip(wanted, raws, strict=True) if raw}
        return {i: sid for i, sid in found.items() if sid}

    def ttl(self, user_id: str, episode_id: str) -> int:
        return int(self.connector.run(lambda r: r.ttl(self.keys.user(user_id).episode(episode_id))))

    def delete(self, user_id: str, episode_id: str) -> bool:
        uk = self.keys.user(user_id)

        def op(r: redis.Redis) -> bool:
            pipe = r.pipeline(transaction=True)
            pipe.delete(uk.episode(episode_id))
            pipe.zrem(uk.episode_timeline(), episode_id)
            return bool(pipe.execute()[0])

        return self.connector.run(op)

    def recent(self, user_id: str, limit: int) -> list[Episode]:
        """Newest first; ids whose episode has expired are dropped from the timeline."""
        out: list[Episode] = []
        for batch in self._timeline_batches(user_id, batch_size=max(limit, 50)):
            out.extend(batch)
            if len(out) >= limit:
                break
        return out[:limit]

    def ids_between(self, user_id: str, start_ms: int, end_ms: int, limit: int = 50) -> list[str]:
        """Ids of the episodes whose time is in ``[start_ms, end_ms)``, oldest first (at most ``limit``;
        ids of expired episodes may be among them: their turns and records are gone)."""
        key = self.keys.user(user_id).episode_timeline()
        return members(self.connector.run(lambda r: r.zrangebyscore(key, start_ms, f"({end_ms}", start=0, num=limit)))

    def iter_all(self, user_id: str, batch_size: int = 500) -> Iterator[Episode]:
        for batch in self._timeline_batches(user_id, batch_size):
            yield from batch

    def _timeline_batches(self, user_id: str, batch_size: int) -> Iterator[list[Episode]]:
        uk = self.keys.user(user_id)
        start = 0
        while True:
            ids, episodes, expired = self._timeline_page(uk, start, batch_size)
            if not ids:
                return
            yield episodes
            start += batch_size - expired
            if len(ids) < batch_size:
                return

    def _timeline_page(self, uk: UserKeys, start: int, size: int) -> tuple[list[str], list[Episode], int]:
        """One page of the timeline: its ids, their live episodes, and how many had expired (now unlisted)."""
        ids = members(self.connector.run(lambda r: r.zrevrange(uk.episode_timeline(), start, start + size - 1)))
        if not ids:
            return [], [], 0
        raws = self.connector.run(lambda r: r.mget([uk.episode(i) for i in ids]))
        expired = [i for i, raw in zip(ids, raws, strict=True) if raw is None]
        if expired:
            self.connector.run(lambda r: r.zrem(uk.episode_timeline(), *expired))
        return ids, [Episode.model_validate_json(raw) for raw in raws if raw is not None], len(expired)
