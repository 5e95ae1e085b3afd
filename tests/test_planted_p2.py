"""Issue 20 (helper p2): tests for the realistic bugs planted in the code landed after fb5984c that the suite
did not catch (docs/testing.md, "Planted bugs in the code landed after fb5984c (issue 14 dates, issue 15
opt-out race)"). Each test's docstring names the bug it fails on. Expected dates are worked out by hand from
the turn's day (Monday 8 May 2023, 14:30 UTC); expected storage states are literals of the README's contract.
"""

from __future__ import annotations

from typing import Any

import pytest
import redis
from fastapi.testclient import TestClient

from agtos.config import Settings
from agtos.memory.coordinator import MemoryCoordinator
from agtos.memory.episodic import session_episode_id
from agtos.providers.embeddings import EmbeddingError
from agtos.schemas import IngestItem
from agtos.tasks.dates import resolve_dates
from tests.helpers import user
from tests.test_dates_h14 import MAY_8
from tests.test_issue15_h15b import OPTED_OUT, dated, opting_out_before_the_writes, user_values
from tests.test_pending_vectors import swap_embedder


def dates(text: str, at: int = MAY_8) -> list[tuple[str, str, str]]:
    return [(d.text, d.date, d.period) for d in resolve_dates(text, at)]


def test_enjoy_a_weekday_said_on_it_is_that_day() -> None:
    """ "Enjoy a lovely Monday!" said on Monday 8 May 2023 wishes that very Monday. Fails where the wish's
    "enjoy" is dropped from the cues of a weekday of one's own (only "have a ..." read): the weekday is
    left undated."""
    assert dates("Enjoy a lovely Monday!") == [("Monday", "2023-05-08", "day")]


def test_a_present_perfect_shares_its_have_with_lived_after_an_and() -> None:
    """ "I have worked in Ohio and lived there for 5 years": "have" before the "and" makes "lived there for 5
    years" a present perfect too, lasting up to 8 May 2023, so it began five years before (2018). Fails where
    "lived" is missing from the participles that may share a "have" (the span left undated, as a past
    simple would be)."""
    assert dates("I have worked in Ohio and lived there for 5 years") == [("for 5 years", "2018-05-08", "year")]


def test_that_has_in_a_past_clause_is_no_future() -> None:
    """ "I wrote a book that has 300 pages in 3 months": the clause is past (wrote), so "in 3 months" is how
    long it took, not a date. Fails where "has" after "that" is read as a present verb of a thing to come
    (as "a job that starts in two weeks"): dated 8 August 2023."""
    assert dates("I wrote a book that has 300 pages in 3 months") == []


def test_we_with_a_past_written_as_its_present_is_past() -> None:
    """ "We read the whole series in 3 days": "read" after "we" is a past, so no date. Fails where "we" is
    missing from the subjects a past written as its present follows (dated 11 May 2023)."""
    assert dates("We read the whole series in 3 days") == []


def test_a_user_refused_while_the_embedder_is_down_gets_no_pending_vector_note(
    coordinator: MemoryCoordinator, settings: Settings, raw_redis: redis.Redis, key_prefix: str
) -> None:
    """One batch while the embedder is down: vic's grown session, wes's new one; vic opts out through another
    process after the ingestion's own check, before the index step writes. Nothing of vic's batch is written
    (README: an opted-out user keeps working memory only), so no key of vic's changes; wes's session is noted
    for the vector fill. Bug caught: ``run_ingestion`` keeping the refused user's memories in the list it notes
    as stored without vectors (a pending-vectors key written for vic, of a memory never stored)."""
    said = "My sister Ines lives in Porto, remember that."
    assert len(coordinator.ingest([IngestItem(user_id="vic", session_id="s1", turns=dated(said))]).episode_ids) == 1
    before = user_values(raw_redis, key_prefix, "vic")
    switch, other = swap_embedder(coordinator), MemoryCoordinator(settings)

    def opt_out_then_fail(texts: list[str]) -> Any:
        other.privacy.set_opt_out("vic", True)
        raise EmbeddingError("test embedder is down")

    switch.embed = opt_out_then_fail  # type: ignore[method-assign]
    grown = dated(said) + dated("Remember that my brother Tiago is a dentist in Braga.", 2)
    batch = [
        IngestItem(user_id="vic", session_id="s1", turns=grown),
        IngestItem(user_id="wes", session_id="w1", turns=dated("I am learning to play the cello every evening.")),
    ]
    try:
        report = coordinator.ingest(batch)
    finally:
        other.close()
    assert report.skipped == [{"sessionId": "s1", "reason": OPTED_OUT}]
    assert report.episode_ids == [session_episode_id("wes", "w1")]
    assert user_values(raw_redis, key_prefix, "vic") == before
    assert list(raw_redis.scan_iter(match=f"{key_prefix}:u:{{wes}}:*pending*")) != []


def test_a_back_fill_refusing_one_user_still_builds_the_others_entity_graph(
    client: TestClient, coordinator: MemoryCoordinator, settings: Settings, monkeypatch: pytest.MonkeyPatch
) -> None:
    """One batch: vic's session, then wes's; vic opts out before the index step writes. Wes's session is
    stored and its people and places go into wes's entity wiki, with no degraded note. Bug caught:
    ``run_ingestion`` not dropping the refused user's entity mentions (one list longer than the stored
    episodes: the entity step fails, "entity graph not updated", and wes gets no entities)."""
    batch = [
        IngestItem(user_id="vic", session_id="s1", turns=dated("My sister Ines lives in Porto, remember that.")),
        IngestItem(user_id="wes", session_id="w1", turns=dated("My friend Tiago Silva moved to Lisbon last year.")),
    ]
    with opting_out_before_the_writes(monkeypatch, settings, "vic"):
        report = coordinator.ingest(batch)
    assert report.skipped == [{"sessionId": "s1", "reason": OPTED_OUT}]
    assert report.degraded is None
    found = client.get("/api/entities", params={"limit": 100}, headers=user("wes")).json()["entities"]
    assert {"Tiago Silva", "Lisbon"} <= {e["name"] for e in found}, found
