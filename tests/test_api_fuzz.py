"""Bad input: schemathesis against the app's own OpenAPI schema, plus body and query size limits.

Every operation gets a bounded, derandomized run (positive and negative examples):
no response may be a 5xx, every 4xx/5xx must be a JSON object with a non-empty
string ``message``, and every response must conform to the schema (a documented status
code and content type, a body valid against the declared response model). The app runs
on a real Redis under a unique key prefix, without Prefect (the inline paths), with the
guard's waits turned off and the import home pointed at an empty folder, so nothing reads
the real home directory. Nothing is excluded.
After each operation the seeded user's reads must still answer 200 and agtos must have
logged no error (a corrupt stored record shows up there, not as a 500).

The operations are parametrized from the app's schema at collection time and each is run
with ``@given(operation.as_strategy(...))``: schemathesis' own pytest loader
(``schemathesis.pytest.from_fixture``) fails on this pytest (``Function._nodeid``).
"""

from __future__ import annotations

import asyncio
import json
import logging
import uuid
from collections.abc import Iterator
from types import SimpleNamespace
from typing import Any, cast

import pytest
import schemathesis
from fastapi import FastAPI, HTTPException
from fastapi.responses import JSONResponse, PlainTextResponse
from fastapi.testclient import TestClient
from hypothesis import HealthCheck, Phase, given, settings
from hypothesis import strategies as st
from pydantic import BaseModel
from schemathesis.checks import (
    content_type_conformance,
    not_a_server_error,
    response_schema_conformance,
    status_code_conformance,
)
from schemathesis.generation.modes import GenerationMode
from starlette.types import Message, Receive, Scope, Send

from agtos.config import MaintenanceConfig, Settings
from agtos.memory.coordinator import MemoryCoordinator
from agtos.serving.app import create_app
from agtos.serving.errors import install_error_handlers
from agtos.serving.limits import BodySizeLimitMiddleware
from tests.helpers import delete_prefix, run_maintenance, talk, user
from tests.hypothesis_profiles import selected as hypothesis_profile

# per operation (x every operation of the schema): 30 in the dev and ci profiles, 300 under `make fuzz`
MAX_EXAMPLES = 300 if hypothesis_profile() == "fuzz" else 30
FUZZ_USER = "fuzz.user@example-1"
OTHER_USER = "fuzz-other"
WIPES_USER = {"POST /api/memory/forget", "PUT /api/memory/privacy"}
READS: list[tuple[str, str, dict[str, Any]]] = [
    ("GET", "/api/memory/profile", {}),
    ("GET", "/api/memory/episodes", {"params": {"limit": 100}}),
    ("GET", "/api/memory/conclusions", {"params": {"limit": 200}}),
    ("GET", "/api/entities", {"params": {"limit": 100}}),
    ("GET", "/api/memory/search", {"params": {"q": "Berlin Python"}}),
    ("POST", "/api/memory/context", {"json": {"query": "Berlin", "session_id": "live"}}),
    ("POST", "/api/memory/ask", {"json": {"question": "Where do I work?"}}),
    ("POST", "/api/memory/dream", {}),
]


def _error_body(response: Any) -> str | None:
    """Why an error response breaks the contract, or None when it is a JSON body with a message."""
    try:
        body = json.loads(response.content)
    except ValueError:
        return f"error {response.status_code} is not JSON: {response.content[:200]!r}"
    if not isinstance(body, dict):
        return f"error {response.status_code} body is not an object: {body!r}"
    message = body.get("message")
    if not isinstance(message, str) or not message.strip():
        return f"error {response.status_code} has no non-empty string 'message': {body!r}"
    return None


@schemathesis.check
def error_has_json_message(
    ctx: schemathesis.CheckContext, response: schemathesis.Response, case: schemathesis.Case
) -> bool | None:
    """Every 4xx/5xx is a JSON object with a non-empty string ``message``."""
    if response.status_code >= 400:
        problem = _error_body(response)
        if problem:
            raise AssertionError(problem)
    return None


CHECKS = [
    not_a_server_error,
    error_has_json_message,
    status_code_conformance,
    content_type_conformance,
    response_schema_conformance,
]


@pytest.fixture(scope="module")
def fuzz_app(redis_url: str, tmp_path_factory: pytest.TempPathFactory) -> Iterator[FastAPI]:
    """One app for the whole module (the embedder loads once) under its own key prefix."""
    tmp = tmp_path_factory.mktemp("fuzz")
    home = tmp / "empty-home"
    home.mkdir()
    prefix = f"agtos-test-{uuid.uuid4().hex[:10]}"
    config = Settings(
        redis_url=redis_url,
        key_prefix=prefix,
        data_dir=tmp / "data",
        config_dir=tmp / "config",
        background_work_policy="always",
        maintenance=MaintenanceConfig(guard_retries=0, guard_delay_s=0.0, nli_enabled=False),
        dreamer_retries=0,
        dreamer_retry_delay_s=0.0,
        import_home=home,
    )
    coordinator = MemoryCoordinator(config)
    try:
        yield create_app(coordinator=coordinator)
    finally:
        coordinator.close()
        delete_prefix(redis_url, prefix)


def _operation_labels() -> list[str]:
    """``METHOD /path`` of every operation, read from the app's schema at collection time.

    The schemathesis pytest loader (``from_fixture``) does not run on this pytest, and the
    real app needs Redis; the schema itself needs neither, so a stand-in coordinator is enough.
    """
    stand_in = cast(MemoryCoordinator, SimpleNamespace(settings=Settings()))
    paths: dict[str, dict[str, Any]] = create_app(coordinator=stand_in).openapi()["paths"]
    return [f"{method.upper()} {path}" for path, item in paths.items() for method in item]


OPERATIONS = _operation_labels()


@pytest.fixture(scope="module")
def seeded(fuzz_app: FastAPI) -> dict[str, str]:
    """Real records of FUZZ_USER, so path parameters can also name things that exist (not only 404s)."""
    with TestClient(fuzz_app) as client:
        talk(
            client,
            FUZZ_USER,
            "seed",
            ("user", "I work with Maria Lopez at Acme Corp in Berlin. Remember that I prefer Python over Java."),
            ("assistant", "Got it: Maria Lopez at Acme Corp in Berlin, and you prefer Python."),
        )
        assert client.post("/api/memory/dream", headers=user(FUZZ_USER)).status_code == 200
        run = run_maintenance(client, FUZZ_USER)
        assert run["status"] == "completed"
        live = client.post(
            "/api/memory/sessions/live/turns",
            json={"turns": [{"role": "user", "content": "still talking about Berlin"}]},
            headers=user(FUZZ_USER),
        )
        assert live.status_code == 200, live.text
        entities = client.get("/api/entities", headers=user(FUZZ_USER)).json()["entities"]
        conclusions = client.get("/api/memory/conclusions", headers=user(FUZZ_USER)).json()["conclusions"]
        reports = client.get("/api/memory/maintain/history", headers=user(FUZZ_USER)).json()["reports"]
        memories = [
            client.post("/api/memory/memories", json={"text": text}, headers=user(FUZZ_USER)).json()["memory"]["id"]
            for text in ("User keeps bees on the roof", "User plays the oboe")
        ]
    assert len(entities) >= 2 and conclusions and reports
    return {
        "entity_id": entities[0]["id"],
        "doomed_entity_id": entities[-1]["id"],  # the one DELETE may remove
        "conclusion_id": conclusions[0]["id"],
        "session_id": "live",
        "timestamp": str(reports[0]["timestamp"]),
        "run_id": run["runId"],
        "memory_id": memories[0],
        "doomed_memory_id": memories[1],  # the one DELETE may remove
    }


def _existing_path(label: str, seeded: dict[str, str]) -> dict[str, str] | None:
    """Path parameters naming seeded records for this operation, or None when it has none."""
    method, path = label.split(" ", 1)
    names = [part[1:-1] for part in path.split("/") if part.startswith("{")]
    if not names:
        return None
    chosen = {name: seeded[name] for name in names}
    if method == "DELETE" and "entity_id" in chosen:
        chosen["entity_id"] = seeded["doomed_entity_id"]
    if method == "DELETE" and "memory_id" in chosen:
        chosen["memory_id"] = seeded["doomed_memory_id"]
    return chosen


def _fuzz(
    app: FastAPI, label: str, headers: dict[str, str] | None, existing: dict[str, str] | None, shrink: bool = True
) -> None:
    """Run the bounded, derandomized schemathesis cases of one operation against ``app``."""
    loaded = schemathesis.openapi.from_asgi("/openapi.json", app)
    operation = loaded.find_operation_by_label(label)
    assert operation is not None, f"{label} is not in the served schema"
    strategies = [
        operation.as_strategy(generation_mode=mode, headers=fixed)
        for mode in GenerationMode
        for fixed in (None, headers)
    ]
    if existing:
        strategies += [
            operation.as_strategy(generation_mode=mode, headers=headers, path_parameters=existing)
            for mode in GenerationMode
        ]

    @given(case=st.one_of(strategies))
    @settings(
        max_examples=MAX_EXAMPLES,  # derandomize, deadline, database: from the profile
        report_multiple_bugs=False,
        phases=[phase for phase in Phase if shrink or phase is not Phase.shrink],
        suppress_health_check=list(HealthCheck),
    )
    def run(case: schemathesis.Case) -> None:
        case.call_and_validate(checks=CHECKS)

    run()


@pytest.mark.parametrize("label", OPERATIONS)
def test_no_server_errors_and_json_errors(
    fuzz_app: FastAPI, seeded: dict[str, str], label: str, caplog: pytest.LogCaptureFixture
) -> None:
    """Valid and invalid requests mixed (an operation without parameters has no invalid ones).

    Random ``X-User-Id`` values are nearly all rejected (400) and random ids are unknown
    (404), so cases also come with the seeded user and, where the path names a record,
    with a record that exists, to reach the deeper code. Errors logged by agtos count as
    failures too: work done after the response (the Dreamer on session end) logs, not 500s.
    """
    # forgetting everything or opting out would empty the seeded user for the operations after it
    headers = {"X-User-Id": OTHER_USER if label in WIPES_USER else FUZZ_USER}
    with caplog.at_level(logging.ERROR, logger="agtos"):
        _fuzz(fuzz_app, label, headers, _existing_path(label, seeded))
    logged = [r for r in caplog.records if r.name.startswith("agtos") and r.levelno >= logging.ERROR]
    assert not logged, "\n".join(f"{r.name}: {r.getMessage()} {r.exc_text or ''}" for r in logged[:3])
    _assert_reads_still_work(fuzz_app, {"X-User-Id": FUZZ_USER})


def _assert_reads_still_work(app: FastAPI, headers: dict[str, str]) -> None:
    """Whatever the fuzzed writes stored, the user's reads still answer 200 (no corrupt record)."""
    with TestClient(app) as client:
        for method, url, kwargs in READS:
            response = client.request(method, url, headers=headers, **kwargs)
            assert response.status_code == 200, (method, url, response.text)


def test_the_fuzz_harness_catches_500s_plain_text_errors_and_schema_drift() -> None:
    """The checks are not vacuous: a crash, a JSON 5xx, a non-JSON 4xx and a body that breaks
    its declared response model each fail the run."""
    tiny = FastAPI()
    install_error_handlers(tiny)

    class Count(BaseModel):
        count: int

    @tiny.get("/drift", response_model=Count)
    def drift(n: int) -> JSONResponse:
        return JSONResponse({"count": "many"})  # a raw response skips the model: only the check sees it

    @tiny.get("/boom")
    def boom(n: int) -> dict[str, int]:
        raise RuntimeError(f"crash {n}")

    @tiny.get("/down")
    def down(n: int) -> dict[str, int]:
        raise HTTPException(503, "down")

    @tiny.get("/plain")
    def plain(n: int) -> PlainTextResponse:
        return PlainTextResponse("nope", status_code=400)

    cases = (
        ("GET /boom", "crash"),
        ("GET /down", "[503]"),
        ("GET /plain", "is not JSON"),
        ("GET /drift", "Response violates schema"),
    )
    for label, expected in cases:
        try:
            _fuzz(tiny, label, None, None, shrink=False)
        except BaseException as exc:  # schemathesis' FailureGroup (a BaseExceptionGroup) or the app's own exception
            assert expected in str(exc), str(exc)
        else:
            pytest.fail(f"{label}: the fuzz run passed")


def test_every_operation_is_fuzzed(fuzz_app: FastAPI) -> None:
    served = schemathesis.openapi.from_asgi("/openapi.json", fuzz_app)
    labels = {result.ok().label for result in served.get_all_operations()}
    assert labels == set(OPERATIONS)


# -- size limits ---------------------------------------------------------------------


def test_oversized_body_by_content_length_is_413(client: TestClient) -> None:
    body = json.dumps({"question": "x" * (1_048_576 + 10)}).encode()
    response = client.post(
        "/api/memory/ask", content=body, headers={"content-type": "application/json", "X-User-Id": "big"}
    )
    assert response.status_code == 413
    assert response.json()["message"].startswith("request body too large")


def test_oversized_chunked_body_is_413(client: TestClient) -> None:
    def chunks() -> Iterator[bytes]:
        yield b'{"question": "'
        for _ in range(64):  # 2 MiB in 32 KiB chunks, no Content-Length
            yield b"y" * 32_768
        yield b'"}'

    response = client.post(
        "/api/memory/ask", content=chunks(), headers={"content-type": "application/json", "X-User-Id": "big"}
    )
    assert response.status_code == 413, response.text
    assert response.request.headers.get("transfer-encoding") == "chunked"
    assert "content-length" not in response.request.headers
    assert response.json()["message"].startswith("request body too large")


def test_small_chunked_body_still_works(client: TestClient) -> None:
    def chunks() -> Iterator[bytes]:
        yield b'{"question": '
        yield b'"what do I like?"}'

    response = client.post(
        "/api/memory/ask", content=chunks(), headers={"content-type": "application/json", "X-User-Id": "small"}
    )
    assert response.status_code == 200, response.text


def test_streamed_body_reading_stops_at_the_limit() -> None:
    """At the ASGI level (the test client buffers bodies): reading stops at the chunk that passes the limit."""
    pulled: list[int] = []
    sent: list[Message] = []

    async def receive() -> Message:
        pulled.append(1)
        return {"type": "http.request", "body": b"x" * 100, "more_body": len(pulled) < 1_000}

    async def send(message: Message) -> None:
        sent.append(message)

    async def reads_everything(scope: Scope, receive: Receive, send: Send) -> None:
        while (await receive()).get("more_body"):
            pass
        await send({"type": "http.response.start", "status": 200, "headers": []})
        await send({"type": "http.response.body", "body": b"read it all"})

    scope: Scope = {"type": "http", "method": "POST", "path": "/", "headers": [(b"transfer-encoding", b"chunked")]}
    asyncio.run(BodySizeLimitMiddleware(reads_everything, max_body_bytes=1_000)(scope, receive, send))
    assert len(pulled) == 11  # 1,100 bytes: one chunk past the limit, not the 100,000 offered
    assert sent[0]["status"] == 413
    assert json.loads(sent[1]["body"])["message"] == "request body too large: the limit is 1000 bytes"


def test_body_limit_is_configurable(settings: Settings) -> None:
    coordinator = MemoryCoordinator(settings.with_overrides(max_body_bytes=64))
    try:
        with TestClient(create_app(coordinator=coordinator)) as small:
            ok = small.post("/api/memory/ask", json={"question": "hi"}, headers={"X-User-Id": "u"})
            assert ok.status_code == 200, ok.text
            big = small.post("/api/memory/ask", json={"question": "h" * 100}, headers={"X-User-Id": "u"})
            assert big.status_code == 413 and "64 bytes" in big.json()["message"]
    finally:
        coordinator.close()


def test_max_body_bytes_from_env(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("AGTOS_MAX_BODY_BYTES", "2048")
    assert Settings.from_env().max_body_bytes == 2048
    monkeypatch.delenv("AGTOS_MAX_BODY_BYTES")
    assert Settings.from_env().max_body_bytes == 1_048_576  # the documented 1 MiB


@pytest.mark.parametrize(
    ("path", "param", "limit"),
    [("/api/memory/search", "q", 1_000), ("/api/entities", "q", 256)],
)
def test_huge_query_strings_are_422(client: TestClient, path: str, param: str, limit: int) -> None:
    response = client.get(path, params={param: "z" * 60_000}, headers={"X-User-Id": "q"})
    assert response.status_code == 422
    assert response.json()["message"]
    at_limit = client.get(path, params={param: "z" * limit}, headers={"X-User-Id": "q"})
    assert at_limit.status_code == 200, at_limit.text


@pytest.mark.parametrize(
    ("path", "body"),
    [
        ("/api/memory/ask", {"question": "q" * 2_001}),
        ("/api/memory/context", {"query": "q" * (1_000 + 1)}),
        ("/api/memory/responses", {"session_id": "s", "response": "r", "query": "q" * 10_001}),
        ("/api/memory/sessions/s/turns", {"turns": [{"role": "user", "content": "c", "name": "n" * 129}]}),
        ("/api/memory/profile", {"preferences": ["p" * 5_001]}),
        ("/api/memory/profile", {"name": "n" * 257}),
    ],
)
def test_long_body_strings_are_422(client: TestClient, path: str, body: dict[str, Any]) -> None:
    method = client.put if path.endswith("/profile") else client.post
    response = method(path, json=body, headers={"X-User-Id": "long"})
    assert response.status_code == 422, response.text
    assert response.json()["message"]


def test_error_contract_helper() -> None:
    class Fake:
        def __init__(self, status: int, content: bytes) -> None:
            self.status_code, self.content = status, content

    assert _error_body(Fake(400, b'{"message": "bad"}')) is None
    assert _error_body(Fake(500, b"Internal Server Error"))
    assert _error_body(Fake(404, b'{"detail": "x"}'))
    assert _error_body(Fake(404, b'{"message": ""}'))


def test_profile_fields_sent_as_null_keep_the_profile_readable(client: TestClient) -> None:
    """Schemathesis finding: ``{"preferences": null}`` was stored as null, and every later read failed."""
    headers = {"X-User-Id": "nulls"}
    put = client.put("/api/memory/profile", json={"name": "Ada", "preferences": ["tea"]}, headers=headers)
    assert put.status_code == 200, put.text
    nulls = {"preferences": None, "patterns": None, "facts": None, "opt_out": None, "communication_style": None}
    put = client.put("/api/memory/profile", json=nulls, headers=headers)
    assert put.status_code == 200, put.text
    got = client.get("/api/memory/profile", headers=headers)
    assert got.status_code == 200, got.text
    profile = got.json()["profile"]
    assert profile["preferences"] == ["tea"] and profile["patterns"] == [] and profile["opt_out"] is False
    cleared = client.put("/api/memory/profile", json={"name": None}, headers=headers).json()["profile"]
    assert cleared["name"] is None and cleared["preferences"] == ["tea"]
    context = client.post("/api/memory/context", json={"query": "tea"}, headers=headers)
    assert context.status_code == 200, context.text


def test_home_is_not_scanned(fuzz_app: FastAPI) -> None:
    with TestClient(fuzz_app) as client:  # issue 15: no service key, no AGTOS_IMPORT_ENABLED: never scanned
        assert client.get("/api/memory/sources").status_code == 403
