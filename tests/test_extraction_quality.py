"""Knowledge extraction through the public path (issue 16): facts, entities and relationships of an
agent session and of a chat between two named people, and the labelled-set scores above a floor."""

from __future__ import annotations

from typing import Any

from fastapi.testclient import TestClient

from agtos.memory.coordinator import MemoryCoordinator
from benchmarks.eval import extraction_scores
from tests.helpers import user

U = "xq-user"
MAY_14_2024 = 1_715_688_000_000  # 2024-05-14 12:00 UTC: "last month" is April 2024
LISBON = (
    ("user", "Hi!"),
    ("assistant", "Hello! How can I help you today?"),
    (
        "user",
        "I just moved to Lisbon last month with my wife Ana and our dog Pixel. I started a new job at Feedzai "
        "as a data engineer. My manager is called Rui.",
    ),
    ("assistant", "Congratulations on the move and the new job! Anything I can help with?"),
    (
        "user",
        "Remind me to book my Portuguese class for Thursday. Also, I am allergic to peanuts, so keep that in "
        "mind for restaurant suggestions.",
    ),
    ("assistant", "Noted! I'll remember your peanut allergy."),
)


def end_session(client: TestClient, session: str, turns: list[dict[str, Any]]) -> dict[str, Any]:
    response = client.post(f"/api/memory/sessions/{session}/turns", json={"turns": turns}, headers=user(U))
    assert response.status_code == 200, response.text
    ended = client.post(f"/api/memory/sessions/{session}/end", headers=user(U))
    assert ended.status_code == 200, ended.text
    body: dict[str, Any] = ended.json()
    assert body["saved"], body
    return body


def stored_facts(coordinator: MemoryCoordinator, body: dict[str, Any]) -> list[str]:
    """The facts of the episode the session end stored (what the memories are distilled from)."""
    episode = coordinator.episodes.get(U, body["episode"]["id"])
    assert episode is not None
    return list(episode.facts)


def graph(client: TestClient) -> tuple[dict[str, str], set[tuple[str, str, str]]]:
    """Entity name -> type, and every (source, type, target) edge by names."""
    listed = client.get("/api/entities", params={"limit": 100}, headers=user(U))
    assert listed.status_code == 200, listed.text
    entities = listed.json()["entities"]
    edges: set[tuple[str, str, str]] = set()
    for entity in entities:
        response = client.get(f"/api/entities/{entity['id']}/relationships", headers=user(U))
        assert response.status_code == 200, response.text
        for r in response.json()["relationships"]:
            if r["direction"] == "out":
                edges.add((entity["name"], r["type"], r["other"]["name"]))
    return {e["name"]: e["type"] for e in entities}, edges


def test_lisbon_session_yields_dated_facts_typed_entities_and_first_person_relationships(
    client: TestClient, coordinator: MemoryCoordinator
) -> None:
    turns = [
        {"role": role, "content": content, "timestamp": MAY_14_2024 + i} for i, (role, content) in enumerate(LISBON)
    ]
    assert stored_facts(coordinator, end_session(client, "s-lisbon", turns)) == [
        "User just moved to Lisbon last month [= April 2024] with the user's wife Ana and the user's dog Pixel",
        "User started a new job at Feedzai as a data engineer",
        "The user's manager is called Rui",
        "User is allergic to peanuts",
    ]  # no greeting, no reminder request, no "so keep that in mind"
    types, edges = graph(client)
    assert types == {
        "User": "person",
        "Lisbon": "place",
        "Ana": "person",
        "Pixel": "animal",
        "Feedzai": "organization",
        "Rui": "person",
    }  # no "Rui\nUser", Pixel is not a person
    assert {
        ("User", "lives-in", "Lisbon"),
        ("User", "works-at", "Feedzai"),
        ("User", "has-pet", "Pixel"),
        ("User", "knows", "Rui"),
    } <= edges
    assert ("User", "spouse", "Ana") in edges or ("Ana", "spouse", "User") in edges
    assert not any(t == "knows" and {s, o} == {"User", "Ana"} for s, t, o in edges)  # a wife is a spouse


def test_two_named_people_facts_carry_each_speakers_name(client: TestClient, coordinator: MemoryCoordinator) -> None:
    rows = [
        ("user", "Maria", "Hey Tom! Long time no see. How have you been?"),
        ("assistant", "Tom", "Hi Maria! Pretty good, thanks. I finally finished my PhD at ETH Zurich in January."),
        ("user", "Maria", "Congratulations! I moved to Porto last year and I work at Farfetch now."),
        ("assistant", "Tom", "Nice! I love Porto."),
        ("user", "Maria", "By the way, I adopted a cat named Miso two weeks ago."),
    ]
    turns = [{"role": r, "name": n, "content": c, "timestamp": MAY_14_2024} for r, n, c in rows]
    assert stored_facts(coordinator, end_session(client, "s-maria-tom", turns)) == [
        "Tom loves Porto",
        "Tom finally finished their PhD at ETH Zurich in January [= January 2024]",  # said on 14 May 2024
        "Maria moved to Porto last year [= 2023]",
        "Maria works at Farfetch",
        "Maria adopted a cat named Miso two weeks ago [= 30 April 2024]",
    ]
    types, edges = graph(client)
    assert {n: types.get(n) for n in ("Maria", "Tom", "Farfetch", "Miso", "Porto", "ETH Zurich")} == {
        "Maria": "person",
        "Tom": "person",
        "Farfetch": "organization",
        "Miso": "animal",
        "Porto": "place",
        "ETH Zurich": "organization",
    }
    assert {
        ("Maria", "lives-in", "Porto"),
        ("Maria", "works-at", "Farfetch"),
        ("Maria", "has-pet", "Miso"),
        ("Tom", "studies-at", "ETH Zurich"),
    } <= edges


def test_scores_script_on_a_slice_stays_above_its_floor() -> None:
    lines: list[str] = []
    code = extraction_scores.main(
        ["--split", "dev", "--limit", "4", "--min-f1", "entities=0.8", "--min-f1", "relationships=0.6",
         "--min-f1", "facts=0.8", "--min-f1", "preferences=0.8"],
        out=lines.append,
    )  # fmt: skip
    assert code == 0, "\n".join(lines)
    table = [row for line in lines for row in line.splitlines() if row.startswith("| ")]
    rows = {row.split("|")[1].strip(): row for row in table}
    assert set(rows) >= {"facts", "preferences", "entities", "relationships"}


def test_scores_script_fails_below_a_floor() -> None:
    lines: list[str] = []
    assert extraction_scores.main(["--split", "dev", "--limit", "1", "--min-f1", "facts=1.01"], out=lines.append) == 1
    assert any(line.startswith("FAIL dev: facts F1") for line in lines)
