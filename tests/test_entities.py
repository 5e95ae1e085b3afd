"""Entity memory end to end: session end → NER → deduplicated entities and relationships in
Redis, the entities API (search, stats, edit, soft delete, merge, views), user isolation."""

from __future__ import annotations

import json
from typing import Any

import numpy as np
import pytest
import redis
from fastapi.testclient import TestClient

from agtos.memory.coordinator import MemoryCoordinator
from agtos.schemas import Conclusion, ConclusionType
from agtos.tasks.mentions import normalise_entity_name
from tests.helpers import talk, user

SCRIPT = (
    ("user", "Alice works at Acme Corp in Berlin; her project Falcon is due Friday."),
    ("assistant", "Got it."),
    ("user", "Thanks, please keep that in mind for next week."),
)
THANKS = (("assistant", "Noted."), ("user", "Thanks, keep that in mind."))
U = "ent-user"


def seed(client: TestClient, user_id: str = U, session_id: str = "s-script") -> str:
    """The scripted conversation through a real session end; returns the episode id."""
    ended = talk(client, user_id, session_id, *SCRIPT)
    assert ended["saved"], ended
    return ended["episode"]["id"]


def entities(client: TestClient, user_id: str = U, **params: Any) -> list[dict[str, Any]]:
    response = client.get("/api/entities", params={"limit": 100, **params}, headers=user(user_id))
    assert response.status_code == 200, response.text
    return response.json()["entities"]


def by_name(client: TestClient, user_id: str = U) -> dict[str, dict[str, Any]]:
    return {e["name"]: e for e in entities(client, user_id)}


def rels(client: TestClient, entity_id: str, user_id: str = U) -> list[dict[str, Any]]:
    response = client.get(f"/api/entities/{entity_id}/relationships", headers=user(user_id))
    assert response.status_code == 200, response.text
    return response.json()["relationships"]


def test_session_end_builds_entities_and_relationships(client: TestClient, coordinator: MemoryCoordinator) -> None:
    episode_id = seed(client)
    found = by_name(client)
    expected = {"Alice": "person", "Acme Corp": "organization", "Berlin": "place", "Falcon": "thing"}
    for name, etype in expected.items():
        assert found[name]["type"] == etype, found[name]
        assert found[name]["episodeIds"] == [episode_id]
    alice = found["Alice"]
    works = [r for r in rels(client, alice["id"]) if r["type"] == "works-at"]
    assert len(works) == 1 and works[0]["direction"] == "out"
    assert works[0]["other"] == {"id": found["Acme Corp"]["id"], "name": "Acme Corp", "type": "organization"}
    assert works[0]["sourceEpisodeIds"] == [episode_id] and 0 < works[0]["confidence"] <= 1
    incoming = rels(client, found["Acme Corp"]["id"])
    assert {"type": "works-at", "direction": "in", "other": "Alice"} in [
        {"type": r["type"], "direction": r["direction"], "other": r["other"]["name"]} for r in incoming
    ]
    # the NER step also set the episode's entity names
    episode = coordinator.episodes.get(U, episode_id)
    assert episode is not None and {"Alice", "Acme Corp", "Berlin", "Falcon"} <= set(episode.entities)
    episodes = client.get(f"/api/entities/{alice['id']}/episodes", headers=user(U)).json()
    assert [e["id"] for e in episodes["episodes"]] == [episode_id]
    stats = client.get("/api/entities/stats", headers=user(U)).json()
    assert stats["total"] == len(found) and stats["byType"]["person"] == 1
    assert sum(stats["byType"].values()) == stats["total"]


def test_later_mention_dedups_by_alias_and_search_finds_it(client: TestClient) -> None:
    seed(client)
    acme = by_name(client)["Acme Corp"]
    later = talk(client, U, "s-lunch", ("user", "I had lunch with the Acme folks."), *THANKS)
    assert later["saved"]
    orgs = entities(client, type="organization")
    assert [o["name"] for o in orgs] == ["Acme Corp"]  # one entity, not two
    merged = orgs[0]
    assert merged["id"] == acme["id"] and "Acme" in merged["aliases"]
    assert merged["episodeIds"] == [*acme["episodeIds"], later["episode"]["id"]]
    assert merged["lastSeen"] >= acme["lastSeen"]
    for q in ("acme", "ACM", "Acme Corp.", "cme"):  # exact, prefix, normalised, substring
        assert [e["id"] for e in entities(client, q=q)] == [acme["id"]], q
    assert entities(client, q="acme", type="person") == []
    assert entities(client, q="zzz") == []


def test_embedding_similarity_merges_what_aliases_miss(client: TestClient, coordinator: MemoryCoordinator) -> None:
    a, b = "Postgres", "PostgreSQL"
    assert normalise_entity_name(a) != normalise_entity_name(b)  # no alias match possible
    vectors = coordinator.semantic.embedder.embed([a, b])
    similarity = float(np.dot(vectors[0], vectors[1]))
    assert similarity >= 0.85, similarity  # all-MiniLM-L6-v2 (int8): about 0.90
    talk(client, U, "s-pg1", ("user", "We store all our analytics data in Postgres."), *THANKS)
    talk(client, U, "s-pg2", ("user", "We moved the analytics warehouse to PostgreSQL last year."), *THANKS)
    things = [e for e in entities(client, type="thing") if "postgres" in e["name"].lower()]
    assert len(things) == 1, things
    assert things[0]["name"] == a and things[0]["aliases"] == [b] and things[0]["episodeCount"] == 2
    # the alias is indexed now: a name search for it lands on the same entity
    assert [e["id"] for e in entities(client, q="postgresql")] == [things[0]["id"]]


def _user_keys(raw: redis.Redis, coordinator: MemoryCoordinator, kind: str) -> list[str]:
    base = coordinator.keys.user(U).base
    return sorted(k.decode() for k in raw.scan_iter(match=f"{base}:{kind}:*", count=1000))


def test_merge_moves_aliases_episodes_and_edges_without_dangling_refs(
    client: TestClient, coordinator: MemoryCoordinator, raw_redis: redis.Redis
) -> None:
    first = seed(client)
    second = talk(client, U, "s-smith", ("user", "Alice Smith works at Acme Corp and lives in Berlin."), *THANKS)
    found = by_name(client)
    alice, smith = found["Alice"], found["Alice Smith"]  # MiniLM similarity ~0.82: kept apart
    memory = coordinator.entities
    memory.relate(U, smith["id"], alice["id"], "knows", 0.6, second["episode"]["id"])  # becomes a self-loop
    response = client.post(f"/api/entities/{alice['id']}/merge", json={"duplicate_id": smith["id"]}, headers=user(U))
    assert response.status_code == 200, response.text
    body = response.json()
    assert body["merged"] == smith["id"]
    assert body["relationships"] == {"moved": 1, "merged": 1, "dropped": 1}
    survivor = body["entity"]
    assert "Alice Smith" in survivor["aliases"]
    assert survivor["episodeIds"] == [first, second["episode"]["id"]]

    assert client.get(f"/api/entities/{smith['id']}", headers=user(U)).status_code == 404
    edges = {(r["type"], r["direction"], r["other"]["name"]): r for r in rels(client, alice["id"])}
    assert set(edges) >= {("works-at", "out", "Acme Corp"), ("lives-in", "out", "Berlin")}
    assert ("knows", "out", "Alice") not in edges and ("knows", "in", "Alice") not in edges
    works = edges[("works-at", "out", "Acme Corp")]  # the two works-at edges became one
    assert sorted(works["sourceEpisodeIds"]) == sorted([first, second["episode"]["id"]])

    # no dangling references: every relationship record, edge set, triple and alias is consistent
    live = {e["id"] for e in entities(client)}
    rel_ids = set()
    for key in _user_keys(raw_redis, coordinator, "rel"):
        rel = json.loads(raw_redis.get(key))
        rel_ids.add(rel["id"])
        assert rel["source_id"] in live and rel["target_id"] in live, rel
        assert smith["id"] not in (rel["source_id"], rel["target_id"]) and rel["source_id"] != rel["target_id"]
    store = memory.store
    triples = {k.decode(): v.decode() for k, v in raw_redis.hgetall(store.index(U, "triples")).items()}
    assert set(triples.values()) == rel_ids and len(triples) == len(rel_ids)
    for entity_id in live:
        out_ids, in_ids = store.edge_ids(U, entity_id)
        assert set(out_ids) | set(in_ids) <= rel_ids
    assert not raw_redis.exists(store.index(U, f"out:{smith['id']}"), store.index(U, f"in:{smith['id']}"))
    aliases = store.alias_map(U)
    assert smith["id"] not in aliases.values() and aliases["alice smith"] == alice["id"]
    names = [m.decode() for m in raw_redis.zrange(store.index(U, "names"), 0, -1)]
    assert not [m for m in names if m.endswith(smith["id"])]
    assert raw_redis.get(store.entity_key(U, smith["id"])) is None
    vectors = memory.vector_index()
    assert vectors is not None and smith["id"] not in set(vectors.ids(U))

    # a later mention of the duplicate's name lands on the survivor
    talk(client, U, "s-again", ("user", "Alice Smith booked the team offsite."), *THANKS)
    assert [e["name"] for e in entities(client, type="person")] == ["Alice"]


def test_put_edits_with_validation_and_conflicts(client: TestClient) -> None:
    seed(client)
    found = by_name(client)
    falcon, berlin = found["Falcon"], found["Berlin"]
    response = client.put(
        f"/api/entities/{falcon['id']}", json={"name": "Project Falcon", "confidence": 0.9}, headers=user(U)
    )
    assert response.status_code == 200, response.text
    edited = response.json()["entity"]
    assert edited["name"] == "Project Falcon" and edited["aliases"] == ["Falcon"] and edited["confidence"] == 0.9
    assert [e["id"] for e in entities(client, q="project fal")] == [falcon["id"]]
    assert [e["id"] for e in entities(client, q="falcon")] == [falcon["id"]]  # old name kept as alias
    retyped = client.put(f"/api/entities/{falcon['id']}", json={"type": "event", "aliases": []}, headers=user(U))
    assert retyped.json()["entity"]["type"] == "event" and retyped.json()["entity"]["aliases"] == []
    assert [e["id"] for e in entities(client, type="event", q="project")] == [falcon["id"]]
    assert entities(client, type="thing", q="project") == []
    conflict = client.put(f"/api/entities/{falcon['id']}", json={"aliases": ["Berlin"]}, headers=user(U))
    assert conflict.status_code == 409 and berlin["id"] in conflict.json()["message"]


def test_soft_delete_hides_from_lists_stats_and_lookups(
    client: TestClient, coordinator: MemoryCoordinator, raw_redis: redis.Redis
) -> None:
    seed(client)
    found = by_name(client)
    berlin, acme = found["Berlin"], found["Acme Corp"]
    before = client.get("/api/entities/stats", headers=user(U)).json()
    response = client.delete(f"/api/entities/{berlin['id']}", headers=user(U))
    assert response.status_code == 200 and response.json() == {"id": berlin["id"], "deleted": True}
    assert "Berlin" not in by_name(client)
    assert entities(client, q="berlin") == [] and entities(client, type="place") == []
    after = client.get("/api/entities/stats", headers=user(U)).json()
    assert after["total"] == before["total"] - 1 and after["byType"]["place"] == 0
    assert client.get(f"/api/entities/{berlin['id']}", headers=user(U)).status_code == 404
    assert client.delete(f"/api/entities/{berlin['id']}", headers=user(U)).status_code == 404
    assert all(r["other"]["name"] != "Berlin" for r in rels(client, acme["id"]))
    record = json.loads(raw_redis.get(coordinator.entities.store.entity_key(U, berlin["id"])))
    assert record["deleted"] is True  # soft: the record stays
    assert "berlin" not in coordinator.entities.store.alias_map(U)


def test_conclusions_that_mention_the_entity(client: TestClient, coordinator: MemoryCoordinator) -> None:
    seed(client)
    acme = by_name(client)["Acme Corp"]
    empty = client.get(f"/api/entities/{acme['id']}/conclusions", headers=user(U))
    assert empty.status_code == 200
    mine = Conclusion(
        user_id=U, text="The user's colleague is employed by ACME corp.", type=ConclusionType.deductive, confidence=0.7
    )
    other = Conclusion(user_id=U, text="The user likes quiet hotels.", type=ConclusionType.explicit, confidence=0.9)
    coordinator.conclusions.upsert_many([mine, other], None)
    found = client.get(f"/api/entities/{acme['id']}/conclusions", headers=user(U)).json()["conclusions"]
    ids = [c["id"] for c in found]
    assert mine.id in ids and other.id not in ids
    assert next(c for c in found if c["id"] == mine.id)["text"] == mine.text


def test_other_users_ids_are_404(client: TestClient) -> None:
    seed(client)
    alice = by_name(client)["Alice"]
    other = user("someone-else")
    assert entities(client, "someone-else") == []
    assert client.get("/api/entities/stats", headers=other).json()["total"] == 0
    calls = [
        ("get", f"/api/entities/{alice['id']}", None),
        ("put", f"/api/entities/{alice['id']}", {"name": "Mallory"}),
        ("delete", f"/api/entities/{alice['id']}", None),
        ("post", f"/api/entities/{alice['id']}/merge", {"duplicate_id": alice["id"] + "x"}),
        ("get", f"/api/entities/{alice['id']}/episodes", None),
        ("get", f"/api/entities/{alice['id']}/conclusions", None),
        ("get", f"/api/entities/{alice['id']}/relationships", None),
        ("get", "/api/entities/ent-doesnotexist", None),
    ]
    for method, path, body in calls:
        response = client.request(method.upper(), path, json=body, headers=other)
        assert response.status_code == 404, (method, path, response.text)
        assert "not found" in response.json()["message"]
    assert client.get(f"/api/entities/{alice['id']}", headers=user(U)).json()["entity"]["name"] == "Alice"
    own = client.post(f"/api/entities/{alice['id']}/merge", json={"duplicate_id": "ent-nope"}, headers=user(U))
    assert own.status_code == 404


@pytest.mark.parametrize(
    ("method", "path", "body"),
    [
        ("get", "/api/entities?limit=0", None),
        ("get", "/api/entities?limit=101", None),
        ("get", "/api/entities?offset=-1", None),
        ("get", "/api/entities?type=alien", None),
        ("put", "/api/entities/{id}", {}),
        ("put", "/api/entities/{id}", {"name": ""}),
        ("put", "/api/entities/{id}", {"name": None}),
        ("put", "/api/entities/{id}", {"name": "!!!"}),
        ("put", "/api/entities/{id}", {"type": "alien"}),
        ("put", "/api/entities/{id}", {"confidence": 1.5}),
        ("put", "/api/entities/{id}", {"aliases": ["ok", " "]}),
        ("put", "/api/entities/{id}", {"aliases": "Ali"}),
        ("put", "/api/entities/{id}", {"nickname": "Ali"}),
        ("post", "/api/entities/{id}/merge", {}),
        ("post", "/api/entities/{id}/merge", {"duplicate_id": "{id}"}),
        ("post", "/api/entities/{id}/merge", {"duplicate_id": ""}),
    ],
)
def test_bad_input_is_422(client: TestClient, method: str, path: str, body: Any) -> None:
    talk(client, U, "s-bob", ("user", "Bob lives in Paris."), *THANKS)
    bob = by_name(client)["Bob"]
    payload = json.loads(json.dumps(body).replace("{id}", bob["id"])) if body is not None else None
    response = client.request(method.upper(), path.replace("{id}", bob["id"]), json=payload, headers=user(U))
    assert response.status_code == 422, response.text
    assert response.json()["message"]


def test_malformed_json_is_422(client: TestClient) -> None:
    response = client.put(
        "/api/entities/ent-x", content=b"{not json", headers={**user(U), "content-type": "application/json"}
    )
    assert response.status_code == 422 and "malformed JSON" in response.json()["message"]


def graph_state(coordinator: MemoryCoordinator) -> tuple[Any, ...]:
    """Every entity, relationship and lookup entry of the test user."""
    store = coordinator.entities.store
    aliases = store.alias_map(U)
    entities = {i: e.model_dump() for i, e in store.get_many(U, aliases.values()).items()}
    triples = {k.decode(): v.decode() for k, v in store.connector.client.hgetall(store.index(U, "triples")).items()}
    rels = {i: r.model_dump() for i, r in store.rels(U, triples.values()).items()}
    return entities, aliases, triples, rels


def test_entity_step_is_wired_idempotent_and_never_fails_ingestion(coordinator: MemoryCoordinator) -> None:
    from dataclasses import replace

    from agtos.flows.ingestion_flow import PREFECT_STEPS
    from agtos.memory.ingestion_pipeline import INLINE_STEPS, run_ingestion, upsert_entities
    from agtos.schemas import Episode, IngestItem

    assert INLINE_STEPS.entities is upsert_entities and PREFECT_STEPS.entities.fn is upsert_entities
    episode = Episode(user_id=U, summary=SCRIPT[0][1])
    report = run_ingestion(coordinator.services, [IngestItem(user_id=U, episode=episode)])
    assert report.entities >= 4 and report.model_dump(by_alias=True)["entities"] == report.entities
    before = graph_state(coordinator)
    coordinator.entities.ingest([episode], coordinator.recognizer)  # a retried task changes nothing
    assert graph_state(coordinator) == before

    def boom(rt: MemoryCoordinator, episodes: list[Episode]) -> int:
        raise RuntimeError("entity step exploded")

    other = Episode(user_id=U, summary="Bob lives in Paris.")
    failed = run_ingestion(
        coordinator.services, [IngestItem(user_id=U, episode=other)], replace(INLINE_STEPS, entities=boom)
    )
    assert failed.stored == 1 and "entity graph not updated" in (failed.degraded or "")
    assert coordinator.episodes.get(U, other.id) is not None
