"""Planted-bug checks of the newest code (issue 20; docs/testing.md, "Planted bugs outside the mutation
core"): the ingestion runs, the worker's hold of its entries, its heartbeat and batch, the queue's
stats and a forget's walk of it (issue 15); how a formula said in three sessions ranks them and whose
names a query leaves out (issue 14); the embedder switch (vector spaces, ``agtos reindex``, ``/health``'s
``staleVectors``, ``/ask`` while records wait). Each test here failed with a hand-planted one-line bug
that the suite let pass (the table in docs/testing.md); the heartbeat test with a real one (fixed).

Real Redis (``AGTOS_TEST_REDIS_URL``); the switch through the HTTP app and the CLI on the local
embedding stub of ``tests/test_embedder_switch.py``. Expected values are literals from the README.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterator
from datetime import timedelta
from typing import Any

import pytest
from fastapi.testclient import TestClient

from agtos.config import EmbeddingConfig, Settings
from agtos.memory import recall, reindex
from agtos.memory.coordinator import MemoryCoordinator
from agtos.memory.ingest_worker import IngestWorker, SessionJob, job_runs
from agtos.serving.app import create_app
from agtos.storage.ingest_queue import GROUP, IngestQueue
from agtos.storage.keys import GlobalKeys
from agtos.storage.redis_conn import RedisConnector
from tests.helpers import end_session, gina_jon_turns, isolated_app, talk, user
from tests.test_embedder_switch import (  # noqa: F401 - cli, embed_server, serve: fixtures
    ALICE,
    BOB,
    STALE_A,
    STALE_SEARCH,
    TOPICS,
    EmbedServer,
    cli,
    embed_server,
    remember,
    search,
    semantic_tier,
    serve,
)
from tests.test_env_settings import HIKE, NO_SHARED_WORDS
from tests.test_large_session_end import job
from tests.test_recall_q1 import JOB, JUNE_1, SMALL_TALK
from tests.test_recall_q1 import search as q1_search

KIB_64 = 65_536  # RUN_MAX_CHARS: 64K characters of turn text per ingestion run (README)


# -- ingestion runs (issue 15) -------------------------------------------------------------------------
def test_an_end_of_64k_characters_runs_with_the_batch_and_one_character_more_runs_alone() -> None:
    """Runs hold at most 65,536 characters of turn text: an end of exactly that many is not deferred,
    one of 65,537 runs alone after the others, and two ends of 32,768 share a run."""
    assert job_runs([job("ann", KIB_64), job("bob", 1)]) == [[0], [1]]
    assert job_runs([job("ann", KIB_64 + 1), job("bob", 1)]) == [[1], [0]]
    assert job_runs([job("ann", KIB_64 // 2), job("bob", KIB_64 // 2), job("cid", 1)]) == [[0, 1], [2]]


@pytest.fixture
def queue(settings: Settings) -> Iterator[IngestQueue]:
    connector = RedisConnector(settings.redis_url, settings.data_dir)
    try:
        yield IngestQueue(connector, GlobalKeys(settings.key_prefix))
    finally:
        connector.close()


def test_a_long_job_is_held_every_third_of_the_claim_idle_time_without_counting_a_delivery(
    queue: IngestQueue,
) -> None:
    """While a job runs (3.2 s, claim idle time 1.5 s) its entry never sits idle much past a third of
    the claim idle time (500 ms; another worker takes an entry idle 1.5 s over), and holding it counts
    no delivery (each counted one goes towards the dead-letter stream)."""
    queue.enqueue(job("ann", 10).model_dump_json().encode())
    seen: list[tuple[int, int]] = []  # (idle ms, deliveries) of the entry while its job runs

    def long_job(_: SessionJob) -> None:
        deadline = time.monotonic() + 3.2
        while time.monotonic() < deadline:
            [pending] = queue.connector.run(lambda r: r.xpending_range(queue.stream, GROUP, "-", "+", 1))
            seen.append((int(pending["time_since_delivered"]), int(pending["times_delivered"])))
            time.sleep(0.02)

    assert IngestWorker(queue, long_job, claim_idle_s=1.5, consumer="first").run_once(block=False) == 1
    assert max(idle for idle, _ in seen) < 1_000, seen
    assert {deliveries for _, deliveries in seen} == {1}


# -- a formula said in three sessions (issue 14, q1) ---------------------------------------------------
FORMULA_USER = "q1-formula-3"  # Jon's sign-off formula said in exactly three sessions


@pytest.fixture(scope="module")
def formulas(redis_url: str, tmp_path_factory: pytest.TempPathFactory) -> Iterator[TestClient]:
    """The app with the job's session and three small-talk sessions replayed (tests/test_recall_q1.py's)."""
    with isolated_app(redis_url, tmp_path_factory.mktemp("formula")) as (client, _, _):
        assert end_session(client, FORMULA_USER, "job", gina_jon_turns(JUNE_1, JOB))["saved"]
        for n in (1, 2, 3):
            said = gina_jon_turns(JUNE_1 + timedelta(days=n), SMALL_TALK)
            assert end_session(client, FORMULA_USER, f"formula-{n}", said)["saved"]
        yield client


def test_a_formula_said_in_three_sessions_does_not_outrank_the_answer(formulas: TestClient) -> None:
    """Words said in 3 of the sessions found make a formula (its turn hits weigh 1/3): the session where
    Jon says what his job is ranks among the first two, not below the three sign-offs."""
    ranked = q1_search(formulas, FORMULA_USER, "What does Jon do for work?", limit=4)
    assert ranked.index("job") < 2, ranked


# -- the embedder switch --------------------------------------------------------------------------------
def test_a_user_who_started_after_the_switch_waits_for_no_reindex(
    serve: Callable[[str], TestClient],  # noqa: F811
    cli: Callable[..., Any],  # noqa: F811
) -> None:
    """Bob's first session is stored by the new embedder: his index that holds no vector (no conclusion
    drawn) is not taken for one of the deployment's first embedder, nor is he counted as waiting."""
    remember(serve("mini-a"), topics={"car": TOPICS["car"]})
    remember(serve("mini-b"), BOB, {"car": TOPICS["car"]})  # no conclusion drawn: that index holds nothing
    assert semantic_tier(serve("mini-b"))["staleVectors"] == STALE_A.format("1 user")
    checked = cli("mini-b", "reindex", "--user", BOB, "--check")
    assert (checked.exit_code, checked.output.strip()) == (0, "every vector was made by the configured embedder")


def test_forgetting_a_session_on_the_new_embedder_leaves_the_old_vectors_to_the_old_process(
    serve: Callable[[str], TestClient],  # noqa: F811
) -> None:
    """A delete never switches an index: forgetting one session through a process on the new embedder
    leaves the user's other vectors to a process still on the old one (a rolling upgrade)."""
    old = serve("mini-a")
    ended = talk(old, ALICE, "car", ("user", TOPICS["car"][0] + "."), ("assistant", "Noted."))
    remember(old, topics={"piano": TOPICS["piano"]})
    forgot = serve("mini-b").post(
        "/api/memory/forget", json={"kind": "episode", "id": ended["episodeId"]}, headers=user(ALICE)
    )
    assert forgot.status_code == 200, forgot.text
    assert search(serve("mini-a"), "piano Chopin nocturnes", "vector") == [("piano", "semantic")]


def test_a_reindex_stopped_by_the_embedder_leaves_the_next_users_vectors_as_they_were(
    serve: Callable[[str], TestClient],  # noqa: F811
    cli: Callable[..., Any],  # noqa: F811
    embed_server: EmbedServer,  # noqa: F811
) -> None:
    """The embedder fails alice's first records (users go in name order): the reindex stops there, so
    bob's vectors stay his old embedder's, which a process still on it searches."""
    remember(serve("mini-a"), topics={"garden": TOPICS["garden"]})
    remember(serve("mini-a"), BOB, {"car": TOPICS["car"]})
    embed_server.texts, embed_server.fail_after = 0, 1  # the dimension probe answers, then nothing
    stopped = cli("mini-b", "reindex")
    assert stopped.exit_code == 1 and "reindexed 0 of 2 user(s)" in stopped.output, stopped.output
    embed_server.fail_after = None
    assert search(serve("mini-a"), "blue Volvo car", "vector", BOB) == [("car", "semantic")]


def test_an_opted_out_users_records_are_not_embedded_again(
    serve: Callable[[str], TestClient],  # noqa: F811
    cli: Callable[..., Any],  # noqa: F811
    embed_server: EmbedServer,  # noqa: F811
) -> None:
    """README: nothing of an opted-out user is written. Her stored sessions stay, and the reindex
    leaves her index as it was: the embedder is asked for its dimension probe's one text only, and her
    old embedder's vectors are neither dropped nor taken for the new one's."""
    api = serve("mini-a")
    remember(api, topics={"garden": TOPICS["garden"]})
    opted = api.put("/api/memory/privacy", json={"opt_out": True}, headers=user(ALICE))
    assert opted.status_code == 200, opted.text
    embed_server.texts = 0
    assert cli("mini-b", "reindex").exit_code == 0
    assert embed_server.texts == 1
    assert semantic_tier(serve("mini-b"))["staleVectors"] == STALE_A.format("1 user")  # her index as it was


def test_the_int8_variant_of_the_bundled_model_reads_the_vectors_it_made(settings: Settings) -> None:
    """README: a quantised variant of one model (AGTOS_EMBEDDING_QUANTIZE) counts as the same embedder:
    a session stored by the bundled model stays found by meaning, and nothing waits for a reindex."""
    for quantize in (None, "int8"):
        coordinator = MemoryCoordinator(settings.with_overrides(embedding=EmbeddingConfig(quantize=quantize)))
        try:
            with TestClient(create_app(coordinator=coordinator)) as api:
                if quantize is None:
                    talk(api, ALICE, "hike", *HIKE)
                else:
                    assert "staleVectors" not in semantic_tier(api)
                    assert search(api, NO_SHARED_WORDS, "vector") == [("hike", "semantic")]
        finally:
            coordinator.close()


def test_health_counts_the_users_waiting_for_a_reindex_at_most_every_15_s(
    serve: Callable[[str], TestClient],  # noqa: F811
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """The count walks every user's index metas: three ``/health`` calls within 15 s walk them once
    (and say the same line)."""
    remember(serve("mini-a"), topics={"car": TOPICS["car"]})
    walks: list[list[str]] = []
    walk = reindex.index_spaces

    def counted(connector: Any, keys: Any, users: Any, *rest: Any) -> Any:
        walks.append(list(users))
        return walk(connector, keys, walks[-1], *rest)

    monkeypatch.setattr(reindex, "index_spaces", counted)
    api = serve("mini-b")
    assert [semantic_tier(api).get("staleVectors") for _ in range(3)] == [STALE_A.format("1 user")] * 3
    assert walks == [[ALICE]]


def test_ask_scores_its_evidence_with_the_embedder_while_older_records_wait_for_a_reindex(
    serve: Callable[[str], TestClient],  # noqa: F811
    embed_server: EmbedServer,  # noqa: F811
) -> None:
    """Records waiting for a reindex make the answer ``degraded`` (they match by keyword only), but the
    embedder is up: ``/ask`` scores its evidence's sentences with it, not by shared words alone (the
    question's own vector is the search's, cached)."""
    remember(serve("mini-a"), topics={"garden": TOPICS["garden"]})
    api = serve("mini-b")
    question = "tomatoes basil garden"
    assert api.get("/api/memory/search", params={"q": question}, headers=user(ALICE)).status_code == 200
    before = embed_server.texts
    asked = api.post("/api/memory/ask", json={"question": question}, headers=user(ALICE))
    assert asked.status_code == 200, asked.text
    assert asked.json()["degraded"] == STALE_SEARCH
    assert embed_server.texts > before


def test_ends_queued_while_the_worker_yields_fill_its_batch_and_no_more(queue: IngestQueue) -> None:
    """Batch of 2: the first end is read alone; two more are queued while the worker yields to a
    request in flight: one joins it, the other waits for the next batch."""
    queue.enqueue(job("ann", 10).model_copy(update={"session_id": "s1"}).model_dump_json().encode())
    polls: list[int] = []

    def busy() -> bool:  # a request in flight for the first two polls; two ends queued at the first
        if not polls:
            for session in ("s2", "s3"):
                queue.enqueue(job("ann", 10).model_copy(update={"session_id": session}).model_dump_json().encode())
        polls.append(1)
        return len(polls) < 3

    batches: list[list[str]] = []
    worker = IngestWorker(
        queue, lambda _: None, handle_many=lambda jobs: batches.append([j.session_id for j in jobs]), batch=2
    ).yield_to(busy, 1.0)
    assert worker.run_once(block=False) == 2
    assert worker.run_once(block=False) == 1
    assert batches == [["s1", "s2"]]  # the third, alone, goes through ``handle``


def test_a_batchs_time_is_shared_out_among_its_ends_in_the_mean_job_time(queue: IngestQueue) -> None:
    """Two ends handled together in 0.4 s took 0.2 s each: ``meanJobS`` (README: the mean job time)."""
    for session in ("s1", "s2"):
        queue.enqueue(job("ann", 10).model_copy(update={"session_id": session}).model_dump_json().encode())
    worker = IngestWorker(queue, lambda _: None, handle_many=lambda _: time.sleep(0.4), batch=2)
    assert worker.run_once(block=False) == 2
    stats = queue.stats()
    assert stats["done"] == 2
    assert 0.2 <= stats["meanJobS"] < 0.35, stats


def test_a_worker_counts_as_alive_while_its_heartbeat_is_within_15_s(queue: IngestQueue) -> None:
    """README: ``workersAlive`` counts the workers whose heartbeat is within 15 s."""
    for age_s, alive in ((10.0, 1), (16.0, 0)):
        queue.connector.run(lambda r, age=age_s: r.hset(queue.workers_key, "w1", repr(time.time() - age)))
        assert queue.stats()["workersAlive"] == alive, age_s


def test_a_job_that_failed_once_and_then_succeeded_leaves_no_error_behind(queue: IngestQueue) -> None:
    """A failed attempt records its error (for the dead letter, if it comes to that); the retry's
    success deletes it with the entry."""
    queue.enqueue(job("ann", 10).model_dump_json().encode())
    attempts: list[str] = []

    def fail_first(_: SessionJob) -> None:
        attempts.append("run")
        if len(attempts) == 1:
            raise RuntimeError("embedder not loaded yet")

    def errors() -> int:
        return int(queue.connector.run(lambda r: r.hlen(queue.errors)))

    worker = IngestWorker(queue, fail_first, retry_delay_s=0.0, claim_idle_s=0.2)
    assert worker.run_once(block=False) == 1
    assert errors() == 1
    assert worker.run_once(block=False) == 1
    assert (len(attempts), errors(), queue.stats()["depth"]) == (2, 0, 0)


def test_forgetting_a_user_drops_all_501_of_their_queued_ends_and_no_one_elses(settings: Settings) -> None:
    """A forget walks the queue 500 entries a page: the 501st of the user's queued ends goes too, the
    other user's stays."""
    coordinator = MemoryCoordinator(settings.with_overrides(ingest_mode="queue", ingest_worker=False))
    try:
        queue = coordinator.ingest_queue
        for _ in range(501):
            queue.enqueue(job("ann", 10).model_dump_json().encode())
        queue.enqueue(job("bob", 10).model_dump_json().encode())
        with TestClient(create_app(coordinator=coordinator)) as client:
            forgot = client.post("/api/memory/forget", json={"kind": "all"}, headers=user("ann"))
            assert forgot.status_code == 200, forgot.text
        assert queue.stats()["depth"] == 1
    finally:
        coordinator.close()


def test_a_worker_on_a_long_job_keeps_beating_within_the_15_s_window(queue: IngestQueue) -> None:
    """A large session's end takes minutes; the worker re-claims its entries only every third of the
    claim idle time (40 s by default), but beats its heartbeat every 2 s meanwhile, so ``/health``
    never counts it gone (``workersAlive``: heartbeat within 15 s) while it works. A real bug found by
    this pass: it beat only with each hold, so a job past 15 s made the worker look gone for 25 s of
    every 40 (``/health`` unhealthy while ends waited, a queued end told no worker was alive)."""
    queue.enqueue(job("ann", 10).model_dump_json().encode())
    ages: list[float] = []

    def long_job(_: SessionJob) -> None:
        deadline = time.monotonic() + 6.0
        while time.monotonic() < deadline:
            beats = queue.connector.run(lambda r: r.hgetall(queue.workers_key))
            ages.append(time.time() - max(float(beat) for beat in beats.values()))
            time.sleep(0.1)

    assert IngestWorker(queue, long_job, claim_idle_s=120.0).run_once(block=False) == 1
    assert max(ages) < 5.0, ages  # before the fix: 6 s, and 40 s in a job of a minute


def test_the_speakers_left_out_of_a_query_are_those_of_the_latest_three_sessions(
    coordinator: MemoryCoordinator,
) -> None:
    """Gina talks with Ada, then Bea, Cleo and Dora (a session each, a day apart): the names left out
    of a search are those of the latest three sessions' speakers, not Ada's."""
    with TestClient(create_app(coordinator=coordinator)) as client:
        for day, other in enumerate(("Ada", "Bea", "Cleo", "Dora")):
            lines = [
                ("Gina", f"Hi {other}! How was the concert last night?"),
                (other, "Loud and wonderful, the band played for three hours."),
                ("Gina", "I prefer quiet jazz clubs myself, remember that."),
                (other, "Noted, a jazz club next time."),
            ]
            said = gina_jon_turns(JUNE_1 + timedelta(days=day), lines)
            assert end_session(client, "gina", f"day-{day}", said)["saved"]
    assert recall.speaker_names(coordinator.services, "gina") == {"Gina", "Bea", "Cleo", "Dora"}
