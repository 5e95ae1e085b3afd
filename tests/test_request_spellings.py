"""Request bodies take each field in snake_case or in the camelCase the responses use, so a client
that echoes what it received works (issue 15, H3); one field sent in both spellings is a 422."""

from __future__ import annotations

from fastapi.testclient import TestClient

from tests.helpers import user


def test_a_memory_written_and_edited_with_the_response_spelling(client: TestClient) -> None:
    written = client.post(
        "/api/memory/memories",
        json={"text": "User lives in Berlin", "kind": "fact", "validFrom": 1709251200000},
        headers=user("cam"),
    )
    assert written.status_code == 201, written.text
    memory = written.json()["memory"]
    assert memory["validFrom"] == 1709251200000
    edited = client.put(f"/api/memory/memories/{memory['id']}", json={"validUntil": 1717200000000}, headers=user("cam"))
    assert edited.status_code == 200, edited.text
    assert client.get(f"/api/memory/memories/{memory['id']}", headers=user("cam")).json()["validUntil"] == (
        1717200000000
    )
    body = {"query": "Where did the user live?", "sessionId": "none-yet", "tokenBudget": 50}
    context = client.post("/api/memory/context", json=body, headers=user("cam"))
    assert context.status_code == 200, context.text
    assert "Berlin" in context.json()["context"] and context.json()["tokens"] <= 50


def test_a_turn_in_camel_case(client: TestClient) -> None:
    turn = {"role": "user", "content": "I went hiking near Lyon.", "timestamp": 1683540000000, "utcOffset": 120}
    appended = client.post("/api/memory/sessions/trip/turns", json={"turns": [turn]}, headers=user("cam"))
    assert appended.status_code == 200, appended.text
    (message,) = client.get("/api/memory/sessions/trip", headers=user("cam")).json()["messages"]
    assert message["utc_offset"] == 120


def test_one_field_in_both_spellings_is_refused(client: TestClient) -> None:
    body = {"query": "hiking", "token_budget": 60, "tokenBudget": 600}
    refused = client.post("/api/memory/context", json=body, headers=user("cam"))
    assert refused.status_code == 422, refused.text
    assert "token_budget" in refused.json()["errors"][0]["message"]
    unknown = client.post("/api/memory/context", json={"query": "hiking", "tokenBudgets": 60}, headers=user("cam"))
    assert unknown.status_code == 422
