"""``X-User-Id`` is read by ``get_user_id`` itself, not as a FastAPI ``Header`` parameter (that one cost
the event loop ~30 µs per request); the OpenAPI document declares it as FastAPI did (a string, not null): the same
parameter object, last of an operation's parameters, before its request body and responses."""

from __future__ import annotations

from fastapi.testclient import TestClient

from tests.helpers import user

DESCRIPTION = (
    "Whose memory this call reads or writes. A user key acts for its own user (a different value is a 403); a "
    "service key must name the user. Without auth: the configured default user when absent."
)
# a user id (README: letters, digits, `_ . @ -`, up to 128, not only dots), not a client's unset value in any case
PATTERN = (
    r"^(?!(?:[Nn][Aa][Nn]|[Nn][Oo][Nn][Ee]|[Nn][Uu][Ll][Ll]|[Uu][Nn][Dd][Ee][Ff][Ii][Nn][Ee][Dd])$)"
    r"\.*[A-Za-z0-9_@-][A-Za-z0-9_.@-]*$"
)
X_USER_ID = {
    "name": "X-User-Id",
    "in": "header",
    "required": False,
    "schema": {  # a string (a header is never JSON null: 'null' is refused as a client's unset value)
        "type": "string",
        "pattern": PATTERN,
        "maxLength": 128,
        "description": DESCRIPTION,
        "title": "X-User-Id",
    },
    "description": DESCRIPTION,
}


def test_x_user_id_is_declared_where_a_route_names_the_user_and_still_read(client: TestClient) -> None:
    paths = client.get("/openapi.json").json()["paths"]
    search = paths["/api/memory/search"]["get"]
    assert [p["name"] for p in search["parameters"]] == ["q", "limit", "mode", "X-User-Id"]
    assert search["parameters"][-1] == X_USER_ID
    context = paths["/api/memory/context"]["post"]  # its only parameter: before the body and the responses
    assert context["parameters"] == [X_USER_ID]
    keys = list(context)
    assert keys.index("parameters") < keys.index("requestBody") < keys.index("responses")
    assert "parameters" not in paths["/health"]["get"]  # names no user
    # the header is what the route reads: two users' turns stay apart, a second X-User-Id is a 400
    for name in ("ann", "bob"):
        sent = {"turns": [{"role": "user", "content": f"I am {name}."}]}
        assert client.post("/api/memory/sessions/s1/turns", json=sent, headers=user(name)).status_code == 200
    got = client.get("/api/memory/sessions/s1", headers=user("bob")).json()
    assert [t["content"] for t in got["messages"]] == ["I am bob."]
    twice = client.get("/api/memory/episodes", headers=[("X-User-Id", "ann"), ("X-User-Id", "bob")])
    assert twice.status_code == 400
