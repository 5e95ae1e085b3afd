"""``agtos mcp`` through the official MCP SDK's own client: stdio (and streamable HTTP) against a real
API server started once for the module (uvicorn on a free port, a fresh key prefix, user API keys)."""

from __future__ import annotations

import asyncio
import json
import os
import socket
import subprocess
import sys
import time
import uuid
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import httpx
import pytest
from mcp import Client, StdioServerParameters
from typer.testing import CliRunner

from agtos.cli import app as cli_app
from tests.helpers import delete_prefix

ROOT = Path(__file__).resolve().parents[1]
TOOLS = {"remember", "recall", "get_context", "ask_about_user", "forget", "list_memories"}


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


@dataclass(frozen=True)
class Api:
    url: str
    env: dict[str, str]
    keys: dict[str, str]  # user -> that user's API key


def wait_healthy(url: str, proc: subprocess.Popen[bytes], timeout_s: float = 60) -> None:
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        assert proc.poll() is None, f"server exited with {proc.returncode}"
        try:
            if httpx.get(f"{url}/health", timeout=2).status_code == 200:
                return
        except httpx.HTTPError:
            time.sleep(0.2)
    raise AssertionError(f"{url} not healthy after {timeout_s} s")


def wait_listening(port: int, proc: subprocess.Popen[bytes], timeout_s: float = 30) -> None:
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        assert proc.poll() is None, f"server exited with {proc.returncode}"
        with socket.socket() as sock:
            if sock.connect_ex(("127.0.0.1", port)) == 0:
                return
        time.sleep(0.2)
    raise AssertionError(f"nothing listens on {port} after {timeout_s} s")


@pytest.fixture(scope="module")
def api(redis_url: str, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Api]:
    """One API server for the module, with a user key for alice and for bob (so auth is on)."""
    prefix = f"agtos-test-mcp-{uuid.uuid4().hex[:8]}"
    env = {
        **os.environ,
        "REDIS_URL": redis_url,
        "AGTOS_KEY_PREFIX": prefix,
        "AGTOS_CONFIG_DIR": str(tmp_path_factory.mktemp("mcp-config")),
        "AGTOS_INGEST_MODE": "inline",
    }
    keys = {}
    for who in ("alice", "bob"):
        created = CliRunner().invoke(cli_app, ["keys", "create", "--user", who], env=env)
        assert created.exit_code == 0, created.output
        keys[who] = created.stdout.strip().splitlines()[-1]
    port = free_port()
    command = [sys.executable, "-m", "uvicorn", "agtos.serving.main:app", "--port", str(port), "--log-level", "warning"]
    server = subprocess.Popen(command, cwd=ROOT, env=env)
    url = f"http://127.0.0.1:{port}"
    try:
        wait_healthy(url, server)
        yield Api(url, env, keys)
    finally:
        server.terminate()
        server.wait(timeout=30)
        delete_prefix(redis_url, prefix)


def mcp_params(api: Api, user: str, key_of: str | None = None) -> StdioServerParameters:
    """``python -m agtos.cli mcp`` for ``user``, with ``key_of``'s key (default: the user's own)."""
    args = ["-m", "agtos.cli", "mcp", "--url", api.url, "--user", user]
    return StdioServerParameters(
        command=sys.executable, args=args, cwd=ROOT, env={**api.env, "AGTOS_API_KEY": api.keys[key_of or user]}
    )


async def call(client: Client, tool: str, **arguments: Any) -> dict[str, Any]:
    """A tool's structured result (the API's response model as JSON); fails on a tool error."""
    result = await client.call_tool(tool, arguments)
    assert not result.is_error, (tool, result.content)
    assert result.structured_content is not None
    return result.structured_content


async def error_of(client: Client, tool: str, **arguments: Any) -> str:
    result = await client.call_tool(tool, arguments)
    assert result.is_error, (tool, result.structured_content)
    return " ".join(getattr(c, "text", "") for c in result.content)


CONSTRAINTS = ("type", "maxLength", "minLength", "pattern", "maximum", "minimum", "enum", "default")


def constraints(schema: dict[str, Any]) -> dict[str, Any]:
    """What a JSON schema allows: its own constraints and, for an optional value, each alternative's (a
    null default is no default: FastAPI leaves it out)."""
    own = {k: schema[k] for k in CONSTRAINTS if schema.get(k) is not None}
    if "anyOf" in schema:
        own["anyOf"] = sorted((constraints(s) for s in schema["anyOf"]), key=json.dumps)
    return own


def test_tools_and_their_schemas_follow_the_api(api: Api) -> None:
    openapi = httpx.get(f"{api.url}/openapi.json").json()
    components = openapi["components"]["schemas"]

    async def run() -> None:
        async with Client(mcp_params(api, "alice"), cache=None) as client:
            tools = {t.name: t for t in (await client.list_tools()).tools}
            assert set(tools) == TOOLS
            resources = (await client.list_resources()).resources
            assert [str(r.uri) for r in resources] == ["memory://profile"]
        # a request model's field has the same bounds and pattern in the tool as in the API
        for tool, model in [
            ("remember", "MemoryIn"),
            ("get_context", "ContextRequest"),
            ("ask_about_user", "AskRequest"),
        ]:
            schema = tools[tool].input_schema
            api_fields = components[model]["properties"]
            assert set(schema["properties"]) == set(api_fields), tool
            for name, prop in schema["properties"].items():
                for constraint in ("maxLength", "minLength", "pattern", "maximum", "minimum", "enum", "default"):
                    assert prop.get(constraint) == api_fields[name].get(constraint), (tool, name, constraint)
            assert schema.get("required", []) == components[model].get("required", []), tool
        # query-parameter tools take the route's parameters, with the same bounds, pattern, default and text
        for tool, path in [("recall", "/api/memory/search"), ("list_memories", "/api/memory/memories")]:
            params = {p["name"]: p for p in openapi["paths"][path]["get"]["parameters"] if p["in"] == "query"}
            schema = tools[tool].input_schema
            assert set(schema["properties"]) == set(params), tool
            for name, prop in schema["properties"].items():
                assert constraints(prop) == constraints(params[name]["schema"]), (tool, name)
                assert prop.get("description") == params[name].get("description"), (tool, name)
            assert sorted(schema.get("required", [])) == sorted(n for n, p in params.items() if p["required"]), tool
        # forget offers one record at a time: no 'all'
        forget = tools["forget"].input_schema
        assert forget["properties"]["kind"]["enum"] == ["episode", "memory", "conclusion", "entity"]
        assert sorted(forget["required"]) == ["id", "kind"]

    asyncio.run(run())


def seed_conversation(api: Api) -> None:
    """A past conversation of alice's, through the API with her key."""
    session = {
        "id": "trip-planning",
        "speakers": {"user": "Alice"},
        "turns": [
            {"role": "user", "content": "I am planning a hiking trip to the Dolomites in September."},
            {"role": "assistant", "content": "The Dolomites are lovely in September."},
        ],
    }
    headers = {"Authorization": f"Bearer {api.keys['alice']}", "X-User-Id": "alice"}
    # the first ingest loads the NER and embedding models in the server: more than httpx's 5 s on a busy machine
    ingested = httpx.post(
        f"{api.url}/api/memory/conversations", json={"sessions": [session]}, headers=headers, timeout=120
    )
    assert ingested.status_code == 200 and ingested.json()["stored"] == 1, ingested.text


def test_every_tool_through_stdio(api: Api) -> None:
    seed_conversation(api)

    async def run() -> None:
        async with Client(mcp_params(api, "alice"), cache=None) as client:
            written = await call(client, "remember", text="User takes their coffee black", kind="preference")
            memory_id = written["memory"]["id"]
            assert (written["created"], written["memory"]["kind"]) == (True, "preference")
            merged = await call(client, "remember", text="User takes their coffee black.", kind="preference")
            assert merged["mergedInto"] == memory_id

            listed = await call(client, "list_memories", q="coffee")
            assert [m["text"] for m in listed["memories"]] == ["User takes their coffee black"]
            found = await call(client, "recall", q="hiking trip Dolomites", limit=3)
            assert found["results"][0]["sessionId"] == "trip-planning"
            context = await call(client, "get_context", query="How does the user take their coffee?", token_budget=300)
            assert "coffee black" in context["context"]
            answer = await call(client, "ask_about_user", question="How does the user take their coffee?")
            assert memory_id in answer["evidenceIds"]

            profile = await client.read_resource("memory://profile")
            assert json.loads(profile.contents[0].text)["user_id"] == "alice"  # type: ignore[union-attr]

            refused = await error_of(client, "get_context", query="x", token_budget=10)  # the model's bound
            assert "token_budget" in refused and "greater than or equal to 50" in refused
            forgotten = await call(client, "forget", kind="memory", id=memory_id)
            assert forgotten["result"]["forgotten"] == {"kind": "memory", "id": memory_id}
            assert "404" in await error_of(client, "forget", kind="memory", id=memory_id)
            assert memory_id not in [m["id"] for m in (await call(client, "list_memories"))["memories"]]

    asyncio.run(run())


def test_two_users_are_isolated_through_mcp(api: Api) -> None:
    async def run() -> None:
        async with (
            Client(mcp_params(api, "alice"), cache=None) as alice,
            Client(mcp_params(api, "bob"), cache=None) as bob,
        ):
            mine = await call(alice, "remember", text="Alice's locker code is 4711", kind="fact")
            theirs = await call(bob, "remember", text="Bob is allergic to peanuts", kind="fact")
            alice_texts = [m["text"] for m in (await call(alice, "list_memories"))["memories"]]
            bob_texts = [m["text"] for m in (await call(bob, "list_memories"))["memories"]]
            assert "Alice's locker code is 4711" in alice_texts and "Bob is allergic to peanuts" not in alice_texts
            assert bob_texts == ["Bob is allergic to peanuts"]
            assert (await call(bob, "recall", q="hiking Dolomites"))["count"] == 0
            assert "4711" not in (await call(bob, "get_context", query="locker code 4711"))["context"]
            assert "404" in await error_of(bob, "forget", kind="memory", id=mine["memory"]["id"])
            assert (await call(alice, "list_memories", q="locker"))["count"] == 1
            assert theirs["memory"]["id"] != mine["memory"]["id"]
        # bob's key cannot be used to act as alice
        async with Client(mcp_params(api, "alice", key_of="bob"), cache=None) as impostor:
            assert "403" in await error_of(impostor, "list_memories")

    asyncio.run(run())


def test_streamable_http(api: Api) -> None:
    port = free_port()
    command = [sys.executable, "-m", "agtos.cli", "mcp", "--http", "--port", str(port), "--url", api.url]
    env = {**api.env, "AGTOS_API_KEY": api.keys["bob"], "AGTOS_USER_ID": "bob"}
    server = subprocess.Popen(command, cwd=ROOT, env=env)
    wait_listening(port, server)

    async def run() -> None:
        async with Client(f"http://127.0.0.1:{port}/mcp", cache=None) as client:
            assert {t.name for t in (await client.list_tools()).tools} == TOOLS
            await call(client, "remember", text="Bob prefers aisle seats", kind="preference")
            listed = await call(client, "list_memories", q="aisle seats")
            assert [m["text"] for m in listed["memories"]] == ["Bob prefers aisle seats"]

    try:
        asyncio.run(run())
    finally:
        server.terminate()
        server.wait(timeout=30)


@pytest.fixture(scope="module")
def in_process_env(redis_url: str, tmp_path_factory: pytest.TempPathFactory) -> Iterator[dict[str, str]]:
    """The environment of an ``agtos mcp`` with no --url: the API runs inside it, on a fresh key prefix, no keys."""
    prefix = f"agtos-test-mcp-local-{uuid.uuid4().hex[:8]}"
    env = {
        **{k: v for k, v in os.environ.items() if k not in ("AGTOS_URL", "AGTOS_API_KEY", "AGTOS_USER_ID")},
        "REDIS_URL": redis_url,
        "AGTOS_KEY_PREFIX": prefix,
        "AGTOS_CONFIG_DIR": str(tmp_path_factory.mktemp("mcp-local-config")),
    }
    try:
        yield env
    finally:
        delete_prefix(redis_url, prefix)


def local_params(env: dict[str, str], user: str) -> StdioServerParameters:
    """``python -m agtos.cli mcp`` with no URL and no key, acting for ``user`` (AGTOS_USER_ID)."""
    return StdioServerParameters(
        command=sys.executable, args=["-m", "agtos.cli", "mcp"], cwd=ROOT, env={**env, "AGTOS_USER_ID": user}
    )


def test_in_process_mode_over_stdio(in_process_env: dict[str, str], tmp_path: Path) -> None:
    # a past conversation of carol's, back-filled in process on the same Redis and prefix
    session = {
        "id": "garden-chat",
        "speakers": {"user": "Carol"},
        "turns": [
            {"role": "user", "content": "My tomato seedlings in the greenhouse keep wilting."},
            {"role": "assistant", "content": "Tomato seedlings wilt when the soil stays too wet."},
        ],
    }
    log = tmp_path / "carol.jsonl"
    log.write_text(json.dumps(session) + "\n", encoding="utf-8")
    # the CLI in this process (its own process is test_conversation_ingest's and the MCP servers' here)
    done = CliRunner().invoke(cli_app, ["memory", "ingest", str(log), "--user", "carol"], env=in_process_env)
    assert done.exit_code == 0, done.output
    assert "1 session(s): stored 1, unchanged 0, skipped 0" in done.output

    async def run() -> None:
        async with (
            Client(local_params(in_process_env, "carol"), cache=None) as carol,
            Client(local_params(in_process_env, "dave"), cache=None) as dave,
        ):
            assert {t.name for t in (await carol.list_tools()).tools} == TOOLS
            written = await call(carol, "remember", text="User grows tomatoes in a greenhouse", kind="fact")
            memory_id = written["memory"]["id"]
            assert (written["created"], written["memory"]["kind"]) == (True, "fact")
            merged = await call(carol, "remember", text="User grows tomatoes in a greenhouse.", kind="fact")
            assert merged["mergedInto"] == memory_id

            listed = {m["id"]: m["text"] for m in (await call(carol, "list_memories"))["memories"]}
            assert listed[memory_id] == "User grows tomatoes in a greenhouse"  # besides what the ingest extracted
            assert memory_id in [m["id"] for m in (await call(carol, "list_memories", q="tomatoes"))["memories"]]
            found = await call(carol, "recall", q="tomato seedlings wilting", limit=3)
            assert found["results"][0]["sessionId"] == "garden-chat"
            context = await call(carol, "get_context", query="What does the user grow?", token_budget=300)
            assert "tomatoes in a greenhouse" in context["context"]
            profile = await carol.read_resource("memory://profile")
            assert json.loads(profile.contents[0].text)["user_id"] == "carol"  # type: ignore[union-attr]

            # dave's server shares the Redis and the prefix, not carol's memory
            theirs = await call(dave, "remember", text="User is learning the cello", kind="fact")
            dave_texts = [m["text"] for m in (await call(dave, "list_memories"))["memories"]]
            assert dave_texts == ["User is learning the cello"]
            assert (await call(dave, "recall", q="tomato seedlings wilting"))["count"] == 0
            assert "tomatoes" not in (await call(dave, "get_context", query="What does the user grow?"))["context"]
            assert "404" in await error_of(dave, "forget", kind="memory", id=memory_id)
            assert set(listed) == {m["id"] for m in (await call(carol, "list_memories"))["memories"]}
            assert theirs["memory"]["id"] != memory_id

            forgotten = await call(carol, "forget", kind="memory", id=memory_id)
            assert forgotten["result"]["forgotten"] == {"kind": "memory", "id": memory_id}
            assert memory_id not in [m["id"] for m in (await call(carol, "list_memories"))["memories"]]

    asyncio.run(run())
