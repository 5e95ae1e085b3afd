"""Overlapping Dreamer runs of one user (issues 15/20).

With a consolidation LLM each session end starts a Dreamer run of its own (a thread), and a queue worker
and an API process may dream the same user at once. Runs merge their conclusions with the stored ones
(a conclusion's id is its text): read, union the sources, write. Without a lock a run that read before
the other wrote overwrote the sources the other had added (a3's probe: 4 of 12 rounds kept 2 of 3 cited
episodes). The overlap is forced here, not hoped for: the stub LLM holds the first run's reply until the
second run's request came, and the first run to write waits until the second run's read has returned
(at most ``HOLD_S``: behind the per-user lock it cannot). Sources are kept in their episodes' time
order, oldest first, whichever run stored first (``dreamer_pipeline.store_conclusions``).
"""

from __future__ import annotations

import json
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import numpy as np
import redis
from fastapi.testclient import TestClient

from agtos.config import Settings
from agtos.memory.coordinator import MemoryCoordinator
from agtos.schemas import Conclusion
from agtos.serving.app import create_app
from agtos.storage.user_lock import UserLock
from tests.helpers import delete_prefix, end_session
from tests.stub_servers import StubModelServer
from tests.test_dreamer import HISTORY, _llm_coordinator, conclusions

TEXT = "User checks the weather every morning"
HOLD_S = 3.0  # the first writer's wait for the other run's read (all of it when a lock holds that read off)
WAIT_S = 30.0


def _end(client: TestClient, user_id: str, day: str) -> str:
    """End the ``HISTORY`` session ``day`` of ``user_id``; its episode's id."""
    stamp, turns = next((stamp, turns) for sid, stamp, turns in HISTORY if sid == day)
    body = [{"role": r, "content": c, "timestamp": stamp + i * 1000} for i, (r, c) in enumerate(turns)]
    ended = end_session(client, user_id, day, body)
    assert ended["saved"] is True, ended
    return str(ended["episode"]["id"])


def _poll(check: Callable[[], bool], what: str) -> None:
    deadline = time.monotonic() + WAIT_S
    while not check():
        assert time.monotonic() < deadline, f"timed out waiting for {what}"
        time.sleep(0.01)


def _citing_newest(before: Callable[[], None] = lambda: None) -> Callable[[dict[str, Any]], str]:
    """A consolidation reply citing the newest episode its request lists (and that episode's first turn)
    for ``TEXT``, after ``before`` ran (the stub answers each request in a thread of its own)."""

    def reply(body: dict[str, Any]) -> str:
        listing = body["messages"][-1]["content"]
        newest = next(line[2:].split(" ")[0] for line in listing.splitlines() if line.startswith("- "))
        before()
        found = {"text": TEXT, "type": "inductive", "confidence": 0.8, "source_episode_ids": [newest]}
        return json.dumps({"conclusions": [{**found, "source_turn_ids": [f"{newest}.t0"]}]})

    return reply


@contextmanager
def _llm_app(settings: Settings) -> Iterator[tuple[StubModelServer, MemoryCoordinator, TestClient]]:
    with StubModelServer() as stub:
        coordinator = _llm_coordinator(settings, stub)
        try:
            with TestClient(create_app(coordinator=coordinator)) as client:
                yield stub, coordinator, client
        finally:
            coordinator.close()


def _two_runs(stub: StubModelServer, coordinator: MemoryCoordinator, client: TestClient) -> tuple[str, str, dict]:
    """End mon, then (once mon's run asked the LLM) tue: two runs, mon's listing [mon], tue's [tue, mon].
    The episode ids and the stored ``TEXT`` conclusion."""
    mon = _end(client, "dora", "mon")
    _poll(lambda: any(r.path == "/api/chat" for r in stub.requests), "mon's run to ask the LLM")
    tue = _end(client, "dora", "tue")
    assert coordinator.dreamer.wait(WAIT_S)
    assert len([r for r in stub.requests if r.path == "/api/chat"]) == 2
    return mon, tue, next(c for c in conclusions(client, "dora", type="inductive") if c["text"] == TEXT)


def test_overlapping_runs_of_a_user_keep_every_cited_source(settings: Settings) -> None:
    """Both runs read before either wrote (without a lock): the last writer kept only its own source."""
    with _llm_app(settings) as (stub, coordinator, client):
        second_asked = threading.Event()
        stub.queue_chat(_citing_newest(lambda: second_asked.wait(WAIT_S)), _citing_newest(second_asked.set))
        store = coordinator.services.conclusions
        get_many, upsert_many = store.get_many, store.upsert_many
        readers: set[str] = set()
        both_read = threading.Event()
        writers: list[str] = []

        def reading(user_id: str, ids: list[str]) -> dict[str, Conclusion]:
            stored = get_many(user_id, ids)
            if threading.current_thread().name.startswith("dreamer-"):  # a run's read, done
                readers.add(f"{threading.get_ident()}")
                if len(readers) == 2:
                    both_read.set()
            return stored

        def writing(found: list[Conclusion], vectors: np.ndarray | None) -> None:
            if not writers:  # the first run to write: the other may read now, if nothing holds it off
                writers.append(threading.current_thread().name)
                both_read.wait(HOLD_S)
            upsert_many(found, vectors)

        store.get_many = reading  # type: ignore[method-assign]
        store.upsert_many = writing  # type: ignore[method-assign]
        mon, tue, stored = _two_runs(stub, coordinator, client)
        assert stored["source_episode_ids"] == [mon, tue], stored
        assert stored["source_turn_ids"] == [f"{mon}.t0", f"{tue}.t0"], stored


def test_sources_are_ordered_by_episode_time_whichever_run_stores_first(settings: Settings) -> None:
    """tue's run (the newer episode) stores first, mon's run merges with it: sources are still [mon, tue]
    (the union kept the stored ones first: [tue, mon], an order that depended on the runs' timing)."""
    with _llm_app(settings) as (stub, coordinator, client):
        tue_stored = threading.Event()
        stub.queue_chat(_citing_newest(lambda: tue_stored.wait(WAIT_S)), _citing_newest())
        store = coordinator.services.conclusions
        upsert_many = store.upsert_many

        def writing(found: list[Conclusion], vectors: np.ndarray | None) -> None:
            upsert_many(found, vectors)
            if any(c.text == TEXT for c in found):
                tue_stored.set()

        store.upsert_many = writing  # type: ignore[method-assign]
        mon, tue, stored = _two_runs(stub, coordinator, client)
        assert tue_stored.is_set()
        assert stored["source_episode_ids"] == [mon, tue], stored
        assert stored["source_turn_ids"] == [f"{mon}.t0", f"{tue}.t0"], stored


def test_a_merge_holds_off_neither_another_user_nor_the_same_user_of_another_tenant(
    client: TestClient, coordinator: MemoryCoordinator, settings: Settings, redis_url: str, tmp_path: Path
) -> None:
    """While dora's merge holds her lock (rules: the Dreamer runs within the end), bob's end and the end of
    another tenant's dora finish: the lock is per user and tenant (a shared one stalled them 60 s)."""
    other_prefix = f"{settings.key_prefix}-b"
    other = MemoryCoordinator(settings.with_overrides(key_prefix=other_prefix, data_dir=tmp_path / "b"))
    try:
        with TestClient(create_app(coordinator=other)) as other_client:
            store = coordinator.services.conclusions
            upsert_many = store.upsert_many
            ended: list[str] = []
            in_time: list[bool] = []
            others = [
                threading.Thread(target=lambda: ended.append(_end(client, "bob", "tue")), daemon=True),
                threading.Thread(target=lambda: ended.append(_end(other_client, "dora", "tue")), daemon=True),
            ]

            def writing(found: list[Conclusion], vectors: np.ndarray | None) -> None:
                if found and found[0].user_id == "dora" and not in_time:  # within dora's merge
                    for thread in others:
                        thread.start()
                    deadline = time.monotonic() + 20
                    for thread in others:
                        thread.join(max(0.0, deadline - time.monotonic()))
                        in_time.append(not thread.is_alive())
                upsert_many(found, vectors)

            store.upsert_many = writing  # type: ignore[method-assign]
            _end(client, "dora", "tue")
            for thread in others:
                thread.join(90)
            assert in_time == [True, True] and len(ended) == 2, (in_time, ended)
            assert conclusions(other_client, "dora", type="explicit")
    finally:
        other.close()
        delete_prefix(redis_url, other_prefix)


def test_a_dead_holders_lock_expires_and_a_release_frees_only_its_own(
    coordinator: MemoryCoordinator, settings: Settings, raw_redis: redis.Redis
) -> None:
    """A holder that died leaves its key: the next holder gets in once it expired (``lock_ms``), not before and
    not never; a holder whose lock expired and was taken over releases nothing of the new holder's."""
    services = coordinator.services
    lock = UserLock(services.connector, services.keys, "dreaming", lock_ms=400)
    key = f"{settings.key_prefix}:u:{{dora}}:dreaming:conclusions"  # the README's key layout
    assert raw_redis.set(key, "dead-holder", nx=True, px=400)
    started = time.monotonic()
    with lock.held("dora", "conclusions"):
        waited = time.monotonic() - started
        assert raw_redis.get(key) not in (None, b"dead-holder") and 0 < raw_redis.pttl(key) <= 400
        raw_redis.set(key, "next-holder", px=400)  # ours expired meanwhile and another took it
    assert 0.2 < waited < 5.0, waited
    assert raw_redis.get(key) == b"next-holder"
