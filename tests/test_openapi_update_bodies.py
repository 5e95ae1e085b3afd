"""An update naming no field is refused (422), and the OpenAPI document says so (``minProperties``):
schemathesis over ``agtos serve`` sent ``PUT /api/entities/{id}`` and ``PUT /api/memory/memories/{id}``
with ``{}`` as schema-valid and got 422 "send at least one of ..." (ST202, issue 15's late probe).
Whether a body fits is decided by ``jsonschema`` on the declared schema, not by the code under test."""

from __future__ import annotations

from typing import Any

import pytest
from fastapi.testclient import TestClient
from jsonschema import Draft202012Validator  # type: ignore[import-untyped]

from tests.helpers import user

UPDATES = ["/api/entities/{entity_id}", "/api/memory/memories/{memory_id}"]


def _body_schema(doc: dict[str, Any], path: str) -> dict[str, Any]:
    ref = doc["paths"][path]["put"]["requestBody"]["content"]["application/json"]["schema"]["$ref"]
    return {**doc["components"]["schemas"][ref.rsplit("/", 1)[1]], "components": doc["components"]}


@pytest.mark.parametrize("path", UPDATES)
def test_an_update_naming_no_field_is_refused_as_the_document_says(client: TestClient, path: str) -> None:
    doc = client.get("/openapi.json").json()
    schema = _body_schema(doc, path)
    fits = Draft202012Validator(schema).is_valid
    assert not fits({}), "the document must say an update names a field"
    named = {"name": "Acme"} if "entities" in path else {"text": "User takes their coffee black"}
    assert fits(named)
    url = path.replace("{entity_id}", "ent-0123456789ab").replace("{memory_id}", "mem-0123456789ab")
    refused = client.put(url, json={}, headers=user("ann"))
    assert refused.status_code == 422, refused.text
    assert "send at least one of" in refused.json()["message"]
    assert client.put(url, json=named, headers=user("ann")).status_code == 404  # valid: only the record is unknown
