"""agtos.client against the real app in process: every method of MemoryClient and AsyncMemoryClient,
the API's errors as MemoryAPIError, retries on 503, and no public route without a client method."""

from __future__ import annotations

import asyncio
import inspect
import time
from collections.abc import Awaitable, Callable, Iterator
from datetime import UTC, datetime, timedelta
from email.utils import format_datetime
from pathlib import Path
from typing import Any

import httpx
import pytest
from fastapi import FastAPI
from fastapi.testclient import TestClient
from pydantic import ValidationError

from agtos import client as client_module
from agtos.client import AsyncMemoryClient, MemoryAPIError, MemoryClient, retry_delay
from agtos.config import MaintenanceConfig, Settings
from agtos.memory.coordinator import MemoryCoordinator
from agtos.schemas import api as api_models
from agtos.schemas import records
from agtos.schemas.api import ForgetAllOut, ForgetItemOut, SearchOut
from agtos.serving.app import create_app
from agtos.storage.api_keys import ApiKeyStore

SESSION_TURNS = [
    {"role": "user", "content": "I work at Acme Corp and I am moving to Lisbon in March."},
    {"role": "assistant", "content": "Congratulations on the move to Lisbon!"},
    {"role": "user", "content": "I prefer metric units, always answer in Celsius."},
]


@pytest.fixture
def settings(settings: Settings, tmp_path: Path) -> Settings:
    """The shared settings with an empty import home (never the developer's own ~); lint runs at once."""
    (tmp_path / "home").mkdir()
    return settings.model_copy(
        update={
            "import_home": tmp_path / "home",
            "import_enabled": True,
            "background_work_policy": "always",
            "maintenance": MaintenanceConfig(guard_retries=0, guard_delay_s=0.0),
        }
    )


@pytest.fixture
def service_key(coordinator: MemoryCoordinator) -> str:
    """A service key (acts for the user in X-User-Id); with a key in the store, every call needs one."""
    key, _ = ApiKeyStore(coordinator.connector, coordinator.keys).create("service", "client-tests")
    return key


@pytest.fixture
def app(client: TestClient) -> FastAPI:
    """The app the ``client`` fixture serves (its lifespan is running)."""
    return client.app  # type: ignore[return-value]


class Recorder:
    """Calls a client's methods as coroutines (sync ones on a worker thread) and records their names."""

    def __init__(self, target: MemoryClient | AsyncMemoryClient) -> None:
        self.target = target
        self.called: set[str] = set()

    def __getattr__(self, name: str) -> Callable[..., Awaitable[Any]]:
        method = getattr(self.target, name)
        self.called.add(name)

        async def call(*args: Any, **kwargs: Any) -> Any:
            if isinstance(self.target, AsyncMemoryClient):
                return await method(*args, **kwargs)
            return await asyncio.to_thread(method, *args, **kwargs)

        return call


async def every_method(m: Recorder) -> None:
    """One user's life through the client: each method once or more, each answer checked."""
    health = await m.health()
    assert health.status in ("ok", "degraded") and health.tiers.episodic.available
    assert "# HELP" in await m.metrics()

    live = await m.add_turns("s1", SESSION_TURNS, speakers={"user": "Alice"})
    assert (live.session_id, live.message_count) == ("s1", 3)
    assert [t.name for t in (await m.get_session("s1")).messages] == ["Alice", None, "Alice"]
    ended = await m.end_session("s1")
    assert ended.saved and ended.episode is not None
    episode_id = ended.episode.id
    assert [e.id for e in (await m.list_episodes(limit=5)).episodes] == [episode_id]

    found = await m.search("metric units Celsius", limit=3, mode="hybrid")
    assert isinstance(found, SearchOut) and found.results[0].session_id == "s1"
    context = await m.context("what units should I answer in?", token_budget=600)
    assert "Celsius" in context.context and context.tokens <= 600
    answer = await m.ask("Which units does the user prefer?", limit=3)
    assert answer.evidence_ids and answer.question == "Which units does the user prefer?"

    profile = await m.update_profile({"name": "Alice Example"})
    assert profile.profile.name == "Alice Example"
    assert (await m.get_profile()).profile.name == "Alice Example"

    written = await m.add_memory("User takes their coffee black", kind="preference")
    memory_id = written.memory.id
    assert written.created and (written.memory.text, written.memory.kind) == (
        "User takes their coffee black",
        "preference",
    )
    repeated = await m.add_memory("User takes their coffee black.", kind="preference")
    assert (repeated.created, repeated.merged_into) == (False, memory_id)
    assert memory_id in [x.id for x in (await m.list_memories(q="coffee", kind="preference", limit=5)).memories]
    assert (await m.get_memory(memory_id)).text == "User takes their coffee black"
    edited = await m.update_memory(memory_id, text="User takes their coffee with oat milk")
    assert edited.text == "User takes their coffee with oat milk" and edited.valid_until is None
    actions = [c.action for c in (await m.memory_history(memory_id)).changes]
    assert actions[0] == "created" and "edited" in actions
    assert (await m.delete_memory(memory_id)).deleted == memory_id
    with pytest.raises(MemoryAPIError) as forgotten:
        await m.get_memory(memory_id)
    assert forgotten.value.status == 404

    log = {"id": "old-chat", "turns": [{"role": "user", "content": "My sister Ana lives in Porto.", "timestamp": 1}]}
    assert [s.status for s in (await m.ingest_conversations([log])).sessions] == ["stored"]
    assert [s.status for s in (await m.ingest_conversations([log])).sessions] == ["unchanged"]

    dreamt = await m.dream()
    assert dreamt.episodes >= 1
    conclusions = await m.list_conclusions(limit=50)
    assert conclusions.count == len(conclusions.conclusions) >= 1
    first = conclusions.conclusions[0].id
    assert (await m.delete_conclusion(first)).deleted == first
    with pytest.raises(MemoryAPIError) as missing:
        await m.delete_conclusion(first)
    assert missing.value.status == 404 and first in missing.value.message

    response = "First, I compared both flights. Second, I checked the layovers. " * 30
    scored = await m.ingest_response("s2", response, query="Compare the flights", tool_calls=2)
    assert scored.score >= 6 and scored.ingest

    run = await m.maintain()
    assert run.status in ("queued", "running", "completed")
    deadline = time.monotonic() + 120
    while run.status in ("queued", "running"):
        assert time.monotonic() < deadline, run
        await asyncio.sleep(0.05)
        run = await m.maintenance_run(run.run_id)
    assert run.status == "completed" and run.report is not None
    history = await m.maintenance_history(limit=5)
    assert history.count == 1
    assert (await m.maintenance_report(history.reports[0].timestamp)).summary["runId"] == run.run_id

    assert (await m.get_privacy()).opt_out is False
    assert (await m.set_privacy(False)).keys_deleted == 0
    assert (await m.list_sources()).count == 0
    assert (await m.import_sources(["aider"])).sessions == 0

    entities = (await m.list_entities(limit=50)).entities
    by_name = {e.name: e for e in entities}
    assert {"Acme Corp", "Lisbon"} <= set(by_name), sorted(by_name)
    stats = await m.entity_stats()
    assert stats.total == len(entities)
    acme, lisbon = by_name["Acme Corp"], by_name["Lisbon"]
    assert (await m.get_entity(acme.id)).entity.name == "Acme Corp"
    assert "Acme" in (await m.update_entity(acme.id, aliases=["Acme"])).entity.aliases
    assert episode_id in [e.id for e in (await m.entity_episodes(acme.id)).episodes]
    assert (await m.entity_conclusions(acme.id, limit=5)).entity_id == acme.id
    assert (await m.entity_relationships(acme.id)).entity_id == acme.id
    merged = await m.merge_entity(acme.id, lisbon.id)
    assert merged.merged == lisbon.id and "Lisbon" in merged.entity.aliases
    assert (await m.delete_entity(acme.id)).deleted

    one = await m.forget("episode", episode_id)
    assert isinstance(one, ForgetItemOut) and one.forgotten.id == episode_id
    everything = await m.forget("all")
    assert isinstance(everything, ForgetAllOut) and everything.keys_deleted > 0
    assert (await m.list_episodes()).count == 0


def test_sync_client_calls_every_endpoint(client: TestClient, service_key: str) -> None:
    recorder = Recorder(MemoryClient(http=client, api_key=service_key, user_id="alice"))
    asyncio.run(every_method(recorder))
    assert recorder.called == set(client_module.routes().values())


def test_async_client_calls_every_endpoint(app: FastAPI, service_key: str) -> None:
    async def run() -> set[str]:
        http = httpx.AsyncClient(transport=httpx.ASGITransport(app), base_url="http://127.0.0.1")
        async with http, AsyncMemoryClient(http=http, api_key=service_key, user_id="bob") as memory:
            recorder = Recorder(memory)
            await every_method(recorder)
            return recorder.called

    assert asyncio.run(run()) == set(client_module.routes().values())


def test_every_public_route_has_a_client_method(app: FastAPI) -> None:
    """A route added to the API without a client method fails here (and so does a stale one)."""
    documented = {
        (method.upper(), path)
        for path, operations in app.openapi()["paths"].items()
        for method in operations
        if method in ("get", "put", "post", "delete", "patch")
    }
    assert documented == set(client_module.routes())


def schema_names(schema: dict[str, Any]) -> set[str]:
    """The model names a JSON schema stands for ('string' for plain text)."""
    if "$ref" in schema:
        return {schema["$ref"].rsplit("/", 1)[-1].removesuffix("-Output")}
    if "anyOf" in schema:
        return set().union(*(schema_names(s) for s in schema["anyOf"]))
    return {schema.get("title") or schema["type"]}


def test_client_methods_match_the_openapi_contract(app: FastAPI) -> None:
    """Each method sends what its route takes (path and query parameters, body fields) and reads the
    route's own response model: a parameter, field or response model changed on one side only fails."""
    spec = app.openapi()
    components = spec["components"]["schemas"]
    for (method, path), name in client_module.routes().items():
        operation = spec["paths"][path][method.lower()]
        endpoint = vars(client_module.Endpoints)[name]
        arguments = set(inspect.signature(endpoint.build).parameters)
        wanted = {p["name"] for p in operation.get("parameters", ()) if p["in"] in ("path", "query")}
        request = operation.get("requestBody", {}).get("content", {}).get("application/json", {}).get("schema")
        if request is not None:
            (body_model,) = schema_names(request) - {"null"}  # an optional body: the model or null
            takes_whole_body = any(
                body_model in str(p.annotation) for p in inspect.signature(endpoint.build).parameters.values()
            )
            if not takes_whole_body:
                wanted |= set(components[body_model]["properties"])
        assert wanted <= arguments, (name, sorted(wanted - arguments))
        assert arguments <= wanted | {"update"}, (name, sorted(arguments - wanted))
        success = next(r for code, r in operation["responses"].items() if code.startswith("2"))
        (media,) = success["content"].values()
        assert schema_names(media["schema"]) == schema_names(endpoint.result.json_schema(mode="serialization")), name


def test_api_errors_carry_the_message(client: TestClient, service_key: str) -> None:
    memory = MemoryClient(http=client, api_key=service_key, user_id="carol")
    with pytest.raises(MemoryAPIError) as missing:
        memory.get_session("never-started")
    assert missing.value.status == 404
    assert missing.value.message == "no live session 'never-started' for this user"
    assert str(missing.value) == "404: no live session 'never-started' for this user"
    with pytest.raises(MemoryAPIError) as bad_user:
        memory.for_user("not a user").list_episodes()
    assert bad_user.value.status == 400 and "user id" in bad_user.value.message
    with pytest.raises(MemoryAPIError) as out_of_range:
        memory.list_episodes(limit=1000)
    assert out_of_range.value.status == 422
    assert [e["field"] for e in out_of_range.value.errors] == ["query.limit"]
    with pytest.raises(ValidationError):  # the API's own request model refuses it before anything is sent
        memory.context("   ")
    with pytest.raises(MemoryAPIError) as no_key:
        MemoryClient(http=client, user_id="carol").list_episodes()
    assert no_key.value.status == 401
    with pytest.raises(MemoryAPIError) as wrong_key:
        MemoryClient(http=client, api_key="agt_0000_not-a-key", user_id="carol").list_episodes()
    assert wrong_key.value.status == 401


def test_headers_bearer_key_and_user(client: TestClient) -> None:
    seen: list[httpx.Request] = []
    client.event_hooks["request"].append(seen.append)
    MemoryClient(http=client, api_key="agt_secret", user_id="dave").health()
    MemoryClient(http=client).for_user("erin").health()
    assert seen[0].headers["authorization"] == "Bearer agt_secret" and seen[0].headers["x-user-id"] == "dave"
    assert "authorization" not in seen[1].headers and seen[1].headers["x-user-id"] == "erin"


@pytest.fixture
def redis_down_client(tmp_path: Path, unused_port: int) -> Iterator[TestClient]:
    settings = Settings(redis_url=f"redis://127.0.0.1:{unused_port}/0", data_dir=tmp_path / "data", redis_timeout_s=0.2)
    coordinator = MemoryCoordinator(settings)
    with TestClient(create_app(coordinator=coordinator)) as test_client:
        yield test_client
    coordinator.close()


@pytest.fixture
def unused_port() -> int:
    import socket

    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def test_503_is_retried_with_back_off_then_raised(redis_down_client: TestClient) -> None:
    sent: list[float] = []
    redis_down_client.event_hooks["request"].append(lambda _: sent.append(time.monotonic()))
    memory = MemoryClient(http=redis_down_client, user_id="frank", retries=2, backoff_s=0.05)
    with pytest.raises(MemoryAPIError) as down:
        memory.update_profile({"name": "Frank"})
    assert down.value.status == 503 and "unavailable" in down.value.message
    assert len(sent) == 3  # the first try and two retries
    assert sent[1] - sent[0] >= 0.05 and sent[2] - sent[1] >= 0.1  # 0.05 s, then 0.1 s


def test_retry_after_is_honoured() -> None:
    def wait(headers: dict[str, str], attempt: int = 0) -> float:
        return retry_delay(httpx.Response(429, headers=headers), attempt, backoff_s=0.5, max_delay_s=30)

    assert wait({"Retry-After": "7"}) == 7.0
    assert wait({"Retry-After": "3600"}) == 30  # capped
    in_4s = format_datetime(datetime.now(UTC) + timedelta(seconds=4), usegmt=True)
    assert 2.5 <= wait({"Retry-After": in_4s}) <= 4.0
    assert wait({}) == 0.5 and wait({}, attempt=2) == 2.0 and wait({"Retry-After": "soon"}, attempt=1) == 1.0


def test_every_request_body_has_a_valid_example(app: FastAPI) -> None:
    """/openapi.json shows an example for every request body, and each example is a valid request."""
    spec = app.openapi()
    components = spec["components"]["schemas"]
    bodies = {
        name
        for operations in spec["paths"].values()
        for operation in operations.values()
        if "requestBody" in operation
        for name in schema_names(operation["requestBody"]["content"]["application/json"]["schema"]) - {"null"}
    }
    assert {"ContextRequest", "ConversationsIn", "MemoryIn", "ProfileUpdate", "TurnsIn"} <= bodies
    for name in sorted(bodies):
        examples = components[name].get("examples")
        assert examples, f"{name} has no example"
        model = getattr(api_models, name, None) or getattr(records, name)
        for example in examples:
            model.model_validate(example)  # raises on an example that no longer fits its model
