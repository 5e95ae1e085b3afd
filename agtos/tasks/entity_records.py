"""Entity record rules (pure): the text NER reads, the lookup keys, and how aliases and episode ids merge."""

from __future__ import annotations

from collections.abc import Sequence

from agtos.schemas import Entity, Episode
from agtos.tasks.mentions import legacy_entity_key, normalise_entity_name

MAX_ALIASES = 200
MAX_NAME_CHARS = 256
MAX_EPISODE_IDS = 1_000


def entity_text(episode: Episode) -> str:
    """The text NER reads: the summary and the facts (the turns are not kept)."""
    return "\n".join(p for p in [episode.summary, *episode.facts] if p)


def surface_keys(name: str) -> list[str]:
    """The keys a name is indexed and looked up by: its key and, where it differs, the key an entity index
    stored before names kept their marks ("Łukasz": "łukasz", "ukasz"), so that entity keeps its names."""
    return list(dict.fromkeys(k for k in (normalise_entity_name(name), legacy_entity_key(name)) if k))


def name_keys(entity: Entity, *, legacy: bool = True) -> list[str]:
    """The entity's lookup keys: of its name and aliases (:func:`surface_keys`; without ``legacy``, only
    their current keys, :func:`~agtos.tasks.mentions.normalise_entity_name`)."""
    names = [entity.name, *entity.aliases]
    if not legacy:
        return list(dict.fromkeys(k for k in map(normalise_entity_name, names) if k))
    return list(dict.fromkeys(k for n in names for k in surface_keys(n)))


def merge_aliases(name: str, aliases: Sequence[str], extra: Sequence[str]) -> list[str]:
    """``aliases`` plus new surfaces of ``extra``: case-insensitively distinct, never the name."""
    seen = {name.strip().casefold()}
    out: list[str] = []
    for alias in [*aliases, *extra]:
        alias = " ".join(alias.split())
        if alias and len(alias) <= MAX_NAME_CHARS and alias.casefold() not in seen and normalise_entity_name(alias):
            seen.add(alias.casefold())
            out.append(alias)
    return out[:MAX_ALIASES]


def union_ids(*groups: Sequence[str]) -> list[str]:
    """Ids in first-seen order, keeping the newest ``MAX_EPISODE_IDS``."""
    ids = list(dict.fromkeys(i for group in groups for i in group))
    return ids[-MAX_EPISODE_IDS:]
