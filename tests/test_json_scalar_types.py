"""A request body's integer and boolean fields take JSON numbers and JSON booleans only, as the
OpenAPI document says (found by schemathesis over `agtos serve`, helper 8's probe of 2026-12-06):
pydantic's lax mode read ``true`` as the integer 1 and ``"no"``/``0``/``"off"`` as false, so
``{"valid_from": true}`` stored a memory valid from 1970-01-01T00:00:00.001, ``{"limit": true}`` was a
limit of 1, ``{"opt_out": "off"}`` a privacy setting and a turn's ``"utcOffset": true`` an offset of
one minute. A number with no fractional part (600.0) is an integer in JSON Schema and stays accepted."""

from __future__ import annotations

import pytest
from fastapi.testclient import TestClient

from tests.helpers import user

BAD_SCALARS = [
    ("post", "/api/memory/memories", {"text": "User lives in Oslo", "valid_from": True}, "valid_from"),
    ("post", "/api/memory/memories", {"text": "User lives in Oslo", "validUntil": "1709251200000"}, "valid_until"),
    ("post", "/api/memory/context", {"query": "Oslo", "limit": True}, "limit"),
    ("post", "/api/memory/context", {"query": "Oslo", "tokenBudget": "600"}, "token_budget"),
    ("post", "/api/memory/ask", {"question": "Where do I live?", "limit": True}, "limit"),
    ("post", "/api/memory/responses", {"session_id": "s1", "response": "ok", "tool_calls": True}, "tool_calls"),
    (
        "post",
        "/api/memory/sessions/s1/turns",
        {"turns": [{"role": "user", "content": "hi", "utcOffset": True}]},
        "turns.0.utc_offset",
    ),
    (
        "post",
        "/api/memory/conversations",
        {"sessions": [{"id": "c1", "turns": [{"role": "user", "content": "I live in Oslo", "utc_offset": "60"}]}]},
        "sessions.0.turns.0.utc_offset",
    ),
    ("put", "/api/memory/privacy", {"opt_out": "off"}, "opt_out"),
    ("put", "/api/memory/profile", {"name": "Alice", "opt_out": 0}, "opt_out"),
    ("put", "/api/memory/privacy", {"opt_out": False, "forget_existing": 0}, "forget_existing"),
]


@pytest.mark.parametrize(("method", "path", "body", "field"), BAD_SCALARS)
def test_a_boolean_or_a_string_for_an_integer_or_boolean_field_is_a_422(
    client: TestClient, method: str, path: str, body: dict[str, object], field: str
) -> None:
    answer = client.request(method, path, json=body, headers=user("scalars"))
    assert answer.status_code == 422, answer.text
    assert [e["field"] for e in answer.json()["errors"]] == [field]
    assert client.get("/api/memory/memories", headers=user("scalars")).json()["memories"] == []


def test_integers_written_as_json_numbers_are_taken(client: TestClient) -> None:
    created = client.post(
        "/api/memory/memories",
        json={"text": "User lives in Oslo", "valid_from": 1709251200000.0},
        headers=user("scalars2"),
    )
    assert created.status_code == 201, created.text
    assert created.json()["memory"]["validFrom"] == 1709251200000
    context = client.post(
        "/api/memory/context", json={"query": "Oslo", "limit": 3, "token_budget": 600.0}, headers=user("scalars2")
    )
    assert context.status_code == 200, context.text
    private = client.put(
        "/api/memory/privacy", json={"opt_out": False, "forget_existing": False}, headers=user("scalars2")
    )
    assert private.status_code == 200, private.text


def test_the_openapi_bounds_of_optional_integers_are_json_schema(client: TestClient) -> None:
    """The OpenAPI document keeps each optional integer's bounds as ``minimum``/``maximum`` (pydantic
    wrote them as ``ge``/``le``, which JSON Schema ignores, with the number check inside the union)."""
    schemas = client.get("/openapi.json").json()["components"]["schemas"]
    for model, field, bounds in [
        ("MemoryIn", "validFrom", {"minimum": 0, "maximum": 253402300799999}),
        ("MemoryUpdate", "validUntil", {"minimum": 0, "maximum": 253402300799999}),
        ("ResponseIn", "reasoningSteps", {"minimum": 0, "maximum": 1000}),
        ("TurnIn", "utcOffset", {"minimum": -1440, "maximum": 1440}),
    ]:
        properties = schemas[model]["properties"]
        integer = next(
            s for s in properties.get(field, properties.get(_snake(field)))["anyOf"] if s["type"] == "integer"
        )
        assert integer == {"type": "integer", **bounds}, (model, field, integer)


def _snake(name: str) -> str:
    return "".join(f"_{c.lower()}" if c.isupper() else c for c in name)
