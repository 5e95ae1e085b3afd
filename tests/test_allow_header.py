"""A 405 names every method the path serves in ``Allow`` (RFC 9110 15.5.6: the resource's supported
methods), not only the first route's: OPTIONS or PATCH on /api/memory/memories/{id} answered
``Allow: GET`` where the path also takes PUT and DELETE (schemathesis ST205 over `agtos serve`,
helper 8's probe of 2026-12-06). The expected methods are read from the OpenAPI document."""

from __future__ import annotations

import pytest
from fastapi.testclient import TestClient

from tests.helpers import user


@pytest.mark.parametrize(
    ("path", "concrete"),
    [
        ("/api/memory/memories/{memory_id}", "/api/memory/memories/mem-0123456789abcdef"),
        ("/api/entities/{entity_id}", "/api/entities/ent-0123456789abcdef"),
        ("/api/memory/privacy", "/api/memory/privacy"),
    ],
)
def test_a_405_allows_every_method_of_the_path(client: TestClient, path: str, concrete: str) -> None:
    documented = {m.upper() for m in client.get("/openapi.json").json()["paths"][path]}
    for method in ("OPTIONS", "PATCH"):
        answer = client.request(method, concrete, headers=user("allow"))
        assert answer.status_code == 405, answer.text
        allowed = set(answer.headers["allow"].split(", "))
        assert allowed - {"HEAD"} == documented, (method, answer.headers["allow"])


def test_the_stats_path_serves_get_only_and_a_put_or_delete_there_is_a_405(client: TestClient) -> None:
    """/api/entities/stats is a concrete path beside the template /api/entities/{entity_id}: OpenAPI documents
    only GET there (a concrete path matches first), so PUT and DELETE on it are a 405 naming that GET, not a
    404 for an entity "stats" with ``Allow: GET, HEAD, PUT, DELETE`` (schemathesis ST205, f1's probe of
    2026-12-07). An entity id that only starts with "stats" is still an entity id."""
    documented = {m.upper() for m in client.get("/openapi.json").json()["paths"]["/api/entities/stats"]}
    assert documented == {"GET"}
    headers = user("allow-stats")
    for method in ("PUT", "DELETE", "OPTIONS"):
        answer = client.request(method, "/api/entities/stats", headers=headers, json={"name": "x"})
        assert answer.status_code == 405, (method, answer.text)
        assert set(answer.headers["allow"].split(", ")) == {"GET", "HEAD"}, (method, answer.headers["allow"])
    assert client.get("/api/entities/stats", headers=headers).status_code == 200
    for method in ("GET", "DELETE"):
        unknown = client.request(method, "/api/entities/statsbook", headers=headers)
        assert unknown.status_code == 404 and "statsbook" in unknown.json()["message"], (method, unknown.text)
