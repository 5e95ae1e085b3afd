"""The typed HTTP contract: every operation documents its responses, and /maintain runs off the request.

The response bodies themselves are checked against these schemas by schemathesis
(tests/test_api_fuzz.py, ``response_schema_conformance``); here the document is checked
against the statuses each route can answer, and the run flow goes through HTTP.
"""

from __future__ import annotations

import time
from types import SimpleNamespace
from typing import Any, cast

import pytest
from fastapi.testclient import TestClient

from agtos.config import MaintenanceConfig, Settings
from agtos.memory.coordinator import MemoryCoordinator
from agtos.serving.app import create_app
from tests.helpers import run_maintenance, user

# what each operation answers: the 2xx, and the errors (400 bad X-User-Id or id, 403 opted out,
# 404 unknown record, 409 conflict, 413 body too large, 422 invalid input, 500, 503 Redis down);
# issue 15 adds 401 (no or bad API key), 403 (a user key naming another user), 429 (rate limit), 400
# for a foreign Host on every route, and 415 for a write whose body is not JSON
USER = {400, 401, 403, 422, 429, 500, 503}
EXPECTED: dict[str, set[int]] = {
    "GET /health": {200, 400, 500},
    "GET /metrics": {200, 400, 401, 403, 429, 500, 503},  # 403: a user key (the counters are the server's)
    "GET /api/memory/sources": {200, 400, 401, 403, 429, 500, 503},
    "GET /api/memory/episodes": {200} | USER,
    "GET /api/memory/search": {200} | USER,
    "GET /api/memory/profile": {200} | USER,
    "PUT /api/memory/profile": {200, 403, 413} | USER,
    "POST /api/memory/context": {200, 413} | USER,
    "POST /api/memory/sessions/{session_id}/turns": {200, 413} | USER,
    "GET /api/memory/sessions/{session_id}": {200, 404} | USER,
    "POST /api/memory/sessions/{session_id}/end": {200} | USER,
    "GET /api/memory/conclusions": {200} | USER,
    "DELETE /api/memory/conclusions/{conclusion_id}": {200, 404} | USER,
    "POST /api/memory/dream": {200} | USER,
    "POST /api/memory/ask": {200, 413} | USER,
    "POST /api/memory/responses": {200, 403, 413} | USER,
    "POST /api/memory/maintain": {202, 403, 409} | USER,
    "GET /api/memory/maintain/runs/{run_id}": {200, 404} | USER,
    "GET /api/memory/maintain/history": {200} | USER,
    "GET /api/memory/maintain/history/{timestamp}": {200, 404} | USER,
    "POST /api/memory/forget": {200, 404, 413} | USER,
    "GET /api/memory/privacy": {200} | USER,
    "PUT /api/memory/privacy": {200, 413} | USER,
    "POST /api/memory/import": {200, 403, 413} | USER,
    "GET /api/entities": {200} | USER,
    "GET /api/entities/stats": {200} | USER,
    "GET /api/entities/{entity_id}": {200, 404} | USER,
    "PUT /api/entities/{entity_id}": {200, 404, 409, 413} | USER,
    "DELETE /api/entities/{entity_id}": {200, 404} | USER,
    "POST /api/entities/{entity_id}/merge": {200, 404, 409, 413} | USER,
    "GET /api/entities/{entity_id}/episodes": {200, 404} | USER,
    "GET /api/entities/{entity_id}/conclusions": {200, 404} | USER,
    "GET /api/entities/{entity_id}/relationships": {200, 404} | USER,
    "POST /api/memory/memories": {200, 201, 403, 413} | USER,  # 201 stored, 200 merged into a near-duplicate
    "GET /api/memory/memories": {200} | USER,
    "GET /api/memory/memories/{memory_id}": {200, 404} | USER,
    "PUT /api/memory/memories/{memory_id}": {200, 403, 404, 413} | USER,
    "DELETE /api/memory/memories/{memory_id}": {200, 403, 404} | USER,
    "GET /api/memory/memories/{memory_id}/history": {200, 404} | USER,
    "POST /api/memory/conversations": {200, 403, 413} | USER,  # issue 17: whole-conversation ingest
}
for _label in EXPECTED:
    EXPECTED[_label] = EXPECTED[_label] | {413}  # the body limit: any request's body, a GET's too
    if _label.split(" ", 1)[0] in {"POST", "PUT", "PATCH", "DELETE"}:
        EXPECTED[_label] = EXPECTED[_label] | {415}  # the JSON-only guard


@pytest.fixture(scope="module")
def spec() -> dict[str, Any]:
    """The served document; building it needs no Redis, so a stand-in coordinator is enough."""
    stand_in = cast(MemoryCoordinator, SimpleNamespace(settings=Settings()))
    return create_app(coordinator=stand_in).openapi()


def operations(spec: dict[str, Any]) -> dict[str, dict[str, Any]]:
    return {f"{method.upper()} {path}": op for path, item in spec["paths"].items() for method, op in item.items()}


def resolve(spec: dict[str, Any], schema: dict[str, Any]) -> dict[str, Any]:
    ref = schema.get("$ref", "")
    return spec["components"]["schemas"][ref.rsplit("/", 1)[-1]] if ref else schema


def test_every_operation_documents_exactly_its_statuses(spec: dict[str, Any]) -> None:
    documented = {label: {int(code) for code in op["responses"]} for label, op in operations(spec).items()}
    assert documented == EXPECTED


def test_every_success_has_a_non_empty_schema(spec: dict[str, Any]) -> None:
    for label, op in operations(spec).items():
        successes = [r for code, r in op["responses"].items() if code.startswith("2")]
        assert len(successes) == (2 if label == "POST /api/memory/memories" else 1), label  # 201 or 200 (merged)
        if label == "GET /metrics":
            assert successes[0]["content"] == {"text/plain": {"schema": {"type": "string"}}}
            continue
        schema = successes[0]["content"]["application/json"]["schema"]
        for branch in [resolve(spec, s) for s in schema.get("anyOf", [schema])]:  # POST /forget: two shapes
            assert branch.get("type") == "object" and branch.get("properties"), (label, branch)


def test_every_error_is_a_message_body(spec: dict[str, Any]) -> None:
    """Errors document the handlers' bodies: ``{message, detail?}``, and 422 adds per-field ``errors``
    (never FastAPI's default ``HTTPValidationError``, which the app does not send)."""
    assert "HTTPValidationError" not in spec["components"]["schemas"]
    error = spec["components"]["schemas"]["ErrorOut"]
    assert error["required"] == ["message"] and set(error["properties"]) == {"message", "detail"}
    invalid = spec["components"]["schemas"]["ValidationErrorOut"]
    assert invalid["required"] == ["message"] and set(invalid["properties"]) == {"message", "errors"}
    for label, op in operations(spec).items():
        for code, response in op["responses"].items():
            if int(code) >= 400:
                ref = response["content"]["application/json"]["schema"]["$ref"]
                assert ref.endswith("/ValidationErrorOut" if code == "422" else "/ErrorOut"), (label, code)


def test_api_models_are_camel_case_and_stored_records_keep_their_keys(spec: dict[str, Any]) -> None:
    schemas = spec["components"]["schemas"]
    # the seed's four keys first, then issue 15's queue fields, then a retried end's last end (h15)
    assert list(schemas["SessionEndOut"]["properties"]) == [
        *("sessionId", "saved", "reason", "episode"),
        *("episodeId", "status", "turnsAccepted", "queuePosition", "searchableInS", "lastEnd"),
    ]
    assert list(schemas["EntityOut"]["properties"])[-3:] == ["lastSeen", "episodeIds", "episodeCount"]
    assert set(schemas["MaintenanceRun"]["properties"]) >= {"runId", "userId", "status", "report", "flowRunId"}
    assert "user_id" in schemas["UserProfile"]["properties"]  # the profile is the stored record, as before


@pytest.fixture
def slow_guard_client(settings: Settings) -> Any:
    """The guard defers while a session is live and waits 2 s before its one retry."""
    coordinator = MemoryCoordinator(
        settings.with_overrides(maintenance=MaintenanceConfig(guard_retries=1, guard_delay_s=2.0, nli_enabled=False))
    )
    with TestClient(create_app(coordinator=coordinator)) as client:
        yield client
    coordinator.close()


def test_maintain_answers_202_at_once_and_the_sweep_runs_after(slow_guard_client: TestClient) -> None:
    client = slow_guard_client
    turns = {"turns": [{"role": "user", "content": "still here"}]}
    assert client.post("/api/memory/sessions/live/turns", json=turns, headers=user("bea")).status_code == 200

    started = time.monotonic()
    first = client.post("/api/memory/maintain", headers=user("bea"))  # deferred: 2 s of guard waits
    queued = client.post("/api/memory/maintain", headers=user("ann"))
    again = client.post("/api/memory/maintain", headers=user("ann"))
    assert time.monotonic() - started < 1.5  # none of the requests waited for a sweep
    assert [r.status_code for r in (first, queued, again)] == [202, 202, 202]
    run = queued.json()
    assert run["userId"] == "ann" and run["status"] == "queued" and run["report"] is None
    assert run["runId"].startswith("run-") and queued.headers["location"] == f"/api/memory/maintain/runs/{run['runId']}"
    assert again.json()["runId"] == run["runId"]  # still queued behind bea's sweep: the same run

    for who, run_id in (("bea", first.json()["runId"]), ("ann", run["runId"])):
        done = poll(client, who, run_id)
        assert done["status"] == "deferred" and done["startedAt"] <= done["finishedAt"], done
        assert done["report"]["summary"]["reasons"] == ["active-session", "active-session"]  # 1 retry
        assert done["report"]["summary"]["runId"] == run_id
        assert client.get("/api/memory/maintain/history", headers=user(who)).json()["count"] == 0  # no sweep ran
    assert time.monotonic() - started >= 4.0  # two sweeps, one after the other, each waited 2 s


def poll(client: TestClient, user_id: str, run_id: str) -> dict[str, Any]:
    deadline = time.monotonic() + 60
    while True:
        run = client.get(f"/api/memory/maintain/runs/{run_id}", headers=user(user_id)).json()
        if run["status"] not in ("queued", "running") or time.monotonic() > deadline:
            return run
        time.sleep(0.02)


def test_a_completed_run_is_in_the_history_under_its_run_id(settings: Settings) -> None:
    coordinator = MemoryCoordinator(settings.with_overrides(background_work_policy="always"))
    try:
        with TestClient(create_app(coordinator=coordinator)) as client:
            check_completed_run(client)
    finally:
        coordinator.close()


def check_completed_run(client: TestClient) -> None:
    run = run_maintenance(client, "cid")
    assert run["status"] == "completed" and run["error"] is None and run["flowRunId"] is None
    report = run["report"]
    assert report["summary"]["status"] == "completed" and report["summary"]["runId"] == run["runId"]
    history = client.get("/api/memory/maintain/history", headers=user("cid")).json()
    assert history["count"] == 1 and history["reports"] == [report]
    assert client.get(f"/api/memory/maintain/history/{report['timestamp']}", headers=user("cid")).json() == report

    other = client.get(f"/api/memory/maintain/runs/{run['runId']}", headers=user("someone-else"))
    assert other.status_code == 404 and run["runId"] in other.json()["message"]
    assert client.get("/api/memory/maintain/runs/run-000000000000", headers=user("cid")).status_code == 404
    assert client.get("/api/memory/maintain/runs/bad%20id", headers=user("cid")).status_code == 422
    assert client.put("/api/memory/privacy", json={"opt_out": True}, headers=user("dee")).status_code == 200
    refused = client.post("/api/memory/maintain", headers=user("dee"))
    assert refused.status_code == 403 and "opted out" in refused.json()["message"]
