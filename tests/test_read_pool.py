"""Cheap reads answer while long work holds every shared request thread (issue 15 item 5).

A black-box probe of ``agtos serve`` under load saw ``GET /api/memory/maintain/runs/{unknown}`` (a
404, 16-28 ms on a quiet box) take 16 s. Sync routes share AnyIO's 40 threads with the long sync
routes (``/ask``, ``/dream``, ``/conversations``) and the hot routes share ``offload.EXECUTOR``'s 40;
the cheap reads run on their own pool (``offload.in_read_thread``). Here both shared pools are held
(AnyIO's tokens borrowed in the app's event loop, the executor's threads blocked on an event), and
the cheap reads must still answer through HTTP, while a sync route waits until the pools are released.
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from functools import partial
from typing import Any

import anyio.to_thread
from fastapi.testclient import TestClient

from agtos.serving.offload import EXECUTOR, MAX_THREADS
from tests.helpers import user

CHEAP_READS = (
    ("/health", 200),
    ("/api/memory/episodes", 200),
    ("/api/memory/maintain/runs/run_unknown", 404),
    ("/api/memory/maintain/history", 200),
    ("/api/memory/maintain/history/1", 404),
)


@contextmanager
def shared_pools_held(client: TestClient, executor: bool = True) -> Iterator[None]:
    """Every AnyIO token of the app's event loop and (``executor``) every thread of the hot routes' executor, held."""
    borrowers = [object() for _ in range(MAX_THREADS)]

    async def borrow() -> None:
        limiter = anyio.to_thread.current_default_thread_limiter()
        assert limiter.total_tokens == len(borrowers)  # AnyIO's default: the pool the sync routes share
        for borrower in borrowers:
            await limiter.acquire_on_behalf_of(borrower)

    async def give_back() -> None:
        limiter = anyio.to_thread.current_default_thread_limiter()
        for borrower in borrowers:
            limiter.release_on_behalf_of(borrower)

    release = threading.Event()
    started = threading.Barrier(MAX_THREADS + 1)

    def hold() -> None:
        started.wait()
        release.wait()

    assert client.portal is not None
    client.portal.call(borrow)
    held = [EXECUTOR.submit(hold) for _ in range(MAX_THREADS if executor else 0)]
    try:
        if executor:
            started.wait(timeout=30)  # all 40 threads busy
        yield
    finally:
        release.set()
        for future in held:
            future.result(timeout=30)
        client.portal.call(give_back)


def in_background(call: Callable[[], Any]) -> tuple[threading.Thread, list[Any]]:
    """``call()`` (a test client request) on a thread; its answer lands in the list once it returns."""
    answers: list[Any] = []
    thread = threading.Thread(target=lambda: answers.append(call()), daemon=True)
    thread.start()
    return thread, answers


def test_cheap_reads_answer_while_the_shared_pools_are_held(client: TestClient) -> None:
    headers = user("pool")
    with shared_pools_held(client):
        for path, status in CHEAP_READS:
            thread, answers = in_background(partial(client.get, path, headers=headers))
            thread.join(timeout=20)
            assert answers and answers[0].status_code == status, (path, answers)
        profile, profile_answers = in_background(lambda: client.get("/api/memory/profile", headers=headers))
        profile.join(timeout=1.0)
        assert profile_answers == []  # a sync route: no thread for it while the pool is held (the pools are full)
    profile.join(timeout=60)
    assert profile_answers and profile_answers[0].status_code == 200


def test_the_hot_routes_need_no_thread_of_anyios_pool(client: TestClient) -> None:
    """A search, a turn append and a session end run on the executor: no dependency of theirs takes an AnyIO
    thread (the repeated-parameter check was a sync dependency: every API request waited for one)."""
    headers = user("pool-hot")
    turns = {"turns": [{"role": "user", "content": "I prefer green tea in the morning."}]}
    calls = (
        (lambda: client.post("/api/memory/sessions/s1/turns", json=turns, headers=headers), 200),
        (lambda: client.get("/api/memory/search", params={"q": "tea"}, headers=headers), 200),
        (lambda: client.post("/api/memory/sessions/s1/end", params={"wait": 0}, headers=headers), 200),
    )
    with shared_pools_held(client, executor=False):
        for call, status in calls:
            thread, answers = in_background(call)
            thread.join(timeout=20)
            assert answers and answers[0].status_code == status, answers
