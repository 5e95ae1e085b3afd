"""What kills the survivors left in ``memory/privacy_controls.py`` and ``memory/memory_versions.py`` (issue 20,
helper m6; docs/testing.md "Survivors left"), and the one bug planted in the forget paths that the privacy tests
missed. Through HTTP, real Redis, literals from the docstrings."""

from __future__ import annotations

import pytest
from fastapi.testclient import TestClient

from agtos.memory.coordinator import MemoryCoordinator
from agtos.tasks.contradiction import NLIVerdict
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


def test_forgetting_an_episode_clears_the_verdict_cache_when_conclusions_go_with_it(
    client: TestClient, coordinator: MemoryCoordinator
) -> None:
    """episode_cascade.forget_derived (planted by m6: its ``nli_cache.clear`` left out; the four privacy test
    files passed): forgetting an episode forgets the conclusions only it supports (here the Dreamer's, run at
    the session's end), and the user's cached NLI verdicts, "keyed by digests of conclusion texts", go with
    them, as when a conclusion is forgotten directly (test_core_privacy); another user's cache stays."""
    post(client, "cora", "s1", METRIC)
    episode_id = end(client, "cora", "s1")["episodeId"]
    learnt = coordinator.list_conclusions("cora")
    assert learnt and all(c.source_episode_ids == [episode_id] for c in learnt)
    verdict = {"k1": NLIVerdict("contradiction", {"contradiction": 0.8})}
    for uid in ("cora", "cole"):
        coordinator.nli_cache.put_many(uid, verdict)
    forgot = client.post("/api/memory/forget", json={"kind": "episode", "id": episode_id}, headers=user("cora"))
    assert forgot.status_code == 200, forgot.text
    assert forgot.json()["derived"]["conclusions"] == len(learnt)
    assert coordinator.list_conclusions("cora") == []
    assert coordinator.nli_cache.get_many("cora", ["k1"]) == {}
    assert coordinator.nli_cache.get_many("cole", ["k1"])["k1"].label == "contradiction"
