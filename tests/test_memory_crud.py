"""Memory CRUD over HTTP (issue 17, item 1): write, list or search, read, edit and delete memories,
and their history; duplicates merge by the lint's near-duplicate rule; isolation, opt-out and
forget-all hold for memories and their histories."""

from __future__ import annotations

from typing import Any

import redis
from fastapi.testclient import TestClient

from tests.helpers import user, user_key_names

MEMORIES = "/api/memory/memories"


def post(client: TestClient, who: str, **body: Any) -> Any:
    return client.post(MEMORIES, json=body, headers=user(who))


def history(client: TestClient, who: str, memory_id: str) -> Any:
    return client.get(f"{MEMORIES}/{memory_id}/history", headers=user(who))


def test_round_trip_with_history(client: TestClient) -> None:
    created = post(client, "alice", text="User takes their coffee black", kind="preference")
    assert created.status_code == 201, created.text
    body = created.json()
    assert body["created"] is True and body["mergedInto"] is None
    memory_id = body["memory"]["id"]
    got = client.get(f"{MEMORIES}/{memory_id}", headers=user("alice")).json()
    assert (got["text"], got["kind"], got["validUntil"], got["current"]) == (
        "User takes their coffee black",
        "preference",
        None,
        True,
    )

    edited = client.put(
        f"{MEMORIES}/{memory_id}", json={"text": "User takes oat milk in coffee"}, headers=user("alice")
    )
    assert edited.status_code == 200, edited.text
    assert edited.json()["text"] == "User takes oat milk in coffee"
    # the edit is re-indexed: a keyword only the new text has finds it, in keyword and hybrid search
    for q in ("oat", "oat milk"):
        found = client.get(MEMORIES, params={"q": q}, headers=user("alice")).json()
        assert [m["id"] for m in found["memories"]] == [memory_id], q

    changes = history(client, "alice", memory_id).json()["changes"]
    assert [(c["origin"], c["action"], c["text"]) for c in changes] == [
        ("user", "created", "User takes their coffee black"),
        ("user", "edited", "User takes oat milk in coffee"),
    ]

    assert client.delete(f"{MEMORIES}/{memory_id}", headers=user("alice")).json() == {"deleted": memory_id}
    assert client.get(f"{MEMORIES}/{memory_id}", headers=user("alice")).status_code == 404
    assert client.delete(f"{MEMORIES}/{memory_id}", headers=user("alice")).status_code == 404
    assert client.get(MEMORIES, params={"q": "oat milk"}, headers=user("alice")).json()["memories"] == []
    listed = client.get(MEMORIES, headers=user("alice")).json()
    assert (listed["memories"], listed["total"]) == ([], 0)
    assert history(client, "alice", memory_id).status_code == 404  # its words are gone with it


def test_a_duplicate_post_merges_into_the_stored_memory(client: TestClient) -> None:
    first = post(client, "alice", text="User is allergic to peanuts", source="onboarding").json()["memory"]
    again = post(client, "alice", text="user is allergic to PEANUTS!", source="chat-7")  # Jaccard 1.0
    assert again.status_code == 200, again.text
    assert again.json()["created"] is False and again.json()["mergedInto"] == first["id"]
    assert again.json()["memory"]["text"] == "User is allergic to peanuts"
    assert again.json()["memory"]["sourceEpisodeIds"] == ["onboarding", "chat-7"]
    # 4 shared words of 6: below the lint's 0.85, a memory of its own
    other = post(client, "alice", text="User is allergic to shellfish")
    assert other.status_code == 201 and other.json()["memory"]["id"] != first["id"]
    assert client.get(MEMORIES, headers=user("alice")).json()["total"] == 2
    changes = history(client, "alice", first["id"]).json()["changes"]
    assert [(c["action"], c["text"]) for c in changes] == [
        ("created", "User is allergic to peanuts"),
        ("merged", "user is allergic to PEANUTS!"),
    ]


def test_a_near_duplicate_of_another_kind_is_a_memory_of_its_own(client: TestClient) -> None:
    """README: the lint's rule "merges current memories of one kind", and a POST folds by that rule: a
    preference whose words are a stored fact's (7 of 8 words, Jaccard 0.875 ≥ 0.85) is stored as a
    preference, not folded into the fact; of the same kind it folds; the very same words are one record."""
    fact = post(client, "alice", text="User flies with window seats on long flights", kind="fact").json()["memory"]
    liked = post(client, "alice", text="User flies with window seats on the long flights", kind="preference")
    assert liked.status_code == 201, liked.text
    assert liked.json()["mergedInto"] is None and liked.json()["memory"]["kind"] == "preference"
    again = post(client, "alice", text="User flies with window seats on all long flights", kind="fact")
    assert again.status_code == 200 and again.json()["mergedInto"] == fact["id"]
    same = post(client, "alice", text="user flies with window seats on long flights!", kind="preference")
    assert same.status_code == 200 and same.json()["mergedInto"] == fact["id"]
    kinds = client.get(MEMORIES, headers=user("alice")).json()["memories"]
    assert sorted(m["kind"] for m in kinds) == ["fact", "preference"]


def test_list_is_newest_first_paged_and_filtered_by_kind(client: TestClient) -> None:
    for text, kind, since in (
        ("User plays the cello", "fact", 1_600_000_000_000),
        ("User prefers window seats", "preference", 1_700_000_000_000),
        ("User has a dog called Pixel", "fact", 1_650_000_000_000),
    ):
        assert post(client, "alice", text=text, kind=kind, valid_from=since).status_code == 201
    page = client.get(MEMORIES, params={"limit": 2}, headers=user("alice")).json()
    assert [m["text"] for m in page["memories"]] == ["User prefers window seats", "User has a dog called Pixel"]
    assert (page["count"], page["total"]) == (2, 3)
    rest = client.get(MEMORIES, params={"limit": 2, "offset": 2}, headers=user("alice")).json()
    assert [m["text"] for m in rest["memories"]] == ["User plays the cello"]
    facts = client.get(MEMORIES, params={"kind": "fact"}, headers=user("alice")).json()
    assert [m["text"] for m in facts["memories"]] == ["User has a dog called Pixel", "User plays the cello"]
    assert facts["total"] == 2


def test_invalid_writes_are_422(client: TestClient) -> None:
    backwards = post(client, "alice", text="User lived in Rome", valid_from=2_000, valid_until=1_000)
    assert backwards.status_code == 422
    assert post(client, "alice", text="   ").status_code == 422
    assert post(client, "alice", text="x", kind="conclusion").status_code == 422
    mid = post(client, "alice", text="User rows on Sundays").json()["memory"]["id"]
    assert client.put(f"{MEMORIES}/{mid}", json={}, headers=user("alice")).status_code == 422
    assert client.put(f"{MEMORIES}/{mid}", json={"text": None}, headers=user("alice")).status_code == 422


def test_other_users_memories_are_404(client: TestClient) -> None:
    mid = post(client, "alice", text="User's locker code is 4411").json()["memory"]["id"]
    assert client.get(f"{MEMORIES}/{mid}", headers=user("bob")).status_code == 404
    assert client.put(f"{MEMORIES}/{mid}", json={"text": "hacked"}, headers=user("bob")).status_code == 404
    assert client.delete(f"{MEMORIES}/{mid}", headers=user("bob")).status_code == 404
    assert history(client, "bob", mid).status_code == 404
    assert client.get(MEMORIES, params={"q": "locker code"}, headers=user("bob")).json()["memories"] == []
    assert client.get(MEMORIES, headers=user("bob")).json()["total"] == 0
    # and alice's memory is untouched
    assert client.get(f"{MEMORIES}/{mid}", headers=user("alice")).json()["text"] == "User's locker code is 4411"


def test_opted_out_writes_are_403_and_nothing_is_stored(
    client: TestClient, raw_redis: redis.Redis, key_prefix: str
) -> None:
    assert client.put("/api/memory/privacy", json={"opt_out": True}, headers=user("olga")).status_code == 200
    refused = post(client, "olga", text="User lives in Oslo")
    assert refused.status_code == 403 and "opted out" in refused.json()["message"]
    assert client.put(f"{MEMORIES}/mem-1", json={"text": "x"}, headers=user("olga")).status_code == 403
    assert client.delete(f"{MEMORIES}/mem-1", headers=user("olga")).status_code == 403
    assert client.get(MEMORIES, headers=user("olga")).json()["memories"] == []
    assert user_key_names(raw_redis, key_prefix, "olga") == set()


def test_forget_all_clears_memories_and_their_history(
    client: TestClient, raw_redis: redis.Redis, key_prefix: str
) -> None:
    mid = post(client, "alice", text="User's bank is Millennium").json()["memory"]["id"]
    client.put(f"{MEMORIES}/{mid}", json={"text": "User's bank is Revolut"}, headers=user("alice"))
    assert len(history(client, "alice", mid).json()["changes"]) == 2
    assert client.post("/api/memory/forget", json={"kind": "all"}, headers=user("alice")).status_code == 200
    assert history(client, "alice", mid).status_code == 404
    assert client.get(f"{MEMORIES}/{mid}", headers=user("alice")).status_code == 404
    assert client.get(MEMORIES, params={"q": "Revolut"}, headers=user("alice")).json()["memories"] == []
    assert user_key_names(raw_redis, key_prefix, "alice") == set()


def test_forgetting_one_memory_removes_it_from_every_index(client: TestClient) -> None:
    mid = post(client, "alice", text="User collects vintage typewriters").json()["memory"]["id"]
    gone = client.post("/api/memory/forget", json={"kind": "memory", "id": mid}, headers=user("alice"))
    assert gone.status_code == 200
    for mode_query in ("typewriters", "vintage typewriters collection"):
        assert client.get(MEMORIES, params={"q": mode_query}, headers=user("alice")).json()["memories"] == []
    assert client.get(f"{MEMORIES}/{mid}", headers=user("alice")).status_code == 404


def test_a_written_memory_feeds_the_entity_graph(client: TestClient) -> None:
    assert post(client, "alice", text="User's sister Ana lives in Lisbon").status_code == 201
    names = {e["name"] for e in client.get("/api/entities", headers=user("alice")).json()["entities"]}
    assert {"Ana", "Lisbon"} <= names


def test_an_edited_memory_no_longer_feeds_the_entities_only_its_old_text_named(client: TestClient) -> None:
    """Bug caught: editing "Ana lives in Lisbon" to "Ana lives in Porto" kept Lisbon in the entity graph under
    the memory's id (a word the user removed, still listed and in the wiki); Ana, named by both texts, stays."""
    posted = post(client, "aria", text="User's sister Ana lives in Lisbon")
    assert posted.status_code == 201, posted.text
    mid = posted.json()["memory"]["id"]
    before = {e["name"]: e["id"] for e in client.get("/api/entities", headers=user("aria")).json()["entities"]}
    edited = client.put(
        f"/api/memory/memories/{mid}", json={"text": "User's sister Ana lives in Porto"}, headers=user("aria")
    )
    assert edited.status_code == 200, edited.text
    entities = client.get("/api/entities", headers=user("aria")).json()["entities"]
    names = {e["name"] for e in entities}
    assert {"Ana", "Porto"} <= names and "Lisbon" not in names, names
    assert before["Ana"] == {e["name"]: e["id"] for e in entities}["Ana"]  # kept, not made again under a new id
