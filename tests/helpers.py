"""Small helpers shared by the API tests."""

from __future__ import annotations

from typing import Any

import redis
from fastapi.testclient import TestClient


def user(user_id: str) -> dict[str, str]:
    return {"X-User-Id": user_id}


def talk(client: TestClient, user_id: str, session_id: str, *exchanges: tuple[str, str]) -> dict[str, Any]:
    """Post (role, content) turns to a session, end it, and return the end-session body."""
    turns = [{"role": role, "content": content} for role, content in exchanges]
    response = client.post(f"/api/memory/sessions/{session_id}/turns", json={"turns": turns}, headers=user(user_id))
    assert response.status_code == 200, response.text
    ended = client.post(f"/api/memory/sessions/{session_id}/end", headers=user(user_id))
    assert ended.status_code == 200, ended.text
    return ended.json()


def delete_prefix(redis_url: str, prefix: str) -> None:
    """Delete every key of a test namespace."""
    client = redis.Redis.from_url(redis_url)
    keys = list(client.scan_iter(match=f"{prefix}:*", count=1000))
    if keys:
        client.delete(*keys)
