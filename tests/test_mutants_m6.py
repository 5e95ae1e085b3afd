"""What kills the survivors left in ``memory/privacy_controls.py`` and ``memory/memory_versions.py`` (issue 20,
helper m6; docs/testing.md "Survivors left"). Through HTTP, real Redis, literals from the docstrings."""

from __future__ import annotations

import pytest
from fastapi.testclient import TestClient

from tests.helpers import user
from tests.test_issue15_h15_end_retry import METRIC, NO_TURNS, end, post


@pytest.mark.parametrize("wrong_kind", ["forget", "delete"])
def test_forgetting_a_memory_by_an_episodes_id_leaves_the_episode_and_its_sessions_end_record(
    client: TestClient, wrong_kind: str
) -> None:
    """privacy_controls.forget_item (mutmut 26: the episode looked up for every kind, ``kind == "episode" or
    True``): a client that sends an episode's id as a memory's (``POST /forget`` with kind ``memory``, or
    ``DELETE /memories/<id>``) gets 404 (docstring: NotFoundError if it does not exist; there is no memory of
    that id) and nothing of the episode is touched, its session's last-end record included: a retried end of
    the session still names the episode. With the mutant the episode is found under the memory's id and the
    record naming it is deleted, so the retry answers as if the session never took turns."""
    post(client, "rosa", "s1", METRIC)
    first = end(client, "rosa", "s1")
    assert (first["status"], first["saved"]) == ("done", True)
    episode_id = first["episodeId"]
    if wrong_kind == "forget":
        body = {"kind": "memory", "id": episode_id}
        answer = client.post("/api/memory/forget", json=body, headers=user("rosa"))
    else:
        answer = client.delete(f"/api/memory/memories/{episode_id}", headers=user("rosa"))
    assert answer.status_code == 404, answer.text
    listed = client.get("/api/memory/episodes", headers=user("rosa")).json()["episodes"]
    assert [e["id"] for e in listed] == [episode_id]
    again = end(client, "rosa", "s1")
    assert {k: v for k, v in again.items() if k != "lastEnd"} == {"sessionId": "s1", **NO_TURNS}
    assert (again["lastEnd"]["episodeId"], again["lastEnd"]["status"]) == (episode_id, "done")
