"""Issue 15: an entity created while the embedder was down gets its name vector from the repair sweep.

Before (2026-12-07, at 5538b4f): an entity stored while the embedder failed got no name vector and
was noted nowhere; once the embedder answered again nothing embedded it (only ``agtos reindex``,
and only for a user reindexed for another reason), so "PostgreSQL" said later became a second
entity instead of joining "Postgres" (dedup by similarity compares against no vector).

Through the HTTP app with the Ollama-style stub of ``tests/test_embedder_switch.py`` (its toy models
embed "PostgreSQL" as "Postgres"), answering HTTP 500 while down, or the bundled ONNX model behind
the hooked switch of ``tests/test_forget_pending_vectors.py`` (a forget inside the repair's call);
real Redis, the ``entity`` index's rows read back.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest
import redis
from fastapi.testclient import TestClient

from agtos.config import Settings
from agtos.memory.coordinator import MemoryCoordinator
from agtos.memory.vector_repair import fill_user
from tests.helpers import run_maintenance, talk, user
from tests.test_embedder_switch import (  # noqa: F401 - cli, embed_server, serve: fixtures
    ALICE,
    POSTGRES,
    EmbedServer,
    cli,
    databases,
    embed_server,
    search,
    semantic_tier,
    serve,
)
from tests.test_forget_pending_vectors import api, end_while_down, forget  # noqa: F401 - api: a fixture
from tests.test_forget_races import HookedEmbedder
from tests.test_pending_vectors import ANA, LISBON, pending, sweep_settings

NOTED = ("assistant", "Noted.")


def postgres_while_down(
    serve: Callable[..., TestClient],  # noqa: F811
    embed_server: EmbedServer,  # noqa: F811
    settings: Settings,
) -> TestClient:
    """The API on ``mini-a`` (maintenance runs at once); the Postgres session ended while every
    embedding call fails."""
    app = serve("mini-a", sweep_settings(settings))
    assert search(app, "analytics", "vector") == []  # the embedder is loaded while up (then fails)
    embed_server.fail_after = 0
    ended = talk(app, ALICE, "pg1", ("user", POSTGRES[0]), NOTED)
    assert ended["saved"] is True and ended["status"] == "done", ended
    embed_server.fail_after = None
    return app


def entity_id(app: TestClient, name: str) -> str:
    listed = app.get("/api/entities", params={"limit": 100}, headers=user(ALICE))
    assert listed.status_code == 200, listed.text
    return str(next(e["id"] for e in listed.json()["entities"] if e["name"] == name))


def test_an_entity_created_while_down_dedups_by_vector_after_the_sweep(
    serve: Callable[..., TestClient],  # noqa: F811
    embed_server: EmbedServer,  # noqa: F811
    settings: Settings,
    cli: Callable[..., Any],  # noqa: F811
) -> None:
    app = postgres_while_down(serve, embed_server, settings)
    stored_down = semantic_tier(app)["pendingVectors"]
    run = run_maintenance(app, ALICE)
    assert run["status"] == "completed", run
    filled = run["report"]["summary"]["vectorsFilled"]
    assert filled == {"filled": stored_down, "gone": 0, "error": None}
    assert semantic_tier(app)["pendingVectors"] == 0
    checked = cli("mini-a", "reindex", "--check")  # nothing was made by another embedder
    assert checked.exit_code == 0, checked.output
    talk(app, ALICE, "pg2", ("user", POSTGRES[1]), NOTED)
    assert databases(app) == [("Postgres", ["PostgreSQL"], 2)]  # not a second entity: its name has a vector


def test_a_forgotten_entity_leaves_the_pending_count(
    serve: Callable[..., TestClient],  # noqa: F811
    embed_server: EmbedServer,  # noqa: F811
    settings: Settings,
) -> None:
    app = postgres_while_down(serve, embed_server, settings)
    waiting = semantic_tier(app)["pendingVectors"]
    body = {"kind": "entity", "id": entity_id(app, "Postgres")}
    forgot = app.post("/api/memory/forget", json=body, headers=user(ALICE))
    assert forgot.status_code == 200, forgot.text
    assert semantic_tier(app)["pendingVectors"] == waiting - 1  # its note went with it
    run = run_maintenance(app, ALICE)
    assert run["report"]["summary"]["vectorsFilled"] == {"filled": waiting - 1, "gone": 0, "error": None}


def name_vectors(raw: redis.Redis, prefix: str, user_id: str) -> set[str]:
    """The ids of the user's entities with a name vector (the ``entity`` index's rows)."""
    return {k.decode() for k in raw.hkeys(f"{prefix}:u:{{{user_id}}}:entity:_idx:vec:data")}


def test_an_entity_renamed_while_down_gets_its_new_names_vector_from_the_sweep(
    serve: Callable[..., TestClient],  # noqa: F811
    embed_server: EmbedServer,  # noqa: F811
    settings: Settings,
    raw_redis: redis.Redis,
    key_prefix: str,
) -> None:
    app = serve("mini-a", sweep_settings(settings))
    talk(app, ALICE, "pg1", ("user", POSTGRES[0]), NOTED)
    postgres = entity_id(app, "Postgres")
    assert postgres in name_vectors(raw_redis, key_prefix, ALICE)  # stored while up: with its vector
    assert semantic_tier(app)["pendingVectors"] == 0
    embed_server.fail_after = 0
    renamed = app.put(f"/api/entities/{postgres}", json={"name": "Postgres DB"}, headers=user(ALICE))
    assert renamed.status_code == 200, renamed.text
    embed_server.fail_after = None
    assert postgres not in name_vectors(raw_redis, key_prefix, ALICE)  # the old name's vector went
    assert semantic_tier(app)["pendingVectors"] == 1  # the new name waits
    run = run_maintenance(app, ALICE)
    assert run["report"]["summary"]["vectorsFilled"] == {"filled": 1, "gone": 0, "error": None}
    assert postgres in name_vectors(raw_redis, key_prefix, ALICE)
    assert semantic_tier(app)["pendingVectors"] == 0


def drop_entity(client: TestClient, how: str, entity_id: str) -> None:
    if how == "POST /forget":
        forget(client, "entity", entity_id)
    else:
        deleted = client.delete(f"/api/entities/{entity_id}", headers=user(ANA))
        assert deleted.status_code == 200, deleted.text


@pytest.mark.parametrize("how", ["POST /forget", "DELETE /entities/{id}"])
def test_an_entity_forgotten_while_the_repair_embeds_its_name_keeps_no_vector(
    api: tuple[TestClient, HookedEmbedder, MemoryCoordinator],  # noqa: F811
    raw_redis: redis.Redis,
    key_prefix: str,
    how: str,
) -> None:
    """The Lisbon session stored while down; its entity Lisbon forgotten or deleted (HTTP) inside the
    repair's embedding call: its vector, written after that, is removed again; the others stay."""
    client, switch, coordinator = api
    end_while_down(client, switch, "lisbon", LISBON)
    listed = client.get("/api/entities", params={"limit": 100}, headers=user(ANA)).json()["entities"]
    ids = {e["name"]: e["id"] for e in listed}
    assert {"Ana", "Lisbon"} <= set(ids)
    assert name_vectors(raw_redis, key_prefix, ANA) == set()
    switch.down = False
    switch.hook = lambda: drop_entity(client, how, ids["Lisbon"])
    report = fill_user(coordinator.services, ANA)
    assert switch.hook is None  # the forget ran inside the repair's call
    assert report.error is None and report.skipped == 1
    assert name_vectors(raw_redis, key_prefix, ANA) == set(ids.values()) - {ids["Lisbon"]}
    assert pending(client) == 0


def test_an_entity_renamed_while_the_repair_embeds_its_old_name_waits_again(
    api: tuple[TestClient, HookedEmbedder, MemoryCoordinator],  # noqa: F811
) -> None:
    """A rename landing inside the repair's embedding call: the vector written is the old name's, so
    the entity is noted again and the repair's next batch embeds its new name."""
    client, switch, coordinator = api
    end_while_down(client, switch, "lisbon", LISBON)
    listed = client.get("/api/entities", params={"limit": 100}, headers=user(ANA)).json()["entities"]
    lisbon = next(e["id"] for e in listed if e["name"] == "Lisbon")
    switch.down = False

    def rename() -> None:
        renamed = client.put(f"/api/entities/{lisbon}", json={"name": "Lisboa"}, headers=user(ANA))
        assert renamed.status_code == 200, renamed.text

    switch.hook = rename
    switch.sizes.clear()
    report = fill_user(coordinator.services, ANA)
    assert switch.hook is None and report.error is None
    # texts per call: the rename's (its new name), the repair's batch, then Lisboa noted again and embedded
    assert len(switch.sizes) == 3 and switch.sizes[0] == switch.sizes[2] == 1, switch.sizes
    assert pending(client) == 0
