"""Entity memory: the people, places, organisations, events and things the user talks about.

Ingestion runs NER over each stored episode (summary + facts), and every recognised entity is
merged into an existing one when (a) its normalised name, else one of its aliases, equals the
entity's name or an alias ("Acme Corp" and "Acme" are both "acme"; "Omar Haddad", also called
"Omar", joins Omar), or (b) the embedding of its name is at least
``similarity_threshold`` (0.85) cosine-similar to an existing entity's name of the same type
(entity-name vectors live in the per-user vector index namespace ``entity``). Otherwise a new
entity is created. Typed relationships between the entities of an episode are merged per
(source, type, target). Loading, compare-and-set writes, name vectors and edges are
:class:`agtos.memory.entity_graph.EntityGraph`'s; reads (lists, search, views) live in
:mod:`agtos.memory.entity_views`.
"""

from __future__ import annotations

import logging
from collections.abc import Sequence
from contextlib import AbstractContextManager
from dataclasses import dataclass
from typing import Any

import numpy as np

from agtos.memory.entity_graph import WRITE_RETRIES, EntityConflict, EntityGraph, EntityInvalid
from agtos.memory.memory_versions import WRITERS
from agtos.memory.semantic import SemanticMemory
from agtos.providers.llm import LLMProvider
from agtos.schemas import Entity, EntityType, Episode, Relationship
from agtos.schemas.api.request_bodies import MERGED_INTO_ITSELF
from agtos.storage.entity_store import triple_key
from agtos.storage.keys import GlobalKeys
from agtos.storage.redis_conn import RedisConnector
from agtos.storage.user_lock import UserLock
from agtos.tasks.entity_records import (
    MAX_NAME_CHARS,
    entity_text,
    merge_aliases,
    name_keys,
    surface_keys,
    union_ids,
)
from agtos.tasks.mentions import EntityCandidate, EntityRecognizer, Mention, collect_entities, normalise_entity_name
from agtos.tasks.relation_types import SYMMETRIC_TYPES
from agtos.tasks.relations import build_relation_extractor

log = logging.getLogger(__name__)

SIMILARITY_THRESHOLD = 0.85
ENTITIES = "entities"  # the name of the user's entity writers' lock (key <prefix>:u:{<user>}:writers:entities)


@dataclass
class EntityIngestReport:
    entities: int = 0
    created: int = 0
    relationships: int = 0


@dataclass(frozen=True)
class MergeReport:
    survivor: Entity
    duplicate_id: str
    moved: int
    merged: int
    dropped: int


class EntityMemory(EntityGraph):
    """Entity graph writes: ingestion with dedup, edits, soft delete and merges."""

    def __init__(
        self,
        connector: RedisConnector,
        keys: GlobalKeys,
        semantic: SemanticMemory,
        llm: LLMProvider | None = None,
        similarity_threshold: float = SIMILARITY_THRESHOLD,
        request_wait_s: float | None = None,
    ) -> None:
        super().__init__(connector, keys, semantic)
        self.writers = UserLock(connector, keys, WRITERS)
        self.extractor = build_relation_extractor(llm)
        self.similarity_threshold = similarity_threshold
        # an edit's (PUT's) bound on a remote embedder for a new name (AGTOS_EMBEDDING_REQUEST_TIMEOUT_S, as
        # a memory's PUT): then the name is written without its vector, which the repair sweep fills
        self.request_wait_s = request_wait_s

    # -- ingestion --------------------------------------------------------------------
    def ingest(
        self,
        episodes: Sequence[Episode],
        found: Sequence[Sequence[Mention]] | EntityRecognizer,
        wait_s: float | None = None,
    ) -> EntityIngestReport:
        """Upsert the entities and relationships mentioned in each episode.

        ``found`` is each episode's mentions (from the ingestion NER step), or a recognizer to run;
        ``wait_s``: a request's bound on a remote embedder for the new names' vectors.
        """
        report = EntityIngestReport()
        texts = [entity_text(e) for e in episodes]
        if hasattr(found, "recognize_many"):
            found = found.recognize_many(texts)
        candidates = [[c for c in collect_entities(mentions) if len(c.name) <= MAX_NAME_CHARS] for mentions in found]
        relations = [  # before taking the lock: an LLM extractor may take a while
            self.extractor.extract(text, mentions) if len(cands) > 1 else []
            for text, mentions, cands in zip(texts, found, candidates, strict=True)
        ]
        vectors = self._new_name_vectors(episodes, candidates, wait_s)
        self.vector_index()  # made before the locks (a first use may load or probe the embedder)
        for episode, cands, extracted in zip(episodes, candidates, relations, strict=True):
            with self.held(episode.user_id), self._lock:
                self._ingest_one(episode, cands, extracted, vectors, report)
        return report

    def held(self, user_id: str) -> AbstractContextManager[None]:
        """The user's entity writers' lock (across processes): an episode's ingestion writes and an
        episode's forget (:func:`agtos.memory.episode_cascade.forget_entities_of`) read and write under it,
        so the forget does not delete an entity, or an edge, another episode was just added to. Taken
        before ``_lock``, never while holding it; not re-entrant."""
        return self.writers.held(user_id, ENTITIES)

    def _ingest_one(
        self,
        episode: Episode,
        cands: list[EntityCandidate],
        extracted: Sequence[Any],
        vectors: dict[str, np.ndarray],
        report: EntityIngestReport,
    ) -> None:
        """One episode's entities and relationships into the graph (counted in ``report``)."""
        ids: dict[str, str] = {}
        for cand in cands:
            entity_id, created = self.observe(episode, cand, vectors.get(cand.name))
            if entity_id is not None:
                ids[cand.key] = entity_id
                report.entities += 1
                report.created += created
        for rel in extracted:
            src = ids.get(normalise_entity_name(rel.source))
            tgt = ids.get(normalise_entity_name(rel.target))
            if src and tgt and src != tgt:
                self.relate(episode.user_id, src, tgt, rel.type, rel.confidence, episode.id, episode.timestamp)
                report.relationships += 1

    def _new_name_vectors(
        self, episodes: Sequence[Episode], candidates: Sequence[list[EntityCandidate]], wait_s: float | None = None
    ) -> dict[str, np.ndarray]:
        """Vectors for the candidate names no alias resolves (one call for the batch)."""
        by_user: dict[str, list[EntityCandidate]] = {}
        for episode, cands in zip(episodes, candidates, strict=True):
            by_user.setdefault(episode.user_id, []).extend(cands)
        names: list[str] = []
        for user_id, cands in by_user.items():
            known = self.store.owners(user_id, list(dict.fromkeys(c.key for c in cands)))
            names += [c.name for c in cands if c.key not in known]
        return self.embed_names(names, wait_s)

    def observe(self, episode: Episode, cand: EntityCandidate, vector: np.ndarray | None) -> tuple[str | None, bool]:
        """Merge one mention into its entity (or create it): ``(entity id, created)``.

        Its entity is the owner of the candidate's name key, else the owner of the first alias key
        that has one ("Omar Haddad", also called "Omar", joins the existing Omar), else the most
        similar name. A name or alias that another entity owns stays with that entity."""
        user_id, ts = episode.user_id, episode.timestamp
        surfaces = [cand.name, *cand.aliases]
        keys = list(dict.fromkeys(k for k in [cand.key, *(k for s in surfaces for k in surface_keys(s))] if k))
        for _ in range(WRITE_RETRIES):
            owners = self.store.owners(user_id, keys)
            loaded = (self.load(user_id, owners[k]) for k in keys if k in owners)
            target = next((t for t in loaded if t is not None), None)
            if target is None and vector is not None:
                target = self._similar(user_id, cand.type, vector)
            if target is None:
                entity = Entity(
                    user_id=user_id,
                    name=cand.name,
                    type=cand.type,
                    aliases=merge_aliases(cand.name, [], cand.aliases),
                    confidence=cand.confidence,
                    first_seen=ts,
                    last_seen=ts,
                    episode_ids=[episode.id],
                )
                if self.store.save_entity(entity, name_keys(entity), expect="").status == "ok":
                    self._checked_vector(user_id, entity, vector)  # another process may rename it at once
                    return entity.id, True
                continue  # another writer claimed one of its names meanwhile: merge into theirs
            old, raw = target
            mine = [s for s in surfaces if all(owners.get(k, old.id) == old.id for k in surface_keys(s))]
            new = old.model_copy(
                update={
                    "aliases": merge_aliases(old.name, old.aliases, mine),
                    "confidence": max(old.confidence, cand.confidence),
                    "first_seen": min(old.first_seen, ts),
                    "last_seen": max(old.last_seen, ts),
                    "episode_ids": union_ids(old.episode_ids, [episode.id]),
                }
            )
            if new == old or self._write(new, raw, old).status == "ok":
                return old.id, False
        log.warning(
            "entity %r of user %s not stored: its entity or names were changed by other writers %d times in a row",
            cand.name,
            user_id,
            WRITE_RETRIES,
        )
        return None, False

    def _similar(self, user_id: str, etype: EntityType, vector: np.ndarray) -> tuple[Entity, str] | None:
        """The most similar live entity of the same type at or above the threshold."""
        index = self.vector_index()
        if index is None:
            return None
        for entity_id, _ in index.search(user_id, vector, 5, self.similarity_threshold):
            loaded = self.load(user_id, entity_id)
            if loaded is not None and loaded[0].type == etype:
                return loaded
        return None

    # -- edits ------------------------------------------------------------------------
    def update(self, user_id: str, entity_id: str, changes: dict[str, Any]) -> Entity:
        """Edit name/type/aliases/confidence. A rename keeps the old name as an alias unless
        ``aliases`` is given too. Raises EntityNotFound, EntityInvalid or EntityConflict.

        A new name is embedded before the lock is taken (the request names it): the embedding call,
        slow when the embedder is, does not hold up the process's other entity writers, and waits on a
        remote embedder at most ``request_wait_s`` (then, as when the embedder is down, the name is
        written and its vector waits for the repair sweep). The vector written is checked against the
        name stored after it (:meth:`_checked_vector`: another process may rename it at once) (issue 15)."""
        old, _ = self.require(user_id, entity_id)
        name = self._edited(old, changes).name  # checked (EntityInvalid) before anything is embedded
        vectors = self.embed_names([name], self.request_wait_s) if name != old.name else {}
        self.vector_index()  # made (a first use may load or probe the embedder) before the lock
        with self._lock:
            for _ in range(WRITE_RETRIES):
                old, raw = self.require(user_id, entity_id)
                new = self._edited(old, changes)
                if new == old:
                    return old
                result = self._write(new, raw, old)
                if result.status == "taken":
                    raise EntityConflict(
                        f"a name or alias of this edit belongs to entity {result.owner!r}; merge them instead",
                        result.owner,
                    )
                if result.status == "ok":
                    if new.name != old.name:  # none when renamed meanwhile from the name asked: repaired later
                        self._checked_vector(user_id, new, vectors.get(new.name))
                    return new
        raise EntityInvalid("entity changed concurrently too often; try again")

    @staticmethod
    def _edited(old: Entity, changes: dict[str, Any]) -> Entity:
        name = " ".join(str(changes.get("name") or old.name).split())
        if not normalise_entity_name(name):
            raise EntityInvalid("name must contain letters or digits")
        if changes.get("aliases") is not None:
            aliases = [str(a) for a in changes["aliases"]]
            bad = [a for a in aliases if not normalise_entity_name(a)]
            if bad:
                raise EntityInvalid(f"aliases must contain letters or digits: {bad[:3]}")
            aliases = merge_aliases(name, [], aliases)
        else:
            aliases = merge_aliases(name, old.aliases, [old.name])
        update: dict[str, Any] = {"name": name, "aliases": aliases}
        if changes.get("type") is not None:
            update["type"] = EntityType(changes["type"])
        if changes.get("confidence") is not None:
            update["confidence"] = float(changes["confidence"])
        return Entity.model_validate({**old.model_dump(), **update})

    def delete(self, user_id: str, entity_id: str) -> Entity:
        """Soft delete: ``deleted=true``, dropped from every index and from dedup lookups."""
        self.vector_index()  # made before the lock (a first use may load or probe the embedder)
        with self._lock:
            for _ in range(WRITE_RETRIES):
                old, raw = self.require(user_id, entity_id)
                new = old.model_copy(update={"deleted": True})
                if self._write(new, raw, old).status == "ok":
                    self._drop_vector(user_id, entity_id)
                    return new
        raise EntityInvalid("entity changed concurrently too often; try again")

    def forget(self, user_id: str, entity_id: str) -> bool:
        """Privacy hard delete: the record (even if soft-deleted), its edges, index entries and vector.
        Under the entity writers' lock: an ingestion relating another entity to it after its edges were
        read wrote an edge naming the forgotten entity."""
        self.vector_index()  # made before the locks (a first use may load or probe the embedder)
        with self.held(user_id):
            return self.forget_holding(user_id, entity_id)

    def forget_holding(self, user_id: str, entity_id: str) -> bool:
        """:meth:`forget` for a caller that holds :meth:`held` (an episode's forget)."""
        self.vector_index()  # made before the process's lock (a first use may load or probe the embedder)
        with self._lock:
            raw = self.store.get_raw(user_id, entity_id)
            if raw is None:
                return False
            entity = Entity.model_validate_json(raw)
            out_ids, in_ids = self.store.edge_ids(user_id, entity_id)
            for rel in self.store.rels(user_id, [*out_ids, *in_ids]).values():
                sym = rel.type in SYMMETRIC_TYPES
                self.store.delete_rel(rel, triple_key(rel.source_id, rel.type, rel.target_id, sym))
            self.store.delete_entity(entity, name_keys(entity))
            self._drop_vector(user_id, entity_id)
        return True

    def drop_episode(self, user_id: str, entity_id: str, episode_id: str) -> int:
        """A forgotten episode leaves the entity (others still mention it): it no longer names the
        episode, its edges stated only there are deleted and its other edges no longer name it;
        returns how many edges were deleted."""
        with self._lock:
            for _ in range(WRITE_RETRIES):
                raw = self.store.get_raw(user_id, entity_id)
                if raw is None:
                    return 0
                old = Entity.model_validate_json(raw)
                new = old.model_copy(update={"episode_ids": [e for e in old.episode_ids if e != episode_id]})
                keys = name_keys(new)
                if self.store.save_entity(new, keys, expect=raw, old=old, old_keys=keys, force=True).status == "ok":
                    break
            out_ids, in_ids = self.store.edge_ids(user_id, entity_id)
            stated_there = [
                rel
                for rel in self.store.rels(user_id, [*out_ids, *in_ids]).values()
                if rel.source_episode_ids == [episode_id]
            ]
            for rel in stated_there:
                sym = rel.type in SYMMETRIC_TYPES
                self.store.delete_rel(rel, triple_key(rel.source_id, rel.type, rel.target_id, sym))
            for rel_id in [*out_ids, *in_ids]:
                self._unname_rel(user_id, rel_id, episode_id)
        return len(stated_there)

    def _unname_rel(self, user_id: str, rel_id: str, episode_id: str) -> None:
        """Drop ``episode_id`` from the sources of an edge other episodes state too (compare-and-set)."""
        for _ in range(WRITE_RETRIES):
            raw = self.store.rel_raw(user_id, rel_id)
            if raw is None:
                return
            rel = Relationship.model_validate_json(raw)
            rest = [e for e in rel.source_episode_ids if e != episode_id]
            if not rest or rest == rel.source_episode_ids:
                return
            triple = triple_key(rel.source_id, rel.type, rel.target_id, rel.type in SYMMETRIC_TYPES)
            new = rel.model_copy(update={"source_episode_ids": rest})
            if self.store.save_rel(new, triple, expect=raw, old=rel, old_triple=triple).status == "ok":
                return

    def merge(self, user_id: str, survivor_id: str, duplicate_id: str) -> MergeReport:
        """Fold ``duplicate_id`` into ``survivor_id``: aliases, episodes and edges move over
        (re-pointed; self-loops dropped; same triples merged), then the duplicate is removed.
        Under the entity writers' lock: an ingestion relating the duplicate after its edges were moved
        wrote an edge to the deleted duplicate (lost), and an episode's forget that had read both before
        the merge left that episode on the survivor."""
        if survivor_id == duplicate_id:
            raise EntityInvalid(MERGED_INTO_ITSELF)
        self.vector_index()  # made before the locks (a first use may load or probe the embedder)
        with self.held(user_id), self._lock:
            self.require(user_id, survivor_id)
            dup, _ = self.require(user_id, duplicate_id)
            moved, merged, dropped = self._move_edges(user_id, dup.id, survivor_id)
            for _ in range(WRITE_RETRIES):
                old, raw = self.require(user_id, survivor_id)
                new = old.model_copy(
                    update={
                        "aliases": merge_aliases(old.name, old.aliases, [dup.name, *dup.aliases]),
                        "confidence": max(old.confidence, dup.confidence),
                        "first_seen": min(old.first_seen, dup.first_seen),
                        "last_seen": max(old.last_seen, dup.last_seen),
                        "episode_ids": union_ids(old.episode_ids, dup.episode_ids),
                    }
                )
                if self._write(new, raw, old, force=True).status == "ok":
                    break
            else:
                raise EntityInvalid("entity changed concurrently too often; try again")
            self.store.delete_entity(dup, name_keys(dup))
            self._drop_vector(user_id, dup.id)
        return MergeReport(new, dup.id, moved, merged, dropped)

    def _move_edges(self, user_id: str, dup_id: str, survivor_id: str) -> tuple[int, int, int]:
        """Re-point the duplicate's edges to the survivor: (moved, merged, dropped)."""
        moved = merged = dropped = 0
        out_ids, in_ids = self.store.edge_ids(user_id, dup_id)
        for rel in self.store.rels(user_id, [*out_ids, *in_ids]).values():
            sym = rel.type in SYMMETRIC_TYPES
            old_triple = triple_key(rel.source_id, rel.type, rel.target_id, sym)
            src = survivor_id if rel.source_id == dup_id else rel.source_id
            tgt = survivor_id if rel.target_id == dup_id else rel.target_id
            if src == tgt:
                self.store.delete_rel(rel, old_triple)
                dropped += 1
                continue
            new_triple = triple_key(src, rel.type, tgt, sym)
            owner = self.store.triple_owner(user_id, new_triple)
            if owner and owner != rel.id and self.absorb_rel(user_id, owner, rel):
                self.store.delete_rel(rel, old_triple)
                merged += 1
                continue
            new = rel.model_copy(update={"source_id": src, "target_id": tgt})
            self.store.save_rel(new, new_triple, old=rel, old_triple=old_triple, force=True)
            moved += 1
        return moved, merged, dropped
