"""The search's latency cuts keep its answers (issue 14 item 8): the turn index's vector search runs on
the query embedding's thread, and only the episode hits a search returns have their records parsed.

Through ``GET /api/memory/search`` with the real embedder and Redis."""

from __future__ import annotations

import json
from typing import Any

from fastapi.testclient import TestClient

from agtos.memory import recall
from agtos.schemas import Episode
from tests.helpers import user
from tests.test_bitemporal import JAN_8_2024, MAR_15_2024, session

WHO = "noor"


def search(client: TestClient, q: str, limit: int = 10) -> list[dict[str, Any]]:
    response = client.get("/api/memory/search", params={"q": q, "limit": limit}, headers=user(WHO))
    assert response.status_code == 200, response.text
    return response.json()["results"]


def test_a_turn_found_by_meaning_alone_is_found_right_after_it_was_saved(client: TestClient) -> None:
    """The vector search that runs on the embedding's thread reads the mirror as the search's version
    check left it: a session saved after the mirror was loaded is found, by its meaning alone (no
    word of the question is in it), in the next search. (A vector search started before the check,
    or on another namespace's mirror, misses it.)"""
    session(client, WHO, "s-tax", JAN_8_2024, "I filed my tax return on paper this year.")
    question = "Which animal lives with them?"
    assert all("retriever" not in h["summary"] for h in search(client, question))  # mirrors loaded
    session(client, WHO, "s-dog", MAR_15_2024, "My golden retriever chews every shoe in the house.")

    hits = search(client, question)

    assert hits[0]["sessionId"] == "s-dog"
    assert hits[0]["matchType"] == "semantic"
    assert [h["text"] for h in hits[0]["highlights"]][:1] == ["My golden retriever chews every shoe in the house."]


def test_the_recency_rerank_weighs_every_hit_found_not_only_those_returned(client: TestClient) -> None:
    """The hits past ``limit`` are not parsed, but their timestamps still count in the recency re-rank: a
    question about the present puts the newer of two near-tied sessions first whatever the limit (a
    re-rank of the returned hits alone leaves the older, slightly better matching one first at limit 1)."""
    said = "We hike the ridge trail every weekend."  # the better match: fused first, before the re-rank
    session(client, WHO, "s-old", JAN_8_2024, said, "My boots are worn out.")
    session(client, WHO, "s-new", MAR_15_2024, said[:-1] + " with the dog, rain or shine.", "My boots are worn out.")
    question = "Where do we hike these days?"

    firsts = [search(client, question, limit)[0]["sessionId"] for limit in (1, 2, 10)]

    assert firsts == ["s-new", "s-new", "s-new"]


def test_an_episode_timestamp_is_read_off_its_key_not_off_its_text() -> None:
    """The recency re-rank reads each hit's timestamp without parsing its record: a summary that
    quotes a timestamp (escaped in the JSON) is not taken for the key, in whichever order the keys
    come; a record without the key is parsed (its default: now)."""
    episode = Episode(
        id="ep-1",
        user_id="u",
        summary='He pasted {"timestamp": 5, "x": 1} and "timestamp":7} into the chat',
        timestamp=1_704_700_980_000,
        facts=['"timestamp": 9'],
    )
    dumped = episode.model_dump_json()
    reordered = json.dumps({"timestamp": 1_704_700_980_000} | json.loads(dumped), indent=2)

    assert recall._timestamp(dumped) == 1_704_700_980_000
    assert recall._timestamp(reordered) == 1_704_700_980_000
    assert recall._timestamp(dumped.replace(',"timestamp":1704700980000', "")) >= 1_764_892_800_000  # 2025-12-05


def test_get_linked_runs_this_versions_script_even_after_another_one_ran(redis_url: str, key_prefix: str) -> None:
    """A store whose script slot holds another version's script (a benchmark comparing two trees in one
    process shares the store) registers this version's script again: it reads the linked records."""
    from agtos.storage.redis_conn import RedisConnector
    from tests.test_read_round_trips import linked_store

    connector = RedisConnector(redis_url, None, 5.0)
    try:
        store = linked_store(connector, key_prefix)
        store._linked = connector.run(lambda r: r.register_script("return {}"))  # the slot itself

        got = store.get_linked("alice", ["m-c"], "superseded_by")

        assert list(got) == ["m-c", "m-d"]
    finally:
        connector.close()


def test_the_turn_doc_id_memo_stays_within_its_bound() -> None:
    """The per-process memo of parsed turn doc ids is bounded (65,536 entries), whatever the ids seen."""
    from agtos.storage import turns

    turns._PLACES.clear()  # the memo itself, from empty
    for n in range(65_536):
        assert turns.parse_turn_doc_id(f"ep-bound.t{n}") == ("ep-bound", n)
    assert len(turns._PLACES) == 65_536
    assert turns.parse_turn_doc_id("ep-bound.t65536") == ("ep-bound", 65_536)
    assert len(turns._PLACES) <= 65_536
