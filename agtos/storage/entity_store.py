"""Entities and relationships in Redis, with lookup indexes every API process shares.

Records: ``UserKeys.record("entity", id)`` and ``UserKeys.record("rel", id)`` (JSON). Indexes,
under ``…:entity:_idx:`` (see :mod:`agtos.storage.index_keys`), cover live entities only:

* ``alias``       hash ``normalised name or alias -> entity id``
* ``names``       sorted set of ``"{normalised}|{id}"`` (score 0) for ZRANGEBYLEX prefix search
* ``all``         sorted set ``id -> last_seen``; ``type:{type}`` the same per entity type
* ``out:{id}`` / ``in:{id}``  sets of relationship ids leaving / entering an entity
* ``triples``     hash ``"{source}|{type}|{target}" -> relationship id`` (one edge per triple)

Every write is one Lua script: a compare-and-set on the record (``expect`` is the JSON the caller
read, ``""`` for "must not exist") plus its index changes, so concurrent writers never lose an
update and an index never points at a record that says otherwise.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import Any, Literal

import redis
from redis.commands.core import Script

from agtos.schemas import Entity, EntityType, Relationship
from agtos.storage.index_keys import index_key
from agtos.storage.keys import GlobalKeys, check_record_id
from agtos.storage.redis_conn import RedisConnector

NAMESPACE = "entity"
REL_KIND = "rel"
SEP = "|"
ANY = "*"  # ``expect`` value that skips the compare-and-set

# KEYS: record, alias, names, all, old type zset, new type zset.
# ARGV: id, json, expect, mode (strict|force), live (1|0), score, n_drop, drop keys..., add keys...
_SAVE_ENTITY = """
local id = ARGV[1]
if ARGV[3] ~= '*' and (redis.call('GET', KEYS[1]) or '') ~= ARGV[3] then return {'conflict', ''} end
local ndrop = tonumber(ARGV[7])
local live = ARGV[5] == '1'
if live and ARGV[4] == 'strict' then
  for i = 8 + ndrop, #ARGV do
    local owner = redis.call('HGET', KEYS[2], ARGV[i])
    if owner and owner ~= id then return {'taken', owner} end
  end
end
local function drop(k)
  if redis.call('HGET', KEYS[2], k) == id then redis.call('HDEL', KEYS[2], k) end
  redis.call('ZREM', KEYS[3], k .. '|' .. id)
end
redis.call('SET', KEYS[1], ARGV[2])
for i = 8, 7 + ndrop do drop(ARGV[i]) end
redis.call('ZREM', KEYS[5], id)
for i = 8 + ndrop, #ARGV do
  if live then
    redis.call('HSET', KEYS[2], ARGV[i], id)
    redis.call('ZADD', KEYS[3], 0, ARGV[i] .. '|' .. id)
  else
    drop(ARGV[i])
  end
end
if live then
  redis.call('ZADD', KEYS[4], ARGV[6], id)
  redis.call('ZADD', KEYS[6], ARGV[6], id)
else
  redis.call('ZREM', KEYS[4], id)
  redis.call('ZREM', KEYS[6], id)
end
return {'ok', id}
"""

# KEYS: record, alias, names, all, type zset, out set, in set. ARGV: id, keys...
_DELETE_ENTITY = """
local id = ARGV[1]
for i = 2, #ARGV do
  if redis.call('HGET', KEYS[2], ARGV[i]) == id then redis.call('HDEL', KEYS[2], ARGV[i]) end
  redis.call('ZREM', KEYS[3], ARGV[i] .. '|' .. id)
end
redis.call('ZREM', KEYS[4], id)
redis.call('ZREM', KEYS[5], id)
redis.call('DEL', KEYS[6], KEYS[7])
return redis.call('DEL', KEYS[1])
"""

# KEYS: record, triples, old out, old in, new out, new in.
# ARGV: id, json, expect, mode (strict|force), old triple ('' if none), new triple.
_SAVE_REL = """
local id = ARGV[1]
if ARGV[3] ~= '*' and (redis.call('GET', KEYS[1]) or '') ~= ARGV[3] then return {'conflict', ''} end
local owner = redis.call('HGET', KEYS[2], ARGV[6])
if owner and owner ~= id and ARGV[4] == 'strict' then return {'taken', owner} end
redis.call('SET', KEYS[1], ARGV[2])
if ARGV[5] ~= '' and ARGV[5] ~= ARGV[6] and redis.call('HGET', KEYS[2], ARGV[5]) == id then
  redis.call('HDEL', KEYS[2], ARGV[5])
end
redis.call('SREM', KEYS[3], id)
redis.call('SREM', KEYS[4], id)
redis.call('HSET', KEYS[2], ARGV[6], id)
redis.call('SADD', KEYS[5], id)
redis.call('SADD', KEYS[6], id)
return {'ok', id}
"""

# KEYS: record, triples, out, in. ARGV: id, triple.
_DELETE_REL = """
if redis.call('HGET', KEYS[2], ARGV[2]) == ARGV[1] then redis.call('HDEL', KEYS[2], ARGV[2]) end
redis.call('SREM', KEYS[3], ARGV[1])
redis.call('SREM', KEYS[4], ARGV[1])
return redis.call('DEL', KEYS[1])
"""

Status = Literal["ok", "conflict", "taken"]


@dataclass(frozen=True)
class WriteResult:
    """Outcome of a compare-and-set write: ``ok``, ``conflict`` (record changed) or ``taken``
    (a name/alias or triple belongs to ``owner``)."""

    status: Status
    owner: str = ""


def _decode(value: Any) -> str:
    return value.decode() if isinstance(value, bytes) else str(value)


_STATUSES: dict[str, Status] = {"ok": "ok", "conflict": "conflict", "taken": "taken"}


def _result(status: Any, owner: Any) -> WriteResult:
    """A write script's reply (a status word other than the three is a KeyError: a script bug)."""
    return WriteResult(_STATUSES[_decode(status)], _decode(owner))


def triple_key(source_id: str, rel_type: str, target_id: str, symmetric: bool = False) -> str:
    """The dedup key of an edge; symmetric types use the ends in sorted order."""
    if symmetric and target_id < source_id:
        source_id, target_id = target_id, source_id
    return SEP.join((source_id, rel_type, target_id))


class EntityStore:
    """Entity and relationship records of every user, with their indexes."""

    def __init__(self, connector: RedisConnector, keys: GlobalKeys) -> None:
        self.connector = connector
        self.keys = keys
        self._scripts: dict[str, Script] = {}

    # -- keys -------------------------------------------------------------------------
    def entity_key(self, user_id: str, entity_id: str) -> str:
        return self.keys.user(user_id).record(NAMESPACE, entity_id)

    def rel_key(self, user_id: str, rel_id: str) -> str:
        return self.keys.user(user_id).record(REL_KIND, rel_id)

    def index(self, user_id: str, part: str) -> str:
        """One index key (``alias``, ``names``, ``all``, ``type:person``, ``out:{id}``...)."""
        return index_key(self.keys, user_id, NAMESPACE, part)

    def _edges(self, user_id: str, direction: str, entity_id: str) -> str:
        return self.index(user_id, f"{direction}:{check_record_id(entity_id, 'entity id')}")

    def _script(self, r: redis.Redis, source: str) -> Script:
        if source not in self._scripts:
            self._scripts[source] = r.register_script(source)
        return self._scripts[source]

    def _eval(self, source: str, keys: list[str], args: list[Any]) -> list[Any]:
        return self.connector.run(lambda r: self._script(r, source)(keys=keys, args=args))

    # -- entity writes ----------------------------------------------------------------
    def save_entity(
        self,
        entity: Entity,
        index_keys: Sequence[str],
        *,
        expect: str = ANY,
        old: Entity | None = None,
        old_keys: Sequence[str] = (),
        force: bool = False,
    ) -> WriteResult:
        """Write ``entity`` if its stored JSON still equals ``expect``; index it under
        ``index_keys`` (live) or drop it from every index (deleted). ``old``/``old_keys``: the
        stored version and its keys, whose stale index entries are removed. Unless ``force``, a
        key owned by another entity aborts the write with ``taken``."""
        uid, eid = entity.user_id, entity.id
        old_type = old.type if old is not None else entity.type
        keys = [
            self.entity_key(uid, eid),
            self.index(uid, "alias"),
            self.index(uid, "names"),
            self.index(uid, "all"),
            self.index(uid, f"type:{old_type}"),
            self.index(uid, f"type:{entity.type}"),
        ]
        drop = [k for k in dict.fromkeys(old_keys) if k not in index_keys]
        args: list[Any] = [
            eid,
            entity.model_dump_json(),
            expect,
            "force" if force else "strict",
            "0" if entity.deleted else "1",
            entity.last_seen,
            len(drop),
            *drop,
            *dict.fromkeys(index_keys),
        ]
        status, owner = self._eval(_SAVE_ENTITY, keys, args)
        if _decode(status) == "ok" and expect == "":  # a new entity: the user has data now
            self.connector.run(lambda r: r.sadd(self.keys.users(), uid))
        return _result(status, owner)

    def delete_entity(self, entity: Entity, index_keys: Sequence[str]) -> bool:
        """Remove the record, its index entries and its (already emptied) edge sets."""
        uid, eid = entity.user_id, entity.id
        keys = [
            self.entity_key(uid, eid),
            self.index(uid, "alias"),
            self.index(uid, "names"),
            self.index(uid, "all"),
            self.index(uid, f"type:{entity.type}"),
            self._edges(uid, "out", eid),
            self._edges(uid, "in", eid),
        ]
        return bool(self._eval(_DELETE_ENTITY, keys, [eid, *dict.fromkeys(index_keys)]))

    # -- entity reads -----------------------------------------------------------------
    def get_raw(self, user_id: str, entity_id: str) -> str | None:
        raw = self.connector.run(lambda r: r.get(self.entity_key(user_id, entity_id)))
        return None if raw is None else _decode(raw)

    def get_many(self, user_id: str, ids: Iterable[str]) -> dict[str, Entity]:
        """Entities by id (deleted ones included); missing ids are omitted."""
        ids = list(dict.fromkeys(ids))
        if not ids:
            return {}
        raws = self.connector.run(lambda r: r.mget([self.entity_key(user_id, i) for i in ids]))
        return {i: Entity.model_validate_json(raw) for i, raw in zip(ids, raws, strict=True) if raw}

    def owners(self, user_id: str, name_keys: Sequence[str]) -> dict[str, str]:
        """``normalised name -> entity id`` for the keys that belong to a live entity."""
        if not name_keys:
            return {}
        found = self.connector.run(lambda r: r.hmget(self.index(user_id, "alias"), list(name_keys)))
        return {k: _decode(v) for k, v in zip(name_keys, found, strict=True) if v is not None}

    def alias_map(self, user_id: str) -> dict[str, str]:
        raw = self.connector.run(lambda r: r.hgetall(self.index(user_id, "alias")))
        return {_decode(k): _decode(v) for k, v in raw.items()}

    def page(self, user_id: str, etype: str | None, offset: int, limit: int) -> tuple[list[str], int]:
        """Live ids, most recently seen first, and how many there are in all."""
        key = self.index(user_id, f"type:{etype}" if etype else "all")

        def op(r: redis.Redis) -> list[Any]:
            pipe = r.pipeline(transaction=False)
            pipe.zrevrange(key, offset, offset + limit - 1)
            pipe.zcard(key)
            return pipe.execute()

        ids, total = self.connector.run(op)
        return [_decode(i) for i in ids], int(total)

    def name_matches(self, user_id: str, query_key: str, scan_limit: int = 5_000) -> list[str]:
        """Ids whose normalised name/alias equals, starts with, then contains ``query_key``."""
        key = self.index(user_id, "names")
        lo, hi = f"[{query_key}".encode(), f"[{query_key}".encode() + b"\xff"

        def op(r: redis.Redis) -> tuple[list[Any], list[Any]]:
            prefixed = r.zrangebylex(key, lo, hi, start=0, num=scan_limit)
            contained = [m for m, _ in r.zscan_iter(key, match=f"*{query_key}*", count=1_000)]
            return prefixed, contained

        prefixed, contained = self.connector.run(op)
        ranked: list[tuple[int, str]] = []
        for member in [*prefixed, *contained[:scan_limit]]:
            name, _, eid = _decode(member).rpartition(SEP)
            rank = 0 if name == query_key else 1 if name.startswith(query_key) else 2
            ranked.append((rank, eid))
        ranked.sort(key=lambda item: item[0])
        return list(dict.fromkeys(eid for _, eid in ranked))

    def live_filter(self, user_id: str, ids: Sequence[str], etype: str | None) -> list[str]:
        """``ids`` (order kept) that are live and, if given, of type ``etype``."""
        if not ids:
            return []
        key = self.index(user_id, f"type:{etype}" if etype else "all")
        scores = self.connector.run(lambda r: r.zmscore(key, list(ids)))
        return [i for i, score in zip(ids, scores, strict=True) if score is not None]

    def counts(self, user_id: str) -> dict[str, int]:
        """Live entities per type."""

        def op(r: redis.Redis) -> list[Any]:
            pipe = r.pipeline(transaction=False)
            for etype in EntityType:
                pipe.zcard(self.index(user_id, f"type:{etype}"))
            return pipe.execute()

        return {str(t): int(n) for t, n in zip(EntityType, self.connector.run(op), strict=True)}

    # -- relationships ----------------------------------------------------------------
    def save_rel(
        self,
        rel: Relationship,
        triple: str,
        *,
        expect: str = ANY,
        old: Relationship | None = None,
        old_triple: str = "",
        force: bool = False,
    ) -> WriteResult:
        """Compare-and-set a relationship and move its edge-set and triple entries."""
        uid = rel.user_id
        before = old or rel
        keys = [
            self.rel_key(uid, rel.id),
            self.index(uid, "triples"),
            self._edges(uid, "out", before.source_id),
            self._edges(uid, "in", before.target_id),
            self._edges(uid, "out", rel.source_id),
            self._edges(uid, "in", rel.target_id),
        ]
        args = [rel.id, rel.model_dump_json(), expect, "force" if force else "strict", old_triple, triple]
        status, owner = self._eval(_SAVE_REL, keys, args)
        return _result(status, owner)

    def delete_rel(self, rel: Relationship, triple: str) -> bool:
        uid = rel.user_id
        keys = [
            self.rel_key(uid, rel.id),
            self.index(uid, "triples"),
            self._edges(uid, "out", rel.source_id),
            self._edges(uid, "in", rel.target_id),
        ]
        return bool(self._eval(_DELETE_REL, keys, [rel.id, triple]))

    def rel_raw(self, user_id: str, rel_id: str) -> str | None:
        raw = self.connector.run(lambda r: r.get(self.rel_key(user_id, rel_id)))
        return None if raw is None else _decode(raw)

    def triple_owner(self, user_id: str, triple: str) -> str | None:
        owner = self.connector.run(lambda r: r.hget(self.index(user_id, "triples"), triple))
        return None if owner is None else _decode(owner)

    def edge_ids(self, user_id: str, entity_id: str) -> tuple[list[str], list[str]]:
        """Relationship ids (outgoing, incoming) of an entity."""

        def op(r: redis.Redis) -> list[Any]:
            pipe = r.pipeline(transaction=False)
            pipe.smembers(self._edges(user_id, "out", entity_id))
            pipe.smembers(self._edges(user_id, "in", entity_id))
            return pipe.execute()

        out, inc = self.connector.run(op)
        return sorted(_decode(i) for i in out), sorted(_decode(i) for i in inc)

    def rels(self, user_id: str, ids: Iterable[str]) -> dict[str, Relationship]:
        ids = list(dict.fromkeys(ids))
        if not ids:
            return {}
        raws = self.connector.run(lambda r: r.mget([self.rel_key(user_id, i) for i in ids]))
        return {i: Relationship.model_validate_json(raw) for i, raw in zip(ids, raws, strict=True) if raw}
