"""A request is read one way only (issue 15): a scalar query parameter sent twice, and a JSON body that is
not UTF-8 or declares another charset, are refused instead of guessed at.

``?limit=1&limit=50`` took the last value silently (a proxy or cache that keeps the first would act on
another request than the API); a UTF-16 body was accepted (``json.loads`` guesses it from the NUL
bytes) while a Latin-1 one was refused. RFC 8259 section 8.1: JSON exchanged between systems "MUST be
encoded using UTF-8", and a parser "MAY ignore" a leading byte order mark."""

from __future__ import annotations

import codecs

from fastapi.testclient import TestClient
from httpx import Response

from agtos.memory.coordinator import MemoryCoordinator
from agtos.storage.api_keys import ApiKeyStore
from tests.helpers import user

JSON = {"content-type": "application/json"}
UTF8_RULE = "JSON bodies must be UTF-8 (RFC 8259 section 8.1)"
TWICE = "given 2 times: each query parameter may appear once"


def test_a_scalar_query_parameter_sent_twice_is_a_422_naming_it(client: TestClient) -> None:
    searched = client.get("/api/memory/search?q=a&q=b", headers=user("q2"))
    assert searched.status_code == 422, searched.text
    assert searched.json()["errors"] == [{"field": "query.q", "message": TWICE}]
    listed = client.get("/api/memory/episodes?limit=1&limit=50", headers=user("q2"))
    assert listed.status_code == 422, listed.text
    assert listed.json()["errors"] == [{"field": "query.limit", "message": TWICE}]
    three = client.get("/api/memory/search?q=a&limit=1&limit=2&limit=3&q=b", headers=user("q2")).json()
    assert three["errors"] == [
        {"field": "query.limit", "message": "given 3 times: each query parameter may appear once"},
        {"field": "query.q", "message": TWICE},
    ]
    assert client.head("/api/memory/episodes?limit=1&limit=50", headers=user("q2")).status_code == 422
    ended = client.post("/api/memory/sessions/s1/end?wait=0&wait=1", headers=user("q2"))
    assert ended.status_code == 422 and ended.json()["errors"][0]["field"] == "query.wait", ended.text
    # once each, and a parameter the route does not read, are as before
    assert client.get("/api/memory/search?q=a&limit=5", headers=user("q2")).status_code == 200
    assert client.get("/api/memory/episodes?limit=2&x=1&x=2", headers=user("q2")).status_code == 200


def test_every_query_parameter_in_the_openapi_document_is_refused_twice(client: TestClient) -> None:
    """Each query parameter the document declares, sent twice: a router made without the strict route
    class would take the last one again."""
    paths = client.get("/openapi.json").json()["paths"]
    checked = 0
    for path, item in paths.items():
        for method, op in item.items():
            for param in op.get("parameters", []):
                if param["in"] != "query":
                    continue
                url = path.replace("{", "").replace("}", "")  # a valid id: the parameter name itself
                name = param["name"]
                answered = client.request(method, f"{url}?{name}=1&{name}=1", headers=user("q3"))
                assert answered.status_code == 422, (method, path, param["name"], answered.text)
                assert {"field": f"query.{name}", "message": TWICE} in answered.json()["errors"]
                assert "422" in op["responses"], (method, path)
                checked += 1
    assert checked >= 15, checked


def test_a_body_that_is_not_utf8_is_a_422_that_says_so_and_nothing_is_written(client: TestClient) -> None:
    headers = user("cs") | JSON
    text = '{"turns": [{"role": "user", "content": "I live in Zürich"}]}'
    for encoded, why in [
        (text.encode("utf-16-le"), "looks like UTF-16-LE"),
        (text.encode("utf-16"), "looks like UTF-16"),  # with its byte order mark
        (text.encode("utf-32-be"), "looks like UTF-32-BE"),
        (text.encode("latin-1"), f"invalid byte at {text.index('ü')}"),  # 'ü' is one byte, 0xFC, in Latin-1
    ]:
        refused = client.post("/api/memory/sessions/s1/turns", content=encoded, headers=headers)
        assert refused.status_code == 422, (why, refused.text)
        assert refused.json()["errors"] == [{"field": "body", "message": f"not UTF-8 ({why}): {UTF8_RULE}"}]
    assert client.get("/api/memory/sessions/s1", headers=user("cs")).status_code == 404
    kept = client.post("/api/memory/sessions/s1/turns", content=codecs.BOM_UTF8 + text.encode(), headers=headers)
    assert kept.status_code == 200, kept.text  # a UTF-8 byte order mark is ignored (RFC 8259 8.1 "MAY")
    shown = client.get("/api/memory/sessions/s1", headers=user("cs")).json()
    assert [m["content"] for m in shown["messages"]] == ["I live in Zürich"]


def test_a_declared_charset_other_than_utf8_is_a_415(client: TestClient) -> None:
    text = '{"turns": [{"role": "user", "content": "I live in Zürich"}]}'

    def sent(content_type: str) -> Response:
        headers = user("cs2") | {"content-type": content_type}
        return client.post("/api/memory/sessions/s2/turns", content=text.encode("utf-8"), headers=headers)

    for charset in ("latin-1", "UTF-16", '"iso-8859-1"'):
        refused = sent(f"application/json; charset={charset}")
        assert refused.status_code == 415, (charset, refused.text)
        name = charset.strip('"').lower()
        assert refused.json() == {"message": f"charset {name!r} is not accepted: {UTF8_RULE}"}
    assert client.get("/api/memory/sessions/s2", headers=user("cs2")).status_code == 404
    for charset in ("utf-8", "UTF-8", "utf8"):
        assert sent(f"application/json;charset={charset}").status_code == 200, charset
    schema = client.get("/openapi.json").json()
    described = schema["paths"]["/api/memory/sessions/{session_id}/turns"]["post"]["responses"]
    assert "charset other than UTF-8" in described["415"]["description"]
    assert "non-UTF-8 JSON body" in described["422"]["description"]


def test_a_repeated_parameter_is_judged_after_the_key_as_a_bad_value_is(
    client: TestClient, coordinator: MemoryCoordinator
) -> None:
    """With auth on, a call without a key is a 401 whatever its query, as ``?limit=500`` is; with the key
    the repetition is the 422."""
    key, _ = ApiKeyStore(coordinator.connector, coordinator.keys).create("user", "alice")
    for query in ("limit=500", "limit=1&limit=50"):
        keyless = client.get(f"/api/memory/episodes?{query}", headers=user("alice"))
        assert keyless.status_code == 401, (query, keyless.text)
    keyed_headers = user("alice") | {"Authorization": f"Bearer {key}"}
    keyed = client.get("/api/memory/episodes?limit=1&limit=50", headers=keyed_headers)
    assert keyed.status_code == 422 and keyed.json()["errors"] == [{"field": "query.limit", "message": TWICE}]


def test_two_idempotency_keys_are_a_422_and_nothing_is_appended(client: TestClient) -> None:
    """Two ``Idempotency-Key`` values: the first was used, so a retry sent with the keys in another order
    (or by a proxy that keeps the last) appended the turns twice."""
    turn = {"turns": [{"role": "user", "content": "I live in Oslo"}]}
    for order in (["k1", "k2"], ["k2", "k1"]):
        headers = [("X-User-Id", "idem2"), *(("Idempotency-Key", k) for k in order)]
        refused = client.post("/api/memory/sessions/s1/turns", json=turn, headers=headers)
        assert refused.status_code == 422, refused.text
        message = "given 2 times: each header may appear once"
        assert refused.json()["errors"] == [{"field": "header.Idempotency-Key", "message": message}]
    assert client.get("/api/memory/sessions/s1", headers=user("idem2")).status_code == 404
    once = client.post("/api/memory/sessions/s1/turns", json=turn, headers=user("idem2") | {"Idempotency-Key": "k1"})
    assert once.status_code == 200 and once.json()["appended"] == 1, once.text
