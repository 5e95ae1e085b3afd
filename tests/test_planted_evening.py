"""Tests written for bugs planted in the code landed on the evening of 2026-12-06 (issue 20; docs/testing.md,
"Planted bugs in the code landed on 2026-12-06 (evening)"): an opt-out landing in the middle of an import,
a thing one has on a weekday, the superseded fact's 'until' offset, the Content-Type hint, the 405's Allow,
the stored episode's importance and the bounds of 'another language'. Expected values are literals of the
rules' docstrings and the README, or (the import) the answer for a user who never opted out."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pyarrow.parquet as pq
import pytest
import redis
from fastapi.testclient import TestClient

import agtos.importers
from agtos.memory.coordinator import MemoryCoordinator
from agtos.memory.export import export_snapshot
from tests.helpers import user
from tests.test_privacy_import import import_client, user_keys  # noqa: F401 (a fixture)
from tests.test_probe_fidelity import context
from tests.test_turn_dates import LONDON, dates, london_then_berlin, told

OPTED_OUT = "user opted out of persistence"  # the skip reason the README's privacy section names


def test_an_opt_out_during_an_import_keeps_nothing_and_a_later_import_takes_it_all(
    import_client: TestClient,  # noqa: F811 (the fixture imported above)
    monkeypatch: pytest.MonkeyPatch,
    raw_redis: redis.Redis,
    key_prefix: str,
) -> None:
    """Planted in source_import.NOT_FINAL: ``OPTED_OUT`` dropped, so a session skipped because the user opted
    out while the import ran was recorded as judged for good, and after opting back in the same files read
    "unchanged" and were never imported. POST /import refuses an opted-out user up front (403), so the
    opt-out is sent through HTTP here between the files being read and their sessions being ingested.
    Found on the way: the memory files of that import were stored for the opted-out user (12 memories)."""
    client, original = import_client, agtos.importers.collect
    control = client.post("/api/memory/import", json={}, headers=user("omar")).json()  # never opted out
    assert control["episodesAdded"] > 0 and control["memoriesAdded"] > 0 and control["unchanged"] == 0

    def collect_then_opt_out(home: Path, sources: list[str] | None) -> Any:
        found = original(home, sources)
        answer = client.put("/api/memory/privacy", json={"opt_out": True}, headers=user("olga"))
        assert answer.status_code == 200 and answer.json()["optOut"] is True
        return found

    monkeypatch.setattr(agtos.importers, "collect", collect_then_opt_out)
    during = client.post("/api/memory/import", json={}, headers=user("olga"))
    assert during.status_code == 200, during.text
    body = during.json()
    assert (body["sessions"], body["episodesAdded"], body["episodesUpdated"]) == (control["sessions"], 0, 0)
    assert (body["unchanged"], body["memoriesAdded"]) == (0, 0)
    assert {s["reason"] for s in body["skipped"]} == {OPTED_OUT} and len(body["skipped"]) == body["sessions"]
    assert user_keys(raw_redis, key_prefix, "olga") == []  # an opted-out user keeps working memory only
    monkeypatch.undo()

    assert client.post("/api/memory/import", json={}, headers=user("olga")).status_code == 403
    assert client.put("/api/memory/privacy", json={"opt_out": False}, headers=user("olga")).status_code == 200
    after = client.post("/api/memory/import", json={}, headers=user("olga")).json()
    # as the import of a user who never opted out: nothing "unchanged" from the opted-out run
    same = ("sessions", "episodesAdded", "unchanged", "memoriesAdded")
    assert [after[k] for k in same] == [control[k] for k in same]
    assert len(after["skipped"]) == len(control["skipped"])
    episodes = client.get("/api/memory/episodes", params={"limit": 100}, headers=user("olga")).json()
    assert episodes["count"] == control["episodesAdded"]


@pytest.mark.parametrize(
    ("text", "expected"),
    [  # said on Monday 8 May 2023 (tests.test_turn_dates.MAY_8): Tuesday 2 or 9 May, Friday 5 or 12, Saturday 13
        # planted: "are" dropped after a thing one has (only "is" read as the present)
        ("The party and the concert are on Saturday", [("Saturday", "2023-05-13", "day")]),
        # planted: "the party's" not read as "the party is"
        ("The wedding's on Saturday", [("Saturday", "2023-05-13", "day")]),
        # planted: "got" after "I've" read as a past tense ("I've got" is "I have": no tense, as "I have yoga")
        ("I've got yoga on Tuesday", []),
        ("I've got Friday off", []),
        # planted: only the listed past tenses stop the look-back for "have", not any "-ed" word
        ("I have attended a class on Tuesday", [("Tuesday", "2023-05-02", "day")]),
        ("I have missed an appointment on Tuesday", [("Tuesday", "2023-05-02", "day")]),
    ],
)
def test_a_thing_one_has_on_a_weekday_is_the_coming_one_only_in_the_present(
    text: str, expected: list[tuple[str, str, str]]
) -> None:
    """6d75be4's rule (tasks/dates.py's docstring): a thing one has on a day said in the present is the
    coming one; "I've got" is no past tense; "I have had an interview" (a past participle) stays past."""
    assert dates(text) == expected


def test_a_superseded_fact_said_again_earlier_keeps_the_local_month_it_ended(client: TestClient) -> None:
    """356ea8e's 'until' label on the local day, planted in MemoryVersions (a restatement keeps the closed
    fact's ``valid_until`` but not its ``until_utc_offset``): London said in January, 'I moved to Berlin'
    on the evening of 31 March 2024 in California (1 April in UTC), then a back-filled February session
    says London again (a restatement, before the move): the label stays 'until March 2024'."""
    london_then_berlin(client, "until-re")
    told(client, "until-re", "feb", LONDON, "2024-02-12T09:00:00Z", "2024-02-12T09:01:00Z")
    listed = client.get("/api/memory/memories", headers=user("until-re")).json()["memories"]
    (closed,) = [m for m in listed if "London" in m["text"]]
    assert closed["validUntil"] == 1_711_940_400_000  # 2024-04-01T03:00Z
    history = client.get(f"/api/memory/memories/{closed['id']}/history", headers=user("until-re"))
    assert "restated" in history.text, history.text
    said = context(client, "until-re", "Which city does the user live in?")
    assert [line for line in said.splitlines() if "London" in line and line.endswith("(until March 2024)")], said


def test_a_validity_end_edited_in_ms_is_labelled_on_its_utc_day(client: TestClient) -> None:
    """Planted in memory_crud.update: the closing fact's ``until_utc_offset`` kept when the user edits
    ``validUntil`` (an instant in ms, which carries no offset: its UTC day, as the docstring says). London
    closed by Berlin said at 2024-03-31T20:00-07:00, then validUntil set to 2024-05-01T02:00Z: May in UTC,
    30 April in California."""
    london_then_berlin(client, "until-ed")
    listed = client.get("/api/memory/memories", headers=user("until-ed")).json()["memories"]
    (closed,) = [m for m in listed if "London" in m["text"]]
    edited = client.put(
        f"/api/memory/memories/{closed['id']}", json={"validUntil": 1_714_528_800_000}, headers=user("until-ed")
    )
    assert edited.status_code == 200 and edited.json()["validUntil"] == 1_714_528_800_000, edited.text
    said = context(client, "until-ed", "Which city does the user live in?")
    assert [line for line in said.splitlines() if "London" in line and line.endswith("(until May 2024)")], said


@pytest.mark.parametrize("how", ["said again after the move", "the move deleted"])
def test_a_reopened_fact_keeps_no_offset_of_its_end(
    how: str, client: TestClient, coordinator: MemoryCoordinator, tmp_path: Path
) -> None:
    """Planted in MemoryVersions: ``until_utc_offset`` not cleared where a closed fact is current again
    (London said again after Berlin: 'reopened'; or the Berlin memory deleted). ``validUntil`` is null,
    so the export (``agtos memory export``) must not keep the offset of an end that is gone."""
    london_then_berlin(client, "until-op")
    listed = client.get("/api/memory/memories", headers=user("until-op")).json()["memories"]
    (closer,) = [m for m in listed if "Berlin" in m["text"]]
    if how == "the move deleted":
        assert client.delete(f"/api/memory/memories/{closer['id']}", headers=user("until-op")).status_code == 200
    else:
        told(client, "until-op", "may", LONDON, "2024-05-06T09:00:00Z", "2024-05-06T09:01:00Z")
    listed = client.get("/api/memory/memories", headers=user("until-op")).json()["memories"]
    (reopened,) = [m for m in listed if "London" in m["text"]]
    assert reopened["validUntil"] is None
    export_snapshot(coordinator.services, tmp_path / "snap", ["until-op"])
    rows = pq.read_table(tmp_path / "snap" / "memories.parquet").to_pylist()
    (row,) = [r for r in rows if r["id"] == reopened["id"]]
    assert (row["valid_until"], row["until_utc_offset"]) == (None, None)


@pytest.mark.parametrize("media", ["application/vnd.api+json", "Application/JSON; charset=utf-8"])
def test_a_body_sent_as_json_under_another_spelling_keeps_the_usual_message(media: str, client: TestClient) -> None:
    """Planted in errors.py (b310075): the Content-Type hint given to a JSON body whose media type is a
    ``+json`` one or written in capitals (FastAPI reads both as JSON; RFC 9110: media types are
    case-insensitive); the hint is for a body sent without a JSON Content-Type only."""
    listed = client.post(
        "/api/memory/sessions/s1/turns", content=b"[1, 2]", headers=user("ct2") | {"content-type": media}
    )
    assert listed.status_code == 422, listed.text
    assert "Content-Type" not in listed.text, listed.text
    body = b'{"turns": [{"role": "user", "content": "I live in Oslo"}]}'
    sent = client.post("/api/memory/sessions/s1/turns", content=body, headers=user("ct2") | {"content-type": media})
    assert sent.status_code == 200, sent.text


@pytest.mark.parametrize(
    "path", ["/api/memory/memories/mem-0123456789abcdef", "/api/memory/privacy", "/api/memory/sessions/s1/turns"]
)
def test_a_405s_allow_names_exactly_the_methods_the_path_answers(client: TestClient, path: str) -> None:
    """2085e6c's Allow (RFC 9110 15.5.6) against an oracle that is not the OpenAPI document the handler's
    routes also make: the server's own answers (a method is allowed where it is not answered 405). Drops
    HEAD rightly (FastAPI's routes answer it 405) and catches every path-matching route's method taken."""
    answers = {
        m: client.request(m, path, headers=user("allow2")).status_code
        for m in ("GET", "HEAD", "POST", "PUT", "PATCH", "DELETE")
    }
    refused = client.request("OPTIONS", path, headers=user("allow2"))
    assert refused.status_code == 405, refused.text
    assert set(refused.headers["allow"].split(", ")) == {m for m, code in answers.items() if code != 405}, answers


@pytest.mark.parametrize(
    "said",
    [
        "猫が好き、犬も",  # planted: "6+ letters" of another script read as 7+ (six here)
        "Ich liebe Berliner Katzen",  # planted: "4+ words" read as 5+ (four, no English stopword)
        "東京のiPhone店、大好き",  # planted: "mostly" (half) read as two thirds (6 Latin letters of 13)
    ],
)
def test_a_one_turn_session_at_the_bounds_of_another_language_is_kept(client: TestClient, said: str) -> None:
    """830e231's rule (importance.judged_in_english): a one-turn session is judged by the English save rules
    only if its letters are mostly Latin, or under 6 letters, and it has under 4 words or 15 % English
    stopwords; otherwise it is kept unjudged. Each text sits on one of the bounds."""
    from tests.test_save_other_languages import ended

    body = ended(client, "lang3", "s1", said)
    assert (body["saved"], body["reason"]) == (True, "another language: kept unjudged"), body


def test_an_ended_sessions_episode_keeps_its_importance_score(client: TestClient) -> None:
    """Planted in importance.decide_save (d1ba1d5's ``scored`` flag inverted): the full decision, the one an
    episode is stored with, scored 0 (the queued verdict's placeholder), so every conversation episode had
    importance 0 and the lint's orphan rule (importance < 0.3, README) took it. One user turn stating one
    fact: the base 0.3 plus 0.05 a fact (score_importance)."""
    from tests.test_save_other_languages import ended

    body = ended(client, "imp", "s1", "I work as a nurse in Oslo.")
    assert (body["saved"], body["reason"]) == (True, "facts stated"), body
    (episode,) = client.get("/api/memory/episodes", headers=user("imp")).json()["episodes"]
    assert episode["importance"] == pytest.approx(0.35)


@pytest.mark.parametrize("path", ["/knowledge/", "/knowledge/app.js"])
def test_a_405_of_the_knowledge_pages_files_allows_what_they_answer(client: TestClient, path: str) -> None:
    """Found by this audit: 2085e6c's handler gave a 405 of the mounted static files an empty ``Allow`` (the
    mount's scope, which no route matches; RFC 9110: an empty Allow says nothing is allowed). The oracle
    is the server's own answers, as above."""
    methods = ("GET", "HEAD", "POST", "PUT", "PATCH", "DELETE")
    answers = {m: client.request(m, path).status_code for m in methods}
    refused = client.request("POST", path)
    assert refused.status_code == 405, refused.text
    allowed = {m for m, code in answers.items() if code != 405}
    assert set(refused.headers["allow"].split(", ")) == allowed == {"GET", "HEAD"}, answers


@pytest.mark.parametrize(
    ("said", "saved", "reason"),
    [
        ("私は猫が好き", True, "another language: kept unjudged"),  # "I like cats": 6 letters, no space
        ("我住在北京喜欢猫", True, "another language: kept unjudged"),  # "I live in Beijing, like cats"
        ("こんにちは", False, "greeting or small talk only"),  # "hello": 5 letters, too short to tell
    ],
)
def test_a_one_turn_session_in_an_unspaced_script_is_not_taken_for_small_talk(
    client: TestClient, said: str, saved: bool, reason: str
) -> None:
    """Found by this audit of 830e231: Japanese or Chinese written without punctuation is one of ``words``,
    so the small-talk rule (under two informative words) dropped it before the language was looked at."""
    from tests.test_save_other_languages import ended

    body = ended(client, "lang4", "s1", said)
    assert (body["saved"], body["reason"]) == (saved, reason), body
