"""Issues 15/20: a record forgotten while it waits for its vector leaves no note and gets no vector.

A session ended (or a memory posted) while the embedder is down is stored for keyword search and
noted in the user's pending set (``…:vectors:_pending``, members ``episode:<id>``, ``memory:<id>``).
A single forget of that record (``POST /api/memory/forget``, ``DELETE /api/memory/memories/{id}``)
must drop its note, and those of the memories learnt from it, at once: the set named the forgotten
ids until the next repair (for ever while the embedder stays down), and ``/health`` counted them as
waiting. Once the embedder answers again the repair finds nothing of them to fill, and vector search
does not find the forgotten text; one forgotten while the repair computes its vectors keeps none.
Through the HTTP API, the bundled ONNX model behind the switch of ``tests/test_pending_vectors.py``;
real Redis, every key of the user read back (SCAN, by type).
"""

from __future__ import annotations

from collections.abc import Iterator

import pytest
import redis
from fastapi.testclient import TestClient

from agtos.config import Settings
from agtos.memory.coordinator import MemoryCoordinator
from agtos.memory.vector_repair import fill_user
from agtos.serving.app import create_app
from tests.helpers import run_maintenance, talk, user
from tests.test_forget_races import HookedEmbedder
from tests.test_issue15_h15b import user_values
from tests.test_pending_vectors import (
    ANA,
    GARDEN,
    LISBON,
    PARAPHRASE,
    SwitchableEmbedder,
    pending,
    search_sessions,
    sweep_settings,
)

GARDEN_PARAPHRASE = "vegetables growing outdoors at home"  # no word of GARDEN
LISBON_WORDS = ("Lisbon", "adores")  # words of the Lisbon session only


@pytest.fixture
def api(settings: Settings) -> Iterator[tuple[TestClient, HookedEmbedder, MemoryCoordinator]]:
    """The ONNX embedder behind a switch (and a hook run inside its next call), sweeps run at once."""
    coordinator = MemoryCoordinator(sweep_settings(settings))
    try:
        with TestClient(create_app(coordinator=coordinator)) as client:
            semantic = coordinator.services.semantic
            hooked = HookedEmbedder(semantic.embedder)  # the model loaded now: indexes get its dimension
            semantic._embedder = hooked
            yield client, hooked, coordinator
    finally:
        coordinator.close()


def noted(raw: redis.Redis, prefix: str) -> set[str]:
    """Ana's pending records (``namespace:id``; entity names, which outlive one record, left out)."""
    members = {m.decode() for m in raw.zrange(f"{prefix}:u:{{{ANA}}}:vectors:_pending", 0, -1)}
    return {m for m in members if not m.startswith("entity:")}


def traces(
    raw: redis.Redis, prefix: str, ids: set[str], words: tuple[str, ...] = LISBON_WORDS, graph: bool = True
) -> list[bytes]:
    """Ana's keys whose name or contents hold one of the ``ids`` or ``words``. An index's change log
    (``…:_idx:*:changes``, ids only) names a deleted document by design (every process's mirror drops
    it): an id may stay there, no word (as in tests/test_forget_mid_ingest.py). ``graph=False``: the
    entity graph's keys (``:entity:``, ``:rel:``) left out."""
    found = []
    for key, value in user_values(raw, prefix, ANA).items():
        if not graph and (b":entity:" in key or b":rel:" in key):
            continue
        logged = key.endswith(b":changes") and b":_idx:" in key
        needles = [w.encode() for w in words] + ([] if logged else [i.encode() for i in ids])
        if any(n in key or n in value for n in needles) or any(i.encode() in key for i in ids):
            found.append(key)
    return found


def forget(client: TestClient, kind: str, item_id: str) -> None:
    response = client.post("/api/memory/forget", json={"kind": kind, "id": item_id}, headers=user(ANA))
    assert response.status_code == 200, response.text


def memory_ids(client: TestClient, q: str) -> list[str]:
    response = client.get("/api/memory/memories", params={"q": q}, headers=user(ANA))
    assert response.status_code == 200, response.text
    return [m["id"] for m in response.json()["memories"]]


def sweep(client: TestClient) -> dict[str, object]:
    run = run_maintenance(client, ANA)
    assert run["status"] == "completed", run
    filled: dict[str, object] = run["report"]["summary"]["vectorsFilled"]
    return filled


def end_while_down(client: TestClient, switch: SwitchableEmbedder, session: str, turn: tuple[str, str]) -> str:
    """End a one-exchange session while the embedder is down; returns its episode id."""
    switch.down = True
    ended = talk(client, ANA, session, turn, ("assistant", "Noted."))
    assert ended["saved"] is True and ended["status"] == "done", ended
    return str(ended["episodeId"])


def test_an_episode_forgotten_while_it_waits_leaves_no_note_and_gets_no_vector(
    api: tuple[TestClient, HookedEmbedder, MemoryCoordinator], raw_redis: redis.Redis, key_prefix: str
) -> None:
    """The Lisbon session stored while down (the garden one while up), its episode forgotten. Bugs
    caught: the pending set still naming the episode or a memory learnt from it (SCAN), /health
    counting them, the global list of users waiting still naming Ana with nothing left, or the
    repair writing a vector for them (found by meaning) once the embedder is back."""
    client, switch, _ = api
    talk(client, ANA, "garden", GARDEN, ("assistant", "Tomatoes and basil grow well together."))
    episode_id = end_while_down(client, switch, "lisbon", LISBON)
    waiting = noted(raw_redis, key_prefix)
    assert f"episode:{episode_id}" in waiting and pending(client) == len(waiting) + 3  # and 3 entity names
    forgotten = {member.partition(":")[2] for member in waiting}  # the episode and its memories
    forget(client, "episode", episode_id)
    assert traces(raw_redis, key_prefix, forgotten) == []
    assert pending(client) == 0
    assert raw_redis.smembers(f"{key_prefix}:meta:pending_vectors") == set()
    switch.down = False
    assert sweep(client) == {"filled": 0, "gone": 0, "error": None}  # nothing of it left to fill
    assert "lisbon" not in search_sessions(client, PARAPHRASE, "vector")
    assert "garden" in search_sessions(client, GARDEN_PARAPHRASE, "vector")
    assert traces(raw_redis, key_prefix, forgotten) == []


@pytest.mark.parametrize("how", ["DELETE /memories/{id}", "POST /forget"])
def test_a_memory_deleted_while_it_waits_leaves_no_note_and_gets_no_vector(
    api: tuple[TestClient, HookedEmbedder, MemoryCoordinator], raw_redis: redis.Redis, key_prefix: str, how: str
) -> None:
    """Two memories posted while down, one deleted (either way). Bugs caught: its note kept (SCAN,
    /health) or filled after the deletion, or the other memory's note dropped with it (not filled), or
    the entity graph's records fed by the memory under its id ("Lisbon") kept after it was forgotten."""
    client, switch, _ = api
    switch.down = True
    ids = []
    for text in (LISBON[1], GARDEN[1]):
        posted = client.post("/api/memory/memories", json={"text": text}, headers=user(ANA))
        assert posted.status_code == 201, posted.text
        ids.append(str(posted.json()["memory"]["id"]))
    gone, kept = ids
    assert noted(raw_redis, key_prefix) == {f"memory:{gone}", f"memory:{kept}"}
    if how == "POST /forget":
        forget(client, "memory", gone)
    else:
        deleted = client.delete(f"/api/memory/memories/{gone}", headers=user(ANA))
        assert deleted.status_code == 200, deleted.text
    assert noted(raw_redis, key_prefix) == {f"memory:{kept}"}
    assert traces(raw_redis, key_prefix, {gone}) == []
    assert pending(client) == 1
    switch.down = False
    assert sweep(client) == {"filled": 1, "gone": 0, "error": None}
    assert memory_ids(client, GARDEN_PARAPHRASE)[:1] == [kept]  # by meaning (no word shared): filled
    assert gone not in memory_ids(client, PARAPHRASE)
    assert traces(raw_redis, key_prefix, {gone}) == []


def test_an_episode_forgotten_while_the_repair_computes_its_vectors_keeps_none(
    api: tuple[TestClient, HookedEmbedder, MemoryCoordinator], raw_redis: redis.Redis, key_prefix: str
) -> None:
    """Both sessions stored while down; the repair reads them, and the Lisbon episode is forgotten
    (HTTP) inside its embedding call (README: "A single record forgotten while the repair computes
    its vector keeps no vector"). Bugs caught: the vectors written for the episode, its turns or its
    memories kept (SCAN by contents, found by meaning), or the garden session left without its own."""
    client, switch, coordinator = api
    lisbon = end_while_down(client, switch, "lisbon", LISBON)
    forgotten = {member.partition(":")[2] for member in noted(raw_redis, key_prefix)}  # the episode, its memories
    end_while_down(client, switch, "garden", GARDEN)
    switch.down = False
    switch.hook = lambda: forget(client, "episode", lisbon)
    report = fill_user(coordinator.services, ANA)
    assert switch.hook is None  # the forget ran inside the repair's call
    assert report.error is None and report.filled >= 1 and report.skipped >= 1
    assert traces(raw_redis, key_prefix, forgotten) == []
    assert pending(client) == 0
    assert "lisbon" not in search_sessions(client, PARAPHRASE, "vector")
    assert "garden" in search_sessions(client, GARDEN_PARAPHRASE, "vector")
