"""Query-as-Ingest: the scoring table, and the gate's rate limit and dedup window in real Redis."""

from __future__ import annotations

import threading
from collections.abc import Iterator
from pathlib import Path

import pytest
import redis

from agtos.memory.query_ingest import QueryIngestGate
from agtos.storage.keys import GlobalKeys, InvalidIdentifier
from agtos.storage.redis_conn import RedisConnector
from agtos.tasks.response_scoring import count_reasoning_steps, score_response

FILLER = "The cache layer keeps hot keys in memory and evicts the rest. "  # 62 chars

SCORES = [
    pytest.param("ok", {}, 4, ["baseline"], id="baseline"),
    pytest.param("Looked it up.", {"tool_calls": 1}, 7, ["baseline", "tool-calls"], id="tool-call"),
    pytest.param("Nothing to do.", {"tool_calls": 0}, 4, ["baseline"], id="zero-tool-calls"),
    pytest.param(
        "First, restart the worker. Then clear the queue.",
        {},
        6,
        ["baseline", "reasoning-steps"],
        id="markers",
    ),
    pytest.param("Plan:\n1. back up\n2. migrate\n3. verify", {}, 6, ["baseline", "reasoning-steps"], id="numbered"),
    pytest.param("Steps:\n- stop\n- start", {}, 6, ["baseline", "reasoning-steps"], id="bullets"),
    pytest.param("Step 1: stop it.\nStep 2: start it.", {}, 6, ["baseline", "reasoning-steps"], id="step-n"),
    pytest.param("Only one:\n1. do it", {}, 4, ["baseline"], id="one-step"),
    pytest.param("If it fails then retry, and then stop.", {}, 4, ["baseline"], id="then-mid-sentence"),
    pytest.param("Short.", {"reasoning_steps": 3}, 6, ["baseline", "reasoning-steps"], id="explicit-steps"),
    pytest.param("1. a\n2. b\n3. c", {"reasoning_steps": 1}, 4, ["baseline"], id="explicit-overrides"),
    pytest.param("x" * 500, {}, 4, ["baseline"], id="500-chars"),
    pytest.param("x" * 501, {}, 5, ["baseline", "length>500"], id="501-chars"),
    pytest.param("x" * 1000, {}, 5, ["baseline", "length>500"], id="1000-chars"),
    pytest.param("x" * 1001, {}, 6, ["baseline", "length>1000"], id="1001-chars"),
    pytest.param("In summary, use Redis.", {}, 5, ["baseline", "synthesis"], id="in-summary"),
    pytest.param("The trade-offs favour B.", {}, 5, ["baseline", "synthesis"], id="trade-offs"),
    pytest.param("Tradeoffs: cost.", {}, 5, ["baseline", "synthesis"], id="tradeoffs"),
    pytest.param(
        "Compared to A, B is faster; on balance, pros and cons even out.",
        {},
        5,
        ["baseline", "synthesis"],
        id="synthesis-once",
    ),
    pytest.param("The analysis shows a leak.", {}, 5, ["baseline", "synthesis"], id="analysis-shows"),
    pytest.param(
        "First, I queried both services. Then I compared latency.\n"
        + FILLER * 17
        + "\nIn summary, the trade-offs favour the cache.",
        {"tool_calls": 2},
        12,
        ["baseline", "tool-calls", "reasoning-steps", "length>1000", "synthesis"],
        id="everything",
    ),
]


@pytest.mark.parametrize(("text", "kwargs", "score", "factors"), SCORES)
def test_scoring_table(text: str, kwargs: dict[str, int], score: int, factors: list[str]) -> None:
    result = score_response(text, **kwargs)
    assert result.score == score
    assert result.factor_names == factors
    assert result.score == sum(f.points for f in result.factors)


def test_reasoning_step_count_and_public_view() -> None:
    assert count_reasoning_steps("First, a. Second, b. Finally, c.") == 3
    assert count_reasoning_steps("1) a\n2) b\n- c") == 3
    assert count_reasoning_steps("no steps here") == 0
    view = score_response("1. a\n2. b", tool_calls=1).model_dump(mode="json", by_alias=True)
    assert view == {
        "score": 9,
        "factors": [
            {"name": "baseline", "points": 4},
            {"name": "tool-calls", "points": 3},
            {"name": "reasoning-steps", "points": 2},
        ],
        "reasoningSteps": 2,
    }


# -- the gate, against real Redis ----------------------------------------------------------------

GOOD = "In summary, the trade-offs favour the cache."  # 4 + 1, plus the tool call below = 8
GOOD_KW = {"tool_calls": 1}


class Clock:
    def __init__(self, now: float = 1_800_000_000.0) -> None:
        self.now = now

    def __call__(self) -> float:
        return self.now


@pytest.fixture
def connector(redis_url: str, tmp_path: Path) -> Iterator[RedisConnector]:
    conn = RedisConnector(redis_url, tmp_path)
    yield conn
    conn.close()


@pytest.fixture
def clock() -> Clock:
    return Clock()


@pytest.fixture
def gate(connector: RedisConnector, key_prefix: str, clock: Clock) -> QueryIngestGate:
    return QueryIngestGate(connector, GlobalKeys(key_prefix), clock=clock)


def test_high_score_is_ingested_and_counted(gate: QueryIngestGate, raw_redis: redis.Redis) -> None:
    decision = gate.evaluate("alice", "s1", GOOD, **GOOD_KW)
    assert (decision.ingest, decision.reason, decision.session_ingests) == (True, "ingest", 1)
    assert decision.score.score == 8
    key = gate.session_key("alice", "s1")
    assert key.endswith(":u:{alice}:qai:s1")
    assert raw_redis.hget(key, "count") == b"1"
    assert 0 < raw_redis.ttl(key) <= 48 * 3600
    answer = decision.response(None).model_dump(mode="json", by_alias=True)
    assert answer["reason"] == "ingest" and answer["score"] == 8


def test_below_threshold_touches_nothing(gate: QueryIngestGate, raw_redis: redis.Redis) -> None:
    decision = gate.evaluate("alice", "s1", "ok")
    assert (decision.ingest, decision.reason, decision.session_ingests) == (False, "below-threshold", None)
    assert decision.score.score == 4
    assert raw_redis.exists(gate.session_key("alice", "s1")) == 0


def test_threshold_is_inclusive_and_configurable(connector: RedisConnector, key_prefix: str, clock: Clock) -> None:
    six = "1. restart\n2. verify"  # 4 + 2
    assert QueryIngestGate(connector, GlobalKeys(key_prefix), clock=clock).evaluate("a", "s", six).ingest
    strict = QueryIngestGate(connector, GlobalKeys(key_prefix), threshold=7, clock=clock)
    assert strict.evaluate("a", "s2", six).reason == "below-threshold"


def test_sixth_response_in_a_session_is_refused(gate: QueryIngestGate, clock: Clock) -> None:
    for n in range(1, 6):
        decision = gate.evaluate("alice", "s1", GOOD, **GOOD_KW)
        assert (decision.reason, decision.session_ingests) == ("ingest", n)
        clock.now += 10
    sixth = gate.evaluate("alice", "s1", GOOD, **GOOD_KW)
    assert (sixth.ingest, sixth.reason, sixth.session_ingests) == (False, "session-cap", 5)
    assert gate.session_ingests("alice", "s1") == 5
    # the cap is per session and per user
    assert gate.evaluate("alice", "s2", GOOD, **GOOD_KW).reason == "ingest"
    assert gate.evaluate("bob", "s1", GOOD, **GOOD_KW).reason == "ingest"
    gate.reset_session("alice", "s1")
    assert gate.evaluate("alice", "s1", GOOD, **GOOD_KW).reason == "ingest"


def test_cap_is_shared_between_processes(
    gate: QueryIngestGate, redis_url: str, key_prefix: str, clock: Clock, tmp_path: Path
) -> None:
    other_conn = RedisConnector(redis_url, tmp_path / "other")
    other = QueryIngestGate(other_conn, GlobalKeys(key_prefix), max_per_session=2, clock=clock)
    try:
        assert gate.evaluate("alice", "s1", GOOD, **GOOD_KW).reason == "ingest"
        clock.now += 10
        assert other.evaluate("alice", "s1", GOOD, **GOOD_KW).session_ingests == 2
        clock.now += 10
        assert other.evaluate("alice", "s1", GOOD, **GOOD_KW).reason == "session-cap"
    finally:
        other_conn.close()


def test_second_save_within_five_seconds_is_refused(gate: QueryIngestGate, clock: Clock) -> None:
    saved_at = clock.now
    assert gate.evaluate("alice", "s1", GOOD, **GOOD_KW).reason == "ingest"
    clock.now = saved_at + 4.9
    refused = gate.evaluate("alice", "s1", GOOD, **GOOD_KW)
    assert (refused.ingest, refused.reason, refused.session_ingests) == (False, "dedup-window", 1)
    assert gate.evaluate("alice", "s2", GOOD, **GOOD_KW).reason == "ingest"  # other session: no dedup
    clock.now = saved_at + 5.0  # exactly 5 s after the save
    assert gate.evaluate("alice", "s1", GOOD, **GOOD_KW).reason == "ingest"


def test_explicit_save_opens_the_dedup_window(gate: QueryIngestGate, clock: Clock) -> None:
    gate.mark_interaction_saved("alice", "s1")
    clock.now += 2
    assert gate.evaluate("alice", "s1", GOOD, **GOOD_KW).reason == "dedup-window"
    assert gate.session_ingests("alice", "s1") == 0
    clock.now += 3
    assert gate.evaluate("alice", "s1", GOOD, **GOOD_KW).reason == "ingest"


def test_configurable_cap_and_window(connector: RedisConnector, key_prefix: str, clock: Clock) -> None:
    gate = QueryIngestGate(connector, GlobalKeys(key_prefix), max_per_session=1, dedup_window_s=60, clock=clock)
    assert gate.evaluate("a", "s", GOOD, **GOOD_KW).reason == "ingest"
    clock.now += 30
    assert gate.evaluate("a", "s", GOOD, **GOOD_KW).reason == "session-cap"


def test_concurrent_responses_admit_exactly_one(gate: QueryIngestGate) -> None:
    reasons: list[str] = []
    lock = threading.Lock()

    def respond() -> None:
        reason = gate.evaluate("alice", "race", GOOD, **GOOD_KW).reason
        with lock:
            reasons.append(reason)

    threads = [threading.Thread(target=respond) for _ in range(12)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert sorted(reasons) == ["dedup-window"] * 11 + ["ingest"]


def test_bad_ids_are_rejected(gate: QueryIngestGate) -> None:
    with pytest.raises(InvalidIdentifier):
        gate.evaluate("alice", "bad:session", GOOD)
    with pytest.raises(InvalidIdentifier):
        gate.evaluate("bad user", "s1", "ok")
