"""Planted-bug audit of the lint's orchestration (issue 20, p5): each setting reaches the step that
reads it, chains of duplicates fold into one survivor, and stage 1's tuning reaches the judge.

Every sweep runs through ``POST /api/memory/maintain`` on an app built from the environment, as
``agtos serve`` builds it; conclusions and episodes are seeded through the stores (the Dreamer's
output), memories through the API. Expected values are the README's rules worked out by hand.
"""

from __future__ import annotations

import json
import os
import re
import time
from collections.abc import Iterator
from typing import Any

import numpy as np
import pytest
from fastapi.testclient import TestClient

from agtos.config import Settings
from agtos.memory.coordinator import MemoryCoordinator
from agtos.memory.lint_pipeline import CONTRADICTION_EVENT
from agtos.schemas import Conclusion
from agtos.schemas.records import now_ms
from agtos.serving.app import create_app
from tests.helpers import run_maintenance, user
from tests.stub_servers import StubModelServer

U = "planted-lint-user"
DAY = 86_400_000
MEMORIES = "/api/memory/memories"
LINE = re.compile(r"^(\d+)\. A: (.*) \| B: (.*)$")
BOATS = "User restores old wooden sailing boats in a small workshop by the harbour of Kiel every winter"
HIKE = "User likes hiking in the Swiss Alps every summer with friends from the old climbing club near Bern"


def from_env(monkeypatch: pytest.MonkeyPatch, settings: Settings, **env: str) -> Settings:
    """Settings read from the environment alone, as ``agtos serve`` reads them (``settings`` gives Redis,
    prefix and directories)."""
    for name in [n for n in os.environ if n.startswith("AGTOS_") and not n.startswith("AGTOS_TEST_")]:
        monkeypatch.delenv(name)
    base = {
        "REDIS_URL": settings.redis_url,
        "AGTOS_KEY_PREFIX": settings.key_prefix,
        "AGTOS_DATA_DIR": str(settings.data_dir),
        "AGTOS_CONFIG_DIR": str(settings.config_dir),
        "AGTOS_BACKGROUND_WORK_POLICY": "always",
    }
    for name, value in (base | env).items():
        monkeypatch.setenv(name, value)
    return Settings.from_env()


def build(monkeypatch: pytest.MonkeyPatch, settings: Settings, **env: str) -> MemoryCoordinator:
    return MemoryCoordinator(from_env(monkeypatch, settings, **env))


def conclusion(cid: str, text: str, confidence: float, age_days: float = 0, source: str = "ep-cited") -> Conclusion:
    stamp = now_ms() - int(age_days * DAY)
    return Conclusion(
        id=cid,
        user_id=U,
        text=text,
        type="inductive",
        confidence=confidence,
        source_episode_ids=[source],
        created_at=stamp,
        updated_at=stamp,
    )


def store(coordinator: MemoryCoordinator, conclusions: list[Conclusion], vectors: np.ndarray | None = None) -> None:
    texts = [c.text for c in conclusions]
    coordinator.conclusions.upsert_many(
        conclusions, coordinator.semantic.embedder.embed(texts) if vectors is None else vectors
    )


def post_memory(client: TestClient, text: str, kind: str = "fact", **extra: Any) -> str:
    response = client.post(MEMORIES, json={"text": text, "kind": kind} | extra, headers=user(U))
    assert response.status_code == 201, response.text
    return str(response.json()["memory"]["id"])


def sweep(client: TestClient) -> dict[str, Any]:
    run = run_maintenance(client, U)
    assert run["status"] == "completed", run
    return dict(run["report"])


def step_ids(report: dict[str, Any]) -> dict[str, list[str]]:
    return {s["step"]: s["ids"] for s in report["steps"]}


def test_memory_merge_follows_the_jaccard_variable_and_keeps_kinds_apart(
    monkeypatch: pytest.MonkeyPatch, settings: Settings
) -> None:
    """With AGTOS_MAINTENANCE_JACCARD=0.8 a pair of facts at Jaccard 5/6 merges (not under the default
    0.85, the one the memories were written with), a fact and a preference at 5/6 do not.
    tests/test_env_settings.py moves the variable for conclusions; this is its use on memories."""
    first = build(monkeypatch, settings)  # written under the default 0.85: no POST merges them
    with TestClient(create_app(coordinator=first)) as client:
        tea = post_memory(client, "User drinks green tea daily")
        tea_too = post_memory(client, "User drinks green tea almost daily")
        as_fact = post_memory(client, "User enjoys quiet lake walks")
        as_preference = post_memory(client, "User enjoys quiet lake walks daily", kind="preference")
    first.close()
    coordinator = build(monkeypatch, settings, AGTOS_MAINTENANCE_JACCARD="0.8")
    try:
        with TestClient(create_app(coordinator=coordinator)) as client:
            report = sweep(client)
            listed = {m["id"] for m in client.get(MEMORIES, headers=user(U)).json()["memories"]}
    finally:
        coordinator.close()
    assert report["summary"]["memoriesMerged"] == 1
    assert listed == {tea, as_fact, as_preference} and tea_too not in listed


def test_chains_of_duplicates_fold_into_one_survivor(monkeypatch: pytest.MonkeyPatch, settings: Settings) -> None:
    """Four conclusions that all pair (each gains one word): the most confident takes every source.
    Four memories that all pair, posted under AGTOS_MAINTENANCE_JACCARD=1 (no POST merges them): the
    first one stored keeps all four sources after three merges; their ids chain (one is merged into a
    memory that is itself merged later), as sha256 of these texts makes them."""
    writer = build(monkeypatch, settings, AGTOS_MAINTENANCE_JACCARD="1")
    with TestClient(create_app(coordinator=writer)) as client:
        posted = []
        for n, word in enumerate(["", "slowly ", "carefully ", "patiently "]):
            posted.append(post_memory(client, BOATS.replace("restores", f"{word}restores"), source=f"s{n}"))
            time.sleep(0.005)  # stored in this order
        past = now_ms() - DAY
        ended = post_memory(client, "User works at the harbour cafe in Lisbon", valid_from=past - DAY, valid_until=past)
        current = post_memory(client, "User works at the old harbour cafe in Lisbon")  # Jaccard 8/9 with the ended one
    writer.close()
    coordinator = build(monkeypatch, settings)
    try:
        store(
            coordinator,
            [
                conclusion(f"c{i}", HIKE.replace("hiking", f"{word} hiking"), 0.5 + i / 10, source=f"ep-{i}")
                for i, word in enumerate(["always", "really", "truly", "often"], start=1)
            ],
        )
        with TestClient(create_app(coordinator=coordinator)) as client:
            report = sweep(client)
            after = {m["id"]: m for m in client.get(MEMORIES, headers=user(U)).json()["memories"]}
        kept = coordinator.conclusions.all(U)
    finally:
        coordinator.close()
    assert sorted(step_ids(report)["merge"]) == ["c1", "c2", "c3"]
    assert [(c.id, sorted(c.source_episode_ids)) for c in kept] == [("c4", ["ep-1", "ep-2", "ep-3", "ep-4"])]
    assert report["summary"]["memoriesMerged"] == 3
    assert set(after) == {posted[0], ended, current}  # an ended memory is no current one: never merged
    assert sorted(after[posted[0]]["sourceEpisodeIds"]) == ["s0", "s1", "s2", "s3"]


def listed_pairs(body: dict[str, Any]) -> list[tuple[str, str]]:
    content = body["messages"][-1]["content"]
    return [(m.group(2), m.group(3)) for m in map(LINE.match, content.splitlines()) if m]


def agreeing_judge(body: dict[str, Any]) -> str:
    """Every pair contradictory, confidence 0.73."""
    verdicts = [
        {"pair": i, "contradiction": True, "confidence": 0.73, "explanation": "stub"}
        for i in range(len(listed_pairs(body)))
    ]
    return json.dumps({"verdicts": verdicts})


@pytest.fixture
def judge() -> Iterator[StubModelServer]:
    with StubModelServer(chat_responder=agreeing_judge) as server:
        yield server


def judged(
    monkeypatch: pytest.MonkeyPatch, settings: Settings, stub: StubModelServer, **tuning: int
) -> MemoryCoordinator:
    """NLI off, an Ollama judge on the stub, stage 1 and the judge's batch tuned as ``tuning`` says."""
    env = {
        "AGTOS_NLI_ENABLED": "false",
        "AGTOS_MAINTENANCE_PROVIDER": "ollama",
        "AGTOS_MAINTENANCE_MODEL": "judge-model",
        "AGTOS_MAINTENANCE_BASE_URL": stub.url,
    }
    read = from_env(monkeypatch, settings, **env)
    return MemoryCoordinator(read.with_overrides(maintenance=read.maintenance.with_overrides(**tuning)))


NEUTRAL = ["User plays the piano", "User lives in Berlin", "User drinks green tea", "User collects stamps"]


def seed_axes(coordinator: MemoryCoordinator, axes: list[int]) -> None:
    """The NEUTRAL texts, the i-th on unit axis ``axes[i]``, the later ones updated more recently."""
    dim = coordinator.semantic.embedder.dim
    rows = [conclusion(f"n{i}", text, 0.9, age_days=(4 - i) / 24) for i, text in enumerate(NEUTRAL)]
    store(coordinator, rows, np.stack([np.eye(dim, dtype=np.float32)[a] for a in axes]))


def test_only_the_most_recent_conclusions_look_for_their_top_k(
    monkeypatch: pytest.MonkeyPatch, settings: Settings, judge: StubModelServer
) -> None:
    """top-k 1 and a query limit of 1: only the newest conclusion (collects stamps) asks for its one
    nearest neighbour (drinks green tea, the same axis); the judge sees that pair alone, and its
    confidence reaches the contradiction event."""
    coordinator = judged(monkeypatch, settings, judge, candidate_top_k=1, candidate_query_limit=1)
    events: list[dict[str, Any]] = []
    coordinator.events.subscribe(CONTRADICTION_EVENT, events.append)
    try:
        seed_axes(coordinator, [0, 0, 1, 1])
        with TestClient(create_app(coordinator=coordinator)) as client:
            counters = sweep(client)["summary"]["contradictionPipeline"]["counters"]
    finally:
        coordinator.close()
    assert [listed_pairs(r.body) for r in judge.requests_to("/api/chat")] == [
        [("User drinks green tea", "User collects stamps")]
    ]
    assert counters["candidates"] == 1 and counters["confirmed"] == 1
    assert [(e["judge"]["confidence"], e["judge"]["explanation"]) for e in events] == [(0.73, "stub")]


def test_candidate_cap_and_judge_batch_size_are_applied(
    monkeypatch: pytest.MonkeyPatch, settings: Settings, judge: StubModelServer
) -> None:
    """Four orthogonal conclusions make 6 pairs; a cap of 5 keeps 5, judged 4 per call: calls of 4 and 1."""
    coordinator = judged(monkeypatch, settings, judge, candidate_cap=5, judge_batch_size=4)
    try:
        seed_axes(coordinator, [0, 1, 2, 3])
        with TestClient(create_app(coordinator=coordinator)) as client:
            counters = sweep(client)["summary"]["contradictionPipeline"]["counters"]
    finally:
        coordinator.close()
    assert [len(listed_pairs(r.body)) for r in judge.requests_to("/api/chat")] == [4, 1]
    assert counters["candidates"] == 5 and counters["judged"] == 5
