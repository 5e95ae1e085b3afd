"""Verbatim turns of episodes: one Redis list per episode (list index = turn position), with the
episode's TTL, and their units in the ``turn`` BM25 and vector indexes.

Index doc ids name the turn: ``{episode_id}.t{position}``, or ``{episode_id}.t{position}.c{n}``
for window ``n`` > 0 of a long turn (:func:`parse_turn_doc_id` reads them back). Searches run
through :class:`SemanticStore`, whose record reads here go to the episode lists, so a hit whose
episode expired or was forgotten is dropped and leaves both indexes on the spot, like any record.
"""

from __future__ import annotations

import logging
import re
from collections.abc import Iterable, Iterator, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
import redis

from agtos.schemas import StoredTurn
from agtos.storage.bm25_index import BM25Index
from agtos.storage.keys import GlobalKeys, record_id_pattern
from agtos.storage.redis_conn import RedisConnector, as_text
from agtos.storage.semantic_store import SearchResult, SemanticStore, Window
from agtos.storage.vector_index import VectorIndex
from agtos.tasks.verbatim_turns import TurnUnit, turn_units

log = logging.getLogger(__name__)

TURN_NAMESPACE = "turn"
_DOC_ID = re.compile(r"^(?P<episode>.+)\.t(?P<position>\d+)(?:\.c(?P<chunk>\d+))?$")


#: the turn at each position p (the i-th number of ``ARGV[2]``, space-separated: one argument for all) of
#: list ``KEYS[i]`` (false when there is none), or with ``ARGV[1]`` = w > 0 the turns of positions
#: p - w .. p + w that exist (one reply for every hit)
READ_TURNS_LUA = """
local w = tonumber(ARGV[1])
local out = {}
local positions = string.gmatch(ARGV[2], '%d+')
for i, key in ipairs(KEYS) do
  local p = tonumber(positions())
  if w == 0 then
    out[i] = redis.call('LINDEX', key, p)
  else
    out[i] = redis.call('LRANGE', key, math.max(0, p - w), p + w)
  end
end
return out
"""


def turn_doc_id(episode_id: str, position: int, chunk: int = 0) -> str:
    """The index doc id of a turn (window ``chunk`` of it, for a long turn)."""
    return f"{episode_id}.t{position}" + (f".c{chunk}" if chunk else "")


#: doc id -> :func:`parse_turn_doc_id` (a search parses each of its ~50 turn hits' ids 4 times)
_PLACES: dict[str, tuple[str, int] | None] = {}
_PLACES_KEPT = 65_536
#: (key prefix, user, episode id) -> the key of the episode's turns (:meth:`TurnStore._list_key`)
_LIST_KEYS: dict[tuple[str, str, str], str] = {}


def parse_turn_doc_id(doc_id: str) -> tuple[str, int] | None:
    """``(episode id, position)`` of a turn doc id; None for any other id."""
    try:
        return _PLACES[doc_id]
    except KeyError:
        pass
    found = _DOC_ID.fullmatch(doc_id)
    place = (found["episode"], int(found["position"])) if found else None
    if len(_PLACES) >= _PLACES_KEPT:
        _PLACES.clear()
    _PLACES[doc_id] = place
    return place


@dataclass(frozen=True)
class TurnMatch:
    """A turn found by the index, its best score, the units that matched and its neighbours."""

    turn: StoredTurn
    score: float
    doc_ids: tuple[str, ...]
    before: tuple[StoredTurn, ...] = ()
    after: tuple[StoredTurn, ...] = ()

    @property
    def window(self) -> list[StoredTurn]:
        """The turn with its neighbours, in order."""
        return [*self.before, self.turn, *self.after]


class TurnStore(SemanticStore):
    """The ``turn`` namespace: turns kept per episode, searchable like any semantic record."""

    def __init__(
        self,
        connector: RedisConnector,
        keys: GlobalKeys,
        vector_index: VectorIndex,
        bm25_index: BM25Index,
        ttl_seconds: int,
        **options: Any,
    ) -> None:
        super().__init__(connector, keys, TURN_NAMESPACE, vector_index, bm25_index, **options)
        self.ttl_seconds = ttl_seconds

    def _list_key(self, user_id: str, episode_id: str) -> str:
        cached = (self.keys.prefix, user_id, episode_id)
        key = _LIST_KEYS.get(cached)
        if key is None:  # ids checked once (a search builds ~50 keys)
            key = self.keys.user(user_id).episode_turns(episode_id)
            if len(_LIST_KEYS) >= _PLACES_KEPT:
                _LIST_KEYS.clear()
            _LIST_KEYS[cached] = key
        return key

    # -- writes -----------------------------------------------------------------------
    def save(self, turns: Sequence[StoredTurn], units: Sequence[TurnUnit], vectors: Any | None) -> int:
        """Store each episode's turns (replacing what it had, in one MULTI/EXEC with the TTL) and
        index ``units`` (``vectors``: their rows, or None for keyword search only); turns stored."""
        by_episode: dict[tuple[str, str], list[StoredTurn]] = {}
        for turn in turns:
            by_episode.setdefault((turn.user_id, turn.episode_id), []).append(turn)
        new_ids: dict[tuple[str, str], set[str]] = {}
        for unit in units:
            new_ids.setdefault((unit.user_id, unit.episode_id), set()).add(_unit_id(unit))
        for (user_id, episode_id), kept in by_episode.items():
            if [t.position for t in kept] != list(range(len(kept))):
                raise ValueError(f"turns of episode {episode_id!r} must have positions 0..{len(kept) - 1} in order")
            old = self.episode_turns(user_id, episode_id)
            stale = {_unit_id(u) for u in turn_units(old)} - new_ids.get((user_id, episode_id), set()) if old else set()
            self._write_list(user_id, episode_id, kept)
            if stale:  # a shorter or edited re-save: its old units leave the indexes
                self.vectors.remove_many(user_id, sorted(stale))
                self.bm25.remove_many(user_id, sorted(stale))
        rows: dict[str, list[int]] = {}
        for row, unit in enumerate(units):
            doc_id = _unit_id(unit)
            if record_id_pattern().fullmatch(doc_id):
                rows.setdefault(unit.user_id, []).append(row)
            else:  # only an episode id near the 128-character limit: the turn is kept, not indexed
                log.warning("turn %r not indexed: its doc id would be longer than 128 characters", doc_id)
        for user_id, picked in rows.items():
            self.index_many(
                user_id,
                [_unit_id(units[i]) for i in picked],
                [units[i].text for i in picked],
                None if vectors is None else np.asarray(vectors)[picked],
            )
        return len(turns)

    def _write_list(self, user_id: str, episode_id: str, turns: list[StoredTurn]) -> None:
        key = self._list_key(user_id, episode_id)

        def op(r: redis.Redis) -> None:
            pipe = r.pipeline(transaction=True)
            pipe.delete(key)
            pipe.rpush(key, *[t.model_dump_json(exclude_defaults=True) for t in turns])
            pipe.expire(key, self.ttl_seconds)
            pipe.execute()
            r.sadd(self.keys.users(), user_id)  # a global key: outside the per-user transaction

        self.connector.run(op)

    def upsert(self, *args: Any, **kwargs: Any) -> None:
        raise TypeError("turns are stored per episode: use TurnStore.save")

    def upsert_many(self, *args: Any, **kwargs: Any) -> None:
        raise TypeError("turns are stored per episode: use TurnStore.save")

    def delete_episode(self, user_id: str, episode_id: str) -> int:
        """Remove an episode's turns and every index entry of them (also when the turns already
        expired: the indexes are searched for the episode's doc ids); how many turns were stored."""
        key = self._list_key(user_id, episode_id)
        metas = (self.vectors._key(user_id, "meta"), self.bm25._key(user_id, "meta"))
        stored = int(self.connector.run(lambda r: r.llen(key)))
        if stored:
            self.connector.run(lambda r: r.delete(key))
        if not self.connector.run(lambda r: r.exists(*metas)):
            return stored  # no index to clean: a change log written now would create keys
        indexed = {d for d in [*self.vectors.ids(user_id), *self.bm25.ids(user_id)] if _of_episode(d, episode_id)}
        self.vectors.remove_many(user_id, sorted(indexed))
        self.bm25.remove_many(user_id, sorted(indexed))
        return stored

    # -- reads ------------------------------------------------------------------------
    def episode_turns(self, user_id: str, episode_id: str) -> list[StoredTurn]:
        """An episode's turns in order (none once it expired or was forgotten)."""
        raws = self.connector.run(lambda r: r.lrange(self._list_key(user_id, episode_id), 0, -1))
        return [StoredTurn.model_validate_json(raw) for raw in raws]

    def of_episodes(self, user_id: str, episode_ids: Sequence[str]) -> list[StoredTurn]:
        """The turns of several episodes, episode by episode (one round trip)."""

        def op(r: redis.Redis) -> list[Any]:
            pipe = r.pipeline(transaction=False)
            for episode_id in episode_ids:
                pipe.lrange(self._list_key(user_id, episode_id), 0, -1)
            return pipe.execute()

        raws = self.connector.run(op) if episode_ids else []
        return [StoredTurn.model_validate_json(raw) for listed in raws for raw in listed]

    def get_many(self, user_id: str, ids: Iterable[str]) -> dict[str, str]:
        """The turn JSON of each doc id whose turn is stored (one LINDEX each, one round trip)."""
        wanted = list(dict.fromkeys(ids))
        if not any(parse_turn_doc_id(doc_id) for doc_id in wanted):
            return {}
        read = self.connector.run(lambda r: self._read(r, user_id, wanted, 0))
        return {doc_id: payload for doc_id, (payload, _) in read.items()}

    def queue_reads(self, pipe: Any, user_id: str, ids: Sequence[str], window: int = 0) -> None:
        """The turn of each turn doc id (a list's index is the turn's position), or with ``window`` > 0
        the turn and that many neighbours either side; other ids are skipped. One command for all
        (:data:`READ_TURNS_LUA`: a pipeline of one LINDEX per hit cost ~0.2 ms of client CPU per
        search of 50 turn hits); on a Redis Cluster one LINDEX / LRANGE each."""
        places = [place for doc_id in ids if (place := parse_turn_doc_id(doc_id))]
        if not places:
            return
        keys = [self._list_key(user_id, episode_id) for episode_id, _ in places]
        if self._scripted:
            pipe.execute_command("EVAL", READ_TURNS_LUA, len(keys), *keys, window, " ".join(str(p) for _, p in places))
            return
        for key, (_, position) in zip(keys, places, strict=True):
            if window:
                pipe.lrange(key, max(0, position - window), position + window)
            else:
                pipe.lindex(key, position)

    def take_reads(
        self, ids: Sequence[str], replies: Iterator[Any], window: int = 0
    ) -> dict[str, tuple[str, Window | None]]:
        """``doc id -> (turn JSON, its window or None)`` for each turn :meth:`queue_reads` found stored."""
        wanted = [(doc_id, place[1]) for doc_id in ids if (place := parse_turn_doc_id(doc_id))]
        if not wanted:
            return {}
        each = iter(next(replies)) if self._scripted else replies
        out: dict[str, tuple[str, Window | None]] = {}
        for doc_id, position in wanted:
            reply = next(each)
            if not window:
                if reply is not None:
                    out[doc_id] = (as_text(reply), None)
                continue
            at = position - max(0, position - window)  # the turn's index in its window
            if len(reply) > at:
                out[doc_id] = (as_text(reply[at]), (window, tuple(reply)))
        return out

    @property
    def _scripted(self) -> bool:
        """Turn reads go through :data:`READ_TURNS_LUA` (not on a Redis Cluster, whose pipelines route
        each command by its first key; the keys share the user's slot, but one command each stays simple)."""
        return self.connector.mode != "cluster"

    def _exists(self, user_id: str, ids: list[str]) -> dict[str, bool]:
        found = self.get_many(user_id, ids)
        return {doc_id: doc_id in found for doc_id in ids}

    def lookup(self, user_id: str, hits: Sequence[SearchResult], neighbours: int = 1) -> list[TurnMatch]:
        """The turns behind index hits, best first, one per turn (the windows of a long turn merge,
        keeping the best score), each with up to ``neighbours`` turns either side; hits whose turn is
        gone are left out. Without neighbours, the turn a hit's ``payload`` holds is not read again."""
        best: dict[tuple[str, int], list[SearchResult]] = {}
        for hit in hits:
            place = parse_turn_doc_id(hit.id)
            if place is not None:
                best.setdefault(place, []).append(hit)
        if not best:
            return []
        # a hit that carries its turn (a search's hits do) needs no second read without neighbours, nor
        # with them when the search read its window (live_many's ``window``, at least ``neighbours`` wide)
        known: dict[tuple[str, int], list[Any]] = {}
        for place, found in best.items():
            hit = found[0]
            if not neighbours and hit.payload is not None:
                known[place] = [hit.payload]
            elif neighbours and hit.window is not None and hit.window[0] >= neighbours:
                known[place] = list(hit.window[1])
        places = [place for place in best if place not in known]

        def op(r: redis.Redis) -> list[Any]:
            pipe = r.pipeline(transaction=False)
            for episode_id, position in places:
                pipe.lrange(self._list_key(user_id, episode_id), max(0, position - neighbours), position + neighbours)
            return pipe.execute()

        read = dict(zip(places, self.connector.run(op), strict=True)) if places else {}
        out: list[TurnMatch] = []
        for place in best:
            raws = known.get(place) or read[place]
            window = [StoredTurn.model_validate_json(raw) for raw in raws]
            at = [i for i, t in enumerate(window) if t.position == place[1]]
            if not at:
                continue  # expired or forgotten since the search
            matched = best[place]
            near = [t for t in window if abs(t.position - place[1]) <= neighbours]  # a wider window read: cut
            out.append(
                TurnMatch(
                    window[at[0]],
                    max(h.score for h in matched),
                    tuple(h.id for h in matched),
                    tuple(t for t in near if t.position < place[1]),
                    tuple(t for t in near if t.position > place[1]),
                )
            )
        return sorted(out, key=lambda m: -m.score)


def _unit_id(unit: TurnUnit) -> str:
    return turn_doc_id(unit.episode_id, unit.position, unit.chunk)


def _of_episode(doc_id: str, episode_id: str) -> bool:
    place = parse_turn_doc_id(doc_id)
    return place is not None and place[0] == episode_id
