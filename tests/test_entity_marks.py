"""Entity names keep the marks of their script (issue 14, as BM25 tokenizer version 3 does for terms).

"कमल" / "कोमल" (Kamal, Komal: only the vowel sign ो apart) and "ケンタ" / "ゲンタ" (Kenta, Genta: only the
dakuten apart) are four people, each shown and found with its marks; before, every mark was dropped and then
every letter outside a-z, so such names had no key at all ("name must contain letters or digits"). Accents of
Latin letters still fold: "José" and "Jose" are one person. An entity stored before keeps its names: its alias
index holds only the old key ("Łukasz Nowak" as "ukasz nowak", the old key keeping ASCII letters only).
"""

from __future__ import annotations

from typing import Any

import redis
from fastapi.testclient import TestClient

from agtos.memory.coordinator import MemoryCoordinator
from tests.helpers import talk, user

U = "marks-user"
THANKS = (("assistant", "Noted."), ("user", "Thanks, keep that in mind."))


def persons(client: TestClient, **params: Any) -> list[dict[str, Any]]:
    response = client.get("/api/entities", params={"type": "person", "limit": 100, **params}, headers=user(U))
    assert response.status_code == 200, response.text
    return response.json()["entities"]


def rename(client: TestClient, entity_id: str, name: str) -> Any:
    return client.put(f"/api/entities/{entity_id}", json={"name": name}, headers=user(U))


def test_names_apart_only_by_marks_are_distinct_people_shown_with_their_marks(client: TestClient) -> None:
    ended = talk(client, U, "s-four", ("user", "Alice, Bob, Carol and Dave flew to Lisbon on Monday."), *THANKS)
    assert ended["saved"], ended
    ids = {e["name"]: e["id"] for e in persons(client)}
    assert {"Alice", "Bob", "Carol", "Dave"} <= set(ids), ids
    new_names = {"Alice": "कमल", "Bob": "कोमल", "Carol": "ケンタ", "Dave": "ゲンタ"}
    for old, new in new_names.items():
        response = rename(client, ids[old], new)
        assert response.status_code == 200, response.text  # HEAD: 422 / 409 (Komal took Kamal's key)
        assert response.json()["entity"]["name"] == new
    for old, new in new_names.items():
        page = client.get(f"/api/entities/{ids[old]}", headers=user(U))
        assert page.status_code == 200, page.text
        assert page.json()["entity"]["name"] == new and page.json()["entity"]["aliases"] == [old]
        assert [e["id"] for e in persons(client, q=new)] == [ids[old]]  # found by its name, marks and all
    shown = {e["name"] for e in persons(client)}
    assert set(new_names.values()) <= shown


def test_latin_accents_still_fold_into_one_person(client: TestClient) -> None:
    for n, text in enumerate(["My friend José fixed my bike on Monday.", "My friend Jose lent me his tent."]):
        ended = talk(client, U, f"s-jose{n}", ("user", text), *THANKS)
        assert ended["saved"], ended
    found = [e for e in persons(client) if {e["name"], *e["aliases"]} & {"José", "Jose"}]
    assert len(found) == 1, found
    assert len(found[0]["episodeIds"]) == 2
    assert [e["id"] for e in persons(client, q="jose")] == [found[0]["id"]]
    other = next(e for e in persons(client) if e["id"] != found[0]["id"])
    conflict = rename(client, other["id"], "JOSÉ")
    assert conflict.status_code == 409 and found[0]["id"] in conflict.json()["message"]


def test_an_entity_stored_under_the_old_key_keeps_its_names(
    client: TestClient, coordinator: MemoryCoordinator, raw_redis: redis.Redis
) -> None:
    store = coordinator.entities.store
    coordinator.entities.similarity_threshold = 1.01  # names join by their keys only, not by similar vectors
    ended = talk(client, U, "s-lukasz", ("user", "I went hiking with Łukasz Nowak on Monday."), *THANKS)
    assert ended["saved"], ended
    [lukasz] = [e for e in persons(client) if e["name"] == "Łukasz Nowak"]
    alias, names = store.index(U, "alias"), store.index(U, "names")
    # as the code before stored it: its only key "ukasz nowak" (NFKD, marks dropped, a-z only; "Ł" has no
    # decomposition), in the alias hash and the names zset
    raw_redis.hdel(alias, "łukasz nowak")
    raw_redis.zrem(names, f"łukasz nowak|{lukasz['id']}")
    raw_redis.hset(alias, "ukasz nowak", lukasz["id"])
    raw_redis.zadd(names, {f"ukasz nowak|{lukasz['id']}": 0})
    assert {k for k, v in store.alias_map(U).items() if v == lukasz["id"]} == {"ukasz nowak"}
    assert [e["id"] for e in persons(client, q="Łukasz Nowak")] == [lukasz["id"]]
    again = talk(client, U, "s-lukasz2", ("user", "I had lunch with Łukasz Nowak."), *THANKS)
    assert again["saved"], again
    found = [e for e in persons(client) if e["name"] == "Łukasz Nowak"]
    assert [e["id"] for e in found] == [lukasz["id"]] and len(found[0]["episodeIds"]) == 2
    other = next(e for e in persons(client) if e["id"] != lukasz["id"])
    conflict = rename(client, other["id"], "Łukasz Nowak")
    assert conflict.status_code == 409 and lukasz["id"] in conflict.json()["message"]
    deleted = client.delete(f"/api/entities/{lukasz['id']}", headers=user(U))
    assert deleted.status_code == 200, deleted.text
    assert lukasz["id"] not in store.alias_map(U).values()
    assert rename(client, other["id"], "Łukasz Nowak").status_code == 200
