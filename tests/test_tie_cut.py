"""Where a page's cut falls inside a run of equal scores (issue 14, 55ccaf1): the page is filled from the whole
run ordered by what its hits say (the later said first), never by record id, whether the run starts at the
page's first place or after a better hit. Store level (``SemanticStore.search``, keyword mode, real Redis),
record ids chosen so that the id order is the wrong one: "ep-a" (said at 1,000 ms) sorts before "ep-b" (2,000).
"""

from __future__ import annotations

import json

from agtos.memory.coordinator import MemoryCoordinator

#: two texts of one length whose only query word is "garden": one BM25 score
TIED = {"ep-a": ("we planted the garden today", 1_000), "ep-b": ("we watered the garden today", 2_000)}


def stored(coordinator: MemoryCoordinator, user_id: str, extra: dict[str, tuple[str, int]]) -> None:
    store = coordinator.semantic.store("episode")
    for doc_id, (text, said_at) in {**TIED, **extra}.items():
        store.upsert(user_id, doc_id, text, None, json.dumps({"id": doc_id, "summary": text, "timestamp": said_at}))


def test_a_tie_at_the_first_place_of_a_page_of_one_gives_the_later_said(coordinator: MemoryCoordinator) -> None:
    stored(coordinator, "tina", {})
    hits = coordinator.semantic.store("episode").search("tina", "garden", None, "bm25", limit=1)
    assert [h.id for h in hits] == ["ep-b"]


def test_a_tie_after_a_better_hit_fills_the_page_with_the_later_said(coordinator: MemoryCoordinator) -> None:
    """ "garden" alone is the better hit (a shorter text); the tie behind it has one place left."""
    stored(coordinator, "toby", {"ep-z": ("garden", 500)})
    hits = coordinator.semantic.store("episode").search("toby", "garden", None, "bm25", limit=2)
    assert [h.id for h in hits] == ["ep-z", "ep-b"]
    assert hits[0].score > hits[1].score


def test_a_tie_read_past_the_cut_forgets_only_its_gone_hits(coordinator: MemoryCoordinator) -> None:
    """Reading the rest of a tie keeps the index honest: the tied hits whose record is gone (expired), one in the
    first page and one past the cut, are dropped from the index; the live ones past the page stay in it. Five tied
    texts; "ep-a" (first by id) and "ep-e" (said last) expired: a page of two is "ep-d", "ep-c", the latest live ones
    (a page of two: its BM25 pool, 4 x the page, holds all five)."""
    more = {"ep-c": ("we weeded the garden today", 3_000), "ep-d": ("we mowed the garden today", 4_000)}
    stored(coordinator, "tess", {**more, "ep-e": ("we fenced the garden today", 5_000)})
    store = coordinator.semantic.store("episode")
    for gone in ("ep-a", "ep-e"):
        store.connector.run(lambda r, doc=gone: r.delete(store._record_key("tess", doc)))  # expired, still indexed

    assert [h.id for h in store.search("tess", "garden", None, "bm25", limit=2)] == ["ep-d", "ep-c"]

    assert sorted(doc for doc, _ in store.keyword_candidates("tess", "garden", 10)) == ["ep-b", "ep-c", "ep-d"]
    assert [h.id for h in store.search("tess", "garden", None, "bm25", limit=5)] == ["ep-d", "ep-c", "ep-b"]
