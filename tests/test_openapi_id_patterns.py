"""The OpenAPI document states the ids the server accepts (issue 15): every id in a path, the
``X-User-Id`` header and the id fields of request bodies declare a pattern and a length, and the
server agrees with them. Whether a value fits is decided by the ``jsonschema`` library on the
declared schema (not by the code under test); a value that fits is never refused as an id, one that
does not is a 422 (path, body) or a 400 (the header, as the README says). schemathesis called ~11
request kinds "valid but rejected" while ``memory_id``/``entity_id`` declared no pattern and ``...``
fitted the session pattern but was refused."""

from __future__ import annotations

import copy
from typing import Any

import pytest
from fastapi.testclient import TestClient
from jsonschema import Draft202012Validator  # type: ignore[import-untyped]

from tests.helpers import user

# from the README: letters, digits, `_ . -` (and `@` in a user id), up to 128 characters, not only dots;
# the rest are characters with a meaning in Redis keys and glob patterns, or in paths
CANDIDATES = [
    "ent-0123456789ab",
    "a",
    "A.b_c-9",
    ".a",
    "a..",
    "x" * 128,
    "x" * 129,
    ".",
    "...",
    "a@b.org",
    "a:b",
    "a*",
    "a?",
    "a[b]",
    "{a}",
    "a b",
    "a%b",
    "é",
    "-",
    "_",
    "",
]
# what a client's unset variable becomes: refused as a user (README, "Auth"), stated by the header's pattern
PLACEHOLDERS = ["null", "NaN", "None", "undefined", "UNDEFINED"]
BODY_IDS = {  # (operation, where the id goes in its example body)
    ("post", "/api/memory/context"): ("session_id",),
    ("post", "/api/memory/responses"): ("session_id",),
    ("post", "/api/memory/forget"): ("id",),
    ("post", "/api/memory/memories"): ("source",),
    ("post", "/api/entities/{entity_id}/merge"): ("duplicate_id",),
    ("post", "/api/memory/conversations"): ("sessions", 0, "id"),
}


def _resolve(doc: dict[str, Any], schema: dict[str, Any]) -> dict[str, Any]:
    while "$ref" in schema:
        schema = doc["components"]["schemas"][schema["$ref"].rsplit("/", 1)[1]]
    return schema


def _example(doc: dict[str, Any], operation: dict[str, Any]) -> Any:
    if "requestBody" not in operation:
        return None
    schema = _resolve(doc, operation["requestBody"]["content"]["application/json"]["schema"])
    return copy.deepcopy(schema["examples"][0])


def _fits(schema: dict[str, Any], value: str) -> bool:
    return Draft202012Validator(schema).is_valid(value)


def _encoded(value: str) -> str:
    """Every byte percent-escaped: the route sees the value as is (no dot segments removed, no '?' cut)."""
    return "".join(f"%{b:02X}" for b in value.encode())


def _id_field(doc: dict[str, Any], operation: dict[str, Any], where: tuple[str | int, ...]) -> dict[str, Any]:
    schema = _resolve(doc, operation["requestBody"]["content"]["application/json"]["schema"])
    for step in where:
        schema = _resolve(doc, schema["items"] if isinstance(step, int) else schema["properties"][step])
    return next((s for s in schema.get("anyOf", [schema]) if s.get("type") == "string"), schema)


def _refused_as_id(response: Any) -> bool:
    return response.status_code in (400, 422)


@pytest.fixture
def doc(client: TestClient) -> dict[str, Any]:
    return client.get("/openapi.json").json()


def test_every_id_in_a_path_is_declared_and_the_server_agrees(client: TestClient, doc: dict[str, Any]) -> None:
    checked = 0
    for path, operations in doc["paths"].items():
        for method, operation in operations.items():
            for param in operation.get("parameters", []):
                if param["in"] != "path" or param["schema"].get("type") != "string":
                    continue
                schema = param["schema"]
                assert "pattern" in schema, (method, path, param["name"], schema)
                fits = [v for v in CANDIDATES if _fits(schema, v)]
                assert "a" in fits and "a:b" not in fits, (method, path, fits)
                for value in CANDIDATES:
                    url = path.replace("{" + param["name"] + "}", _encoded(value))
                    response = client.request(method.upper(), url, json=_example(doc, operation), headers=user("ann"))
                    if value in fits:
                        assert not _refused_as_id(response), (method, path, value, response.text)
                    elif value:  # an empty segment is another path (a 404 or 405)
                        assert response.status_code == 422, (method, path, value, response.text)
                        assert param["name"] in response.json()["message"]
                checked += 1
    assert checked >= 15  # sessions (3), memories (4), entities (7), a conclusion, a run


def test_the_user_header_is_declared_and_the_server_agrees(client: TestClient, doc: dict[str, Any]) -> None:
    header = next(p for p in doc["paths"]["/api/memory/episodes"]["get"]["parameters"] if p["name"] == "X-User-Id")
    schema = header["schema"]
    assert schema["type"] == "string" and "pattern" in schema, schema  # never null: a header is a string
    fits = [v for v in CANDIDATES + PLACEHOLDERS if _fits(schema, v)]
    assert "a@b.org" in fits and "a*" not in fits
    for value in CANDIDATES + PLACEHOLDERS:
        if value.strip() != value or not value.isascii():
            continue  # a header value has no edge spaces and is sent as ASCII
        response = client.get("/api/memory/episodes", headers=user(value))
        assert response.status_code == (200 if value in fits else 400), (value, response.text)


def test_isolation_by_declared_pattern_holds_for_glob_characters(client: TestClient) -> None:
    """'a*' or 'a?' can never name user 'ab': refused before any key is built."""
    turn = {"turns": [{"role": "user", "content": "My locker code is 4711."}]}
    assert client.post("/api/memory/sessions/s1/turns", json=turn, headers=user("ab")).status_code == 200
    for pattern in ("a*", "a?", "a[b]", "*"):
        assert client.get("/api/memory/sessions/s1", headers=user(pattern)).status_code == 400
        forget = client.post("/api/memory/forget", json={"kind": "all"}, headers=user(pattern))
        assert forget.status_code == 400, forget.text
    kept = client.get("/api/memory/sessions/s1", headers=user("ab")).json()
    assert [m["content"] for m in kept["messages"]] == ["My locker code is 4711."]


@pytest.mark.parametrize(("method", "path"), sorted(BODY_IDS))
def test_every_id_in_a_body_is_declared_and_the_server_agrees(
    client: TestClient, doc: dict[str, Any], method: str, path: str
) -> None:
    operation = doc["paths"][path][method]
    where = BODY_IDS[(method, path)]
    schema = _id_field(doc, operation, where)
    assert "pattern" in schema, schema
    fits = [v for v in CANDIDATES if _fits(schema, v)]
    assert "a" in fits and "a:b" not in fits
    url = path.replace("{entity_id}", "ent-fedcba987654")  # not the merged one: no merge into itself
    for value in [*CANDIDATES, " ent-0123456789ab"]:
        body = _example(doc, operation)
        target = body
        for step in where[:-1]:
            target = target[step]
        target[where[-1]] = value
        if path == "/api/memory/forget":
            body["kind"] = "memory"
        response = client.request(method.upper(), url, json=body, headers=user("ann"))
        if value in fits:
            assert not _refused_as_id(response), (path, value, response.text)
        else:
            assert response.status_code == 422, (path, value, response.text)
