"""The hot routes (turn append, search, context, session end) run their blocking work off the event
loop and answer as their OpenAPI document says: a session end that waits for the worker does not
hold up a search sent after it, the bodies carry the documented camelCase fields, and an error
raised on the route's thread keeps its status code."""

from __future__ import annotations

import asyncio
from collections.abc import Iterator
from typing import Any

import httpx
import pytest
from fastapi.testclient import TestClient

from agtos.config import Settings
from agtos.memory.coordinator import MemoryCoordinator
from agtos.serving.app import create_app
from tests.helpers import user

TURNS = [
    {"role": "user", "content": "I booked a trip to Lisbon for the second week of June with my sister Ana"},
    {"role": "assistant", "content": "Lovely! Do you want tips for the Alfama district and the trams?"},
    {"role": "user", "content": "Yes please, and remember that I prefer quiet hotels near the river"},
]


@pytest.fixture
def queue_coordinator(settings: Settings) -> Iterator[MemoryCoordinator]:
    """Queue mode with no worker in the process: a session end queues its job and nothing ingests it."""
    coord = MemoryCoordinator(settings.with_overrides(ingest_mode="queue", ingest_worker=False, session_max_turns=4))
    yield coord
    coord.close()


def schema_fields(app_schema: dict[str, Any], name: str) -> set[str]:
    return set(app_schema["components"]["schemas"][name]["properties"])


async def exchange(coordinator: MemoryCoordinator) -> dict[str, Any]:
    """Turns appended, then a session end that waits 1.5 s for a worker that never comes, and a
    search sent 0.2 s after it; when each finished, and the bodies."""
    app = create_app(coordinator=coordinator)
    transport = httpx.ASGITransport(app=app)
    finished: dict[str, float] = {}
    loop = asyncio.get_running_loop()
    async with httpx.AsyncClient(transport=transport, base_url="http://127.0.0.1") as http:
        appended = await http.post("/api/memory/sessions/trip/turns", json={"turns": TURNS}, headers=user("ana"))

        async def timed(name: str, request: Any) -> httpx.Response:
            response = await request
            finished[name] = loop.time()
            return response

        ending = asyncio.create_task(
            timed("end", http.post("/api/memory/sessions/trip/end?wait=1.5", headers=user("ana")))
        )
        await asyncio.sleep(0.2)
        searched = await timed("search", http.get("/api/memory/search", params={"q": "Lisbon"}, headers=user("ana")))
        context = await http.post("/api/memory/context", json={"query": "Lisbon"}, headers=user("ana"))
        ended = await ending
        again = await http.post("/api/memory/sessions/trip/turns", json={"turns": TURNS * 2}, headers=user("ana"))
    return {
        "schema": app.openapi(),
        "appended": appended,
        "ended": ended,
        "searched": searched,
        "context": context,
        "too_many": again,
        "finished": finished,
    }


def test_hot_routes_answer_off_the_event_loop_with_their_documented_bodies(
    queue_coordinator: MemoryCoordinator,
) -> None:
    got = asyncio.run(exchange(queue_coordinator))
    schema = got["schema"]

    # the search, sent while the session end waited on its thread, was answered first
    assert got["searched"].status_code == 200, got["searched"].text
    assert got["finished"]["search"] < got["finished"]["end"]

    appended = got["appended"]
    assert appended.status_code == 200, appended.text
    assert set(appended.json()) == schema_fields(schema, "TurnsAppendedOut")
    assert appended.json()["sessionId"] == "trip"
    assert appended.json()["appended"] == 3
    assert appended.headers["content-type"] == "application/json"

    ended = got["ended"]
    assert ended.status_code == 200, ended.text
    body = ended.json()
    # every field, nulls included, camelCase; lastEnd only on an end that finds no turns (a retry)
    assert set(body) == schema_fields(schema, "SessionEndOut") - {"lastEnd"}
    assert body["sessionId"] == "trip"
    assert body["saved"] is True
    assert body["status"] == "queued"  # no worker: the 1.5 s wait ran out
    assert body["turnsAccepted"] == 3
    assert body["episode"] is None
    assert body["episodeId"]
    assert body["queuePosition"] == 1
    assert ended.headers["content-type"] == "application/json"

    searched = got["searched"].json()
    assert set(searched) == schema_fields(schema, "SearchOut")
    assert searched["query"] == "Lisbon"
    assert searched["available"] is True

    context = got["context"]
    assert context.status_code == 200, context.text
    assert set(context.json()) <= schema_fields(schema, "ContextOut")
    assert set(schema["components"]["schemas"]["ContextOut"].get("required", [])) <= set(context.json())

    # 6 turns past the cap of 4 (AGTOS_SESSION_MAX_TURNS): the JournalFull raised on the thread is a 413
    assert got["too_many"].status_code == 413, got["too_many"].text
    assert "message" in got["too_many"].json()


def test_a_search_hit_carries_its_episode_and_highlights_as_documented(
    queue_coordinator: MemoryCoordinator,
) -> None:
    got = asyncio.run(exchange(queue_coordinator))
    episode_id = got["ended"].json()["episodeId"]
    queue_coordinator.ingest_worker().drain(120)  # the queued session end, stored
    with TestClient(create_app(coordinator=queue_coordinator)) as client:
        response = client.get("/api/memory/search", params={"q": "Lisbon hotels river"}, headers=user("ana"))
        listed = client.get("/api/memory/episodes", headers=user("ana")).json()["episodes"]
    assert response.status_code == 200, response.text
    body = response.json()
    assert body["count"] == len(body["results"]) == 1
    (hit,) = body["results"]
    schemas = got["schema"]["components"]["schemas"]
    assert set(hit) == set(schemas["SearchHitOut"]["properties"])
    assert hit["id"] == episode_id
    assert hit["sessionId"] == "trip"
    assert listed == [{name: hit[name] for name in schemas["EpisodeOut"]["properties"]}]  # as /episodes lists it
    assert hit["matchType"] and 0 < hit["score"] <= 1
    assert hit["summary"] and hit["keywords"] and isinstance(hit["timestamp"], int)
    assert hit["highlights"], hit
    for highlight in hit["highlights"]:
        assert set(highlight) == set(schemas["HighlightOut"]["properties"])
        assert highlight["role"] in ("user", "assistant")
        assert highlight["text"] == TURNS[highlight["position"]]["content"]
    assert "Lisbon" in hit["highlights"][0]["text"] or "river" in hit["highlights"][0]["text"]
