"""Issue 15: an entity created while the embedder was down gets its name vector from the repair sweep.

Before (2026-12-07, at 5538b4f): an entity stored while the embedder failed got no name vector and
was noted nowhere; once the embedder answered again nothing embedded it (only ``agtos reindex``,
and only for a user reindexed for another reason), so "PostgreSQL" said later became a second
entity instead of joining "Postgres" (dedup by similarity compares against no vector).

Through the HTTP app with the Ollama-style stub of ``tests/test_embedder_switch.py`` (its toy models
embed "PostgreSQL" as "Postgres"), answering HTTP 500 while down; real Redis.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from fastapi.testclient import TestClient

from agtos.config import Settings
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
from tests.test_pending_vectors import sweep_settings

NOTED = ("assistant", "Noted.")


def postgres_while_down(
    serve: Callable[..., TestClient],  # noqa: F811
    embed_server: EmbedServer,  # noqa: F811
    settings: Settings,
) -> TestClient:
    """The API on ``mini-a`` (maintenance runs at once); the Postgres session ended while every
    embedding call fails."""
    api = serve("mini-a", sweep_settings(settings))
    assert search(api, "analytics", "vector") == []  # the embedder is loaded while up (then fails)
    embed_server.fail_after = 0
    ended = talk(api, ALICE, "pg1", ("user", POSTGRES[0]), NOTED)
    assert ended["saved"] is True and ended["status"] == "done", ended
    embed_server.fail_after = None
    return api


def entity_id(api: TestClient, name: str) -> str:
    listed = api.get("/api/entities", params={"limit": 100}, headers=user(ALICE))
    assert listed.status_code == 200, listed.text
    return str(next(e["id"] for e in listed.json()["entities"] if e["name"] == name))


def test_an_entity_created_while_down_dedups_by_vector_after_the_sweep(
    serve: Callable[..., TestClient],  # noqa: F811
    embed_server: EmbedServer,  # noqa: F811
    settings: Settings,
    cli: Callable[..., Any],  # noqa: F811
) -> None:
    api = postgres_while_down(serve, embed_server, settings)
    stored_down = semantic_tier(api)["pendingVectors"]
    run = run_maintenance(api, ALICE)
    assert run["status"] == "completed", run
    filled = run["report"]["summary"]["vectorsFilled"]
    assert filled == {"filled": stored_down, "gone": 0, "error": None}
    assert semantic_tier(api)["pendingVectors"] == 0
    checked = cli("mini-a", "reindex", "--check")  # nothing was made by another embedder
    assert checked.exit_code == 0, checked.output
    talk(api, ALICE, "pg2", ("user", POSTGRES[1]), NOTED)
    assert databases(api) == [("Postgres", ["PostgreSQL"], 2)]  # not a second entity: its name has a vector


def test_a_forgotten_entity_leaves_the_pending_count(
    serve: Callable[..., TestClient],  # noqa: F811
    embed_server: EmbedServer,  # noqa: F811
    settings: Settings,
) -> None:
    api = postgres_while_down(serve, embed_server, settings)
    waiting = semantic_tier(api)["pendingVectors"]
    body = {"kind": "entity", "id": entity_id(api, "Postgres")}
    forgot = api.post("/api/memory/forget", json=body, headers=user(ALICE))
    assert forgot.status_code == 200, forgot.text
    assert semantic_tier(api)["pendingVectors"] == waiting - 1  # its note went with it
    run = run_maintenance(api, ALICE)
    assert run["report"]["summary"]["vectorsFilled"] == {"filled": waiting - 1, "gone": 0, "error": None}
