"""A JSON body whose object names a key twice is refused (issue 15): Python's json.loads kept the last
value silently ({"content": "a", "content": "b"} stored "b"), and other parsers keep the first, so a
proxy and the API could act on different values. The bodies are written as raw text: a dict cannot
hold a key twice."""

from __future__ import annotations

import re

from fastapi.testclient import TestClient

from tests.helpers import user

JSON = {"content-type": "application/json"}


def test_a_key_named_twice_is_a_422_that_names_it_and_nothing_is_written(client: TestClient) -> None:
    headers = user("dup") | JSON
    body = '{"turns": [{"role": "user", "content": "I live in Oslo", "content": "I live in Rome"}]}'
    refused = client.post("/api/memory/sessions/s1/turns", content=body, headers=headers)
    assert refused.status_code == 422, refused.text
    assert refused.json()["errors"] == [
        {"field": "body", "message": "duplicate key 'content': each key may appear once in an object"}
    ]
    assert "duplicate key 'content'" in refused.json()["message"]
    assert client.get("/api/memory/sessions/s1", headers=user("dup")).status_code == 404  # nothing journalled

    top = '{"text": "User lives in Oslo", "kind": "fact", "text": "User lives in Rome"}'
    refused = client.post("/api/memory/memories", content=top, headers=headers)
    assert refused.status_code == 422, refused.text
    assert refused.json()["errors"][0]["message"].startswith("duplicate key 'text'")
    assert client.get("/api/memory/memories", headers=user("dup")).json()["memories"] == []


def test_the_same_key_in_different_objects_and_malformed_json_as_before(client: TestClient) -> None:
    headers = user("dup2") | JSON
    body = (
        '{"turns": [{"role": "user", "content": "I live in Oslo"},'
        ' {"role": "assistant", "content": "Nice city!"}], "speakers": {"user": "Ana"}}'
    )
    appended = client.post("/api/memory/sessions/s2/turns", content=body, headers=headers)
    assert appended.status_code == 200, appended.text
    assert appended.json()["appended"] == 2
    broken = client.post("/api/memory/context", content='{"query": "Oslo",', headers=headers)
    assert broken.status_code == 422
    assert broken.json()["errors"] == [{"field": "body", "message": "malformed JSON (JSON decode error)"}]


def test_the_openapi_422_says_so(client: TestClient) -> None:
    schema = client.get("/openapi.json").json()
    described = schema["paths"]["/api/memory/sessions/{session_id}/turns"]["post"]["responses"]["422"]["description"]
    assert "names a key twice" in described


def test_every_route_with_a_json_body_refuses_a_repeated_key(client: TestClient) -> None:
    """Each operation the OpenAPI document gives a JSON request body: a router made without the strict
    route class would read the body last-wins again."""
    paths = client.get("/openapi.json").json()["paths"]
    operations = [
        (method, re.sub(r"\{[^}]+\}", "x", path))
        for path, item in paths.items()
        for method, op in item.items()
        if "application/json" in op.get("requestBody", {}).get("content", {})
    ]
    assert len(operations) >= 10, operations
    for method, path in operations:
        answered = client.request(method, path, content='{"a": 1, "a": 2}', headers=user("dup3") | JSON)
        assert answered.status_code == 422, (method, path, answered.text)
        assert answered.json()["errors"][0]["message"].startswith("duplicate key 'a'"), (method, path, answered.text)


def test_a_json_body_sent_without_its_content_type_is_a_422_that_says_so(client: TestClient) -> None:
    """A client that forgets ``Content-Type: application/json`` (a hand-made request, a bare
    ``requests.post(data=...)``) got FastAPI's "Input should be a valid dictionary or object to extract
    fields from", which names neither the header nor JSON; nothing is journalled either way."""
    body = b'{"turns": [{"role": "user", "content": "I live in Oslo"}]}'
    refused = client.post("/api/memory/sessions/s1/turns", content=body, headers=user("ct") | {"content-type": ""})
    assert refused.status_code == 422, refused.text
    assert refused.json()["errors"] == [
        {"field": "body", "message": "the body is read as JSON only with Content-Type: application/json"}
    ]
    assert client.get("/api/memory/sessions/s1", headers=user("ct")).status_code == 404
    listed = client.post("/api/memory/sessions/s1/turns", content=b"[1, 2]", headers=user("ct") | JSON)
    assert listed.status_code == 422 and "Content-Type" not in listed.text  # JSON sent: the usual message
    sent = client.post("/api/memory/sessions/s1/turns", content=body, headers=user("ct") | JSON)
    assert sent.status_code == 200, sent.text
