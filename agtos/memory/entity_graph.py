"""The entity graph over its Redis store: loading with compare-and-set writes, the entity-name
vectors (per-user vector index namespace ``entity``) and merged edges. :class:`agtos.memory.entity_memory.EntityMemory`
builds ingestion, edits and merges on it; reads live in :mod:`agtos.memory.entity_views`.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Sequence

import numpy as np

from agtos.memory.semantic import SemanticMemory
from agtos.providers.embeddings import EmbeddingError
from agtos.schemas import Entity, Relationship
from agtos.schemas.records import now_ms
from agtos.storage.entity_store import NAMESPACE, EntityStore, WriteResult, triple_key
from agtos.storage.keys import GlobalKeys, record_id_pattern
from agtos.storage.pending_vectors import PendingVectors
from agtos.storage.redis_conn import RedisConnector
from agtos.storage.vector_index import VectorIndex
from agtos.tasks.entity_records import name_keys, union_ids
from agtos.tasks.relation_types import SYMMETRIC_TYPES

log = logging.getLogger(__name__)

SINGLE_VALUED = frozenset({"lives-in", "works-at"})  # a new edge of these types ends the older ones
WRITE_RETRIES = 8  # compare-and-set attempts before a write gives up


class EntityNotFound(LookupError):
    """No live entity with this id for this user."""


class EntityInvalid(ValueError):
    """An edit or merge that cannot be applied as asked."""


class EntityConflict(ValueError):
    """A name or alias already belongs to another entity."""

    def __init__(self, message: str, owner_id: str) -> None:
        super().__init__(message)
        self.owner_id = owner_id


class EntityGraph:
    """Entities and their edges in Redis, with the name vectors that dedup uses."""

    def __init__(self, connector: RedisConnector, keys: GlobalKeys, semantic: SemanticMemory) -> None:
        self.store = EntityStore(connector, keys)
        self.connector = connector
        self.keys = keys
        self.semantic = semantic
        self._vectors: VectorIndex | None = None
        self._lock = threading.RLock()

    # -- vectors ----------------------------------------------------------------------
    def vector_index(self) -> VectorIndex | None:
        """The ``entity`` vector namespace, or None without an embedder. The embedder's dimension is
        had outside ``_lock`` (a first use loads the model or probes the service): the writers call
        this before taking it, so none holds it through that (issue 15)."""
        if self._vectors is None:
            try:
                dim = self.semantic.embedder.dim
            except EmbeddingError:
                return None
            with self._lock:
                if self._vectors is None:
                    identity = self.semantic.embedder_identity
                    self._vectors = VectorIndex(self.connector, self.keys, "entity", dim, identity=identity)
        return self._vectors

    def embed_names(self, names: Sequence[str], wait_s: float | None = None) -> dict[str, np.ndarray]:
        """One embedding call for ``names``; empty when the embedder is unavailable. ``wait_s``: a
        request's bound on a remote embedder (:meth:`SemanticMemory.embed_within`)."""
        names = list(dict.fromkeys(names))
        if not names:
            return {}
        semantic = self.semantic
        try:
            matrix = semantic.embedder.embed(names) if wait_s is None else semantic.embed_within(names, wait_s)
        except EmbeddingError as exc:
            log.warning("entity names not embedded (alias dedup only): %s", exc)
            return {}
        return dict(zip(names, matrix, strict=True))

    def _set_vector(self, user_id: str, entity_id: str, vector: np.ndarray | None) -> None:
        index = self.vector_index()
        if index is None:
            return
        if vector is None:
            index.remove(user_id, entity_id)
        else:
            index.add(user_id, entity_id, vector)

    def _name_vector(self, user_id: str, entity_id: str, vector: np.ndarray | None) -> None:
        """Write a stored entity's name vector; without one (the embedder was down) its old one goes and
        the entity waits for the repair (:mod:`agtos.memory.vector_repair`, :class:`PendingVectors`)."""
        self._set_vector(user_id, entity_id, vector)
        if vector is None:
            PendingVectors(self.connector, self.keys).add(user_id, [(NAMESPACE, entity_id)], now_ms(), stored=True)

    def _checked_vector(self, user_id: str, written: Entity, vector: np.ndarray | None) -> None:
        """:meth:`_name_vector` for an entity just written with the name ``written.name`` (a rename, or an
        ingestion's new entity), then checked against the name stored now. Another process's rename (it
        does not take this process's ``_lock``, nor the user's entity lock) may have written its name
        after ours and its vector before ours, and a delete or merge may have removed the entity
        meanwhile: a vector of a name that is not the stored one goes and the entity waits for the repair
        sweep (which embeds the name it has then); a removed entity's goes (issue 15). Whichever writer
        writes its vector last makes this check after every name write it could have missed, so no other
        name's vector stays (at worst the entity waits for the sweep)."""
        self._name_vector(user_id, written.id, vector)
        now = self.load(user_id, written.id)
        if now is None:
            self._drop_vector(user_id, written.id)
        elif now[0].name != written.name:
            self._name_vector(user_id, written.id, None)

    def _drop_vector(self, user_id: str, entity_id: str) -> None:
        """A deleted, forgotten or merged entity: its name vector goes and it waits for none."""
        self._set_vector(user_id, entity_id, None)
        PendingVectors(self.connector, self.keys).forget(user_id, NAMESPACE, entity_id)

    # -- loading ----------------------------------------------------------------------
    def load(self, user_id: str, entity_id: str) -> tuple[Entity, str] | None:
        """A live entity and its stored JSON (for compare-and-set), or None."""
        if not record_id_pattern().fullmatch(entity_id or ""):
            return None
        raw = self.store.get_raw(user_id, entity_id)
        if raw is None:
            return None
        entity = Entity.model_validate_json(raw)
        return None if entity.deleted else (entity, raw)

    def require(self, user_id: str, entity_id: str) -> tuple[Entity, str]:
        loaded = self.load(user_id, entity_id)
        if loaded is None:
            raise EntityNotFound(f"entity {entity_id!r} not found")
        return loaded

    def _write(self, new: Entity, raw: str, old: Entity, *, force: bool = False) -> WriteResult:
        return self.store.save_entity(new, name_keys(new), expect=raw, old=old, old_keys=name_keys(old), force=force)

    # -- edges ------------------------------------------------------------------------
    def relate(
        self,
        user_id: str,
        source_id: str,
        target_id: str,
        rtype: str,
        confidence: float,
        episode_id: str,
        stated_at: int | None = None,
    ) -> str | None:
        """Create the edge or merge into the same (source, type, target): ids union, max confidence.
        An edge of a single-valued type (lives-in, works-at) closes the source's earlier edges of
        that type to other targets (``valid_until``, ``superseded_by``)."""
        triple = triple_key(source_id, rtype, target_id, rtype in SYMMETRIC_TYPES)
        incoming = Relationship(
            user_id=user_id,
            source_id=source_id,
            target_id=target_id,
            type=rtype,
            confidence=confidence,
            source_episode_ids=[episode_id],
            valid_from=stated_at,
        )
        for _ in range(WRITE_RETRIES):
            owner = self.store.triple_owner(user_id, triple)
            if owner is None or self.store.rel_raw(user_id, owner) is None:
                if self.store.save_rel(incoming, triple, expect="", force=owner is not None).status == "ok":
                    self._supersede_edges(incoming)
                    return incoming.id
                continue
            if self.absorb_rel(user_id, owner, incoming):
                return owner
        return None

    def _supersede_edges(self, new: Relationship) -> None:
        """Close the source's current edges of ``new``'s single-valued type that were stated earlier."""
        if new.type not in SINGLE_VALUED or new.valid_from is None:
            return
        outgoing, _ = self.store.edge_ids(new.user_id, new.source_id)
        for rel in self.store.rels(new.user_id, outgoing).values():
            if rel.type != new.type or rel.target_id == new.target_id or rel.valid_until is not None:
                continue
            raw = self.store.rel_raw(new.user_id, rel.id)
            if raw is None or (rel.valid_from or 0) > new.valid_from:
                continue
            closed = rel.model_copy(update={"valid_until": new.valid_from, "superseded_by": new.id})
            triple = triple_key(rel.source_id, rel.type, rel.target_id, rel.type in SYMMETRIC_TYPES)
            self.store.save_rel(closed, triple, expect=raw, old=rel, old_triple=triple)  # lost race: stays open

    def absorb_rel(self, user_id: str, rel_id: str, other: Relationship) -> bool:
        """Fold ``other``'s confidence and episodes into the stored edge ``rel_id``."""
        for _ in range(WRITE_RETRIES):
            raw = self.store.rel_raw(user_id, rel_id)
            if raw is None:
                return False
            rel = Relationship.model_validate_json(raw)
            stated = [t for t in (rel.valid_from, other.valid_from) if t is not None]
            update = {
                "confidence": max(rel.confidence, other.confidence),
                "source_episode_ids": union_ids(rel.source_episode_ids, other.source_episode_ids),
                "valid_from": min(stated, default=None),
            }
            reopened = (
                rel.valid_until is not None and other.valid_from is not None and other.valid_from >= rel.valid_until
            )
            if reopened:  # stated again after another edge replaced it: current again, from now
                update |= {"valid_from": other.valid_from, "valid_until": None, "superseded_by": None}
            new = rel.model_copy(update=update)
            triple = triple_key(rel.source_id, rel.type, rel.target_id, rel.type in SYMMETRIC_TYPES)
            if new == rel or self.store.save_rel(new, triple, expect=raw, old=rel, old_triple=triple).status == "ok":
                if reopened:
                    self._supersede_edges(new)
                return True
        return False
