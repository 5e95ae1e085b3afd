"""Headers that could name two callers or no one (issue 15, H3's probe of ``agtos serve``): a second
``Authorization`` header is a 400 like a second ``X-User-Id`` (before, the first key won and the
second was ignored, so a proxy and the API could disagree on who calls), and ``X-User-Id: null`` or
``undefined`` (a client's unset variable) is a 400 instead of one bucket shared by every such client."""

from __future__ import annotations

import pytest
from fastapi.testclient import TestClient

from tests.test_auth import store_of


def test_a_second_authorization_header_is_refused(client: TestClient) -> None:
    store = store_of(client)
    alice, _ = store.create("user", "alice")
    service, _ = store.create("service", "bot")
    one = client.get("/api/memory/episodes", headers={"Authorization": f"Bearer {alice}"})
    assert one.status_code == 200
    for first, second in ((alice, service), (service, alice), (alice, alice)):
        two = [("Authorization", f"Bearer {first}"), ("Authorization", f"Bearer {second}"), ("X-User-Id", "alice")]
        refused = client.get("/api/memory/episodes", headers=two)
        assert refused.status_code == 400, refused.text
        assert refused.json() == {"message": "send Authorization once"}


@pytest.mark.parametrize("placeholder", ["null", "undefined", "None", "NaN"])
def test_a_placeholder_user_id_is_refused(client: TestClient, placeholder: str) -> None:
    turns = {"turns": [{"role": "user", "content": "I keep my passport in the blue drawer."}]}
    refused = client.post("/api/memory/sessions/s1/turns", json=turns, headers={"X-User-Id": placeholder})
    assert refused.status_code == 400, refused.text
    assert "unset client value" in refused.json()["message"]
    kept = client.post("/api/memory/sessions/s1/turns", json=turns, headers={"X-User-Id": f"{placeholder}-fan"})
    assert kept.status_code == 200, kept.text  # only the bare placeholder is refused
