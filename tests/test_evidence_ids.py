"""Issue 14 gaps found by an HTTP probe: memories and conclusions name the sessions they were said in,
through the HTTP API."""

from __future__ import annotations

from fastapi.testclient import TestClient

from tests.helpers import end_session, talk, user

USER = "evidence-ids"


def test_memories_and_conclusions_carry_their_session_ids(client: TestClient) -> None:
    talk(client, USER, "chat-monday-7f3", ("user", "I work as a nurse at Mercy Hospital."), ("assistant", "Noted."))
    talk(client, USER, "chat-friday-2c9", ("user", "I am allergic to peanuts."), ("assistant", "I will remember."))

    found = client.get("/api/memory/memories", params={"q": "nurse Mercy Hospital"}, headers=user(USER)).json()
    nurse = next(m for m in found["memories"] if "nurse" in m["text"].lower())
    assert nurse["sourceSessionIds"] == ["chat-monday-7f3"]
    assert len(nurse["sourceEpisodeIds"]) == 1
    one = client.get(f"/api/memory/memories/{nurse['id']}", headers=user(USER)).json()
    assert one["sourceSessionIds"] == ["chat-monday-7f3"]

    conclusions = client.get("/api/memory/conclusions", headers=user(USER)).json()["conclusions"]
    peanuts = next(c for c in conclusions if "peanut" in c["text"].lower())
    assert peanuts["source_session_ids"] == ["chat-friday-2c9"]

    # a memory whose source is no stored episode names no session
    written = client.post(
        "/api/memory/memories", json={"text": "User plays the cello", "source": "ep-gone-000"}, headers=user(USER)
    ).json()["memory"]
    assert written["sourceEpisodeIds"] == ["ep-gone-000"]
    assert written["sourceSessionIds"] == []


def test_an_extracted_fact_is_valid_from_its_own_turn(client: TestClient) -> None:
    turns = [
        {"role": "user", "content": "I work as a nurse at Mercy Hospital.", "timestamp": 1683540000000},
        {"role": "assistant", "content": "That sounds demanding.", "timestamp": 1683540030000},
        {"role": "user", "content": "I live in Lisbon with my two cats.", "timestamp": 1683543600000},
        {"role": "assistant", "content": "Lisbon is lovely.", "timestamp": 1683547200000},
    ]
    end_session(client, USER, "dated-turns-4b1", turns)
    memories = client.get("/api/memory/memories", headers=user(USER)).json()["memories"]
    valid_from = {m["text"]: m["validFrom"] for m in memories}
    nurse = next(t for t in valid_from if "nurse" in t.lower())
    lisbon = next(t for t in valid_from if "lisbon" in t.lower())
    assert valid_from[nurse] == 1683540000000  # 8 May 2023 10:00 UTC, not the session's last turn
    assert valid_from[lisbon] == 1683543600000


def test_a_long_turn_highlight_is_cut_to_what_matched(client: TestClient) -> None:
    # one unpunctuated run on either side (few sentences: the session's summary and facts stay cheap); 6,700
    # characters, not the probe's 20,000, to keep the ingestion short: the cut is the same past 256 tokens
    filler = "we talked about the weather and the traffic on the bridge again this morning and " * 40
    said = filler + "My grandmother's lighthouse in Peniche was painted teal last spring. " + filler
    assert len(said) > 6_000
    end_session(
        client,
        USER,
        "long-turn-9d2",
        [
            {"role": "user", "content": said, "timestamp": 1683540000000},
            {"role": "assistant", "content": "What a story.", "timestamp": 1683540060000},
            {"role": "user", "content": "The lighthouse is tall.", "timestamp": 1683540120000},
        ],
    )
    found = client.get(
        "/api/memory/search", params={"q": "grandmother lighthouse Peniche teal"}, headers=user(USER)
    ).json()
    (hit,) = [h for h in found["results"] if h["sessionId"] == "long-turn-9d2"]
    texts = [h["text"] for h in hit["highlights"]]
    assert "The lighthouse is tall." in texts  # a short turn stays whole
    (long_one,) = [t for t in texts if "Peniche" in t]
    assert len(long_one) <= 1_600  # about 256 tokens
    assert "My grandmother's lighthouse in Peniche was painted teal last spring [= spring 2022]." in long_one
    assert "…" in long_one


def test_an_undated_turn_among_dated_ones_takes_its_neighbours_time(client: TestClient) -> None:
    turns = [
        {"role": "user", "content": "My brother Tiago opened a surf school in Ericeira."},  # first: the next one's
        {"role": "assistant", "content": "A surf school, how exciting.", "timestamp": 1683540000000},
        {"role": "user", "content": "He also adopted a greyhound called Bolt.", "timestamp": 1683540060000},
        {"role": "assistant", "content": "Greyhounds are gentle dogs."},  # the previous one's
    ]
    end_session(client, USER, "undated-3e7", turns)
    (episode,) = [
        e for e in client.get("/api/memory/episodes", headers=user(USER)).json()["episodes"] if "Tiago" in e["summary"]
    ]
    assert episode["timestamp"] == 1683540060000  # 8 May 2023, not today

    def said_at(query: str) -> dict[str, int]:
        found = client.get("/api/memory/search", params={"q": query}, headers=user(USER)).json()
        return {h["text"]: h["timestamp"] for hit in found["results"] for h in hit["highlights"]}

    assert said_at("Tiago Ericeira")["My brother Tiago opened a surf school in Ericeira."] == 1683540000000
    assert said_at("gentle dogs")["Greyhounds are gentle dogs."] == 1683540060000
    tiago = [
        m for m in client.get("/api/memory/memories", headers=user(USER)).json()["memories"] if "Tiago" in m["text"]
    ]
    assert tiago and all(m["validFrom"] == 1683540000000 for m in tiago)


def test_an_undated_last_turn_of_an_imported_conversation_does_not_date_it_today(client: TestClient) -> None:
    turns = [
        {"role": "user", "content": "I finally repaired the old sailing boat in Cascais.", "timestamp": 1683540000000},
        {"role": "assistant", "content": "Well done, that took months."},
    ]
    stored = client.post(
        "/api/memory/conversations", json={"sessions": [{"id": "boat-5a0", "turns": turns}]}, headers=user(USER)
    )
    assert stored.status_code == 200 and stored.json()["stored"] == 1, stored.text
    (episode,) = [
        e for e in client.get("/api/memory/episodes", headers=user(USER)).json()["episodes"] if "boat" in e["summary"]
    ]
    assert episode["timestamp"] == 1683540000000  # 8 May 2023, not the day it was imported


def test_entity_conclusions_and_a_dream_run_carry_their_session_ids(client: TestClient) -> None:
    """Every route that lists conclusions names their sessions: the entity page's and POST /dream's
    (GET /conclusions above)."""
    who = "evidence-ids-dream"
    talk(client, who, "chat-tue-5a1", ("user", "I work as a nurse at Mercy Hospital."), ("assistant", "Noted."))
    entities = client.get("/api/entities", params={"q": "Mercy Hospital"}, headers=user(who)).json()["entities"]
    mercy = next(e for e in entities if e["name"] == "Mercy Hospital")
    listed = client.get(f"/api/entities/{mercy['id']}/conclusions", headers=user(who)).json()["conclusions"]
    nurse = next(c for c in listed if "nurse" in c["text"].lower())
    assert nurse["source_session_ids"] == ["chat-tue-5a1"]
    assert nurse["text"] == "User works at Mercy Hospital as a nurse"  # not "Mercy Hospital. as a nurse"

    dreamt = client.post("/api/memory/dream", headers=user(who))  # consolidates the recent episodes again
    assert dreamt.status_code == 200, dreamt.text
    job = next(c for c in dreamt.json()["conclusions"] if "nurse" in c["text"].lower())
    assert job["source_session_ids"] == ["chat-tue-5a1"]


def test_an_employer_named_at_a_sentence_end_keeps_no_full_stop_but_an_abbreviation_keeps_its_own() -> None:
    from agtos.tasks.explicit import statements_of

    assert statements_of("I work at Google.", "Omar") == [("Omar works at Google", "job", 0.9)]
    assert statements_of("I am a teacher at Lincoln High.", "Ana")[0][0] == "Ana works at Lincoln High as a teacher"
    assert statements_of("I work at Acme Inc.", "Omar")[0][0] == "Omar works at Acme Inc."
