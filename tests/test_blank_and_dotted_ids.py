"""Found probing ``agtos serve`` (issue 15, H3): a session id of only dots (``%2E%2E`` on the wire) was
a live session that the Python client and a browser cannot address (``/sessions/../turns`` is
normalised to ``/api/memory/turns``), and a blank turn (``" "``) was journalled while every other
free-text field refuses blanks. Both are refused now, as user ids of only dots already were."""

from __future__ import annotations

import pytest
from fastapi.testclient import TestClient

from tests.helpers import user

TURNS = {"turns": [{"role": "user", "content": "I keep my passport in the blue drawer."}]}


@pytest.mark.parametrize("session_id", ["%2E%2E", "%2E", "..."])
def test_a_session_id_of_only_dots_is_refused(client: TestClient, session_id: str) -> None:
    refused = client.post(f"/api/memory/sessions/{session_id}/turns", json=TURNS, headers=user("dot"))
    assert refused.status_code == 422, refused.text  # a path id against its declared pattern (87538cf)
    assert refused.json()["errors"] == [
        {
            "field": "path.session_id",
            "message": "must be 1-128 characters of letters, digits, '_', '.' or '-' (not only dots)",
        }
    ]
    assert client.post("/api/memory/sessions/v1.2/turns", json=TURNS, headers=user("dot")).status_code == 200


@pytest.mark.parametrize("content", [" ", "\n\t "])
def test_a_blank_turn_is_refused(client: TestClient, content: str) -> None:
    refused = client.post(
        "/api/memory/sessions/s1/turns", json={"turns": [{"role": "user", "content": content}]}, headers=user("dot")
    )
    assert refused.status_code == 422, refused.text
    assert refused.json()["errors"][0]["field"] == "turns.0.content"
