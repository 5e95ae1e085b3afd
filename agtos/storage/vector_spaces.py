"""Which embedder made a vector index's vectors: its *space*, recorded in the index's Redis meta.

A space is ``"{provider}:{model}|{dim}"``, e.g. ``"onnx:all-MiniLM-L6-v2-onnx-int8|384"`` (the bundled model).
Vectors of two spaces are never compared: a query of one embedder against another's vectors ranks
noise. Per user and namespace, ``…:_idx:vec:meta`` holds ``space`` (the space of every vector in
``data``), ``dtype`` (``f4`` or ``f2``: the blob format of the last write; a blob is read at the
space's dimension, as float32 when 4 bytes a value long, float16 when 2, so the two formats of one
space live side by side and a blob of another dimension is never read) and, after a switch,
``reindex`` (the space of the vectors the switch dropped: their records are keyword-only until
``agtos reindex`` embeds them again). An index written before spaces were
recorded has vectors and no ``space``: it is taken to be of the deployment's *legacy* space, the
embedder of the first process that ran this code (``{prefix}:meta:vector_legacy_embedder``, set once).
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Iterator, Sequence
from dataclasses import dataclass
from typing import Any

from agtos.storage.index_keys import index_key
from agtos.storage.keys import GlobalKeys
from agtos.storage.redis_conn import RedisConnector, as_text

LEGACY_KEY = "vector_legacy_embedder"

#: the first lines of the vector write script (before the change log's): KEYS meta, changes, data;
#: ARGV op ("set"|"del"|"switch"), epoch candidate, log cap, the writer's space, the legacy space
#: ('' when unknown), the writer's dtype. A write of vectors (or a "switch") into an index of another space drops that
#: index's vectors first (``reindex`` names their space) and starts a new life of it (a new epoch:
#: every process reloads its mirror); the first space recorded starts one too. Deletes never switch.
SPACE_LUA = """
local recorded = redis.call('HGET', KEYS[1], 'space')
local space = recorded
if not space and ARGV[5] ~= '' and redis.call('EXISTS', KEYS[3]) == 1 then space = ARGV[5] end
local switched = 0
if ARGV[1] ~= 'del' and space and space ~= ARGV[4] then
  redis.call('UNLINK', KEYS[3])
  redis.call('DEL', KEYS[2])
  redis.call('HSET', KEYS[1], 'reindex', space, 'floor', redis.call('HGET', KEYS[1], 'ver') or 0)
  switched = 1
  recorded = false
end
if ARGV[1] ~= 'del' and not recorded then
  redis.call('HSET', KEYS[1], 'space', ARGV[4], 'epoch', ARGV[2])
end
if ARGV[1] ~= 'del' then redis.call('HSET', KEYS[1], 'dtype', ARGV[6]) end
"""


def space_name(identity: str, dim: int) -> str:
    """The space of vectors of ``dim`` made by ``identity`` (``provider:model``)."""
    return f"{identity}|{dim}"


def space_dim(space: str) -> int | None:
    """The dimension a space name gives (None for a malformed one)."""
    try:
        return int(space.rsplit("|", 1)[1])
    except (IndexError, ValueError):
        return None


def is_stale(space: str | None, reindex: str | None, current: str | None) -> bool:
    """Whether an index whose vectors are of ``space`` (None: it has none) and whose ``reindex`` note is
    as given waits for ``agtos reindex`` under an embedder of the ``current`` space (None: unknown, never)."""
    return current is not None and (reindex is not None or (space is not None and space != current))


def stale_reads(keys: GlobalKeys, user_id: str, namespace: str) -> list[Callable[[Any], Any]]:
    """The two reads (each one command on a pipeline) of a user's index whose replies :func:`waits` judges."""
    meta, data = (index_key(keys, user_id, namespace, f"vec:{part}") for part in ("meta", "data"))
    return [lambda pipe: pipe.hmget(meta, ["space", "reindex"]), lambda pipe: pipe.exists(data)]


def waits(replies: Sequence[Any], current: str | None, legacy: Callable[[], str | None]) -> bool:
    """Whether the index :func:`stale_reads` read waits for ``agtos reindex`` (:func:`is_stale`);
    ``legacy`` gives the legacy space, asked only for vectors written before spaces were recorded."""
    (space, reindex), has_data = replies
    found = as_text(space) if space is not None else (legacy() if has_data else None)
    return is_stale(found, None if reindex is None else as_text(reindex), current)


def describe(space: str) -> str:
    """A space for people: ``ollama:nomic-embed-text (768-d)``."""
    identity, _, dim = space.rpartition("|")
    return f"{identity} ({dim}-d)" if identity else space


def embedder_identity(embedder: Any) -> str:
    """``provider:model`` of an embedder (a quantised variant of a model, ``+dynamic-int8``, shares its space)."""
    return f"{embedder.name}:{str(embedder.model).split('+', 1)[0]}"


def legacy_identity(connector: RedisConnector, keys: GlobalKeys, mine: str | None) -> str | None:
    """The deployment's legacy ``identity|dim`` (set to ``mine`` if none was recorded yet)."""
    key = keys.meta(LEGACY_KEY)

    def op(r: Any) -> Any:
        if mine:
            r.set(key, mine, nx=True)
        return r.get(key)

    found = connector.run(op)
    return None if found is None else as_text(found)


@dataclass(frozen=True)
class IndexSpace:
    """One user's index of one namespace: its recorded space (the legacy one for an index written
    before spaces were recorded) and the space of the vectors a switch dropped (None: none)."""

    user_id: str
    namespace: str
    space: str | None
    reindex: str | None


def index_spaces(
    connector: RedisConnector,
    keys: GlobalKeys,
    users: Iterable[str],
    namespaces: Sequence[str],
    legacy: dict[str, str | None],
    batch: int = 500,
) -> Iterator[IndexSpace]:
    """The spaces of these users' indexes that hold vectors or wait for a reindex, ``batch`` users a
    round trip (``legacy``: namespace -> its legacy space)."""
    chunk: list[str] = []
    for user_id in users:
        chunk.append(user_id)
        if len(chunk) >= batch:
            yield from _spaces_of(connector, keys, chunk, namespaces, legacy)
            chunk = []
    if chunk:
        yield from _spaces_of(connector, keys, chunk, namespaces, legacy)


def _spaces_of(
    connector: RedisConnector,
    keys: GlobalKeys,
    users: list[str],
    namespaces: Sequence[str],
    legacy: dict[str, str | None],
) -> Iterator[IndexSpace]:
    pairs = [(u, ns) for u in users for ns in namespaces]

    def op(r: Any) -> list[Any]:
        pipe = r.pipeline(transaction=False)
        for user_id, ns in pairs:
            pipe.hmget(index_key(keys, user_id, ns, "vec:meta"), ["space", "reindex"])
            pipe.exists(index_key(keys, user_id, ns, "vec:data"))
        return pipe.execute()

    replies = connector.run(op)
    for k, (user_id, ns) in enumerate(pairs):
        (space, reindex), has_data = replies[2 * k], replies[2 * k + 1]
        found = as_text(space) if space is not None else (legacy.get(ns) if has_data else None)
        if found is not None or reindex is not None:
            yield IndexSpace(user_id, ns, found, None if reindex is None else as_text(reindex))
