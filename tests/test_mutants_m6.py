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


def test_forgetting_a_memory_by_an_episodes_id_leaves_the_episodes_entities(client: TestClient) -> None:
    """privacy_controls.forget_item (mutmut 75: ``kind == "memory" and found`` -> ``or found``): the entity
    step of a memory's forget runs only for a memory that existed; a memory id that names no memory (here an
    episode's id sent as a memory's) answers 404 and leaves the graph as it was. With the mutant the episode's
    own entities (Ana, Lisbon: named by it alone) are forgotten under the memory kind."""
    said = [
        {"role": "user", "content": "My sister Ana moved to Lisbon last spring and works at a bakery there."},
        {"role": "assistant", "content": "Lisbon sounds lovely for Ana."},
    ]
    post(client, "enzo", "s1", said)
    episode_id = end(client, "enzo", "s1")["episodeId"]

    def graph() -> dict[str, str]:
        listed = client.get("/api/entities", headers=user("enzo")).json()["entities"]
        return {e["name"]: e["id"] for e in listed}

    before = graph()
    assert {"Ana", "Lisbon"} <= set(before), before
    answer = client.post("/api/memory/forget", json={"kind": "memory", "id": episode_id}, headers=user("enzo"))
    assert answer.status_code == 404, answer.text
    assert graph() == before


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


NEWS = [  # 24 short facts naming a company, none of them the user's job or car
    "{}'s cafeteria serves ramen on Fridays",
    "{} has an office in Porto",
    "{} sponsors a cycling team",
    "{} was founded in 1999",
    "{}'s logo is red",
    "{} ships parts worldwide",
    "{}'s CEO gave a keynote",
    "{} holds a hackathon every spring",
    "{} uses Kotlin for its apps",
    "{}'s stock rose in May",
    "{} opened a data centre in Frankfurt",
    "{}'s support line opens at eight",
    "{} acquired Roadrunner Labs",
    "{}'s annual party is in December",
    "{} offers free yoga classes",
    "{}'s parking garage has chargers",
    "{} publishes a tech blog",
    "{}'s intranet is called Anvil",
    "{} runs a mentoring programme",
    "{}'s headquarters are in Phoenix",
    "{} sells rocket skates",
    "{}'s badge photos are terrible",
    "{} bought a sailing boat",
    "{}'s canteen closes at three",
]
ENDS = {  # a long fact of the user's, and the later fact that ends it
    "Acme": (
        "The user works at Acme as a backend engineer on the payments team, writing Go services, reviewing pull "
        "requests and on call one week in six for the checkout platform",
        "The user left Acme",
    ),
    "Tesla": (
        "The user drives a Tesla, a grey Model 3 bought second hand from a neighbour, charged at home overnight "
        "and taken to the coast most weekends with the kayak on the roof",
        "The user sold the Tesla",
    ),
}


@pytest.mark.parametrize("name", list(ENDS))
def test_a_fact_ended_closes_the_users_fact_however_many_other_facts_name_it(
    client: TestClient, coordinator: MemoryCoordinator, name: str
) -> None:
    """MemoryVersions._supersede (bug found through mutmut 18, the keyword-candidate pool of an ended value
    5 -> 6): "The user left Acme" ends the user's works-at fact naming Acme, "The user sold the Tesla" (a
    change of anything) the user's car naming Tesla (POST /memories: "a fact that a stored one of the same
    subject and attribute contradicts closes the earlier one"; _supersede: "close the facts that a later fact
    of the same subject and attribute ends"). The earlier facts were looked for only among the 20 best BM25
    matches of the value, so a long fact behind 24 shorter ones naming it stayed current; they are found
    under their slots (``user|works-at``; every attribute of the user for a change of anything) now. The
    other facts naming the company stay current."""
    fact, ending = ENDS[name]
    who = f"wes-{name}"
    stated = client.post("/api/memory/memories", json={"text": fact}, headers=user(who)).json()["memory"]
    others = [text.format(name) for text in NEWS]
    for text in others:
        assert client.post("/api/memory/memories", json={"text": text}, headers=user(who)).status_code == 201
    pool = coordinator.services.semantic.store("memory").keyword_candidates(who, name.lower(), 5)
    assert len(pool) == 20 and stated["id"] not in {d for d, _ in pool}  # the case: past the keyword pool
    assert_closed_by(client, who, stated["id"], ending, others)


def assert_closed_by(client: TestClient, who: str, stated_id: str, ending: str, others: list[str]) -> None:
    """POST ``ending``: the memory ``stated_id`` is closed by it (validUntil = its validFrom, supersededBy = its
    id), and the current memories are then ``others`` and the ending, no more."""
    ended = client.post("/api/memory/memories", json={"text": ending}, headers=user(who))
    assert ended.status_code == 201, ended.text
    after = client.get(f"/api/memory/memories/{stated_id}", headers=user(who)).json()
    by = ended.json()["memory"]
    assert (after["validUntil"], after["supersededBy"]) == (by["validFrom"], by["id"])
    listed = client.get("/api/memory/memories", params={"limit": 100}, headers=user(who)).json()["memories"]
    assert sorted(m["text"] for m in listed if m["validUntil"] is None) == sorted([*others, ending])
