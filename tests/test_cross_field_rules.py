"""The rules a request body must satisfy that its JSON Schema cannot state (issue 15): schemathesis over
``agtos serve`` sent bodies that fit ``/openapi.json`` and got a 422 (ST202: an entity merged into itself,
an update of only nulls, ``kind: null``, ``valid_until`` before ``valid_from``). Each such rule is now
listed in its operation's OpenAPI description, in the words of the 422 that refuses it."""

from __future__ import annotations

from typing import Any

import pytest
from fastapi.testclient import TestClient

from tests.helpers import user

HEADING = "Rules the JSON Schema cannot state (each a 422 with this message):"

# (method, path in the document, path sent, body that breaks the rule, the rule)
RULES: list[tuple[str, str, str, dict[str, Any], str]] = [
    (
        "post",
        "/api/entities/{entity_id}/merge",
        "/api/entities/ent-0123456789ab/merge",
        {"duplicate_id": "ent-0123456789ab"},
        "an entity cannot be merged into itself: duplicate_id must not be the entity_id of the path",
    ),
    (
        "put",
        "/api/entities/{entity_id}",
        "/api/entities/ent-0123456789ab",
        {"type": None},
        "send at least one of name, type, aliases, confidence that is not null",
    ),
    (
        "put",
        "/api/memory/memories/{memory_id}",
        "/api/memory/memories/mem-0123456789abcdef",
        {"kind": None, "text": "User takes their coffee with oat milk"},
        "only valid_until may be null",
    ),
    (
        "put",
        "/api/memory/memories/{memory_id}",
        "/api/memory/memories/mem-0123456789abcdef",
        {},
        "send at least one of text, kind, valid_from, valid_until",
    ),
    (
        "post",
        "/api/memory/memories",
        "/api/memory/memories",
        {"text": "User lives in Berlin", "valid_from": 1709251200000, "valid_until": 1709251199999},
        "valid_until must not be before valid_from",
    ),
    (
        "post",
        "/api/memory/forget",
        "/api/memory/forget",
        {"kind": "all", "id": "ep-0123456789abcdef"},
        "give an id for one record, and no id with kind 'all'",
    ),
    (
        "post",
        "/api/memory/forget",
        "/api/memory/forget",
        {"kind": "episode"},
        "give an id for one record, and no id with kind 'all'",
    ),
    (
        "post",
        "/api/memory/conversations",
        "/api/memory/conversations",
        {"sessions": [{"id": "s1", "turns": [{"role": "user", "content": "hi"}]}] * 2},
        "session ids must be unique within a request",
    ),
    (
        "post",
        "/api/memory/sessions/{session_id}/turns",
        "/api/memory/sessions/s1/turns",
        {"turns": [{"role": "user", "content": "hi", "timestamp": 253402300799999, "utcOffset": 840}]},
        "a turn's local time (its timestamp + utcOffset minutes) is on or before 9999-12-31T23:59:59.999",
    ),
]


@pytest.mark.parametrize(("method", "documented", "path", "body", "rule"), RULES, ids=[r[4][:30] for r in RULES])
def test_a_rule_beyond_the_schema_is_a_422_in_the_words_the_document_lists(
    client: TestClient, method: str, documented: str, path: str, body: dict[str, Any], rule: str
) -> None:
    refused = client.request(method, path, json=body, headers=user("rules"))
    assert refused.status_code == 422, refused.text
    assert rule in refused.json()["message"], refused.text
    description = client.get("/openapi.json").json()["paths"][documented][method]["description"]
    assert f"{HEADING}\n\n" in description and f"\n- {rule}" in description, description
    assert "422" in client.get("/openapi.json").json()["paths"][documented][method]["responses"]


def test_bodies_that_keep_the_rules_are_taken(client: TestClient) -> None:
    """The same operations with the rule kept: the 422s above are the rules, not the bodies' shapes."""
    headers = user("rules-ok")
    kept = {"text": "User lives in Berlin", "valid_from": 1709251200000, "valid_until": 1709251200000}
    assert client.post("/api/memory/memories", json=kept, headers=headers).status_code == 201
    assert client.post("/api/memory/forget", json={"kind": "all"}, headers=headers).status_code == 200
    two = [{"id": f"s{i}", "turns": [{"role": "user", "content": "hi"}]} for i in (1, 2)]
    assert client.post("/api/memory/conversations", json={"sessions": two}, headers=headers).status_code == 200
    other = client.post(
        "/api/entities/ent-0123456789ab/merge", json={"duplicate_id": "ent-ba9876543210"}, headers=headers
    )
    assert other.status_code == 404, other.text  # past the rule: neither entity exists


def test_operations_without_such_rules_list_none(client: TestClient) -> None:
    paths = client.get("/openapi.json").json()["paths"]
    listed = {
        (method, path)
        for path, item in paths.items()
        for method, op in item.items()
        if HEADING in op.get("description", "")
    }
    assert listed == {(method, documented) for method, documented, *_ in RULES}
    assert all(paths[path][method]["description"].count(HEADING) == 1 for method, path in listed)
