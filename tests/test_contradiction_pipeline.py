"""The contradiction pipeline with an LLM judge configured the way a user does it (``AGTOS_MAINTENANCE_*``
variables or ``config.json``), judged by a local stub server, run through ``POST /api/memory/maintain``.

The hand-built case: 4 vegetarian/vegan statements (one direction in vector space) and 3 meat-eating
ones (an orthogonal direction). Stage 1 then yields all 21 pairs (the cosine top-5 of 7 texts covers
each group, the 12 cross pairs are polarity pairs); the lexical-negation NLI flags exactly the 12
cross pairs; the judge overrules the 4 pairs about burgers, so 8 are confirmed.
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterator
from itertools import combinations, product
from pathlib import Path
from typing import Any

import numpy as np
import pytest
import redis
from fastapi.testclient import TestClient

from agtos.config import Settings
from agtos.memory.coordinator import MemoryCoordinator
from agtos.memory.lint_pipeline import CONTRADICTION_EVENT
from agtos.schemas.records import now_ms
from agtos.serving.app import create_app
from tests.helpers import inductive_conclusion, run_maintenance
from tests.stub_servers import RecordedRequest, StubModelServer

U = "judge-user"
VEG = [
    "User is vegetarian",
    "User has been vegan for years",
    "User cooks vegetarian curry on Mondays",
    "User follows a strict vegan diet",
]
MEAT = ["User eats steak every day", "User grills burgers at weekends", "User orders bacon for breakfast"]
CROSS = {frozenset(p) for p in product(VEG, MEAT)}  # the 12 polarity pairs
CONFIRMED = {p for p in CROSS if not any("burgers" in t for t in p)}  # the judge overrules 4
LINE = re.compile(r"^(\d+)\. A: (.*) \| B: (.*)$")


def listed_pairs(request: RecordedRequest) -> list[tuple[str, str]]:
    """The numbered pairs of one judge call, in order (from the user message the stub received)."""
    content = request.body["messages"][-1]["content"]
    rows = [LINE.match(line) for line in content.splitlines()]
    assert all(rows) and [int(m.group(1)) for m in rows if m] == list(range(len(rows))), content
    return [(m.group(2), m.group(3)) for m in rows if m]


def judge_reply(body: dict[str, Any]) -> str:
    """A judge that calls a pair contradictory when exactly one side is vegetarian and no side is about burgers."""
    pairs = [(m.group(2), m.group(3)) for m in map(LINE.match, body["messages"][-1]["content"].splitlines()) if m]
    verdicts = [
        {
            "pair": i,
            "contradiction": ("veg" in a) != ("veg" in b) and "burgers" not in a + b,
            "confidence": 0.9,
            "explanation": "checked by the stub judge",
        }
        for i, (a, b) in enumerate(pairs)
    ]
    return json.dumps({"verdicts": verdicts})


def nli_cache_size(client: redis.Redis, prefix: str) -> int:
    """Cached NLI verdicts in Redis, in either layout (one STRING per verdict, or fields of a hash)."""
    size = 0
    for key in client.scan_iter(match=f"{prefix}:*nli*"):
        size += client.hlen(key) if client.type(key) == b"hash" else 1
    return size


def seed(coordinator: MemoryCoordinator, user_id: str, groups: list[list[str]]) -> dict[str, str]:
    """Conclusions through the store, each group on its own unit axis; returns text -> id."""
    dim = coordinator.semantic.embedder.dim
    stamp = now_ms()
    conclusions, vectors = [], []
    for axis, texts in enumerate(groups):
        for text in texts:
            conclusions.append(inductive_conclusion(user_id, f"c{len(conclusions)}", text, stamp))
            vectors.append(np.eye(dim, dtype=np.float32)[axis])
    coordinator.conclusions.upsert_many(conclusions, np.stack(vectors))
    return {c.text: c.id for c in conclusions}


@pytest.fixture
def stub() -> Iterator[StubModelServer]:
    with StubModelServer(chat_responder=judge_reply) as server:
        yield server


def env_app(
    monkeypatch: pytest.MonkeyPatch, redis_url: str, key_prefix: str, tmp_path: Path, **env: str
) -> tuple[MemoryCoordinator, TestClient]:
    """A coordinator and API built from the environment alone, as ``agtos serve`` does."""
    for name in ("AGTOS_LLM_PROVIDER", "AGTOS_MAINTENANCE_PROVIDER", "AGTOS_NLI_ENABLED", "AGTOS_NLI_MODEL_DIR"):
        monkeypatch.delenv(name, raising=False)
    base = {
        "REDIS_URL": redis_url,
        "AGTOS_KEY_PREFIX": key_prefix,
        "AGTOS_DATA_DIR": str(tmp_path / "data"),
        "AGTOS_CONFIG_DIR": str(tmp_path / "config"),
        "AGTOS_BACKGROUND_WORK_POLICY": "always",
    }
    for name, value in {**base, **env}.items():
        monkeypatch.setenv(name, value)
    coordinator = MemoryCoordinator(Settings.from_env())
    return coordinator, TestClient(create_app(coordinator=coordinator))


@pytest.fixture
def judged_app(
    monkeypatch: pytest.MonkeyPatch, stub: StubModelServer, redis_url: str, key_prefix: str, tmp_path: Path
) -> Iterator[tuple[MemoryCoordinator, TestClient]]:
    """The maintenance slot set by ``AGTOS_MAINTENANCE_*`` to an Ollama judge on the stub."""
    coordinator, client = env_app(
        monkeypatch,
        redis_url,
        key_prefix,
        tmp_path,
        AGTOS_MAINTENANCE_PROVIDER="ollama",
        AGTOS_MAINTENANCE_MODEL="judge-model",
        AGTOS_MAINTENANCE_BASE_URL=stub.url,
    )
    with client:
        yield coordinator, client
    coordinator.close()


def maintain(client: TestClient, user_id: str = U) -> dict[str, Any]:
    report = run_maintenance(client, user_id)["report"]
    assert report["summary"]["status"] == "completed", report
    return report


def test_three_stages_in_order_with_an_ollama_judge(
    judged_app: tuple[MemoryCoordinator, TestClient], stub: StubModelServer, raw_redis: redis.Redis, key_prefix: str
) -> None:
    coordinator, client = judged_app
    ids = seed(coordinator, U, [VEG, MEAT])
    events: list[dict[str, Any]] = []
    coordinator.events.subscribe(CONTRADICTION_EVENT, events.append)
    cache_at_judge_calls: list[int] = []

    def judge_after_stage_two(body: dict[str, Any]) -> str:
        cache_at_judge_calls.append(nli_cache_size(raw_redis, key_prefix))
        return judge_reply(body)

    stub.chat_responder = judge_after_stage_two
    stub.delay_s = 0.05
    report = maintain(client)
    pipeline = report["summary"]["contradictionPipeline"]
    assert pipeline["counters"] == {
        "candidates": 21,
        "nliChecked": 21,
        "nliContradictions": 12,
        "cacheHits": 0,
        "judged": 12,
        "confirmed": 8,
    }
    assert pipeline["nli"] == "lexical-negation-fallback" and pipeline["judge"] == "ollama"

    calls = stub.requests_to("/api/chat")
    assert [len(listed_pairs(c)) for c in calls] == [10, 2]  # at most 10 pairs per judge call
    assert all(c.body["model"] == "judge-model" and c.body["format"] == "json" for c in calls)
    assert {frozenset(p) for c in calls for p in listed_pairs(c)} == CROSS  # exactly what stage 2 flagged
    assert cache_at_judge_calls == [21, 21]  # stage 2 had finished (all 21 verdicts cached) before stage 3
    latencies = pipeline["latencies"]
    assert latencies["stage1Ms"] > 0 and latencies["stage2Ms"] > 0
    assert latencies["stage3Ms"] >= 100  # two judge calls of >= 50 ms each, timed in stage 3

    confirmed = {frozenset((ids[a], ids[b])) for a, b in map(tuple, CONFIRMED)}
    contradictions = next(s for s in report["steps"] if s["step"] == "contradictions")
    assert {frozenset(i.split("|")) for i in contradictions["ids"]} == confirmed
    assert len(events) == 8 and {frozenset((e["a"], e["b"])) for e in events} == confirmed
    assert all(e["judge"]["explanation"] == "checked by the stub judge" for e in events)

    again = maintain(client)["summary"]["contradictionPipeline"]["counters"]
    assert again == {
        "candidates": 21,
        "nliChecked": 0,
        "nliContradictions": 12,
        "cacheHits": 21,
        "judged": 12,
        "confirmed": 8,
    }
    assert len(stub.requests_to("/api/chat")) == 4 and len(events) == 8  # once per confirmed pair, ever


def test_judge_not_called_when_stage_two_is_decisive(
    judged_app: tuple[MemoryCoordinator, TestClient], stub: StubModelServer
) -> None:
    coordinator, client = judged_app
    seed(coordinator, "calm-user", [["User plays the piano", "User lives in Berlin", "User drinks green tea"]])
    pipeline = maintain(client, "calm-user")["summary"]["contradictionPipeline"]
    assert pipeline["counters"] == {
        "candidates": 3,
        "nliChecked": 3,
        "nliContradictions": 0,
        "cacheHits": 0,
        "judged": 0,
        "confirmed": 0,
    }
    assert stub.requests == []  # no pair left undecided: the judge is never asked


def test_invalid_judge_replies_leave_their_batch_unjudged(
    judged_app: tuple[MemoryCoordinator, TestClient], stub: StubModelServer
) -> None:
    coordinator, client = judged_app
    seed(coordinator, U, [VEG, MEAT])
    events: list[dict[str, Any]] = []
    coordinator.events.subscribe(CONTRADICTION_EVENT, events.append)
    stub.queue_chat("this is not JSON {", judge_reply)  # the first batch (10 pairs) gets prose
    counters = maintain(client)["summary"]["contradictionPipeline"]["counters"]
    assert counters["nliContradictions"] == 12 and counters["judged"] == 2
    second_batch = {frozenset(p) for p in listed_pairs(stub.requests_to("/api/chat")[1])}
    assert counters["confirmed"] == len(second_batch & CONFIRMED) and len(events) == counters["confirmed"]

    stub.fail_next(500, times=2, path_suffix="/api/chat")  # the server fails outright: the sweep still completes
    counters = maintain(client)["summary"]["contradictionPipeline"]["counters"]
    assert counters["judged"] == 0 and counters["confirmed"] == 0
    stub.requests.clear()
    wrong_types = json.dumps({"verdicts": [{"pair": i, "contradiction": "yes", "confidence": 0.9} for i in range(10)]})
    stub.queue_chat(wrong_types, judge_reply)  # a strict schema: "yes" is not a boolean
    counters = maintain(client)["summary"]["contradictionPipeline"]["counters"]
    assert counters["judged"] == 2 and len(stub.requests_to("/api/chat")) == 2


def test_nli_off_sends_every_candidate_to_a_config_json_judge(
    monkeypatch: pytest.MonkeyPatch, stub: StubModelServer, redis_url: str, key_prefix: str, tmp_path: Path
) -> None:
    config = tmp_path / "config"
    config.mkdir()
    slot = {"provider": "openai", "model": "judge-4", "base_url": stub.url + "/v1", "api_key": "sk-test"}
    (config / "config.json").write_text(json.dumps({"slots": {"maintenance": slot}}))
    stub.api_key = "sk-test"
    coordinator, client = env_app(monkeypatch, redis_url, key_prefix, tmp_path, AGTOS_NLI_ENABLED="false")
    try:
        with client:
            seed(coordinator, U, [VEG, MEAT])
            pipeline = maintain(client)["summary"]["contradictionPipeline"]
    finally:
        coordinator.close()
    assert pipeline["nli"] == "disabled" and pipeline["judge"] == "openai"
    assert pipeline["counters"] == {
        "candidates": 21,
        "nliChecked": 0,
        "nliContradictions": 0,
        "cacheHits": 0,
        "judged": 21,
        "confirmed": 8,
    }
    calls = stub.requests_to("/v1/chat/completions")
    assert [len(listed_pairs(c)) for c in calls] == [10, 10, 1]
    assert {frozenset(p) for c in calls for p in listed_pairs(c)} == {frozenset(p) for p in combinations(VEG + MEAT, 2)}
    assert all(c.body["model"] == "judge-4" and c.body["response_format"] == {"type": "json_object"} for c in calls)
