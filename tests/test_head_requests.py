"""HEAD is answered like GET without a body (RFC 9110 9.3.2) wherever GET is served: an uptime
monitor's ``HEAD /health`` answered 405 (FastAPI's routes do not serve HEAD; helper 3's probe of
2026-12-06). A path without GET still refuses HEAD, and its 405's ``Allow`` says what it serves."""

from __future__ import annotations

from fastapi.testclient import TestClient

from tests.helpers import user


def test_head_health_is_get_without_its_body(client: TestClient) -> None:
    got, head = client.get("/health"), client.head("/health")
    assert (head.status_code, got.status_code) == (200, 200), head.text
    assert head.content == b""
    assert head.headers["content-type"] == got.headers["content-type"] == "application/json"


def test_head_of_a_users_list_is_guarded_and_sized_like_its_get(client: TestClient) -> None:
    got = client.get("/api/memory/episodes", headers=user("head"))
    head = client.head("/api/memory/episodes", headers=user("head"))
    assert got.json() == {"episodes": [], "count": 0, "available": True}
    assert head.status_code == 200 and head.content == b""
    assert head.headers["content-length"] == str(len(got.content)) == "42"
    bad = {"X-User-Id": "a*"}  # a glob character: refused, for HEAD as for GET
    assert client.head("/api/memory/episodes", headers=bad).status_code == 400
    assert client.get("/api/memory/episodes", headers=bad).status_code == 400


def test_head_where_only_post_is_served_is_a_405_that_allows_post(client: TestClient) -> None:
    refused = client.head("/api/memory/dream", headers=user("head"))
    assert refused.status_code == 405
    assert refused.headers["allow"] == "POST"


def test_a_405_of_a_get_path_allows_head_too(client: TestClient) -> None:
    refused = client.request("PATCH", "/api/memory/episodes", headers=user("head"))
    assert refused.status_code == 405
    assert refused.headers["allow"].split(", ")[:2] == ["GET", "HEAD"]


def test_the_middleware_sends_no_body_bytes_whatever_server_runs_it() -> None:
    """The HTTP clients and uvicorn drop a HEAD response's body themselves, so the test client cannot see one;
    the ASGI messages the middleware sends are what another server would put on the wire."""
    import asyncio

    from starlette.types import Message, Receive, Scope, Send

    from agtos.serving.head_requests import HeadAsGetMiddleware

    seen_methods: list[str] = []

    async def app(scope: Scope, receive: Receive, send: Send) -> None:
        seen_methods.append(scope["method"])
        await send({"type": "http.response.start", "status": 200, "headers": [(b"content-length", b"5")]})
        await send({"type": "http.response.body", "body": b"hello", "more_body": False})

    sent: list[Message] = []

    async def send(message: Message) -> None:
        sent.append(message)

    async def receive() -> Message:
        return {"type": "http.request", "body": b"", "more_body": False}

    scope = {"type": "http", "method": "HEAD", "path": "/", "headers": []}
    asyncio.run(HeadAsGetMiddleware(app)(scope, receive, send))
    assert seen_methods == ["GET"]
    assert sent == [
        {"type": "http.response.start", "status": 200, "headers": [(b"content-length", b"5")]},
        {"type": "http.response.body", "body": b"", "more_body": False},
    ]
