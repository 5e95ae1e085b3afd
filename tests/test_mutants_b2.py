"""What kills the survivors of the mutants of the functions changed this session in ``memory/privacy_controls.py``
(issue 20, helper b2; docs/testing.md). Through the HTTP API, a real Redis and the bundled models."""

from __future__ import annotations

from fastapi.testclient import TestClient

from tests.helpers import user

MEMORIES = "/api/memory/memories"


def names(client: TestClient, who: str) -> set[str]:
    """The names of the user's entities, as the entity list shows them."""
    return {e["name"] for e in client.get("/api/entities", headers=user(who)).json()["entities"]}


def test_forgetting_a_posted_memory_forgets_the_entities_only_it_named(client: TestClient) -> None:
    """privacy_controls.forget_item (mutmut 77-79: ``kind == "memory"`` -> ``!=`` / another word; 82: the
    memory's id -> None): a memory posted through the API feeds the entity graph under its own id (README), so
    forgetting it forgets the entities only it named; another memory's entities stay. The bugs leave Ana and
    Lisbon listed after the memory that alone named them is forgotten."""
    ana = client.post(MEMORIES, json={"text": "User's sister Ana lives in Lisbon"}, headers=user("bea"))
    assert ana.status_code == 201, ana.text
    assert (
        client.post(MEMORIES, json={"text": "User's friend Tom lives in Berlin"}, headers=user("bea")).status_code
        == 201
    )
    assert {"Ana", "Lisbon", "Tom", "Berlin"} <= names(client, "bea")
    body = {"kind": "memory", "id": ana.json()["memory"]["id"]}
    assert client.post("/api/memory/forget", json=body, headers=user("bea")).status_code == 200
    left = names(client, "bea")
    assert "Ana" not in left and "Lisbon" not in left
    assert {"Tom", "Berlin"} <= left
