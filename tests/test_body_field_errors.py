"""A JSON body that is missing, or is not an object, is a 422 whose per-field error names the field "body", as the
README's "422 for invalid input (with per-field `errors`)" and the malformed-JSON errors do: it was named "" (the
message said "body", the `errors` list an empty field), found sending `curl -XPOST …/turns` with no `-d`."""

from __future__ import annotations

import pytest
from fastapi.testclient import TestClient

from tests.helpers import user

JSON = {"content-type": "application/json"}


@pytest.mark.parametrize(
    ("body", "message"),
    [
        ("", "Field required"),
        ("null", "Field required"),
        ("[]", "Input should be a valid dictionary or object to extract fields from"),
        ('"hello"', "Input should be a valid dictionary or object to extract fields from"),
    ],
)
@pytest.mark.parametrize("path", ["/api/memory/sessions/s1/turns", "/api/memory/context", "/api/memory/memories"])
def test_a_body_that_is_no_object_is_the_field_body(client: TestClient, path: str, body: str, message: str) -> None:
    refused = client.post(path, content=body, headers=user("nobody") | JSON)
    assert refused.status_code == 422, refused.text
    assert refused.json() == {
        "message": f"invalid request: body: {message}",
        "errors": [{"field": "body", "message": message}],
    }


def test_a_missing_field_is_still_named_by_its_path(client: TestClient) -> None:
    refused = client.post("/api/memory/forget", json={}, headers=user("nobody"))
    assert refused.status_code == 422, refused.text
    assert refused.json()["errors"] == [{"field": "kind", "message": "Field required"}]
