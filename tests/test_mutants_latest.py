"""What kills the mutants of the core functions changed since the last mutation run (6d7dd19; issue 20,
docs/testing.md, "Figures of 2026-12-06, later"): the settings' CORS origin list (``config._origins``), a
turn append's Idempotency-Key (``SessionJournal.append``, ``_idempotency_id``, ``_batch_digest``) and the
offset a restated fact keeps (``MemoryVersions._merge_existing``), with its closure's offset (the sample at
19bc6d2, "Figures of 2026-12-06, evening"), and the width of stored vectors (``SemanticMemory.store``). Real
Redis, through HTTP or the settings' environment where a user goes; literals from the README's CORS,
Idempotency-Key and float16 promises and hand-worked calendars (2023-05-08T20:00-07:00 is 9 May 03:00 UTC,
8 May in Oregon)."""

from __future__ import annotations

import pytest
import redis
from fastapi.testclient import TestClient

from agtos.config import Settings, SettingsError
from agtos.memory.context_builder import evidence_items
from agtos.memory.coordinator import MemoryCoordinator
from agtos.schemas import Memory
from tests.helpers import user, user_key_names
from tests.test_probe_fidelity import context, end
from tests.test_turn_dates import LONDON, london_then_berlin, told

TURNS = "/api/memory/sessions/{}/turns"


# -- AGTOS_CORS_ORIGINS (config._origins, a1b7a88) ---------------------------------------------------
def test_cors_origins_are_read_lower_cased_without_the_trailing_slash(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("AGTOS_CORS_ORIGINS", " HTTPS://App.Example.com/ ,http://localhost:5173,, http://10.0.0.7:80//")
    assert Settings.from_env().cors_origins == frozenset(
        {"https://app.example.com", "http://localhost:5173", "http://10.0.0.7:80"}
    )
    monkeypatch.setenv("AGTOS_CORS_ORIGINS", "")
    assert Settings.from_env().cors_origins == frozenset()


@pytest.mark.parametrize(
    ("origin", "shown"),
    [
        ("*", "*"),
        ("https://*.example.com", "https://*.example.com"),
        ("https://App.example.com/path/", "https://app.example.com/path"),
        ("app.example.com", "app.example.com"),
        ("ftp://files.example.com", "ftp://files.example.com"),
        ("https://", "https:"),  # the trailing slash goes first
    ],
)
def test_what_is_not_an_origin_is_refused_with_the_reason(
    monkeypatch: pytest.MonkeyPatch, origin: str, shown: str
) -> None:
    monkeypatch.setenv("AGTOS_CORS_ORIGINS", f"https://ok.example.com, {origin}")
    expected = f"'{shown}' is not an origin such as https://app.example.com (no '*', no path)"
    with pytest.raises(SettingsError, match="AGTOS_CORS_ORIGINS") as raised:
        Settings.from_env()
    assert expected in str(raised.value)


# -- Idempotency-Key on a turn append (session_journal: append, _idempotency_id, _batch_digest, 1f87fbe) ---
def post(client: TestClient, session_id: str, turns: list[dict[str, str]], key: str | None = None) -> dict:
    headers = {**user("idem"), **({"Idempotency-Key": key} if key is not None else {})}
    answered = client.post(TURNS.format(session_id), json={"turns": turns}, headers=headers)
    return {"status": answered.status_code, **answered.json()}


def said(client: TestClient, session_id: str) -> list[str]:
    got = client.get(f"/api/memory/sessions/{session_id}", headers=user("idem"))
    assert got.status_code == 200, got.text
    return [m["content"] for m in got.json()["messages"]]


def test_a_keyed_append_lands_once_per_session(client: TestClient) -> None:
    """A retry with the key and the same roles and contents appends nothing (its times may differ); the
    same key with another role or content is a 422 naming the header; the key of one session is free in
    another; an append without a key always appends."""
    train = [{"role": "user", "content": "I booked the 9:40 train to Leeds."}]
    first = post(client, "s1", train, key="k-1")
    assert (first["status"], first["appended"], first["journalLength"]) == (200, 1, 1)
    again = post(client, "s1", [{**train[0], "timestamp": "2026-12-06T09:00:00Z"}], key="k-1")
    assert (again["status"], again["journalLength"]) == (200, 1)
    assert said(client, "s1") == ["I booked the 9:40 train to Leeds."]
    for other in ([{"role": "assistant", "content": train[0]["content"]}], [{"role": "user", "content": "Other."}]):
        refused = post(client, "s1", other, key="k-1")
        assert refused["status"] == 422
        assert refused["errors"] == [
            {
                "field": "header.Idempotency-Key",
                "message": "this Idempotency-Key was used for other turns of this session",
            }
        ]
    assert said(client, "s1") == ["I booked the 9:40 train to Leeds."]
    elsewhere = post(client, "s2", train, key="k-1")
    assert (elsewhere["status"], elsewhere["journalLength"]) == (200, 1)
    plain = [post(client, "s1", train) for _ in range(2)]
    assert [(p["status"], p["journalLength"]) for p in plain] == [(200, 2), (200, 3)]
    other_key = post(client, "s1", train, key="k-2")
    assert (other_key["status"], other_key["journalLength"]) == (200, 4)
    assert said(client, "s1") == ["I booked the 9:40 train to Leeds."] * 4


# -- a restated fact's offset (MemoryVersions._merge_existing, cdfc553) ------------------------------------
CORGI = "I adopted a corgi named Biscuit."
OREGON = "2023-05-08T20:00:00-07:00"  # Monday evening in Oregon: 2023-05-09T03:00:00Z
SAME_INSTANT_UTC = "2023-05-09T03:00:00Z"
JUNE = "2023-06-01T10:00:00Z"
MAY_8, MAY_9 = (
    ["- (8 May 2023) User adopted a corgi named Biscuit"],
    ["- (9 May 2023) User adopted a corgi named Biscuit"],
)


def corgi_fact(client: TestClient, coordinator: MemoryCoordinator, who: str, *times: str) -> tuple[int, list[str]]:
    """The corgi fact's ``validFrom`` and its evidence line (the context shows the turns themselves, which
    restate it), after its sayings at ``times`` were sent in that order, one request each."""
    for n, at in enumerate(times):
        session = {"id": f"said-{n}", "turns": [{"role": "user", "content": CORGI, "timestamp": at}]}
        posted = client.post("/api/memory/conversations", json={"sessions": [session]}, headers=user(who))
        assert posted.status_code == 200, posted.text
    listed = client.get("/api/memory/memories", headers=user(who)).json()["memories"]
    (memory,) = [m for m in listed if "corgi" in m["text"]]
    items, _ = evidence_items(coordinator.services, who, "corgi named Biscuit", 1_000, 10)
    return memory["validFrom"], [item.bullet for item in items if item.tier == "semantic"]


@pytest.mark.parametrize(
    ("times", "expected"),
    [
        ((JUNE, OREGON), (1_683_601_200_000, MAY_8)),  # the earlier saying came second: its offset
        ((OREGON, JUNE), (1_683_601_200_000, MAY_8)),  # the earlier saying was stored: its offset kept
        ((SAME_INSTANT_UTC, OREGON), (1_683_601_200_000, MAY_9)),  # the same instant: the first saying's offset
    ],
)
def test_a_restated_fact_keeps_the_offset_of_its_earliest_saying(
    client: TestClient, coordinator: MemoryCoordinator, times: tuple[str, ...], expected: tuple[int, list[str]]
) -> None:
    assert corgi_fact(client, coordinator, "tz-merge", *times) == expected


def test_a_reopened_fact_takes_the_offset_of_the_saying_that_reopened_it(coordinator: MemoryCoordinator) -> None:
    """London said from Oregon (-07:00) in January, closed by Berlin in March, said again from Tokyo
    (+09:00) in May: London is current again from May, read on Tokyo's day; what it had is kept."""
    jan, mar, may = 1_704_700_800_000, 1_710_489_600_000, 1_715_760_000_000  # 8 Jan, 15 Mar, 15 May 2024 08:00Z

    def said(memory_id: str, text: str, at: int, offset: int, source: str) -> Memory:
        return Memory(
            id=memory_id, user_id="tz-reopen", text=text, created_at=at, valid_from=at,
            source_episode_ids=[source], utc_offset=offset,
        )  # fmt: skip

    sem = coordinator.semantic
    sem.write_memories([said("m-london", "User lives in London", jan, -420, "ep-1")], None)
    sem.write_memories([said("m-berlin", "User lives in Berlin", mar, 60, "ep-2")], None)
    sem.write_memories([said("m-london", "User lives in London", may, 540, "ep-3")], None)
    raw = sem.records("memory", "tz-reopen", ["m-london"])["m-london"]
    london = Memory.model_validate_json(raw)
    assert (london.valid_from, london.utc_offset, london.valid_until) == (may, 540, None)
    assert (london.created_at, london.source_episode_ids) == (jan, ["ep-1", "ep-3"])


# -- a closed fact said again: its end kept, or cleared when it reopens (_merge_existing, 356ea8e) ----------


def test_a_closed_fact_said_again_before_its_end_keeps_its_end_and_local_month(client: TestClient) -> None:
    """London said in January, closed by Berlin said on the evening of 31 March 2024 in California
    (1 April 03:00 UTC), then said again in a February session sent last: still closed at that instant
    by Berlin, and still 'until March 2024' (the month where Berlin was said), not April."""
    london_then_berlin(client, "until-kept")
    told(client, "until-kept", "london-again", LONDON, "2024-02-10T09:00:00Z", "2024-02-10T09:01:00Z")
    listed = client.get("/api/memory/memories", headers=user("until-kept")).json()["memories"]
    (london,) = [m for m in listed if "London" in m["text"]]
    (berlin,) = [m for m in listed if "Berlin" in m["text"]]
    assert (london["validFrom"], london["validUntil"], london["supersededBy"], london["current"]) == (
        1_704_700_800_000,  # 2024-01-08T08:00Z: the first saying
        1_711_940_400_000,  # 2024-04-01T03:00Z: where Berlin was said
        berlin["id"],
        False,
    )
    lines = context(client, "until-kept", "Which city does the user live in?").splitlines()
    assert [line for line in lines if "User lives in London" in line and line.endswith("(until March 2024)")], lines


def test_a_reopened_fact_keeps_no_trace_of_its_end(coordinator: MemoryCoordinator) -> None:
    """London closed by Berlin (said at UTC+01:00) and said again after it: current, with neither the
    closing fact nor the closing offset left on its record."""
    jan, mar, may = 1_704_700_800_000, 1_710_489_600_000, 1_715_760_000_000  # 8 Jan, 15 Mar, 15 May 2024 08:00Z

    def fact(memory_id: str, text: str, at: int, offset: int) -> Memory:
        return Memory(id=memory_id, user_id="tz-cleared", text=text, created_at=at, valid_from=at, utc_offset=offset)

    sem = coordinator.semantic
    sem.write_memories([fact("m-london", "User lives in London", jan, 0)], None)
    sem.write_memories([fact("m-berlin", "User lives in Berlin", mar, 60)], None)
    closed = Memory.model_validate_json(sem.records("memory", "tz-cleared", ["m-london"])["m-london"])
    assert (closed.valid_until, closed.until_utc_offset, closed.superseded_by) == (mar, 60, "m-berlin")
    sem.write_memories([fact("m-london", "User lives in London", may, 0)], None)
    reopened = Memory.model_validate_json(sem.records("memory", "tz-cleared", ["m-london"])["m-london"])
    assert (reopened.valid_until, reopened.until_utc_offset, reopened.superseded_by) == (None, None, None)


# -- the vector blobs' width per namespace (SemanticMemory.store, sample at 19bc6d2) -------------------------
def test_turn_vectors_are_stored_as_float16_and_the_others_as_float32(
    client: TestClient, raw_redis: redis.Redis, key_prefix: str
) -> None:
    """README: 'Turn vectors are stored as float16 in Redis'; episodes, memories, conclusions and entities
    keep float32. With the 384-d embedder (README) a turn's blob is 768 bytes, any other 1,536."""
    turns = [
        {"role": "user", "content": "I adopted a corgi named Biscuit and I live in Lisbon."},
        {"role": "assistant", "content": "Lovely, a corgi in Lisbon!"},
    ]
    end(client, "blobs", "s-blobs", turns)
    widths: dict[str, set[int]] = {}
    for key in user_key_names(raw_redis, key_prefix, "blobs"):
        if key.endswith(":vec:data"):
            namespace = key.removeprefix(f"{key_prefix}:u:{{blobs}}:").split(":", 1)[0]
            widths[namespace] = {raw_redis.hstrlen(key, field) for field in raw_redis.hkeys(key)}
    f4 = {1_536}
    assert widths == {"turn": {768}, "episode": f4, "memory": f4, "conclusion": f4, "entity": f4}


# -- tokenizer version 3's upgrade of stored terms (bm25.upgraded_term, 2a633a0): the CI sample's two survivors --


def test_a_stored_term_upgrades_as_the_v3_tokenizer_would_make_it() -> None:
    """A version-2 term of 64 letters stays a term and one of 65 does not, as tokenize keeps them (its own
    length rule; the sample's survivor `_kept` 4 dropped the 64-letter one); a v2 possessive becomes its
    word's stem, a v1 term is stemmed, a v2 stem is kept, a stopword once its "'s" is off is no term, and
    Hangul stored as jamo (NFD) is composed (NFC, by the standard library)."""
    from unicodedata import normalize

    from agtos.tasks.bm25 import tokenize, upgraded_term

    for word in ("b" * 64, "b" * 65):
        assert [upgraded_term(word, 2)] == (tokenize(word) or [None])
    assert upgraded_term("b" * 64, 2) == "b" * 64 and upgraded_term("b" * 65, 2) is None
    assert upgraded_term("kate's", 2) == "kate"
    assert (upgraded_term("cooking", 1), upgraded_term("cooking", 2)) == ("cook", "cooking")
    assert upgraded_term("it's", 2) is None
    assert upgraded_term(normalize("NFD", "한국"), 2) == normalize("NFC", "한국") == "한국"


# -- the rest of tokenizer version 3's upgrade (bm25.py complete at 244532e, docs/testing.md) -----------------
def test_an_upgraded_possessive_or_code_term_is_the_word_s_v3_term() -> None:
    """A version-2 possessive is stemmed once its "'s" is off ("lucy's" -> Snowball's "luci", y -> i after a
    consonant), a one-letter word's possessive is no term (tokenize keeps 2-64 characters), and a code or
    number stays as written at any version (the docstring's "gpt-4", "node.js", "4521"), not stemmed."""
    from agtos.tasks.bm25 import upgraded_term

    assert upgraded_term("lucy's", 2) == "luci"
    assert upgraded_term("x's", 2) is None
    assert [upgraded_term(code, 1) for code in ("gpt-4", "node.js", "iphone15s", "4521")] == [
        "gpt-4",
        "node.js",
        "iphone15s",
        "4521",
    ]


def test_a_possessive_is_indexed_as_its_word() -> None:
    """Tokenizer version 3: "'s" (straight or curly apostrophe) is its word's ("Kate's" finds Kate), "it's"
    stays a stopword, another apostrophe stays in the word ("O'Neill"); Snowball stems "lucy" as "luci"."""
    from agtos.tasks.bm25 import tokenize

    assert tokenize("Kate's dog met Lucy\u2019s cats; it's O'Neill's") == [
        "kate",
        "dog",
        "meet",  # "met": tokenizer v4 relates it to "meet"
        "luci",
        "cat",
        "o'neill",
    ]


def test_a_v3_query_term_also_looks_up_its_v2_form_without_marks() -> None:
    """The docstring's pairs: "かぎ" (ぎ = き + the combining voicing mark U+3099) was stored by version 2 as
    "かき", "हिंदी" as "हद"; a term with no marks, a form already in the query, a repeated old form and an
    old form of one letter ("क्" -> "क", no term) add nothing."""
    from agtos.tasks.bm25 import legacy_terms

    assert legacy_terms(["かぎ"]) == ["かき"]
    assert legacy_terms(["हिंदी", "cafe"]) == ["हद"]
    assert legacy_terms(["cafe", "4521"]) == []
    assert legacy_terms(["かぎ", "かき"]) == []
    assert legacy_terms(["がぎ", "かぎ", "かげ"]) == ["かき", "かけ"]
    assert legacy_terms(["क्"]) == []


def test_a_term_may_have_lost_marks_from_u0700_on() -> None:
    """Letters past Arabic, U+0700 (Syriac) on, are of the scripts whose marks version 3 keeps; Latin, Greek,
    Cyrillic and Arabic (to U+06FF) are not, and one such letter in a term is enough."""
    from agtos.tasks.bm25 import lost_marks

    assert [lost_marks(t) for t in ("\u0700", "\u06ff", "cafe", "καφές", "чай", "abcक", "かき")] == [
        True,
        False,
        False,
        False,
        False,
        True,
        True,
    ]


def test_a_sessions_statements_stay_in_one_round_when_a_later_one_repeats_an_earlier_sessions() -> None:
    """statement_rounds (the CI sample's survivor at 83a8f6d, mutmut 6: rows grouped one by one, not by their
    session): session B says m2 then m1 again after session A said m1; B's two rows are one round after A's,
    not m2 with A's round and m1 alone. Sessions that repeat nothing are one round."""
    from agtos.memory.memory_versions import statement_rounds

    def said(memory_id: str, episode: str) -> Memory:
        return Memory(id=memory_id, user_id="u", text=f"fact {memory_id}", source_episode_ids=[episode])

    assert statement_rounds([said("m1", "A"), said("m2", "B"), said("m1", "B")]) == [[0], [1, 2]]
    assert statement_rounds([said("m1", "A"), said("m2", "A"), said("m3", "B")]) == [[0, 1, 2]]
    assert statement_rounds([said("m1", "A"), said("m1", "B"), said("m1", "C")]) == [[0], [1], [2]]
