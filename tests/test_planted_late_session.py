"""Planted-bug audit of the code landed late on 2026-12-06 (issue 20, docs/testing.md: fail-closed auth,
Idempotency-Key, dotted ids, request spellings, import digests, seasons, the local-clock morning habit):
each test kills a realistic one-line bug that the owning tests let through (planted one at a time in a
copy). Real Redis, through HTTP where a user would go."""

from __future__ import annotations

import logging
import time

import pytest
import redis
from fastapi.testclient import TestClient

from agtos.serving.auth import OFF_CACHE_S
from agtos.tasks.dates import resolve_dates
from tests.helpers import user
from tests.test_auth import bearer, store_of
from tests.test_privacy_import import import_client  # noqa: F401 (a fixture)

TURN = {"turns": [{"role": "user", "content": "I keep my passport in the blue drawer."}]}


def test_auth_that_was_on_stays_closed_when_the_marker_goes_even_after_an_explicit_off(
    client: TestClient, raw_redis: redis.Redis, key_prefix: str
) -> None:
    """Planted in Authenticator: ``_ever_on`` set to each answer instead of kept once seen. The process
    saw auth on, then an operator's ``agtos keys off``, then Redis lost its data: it fails closed (README:
    a process that saw auth on keeps it on while the marker is missing)."""
    store = store_of(client)
    _, record = store.create("service", "bot")
    assert client.get("/api/memory/episodes", headers=user("eve")).status_code == 401
    assert store.revoke(record.id) and store.disable()
    assert client.get("/api/memory/episodes", headers=user("eve")).status_code == 200
    raw_redis.delete(f"{key_prefix}:{{auth}}:on")  # Redis restarted without its data
    time.sleep(OFF_CACHE_S + 0.05)  # past the while 'auth off' is trusted without asking Redis
    lost = client.get("/api/memory/episodes", headers=user("eve"))
    assert lost.status_code == 401, lost.text


def test_the_lost_marker_is_logged_once_not_on_every_request(
    client: TestClient, raw_redis: redis.Redis, key_prefix: str, caplog: pytest.LogCaptureFixture
) -> None:
    """Planted in Authenticator (96354aa): the 'marker is gone' error logged on every request while the
    marker is missing. Three refused requests after the loss log it once; a new marker and a second loss
    log it again."""
    store = store_of(client)
    key, _ = store.create("service", "bot")
    assert client.get("/api/memory/episodes", headers=bearer(key, **user("eve"))).status_code == 200
    raw_redis.delete(f"{key_prefix}:{{auth}}:keys", f"{key_prefix}:{{auth}}:on")
    with caplog.at_level(logging.ERROR, logger="agtos.serving.auth"):
        for _ in range(3):
            assert client.get("/api/memory/episodes", headers=user("eve")).status_code == 401
        gone = [r for r in caplog.records if "marker is gone" in r.getMessage()]
        assert len(gone) == 1, [r.getMessage() for r in caplog.records]
        key, _ = store.create("service", "bot")
        assert client.get("/api/memory/episodes", headers=bearer(key, **user("eve"))).status_code == 200
        raw_redis.delete(f"{key_prefix}:{{auth}}:keys", f"{key_prefix}:{{auth}}:on")
        assert client.get("/api/memory/episodes", headers=user("eve")).status_code == 401
        assert len([r for r in caplog.records if "marker is gone" in r.getMessage()]) == 2


def test_one_idempotency_key_in_two_sessions_appends_to_each(client: TestClient) -> None:
    """Planted in the journal: the key's mark not per session (the session id left out of its digest). The
    header is per session (README: 'the same key with other turns of the session is a 422'): a client
    reusing its key in another session has that session's turn appended, not acknowledged as a replay."""
    keyed = {**user("ida"), "Idempotency-Key": "retry-7"}
    for session in ("s1", "s2"):
        appended = client.post(f"/api/memory/sessions/{session}/turns", json=TURN, headers=keyed)
        assert appended.status_code == 200, appended.text
        assert (appended.json()["appended"], appended.json()["journalLength"]) == (1, 1)
        got = client.get(f"/api/memory/sessions/{session}", headers=user("ida")).json()["messages"]
        assert [m["content"] for m in got] == [TURN["turns"][0]["content"]]


def test_an_idempotency_key_is_kept_as_long_as_the_sessions_journal(
    client: TestClient, raw_redis: redis.Redis, key_prefix: str
) -> None:
    """Planted in the journal's Lua: the key's mark written without its TTL (kept for ever: every key a
    client sent stays in Redis). The header's description: 'Kept as long as the session's journal'
    (AGTOS_SESSION_JOURNAL_TTL_HOURS, 48 h by default)."""
    keyed = {**user("ida"), "Idempotency-Key": "retry-8"}
    assert client.post("/api/memory/sessions/s1/turns", json=TURN, headers=keyed).status_code == 200
    (mark,) = raw_redis.keys(f"{key_prefix}:*journal-idem*")
    (journal,) = raw_redis.keys(f"{key_prefix}:*session:s1:turns")
    assert 48 * 3600 - 60 < raw_redis.ttl(mark) <= 48 * 3600
    assert abs(raw_redis.ttl(mark) - raw_redis.ttl(journal)) <= 1


def test_a_retry_must_repeat_the_turns_roles_too(client: TestClient) -> None:
    """Planted in the journal: the batch's digest of the contents only. The same key with the same words
    sent as the assistant's turn is other turns (a 422), not a replay of the user's."""
    keyed = {**user("ida"), "Idempotency-Key": "retry-9"}
    assert client.post("/api/memory/sessions/s1/turns", json=TURN, headers=keyed).status_code == 200
    said_by_assistant = {"turns": [{**TURN["turns"][0], "role": "assistant"}]}
    refused = client.post("/api/memory/sessions/s1/turns", json=said_by_assistant, headers=keyed)
    assert refused.status_code == 422, refused.text
    assert "Idempotency-Key" in refused.json()["message"]


def test_a_turn_that_starts_with_blanks_is_not_blank(client: TestClient) -> None:
    """Planted in TurnIn: the not-blank pattern anchored (``^\\S``), refusing a turn that starts with a
    space or a newline (a pasted block, an indented snippet). Only all-blank turns are refused."""
    content = "\n    def hello():\n        return 'hi'"
    body = {"turns": [{"role": "user", "content": content}]}
    appended = client.post("/api/memory/sessions/s1/turns", json=body, headers=user("ida"))
    assert appended.status_code == 200, appended.text
    got = client.get("/api/memory/sessions/s1", headers=user("ida")).json()["messages"]
    assert [m["content"] for m in got] == [content]


def test_a_turn_echoed_with_its_offset_and_an_iso_time_is_taken(client: TestClient) -> None:
    """Planted in the turn models' validator: the offset read from the ISO time before the camelCase keys
    are renamed, so a turn sending ``utcOffset`` beside a time with an offset had both spellings (422)."""
    turn = {"role": "user", "content": "I went hiking near Lyon.", "timestamp": "2023-05-08T20:00:00-07:00"}
    body = {"turns": [{**turn, "utcOffset": -420}]}
    appended = client.post("/api/memory/sessions/trip/turns", json=body, headers=user("cam"))
    assert appended.status_code == 200, appended.text
    (message,) = client.get("/api/memory/sessions/trip", headers=user("cam")).json()["messages"]
    assert (message["utc_offset"], message["timestamp"]) == (-420, 1_683_601_200_000)  # 2023-05-09T03:00Z


def test_an_imported_episode_gone_since_is_stored_again(
    import_client: TestClient,  # noqa: F811 (the fixture imported above)
    raw_redis: redis.Redis,
    key_prefix: str,
) -> None:
    """Planted in EpisodeStore.unchanged_imports: a recorded digest alone counts as unchanged, so an episode
    whose TTL passed (AGTOS_EPISODE_TTL_DAYS) was never imported again from the same file."""
    client = import_client
    first = client.post("/api/memory/import", json={"sources": ["aider"]}, headers=user("ida")).json()
    assert (first["sessions"], first["episodesAdded"], len(first["skipped"])) == (2, 1, 1)
    (episode,) = client.get("/api/memory/episodes", headers=user("ida")).json()["episodes"]
    assert raw_redis.delete(f"{key_prefix}:u:{{ida}}:episode:{episode['id']}") == 1  # its TTL passed
    again = client.post("/api/memory/import", json={"sources": ["aider"]}, headers=user("ida")).json()
    assert (again["episodesAdded"], again["unchanged"]) == (1, 1), again  # the small talk: not judged again
    (back,) = client.get("/api/memory/episodes", headers=user("ida")).json()["episodes"]
    assert back["id"] == episode["id"]


JUNE_15 = 1_686_830_400_000  # 2023-06-15T12:00Z, summer under way


def test_next_summer_said_in_june_is_next_years() -> None:
    """Planted in _season: 'next' left unresolved up to and including the season's first month (``<=``).
    Said in June, this year's summer has begun: the next one is 2024's (``_season``'s docstring)."""
    found = [(d.text, d.date, d.period) for d in resolve_dates("We will go back to Crete next summer", JUNE_15)]
    assert found == [("next summer", "2024-06-01", "season")]


def test_a_decomposed_query_names_a_speaker_accented_mid_word() -> None:
    """Planted in named_speakers: the query searched as sent, not composed (dc6a32c composes it). 'Zoe' +
    U+0308 still matched through the unaccented 'Zoe'; 'Rene' + U+0301 + 'e' matches neither 'Renée'
    nor 'Renee' unless the query is composed first."""
    from agtos.tasks.ranking import named_speakers, without_speakers

    query = "What does Rene\u0301e do for work?"
    assert named_speakers(query, ["Renée", "Jon"]) == {"renée"}
    assert without_speakers(query, ["Renée"]) == "What does do for work?"
