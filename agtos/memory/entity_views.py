"""Entity reads for the API: list and name search, stats, and an entity's episodes,
conclusions and relationships."""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any

from agtos.memory.entity_memory import EntityMemory
from agtos.schemas import Entity, Episode
from agtos.storage.record_reads import RecordReads
from agtos.tasks.entity_records import name_keys
from agtos.tasks.mentions import legacy_entity_key, normalise_entity_name
from agtos.tasks.text import name_words


def text_tokens(text: str) -> str:
    """Text tokenised like :func:`normalise_entity_name` (space-padded, for phrase lookups)."""
    return f" {' '.join(name_words(text))} "


def mentions_entity(text: str, entity: Entity) -> bool:
    """True when ``text`` names the entity or one of its aliases (as whole words)."""
    padded = text_tokens(text)
    return any(f" {key} " in padded for key in name_keys(entity, legacy=False))


@dataclass(frozen=True)
class EntityPage:
    entities: list[Entity]
    total: int
    offset: int
    next_offset: int | None


class EntityViews:
    """Read side of :class:`EntityMemory`."""

    def __init__(self, memory: EntityMemory) -> None:
        self.memory = memory
        self.store = memory.store
        self.reads = RecordReads(memory.connector, memory.keys)

    def get(self, user_id: str, entity_id: str) -> Entity:
        return self.memory.require(user_id, entity_id)[0]

    def page(
        self, user_id: str, q: str | None = None, etype: str | None = None, limit: int = 20, offset: int = 0
    ) -> EntityPage:
        """Live entities: name matches (exact, prefix, substring) for ``q``, else most recent first."""
        if q is not None and q.strip():
            keys = dict.fromkeys(k for k in (normalise_entity_name(q), legacy_entity_key(q)) if k)
            found_ids = [i for k in keys for i in self.store.name_matches(user_id, k)]
            ids = self.store.live_filter(user_id, list(dict.fromkeys(found_ids)), etype)
            total, page_ids = len(ids), ids[offset : offset + limit]
        else:
            page_ids, total = self.store.page(user_id, etype, offset, limit)
        found = self.store.get_many(user_id, page_ids)
        entities = [found[i] for i in page_ids if i in found and not found[i].deleted]
        nxt = offset + limit if offset + limit < total else None
        return EntityPage(entities, total, offset, nxt)

    def counts(self, user_id: str) -> dict[str, int]:
        """Live entities by type."""
        return self.store.counts(user_id)

    def episodes(self, user_id: str, entity_id: str) -> list[Episode]:
        """The stored episodes that mention the entity, newest first (expired ones omitted)."""
        entity = self.get(user_id, entity_id)
        ids = entity.episode_ids
        if not ids:
            return []
        return sorted(self.reads.episodes(user_id, ids), key=lambda e: -e.timestamp)

    def conclusions(self, user_id: str, entity_id: str, limit: int = 20) -> list[dict[str, Any]]:
        """Conclusions whose text names the entity or an alias (BM25 over the names, then checked)."""
        entity = self.get(user_id, entity_id)
        store = self.memory.semantic.store("conclusion")
        query = " ".join([entity.name, *entity.aliases])
        hits = store.search(user_id, query, None, "bm25", limit * 4)
        raws = store.get_many(user_id, [h.id for h in hits])
        out: list[dict[str, Any]] = []
        for hit in hits:
            if hit.id not in raws:
                continue
            record = json.loads(raws[hit.id])
            if isinstance(record, dict) and mentions_entity(str(record.get("text", "")), entity):
                out.append(record)
        return out[:limit]

    def relationships(self, user_id: str, entity_id: str) -> list[dict[str, Any]]:
        """Edges in and out, each with the other entity (edges to deleted entities hidden)."""
        self.get(user_id, entity_id)
        out_ids, in_ids = self.store.edge_ids(user_id, entity_id)
        rels = self.store.rels(user_id, [*out_ids, *in_ids])
        other_ids = {r.target_id if r.source_id == entity_id else r.source_id for r in rels.values()}
        others = self.store.get_many(user_id, other_ids)
        items: list[dict[str, Any]] = []
        for rel in rels.values():
            outgoing = rel.source_id == entity_id
            other = others.get(rel.target_id if outgoing else rel.source_id)
            if other is None or other.deleted:
                continue
            items.append(
                {
                    "id": rel.id,
                    "type": rel.type,
                    "direction": "out" if outgoing else "in",
                    "confidence": rel.confidence,
                    "sourceEpisodeIds": rel.source_episode_ids,
                    "other": {"id": other.id, "name": other.name, "type": other.type},
                    "validFrom": rel.valid_from,
                    "validUntil": rel.valid_until,
                    "supersededBy": rel.superseded_by,
                }
            )
        return sorted(items, key=lambda i: (i["direction"] == "in", i["type"], i["other"]["name"]))
