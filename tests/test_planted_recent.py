"""Planted-bug checks of the code that landed last (issue 20; docs/testing.md, "Planted bugs outside the
mutation core"): the URL-credential masking, ``/health``'s bounded and cached probe of a remote
embedder, Prefect refusing a maintenance run, and the benchmark suite's default-mode note. Each test
here failed with a mutant or a hand-planted one-line bug that the suite let pass.

Real Redis (``AGTOS_TEST_REDIS_URL``), a local stub model server, everything through HTTP where a user
would go; expected values are literals from the README or the issue.
"""

from __future__ import annotations

import base64
import logging
import socket
import threading
import time
from collections.abc import Callable, Iterator
from typing import Any

import prefect.context
import pytest
from fastapi.testclient import TestClient
from prometheus_client import CollectorRegistry

from agtos.config import EmbeddingConfig, LLMSlot, Settings
from agtos.memory import health_checks
from agtos.memory.coordinator import MemoryCoordinator
from agtos.memory.resource_guard import ActivityTracker, GuardConfig, ResourceGuard
from agtos.providers.embedding_base import EmbeddingTimeout
from agtos.providers.embeddings import EmbeddingError, OllamaEmbedder, OpenAICompatibleEmbedder
from agtos.providers.llm import LLMError, OllamaProvider
from agtos.serving.app import create_app
from agtos.tasks.url_credentials import mask_urls, split_userinfo
from benchmarks import suite
from tests.helpers import silent_listener, user
from tests.stub_servers import StubModelServer

PASSWORD = "secret-Pa55"
BASIC = "Basic " + base64.b64encode(f"svc:{PASSWORD}".encode()).decode()


def with_credentials(url: str) -> str:
    return url.replace("http://", f"http://svc:{PASSWORD}@", 1)


def closed_port() -> int:
    """A loopback port nothing listens on (a connection is refused at once)."""
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


@pytest.fixture
def silent_url() -> Iterator[str]:
    """A service that accepts connections and never answers (a hung model server)."""
    with silent_listener() as port:
        yield f"http://127.0.0.1:{port}"


def raised_within(seconds: float, call: Callable[[], Any]) -> BaseException | None:
    """What ``call`` raised (None: nothing), asserting it ended within ``seconds``; it runs on a
    thread, so a call that hangs fails the test instead of holding it."""
    done = threading.Event()
    raised: list[BaseException] = []

    def run() -> None:
        try:
            call()
        except BaseException as exc:  # the caller checks what was raised
            raised.append(exc)
        finally:
            done.set()

    threading.Thread(target=run, daemon=True).start()
    assert done.wait(seconds), f"still running after {seconds} s"
    return raised[0] if raised else None


# -- the masking helper --------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("text", "masked"),
    [
        # compact JSON (no spaces): a quote ends the URL, so an e-mail address after it stays as it is
        ('{"url":"http://127.0.0.1:9","by":"ann@example.org"}', '{"url":"http://127.0.0.1:9","by":"ann@example.org"}'),
        ('{"url":"http://u:pw@h:1","by":"ann@example.org"}', '{"url":"http://u:***@h:1","by":"ann@example.org"}'),
        ("<http://127.0.0.1:9>ann@example.org", "<http://127.0.0.1:9>ann@example.org"),
        # an '@' in the path is no userinfo (a user's address, an npm scope)
        ("GET http://127.0.0.1:9/api/users/ann@example.org", "GET http://127.0.0.1:9/api/users/ann@example.org"),
        ("https://registry.npmjs.org/@types%2fnode", "https://registry.npmjs.org/@types%2fnode"),
        ("http://u:pa:ss@h:1/x", "http://u:***@h:1/x"),  # a ':' in the password: all of it masked
    ],
)
def test_mask_urls_stops_at_quotes_angle_brackets_and_the_path(text: str, masked: str) -> None:
    assert mask_urls(text) == masked


# -- /health: a remote embedder probed at most every 15 s (README) ----------------------------------------


class Clock:
    """``health_checks``' view of :mod:`time`: a monotonic clock the test moves, the wall clock real."""

    def __init__(self) -> None:
        self.now = 1_000.0

    def monotonic(self) -> float:
        return self.now

    def time(self) -> float:
        return time.time()


@pytest.fixture
def stub_embedder_app(settings: Settings) -> Iterator[tuple[StubModelServer, TestClient]]:
    with StubModelServer() as stub:
        embedding = EmbeddingConfig(provider="ollama", model="nomic-embed-text", base_url=with_credentials(stub.url))
        coordinator = MemoryCoordinator(settings.with_overrides(embedding=embedding))
        try:
            with TestClient(create_app(coordinator=coordinator)) as client:
                yield stub, client
        finally:
            coordinator.close()


def test_health_probes_a_remote_embedder_again_after_15_s_and_not_before(
    stub_embedder_app: tuple[StubModelServer, TestClient], monkeypatch: pytest.MonkeyPatch
) -> None:
    stub, client = stub_embedder_app
    clock = Clock()
    monkeypatch.setattr(health_checks, "time", clock)

    def probes() -> int:
        return len(stub.requests_to("/api/embed"))

    assert client.get("/health").json()["status"] == "ok"
    first = probes()
    assert first >= 1
    clock.now += 14.9
    assert client.get("/health").json()["status"] == "ok"
    assert probes() == first  # the answer is reused for 15 s
    clock.now += 0.2
    assert client.get("/health").json()["status"] == "ok"
    assert probes() == first + 1  # then one new probe
    assert stub.requests_to("/api/embed")[-1].headers.get("authorization") == BASIC


# -- Prefect refusing a maintenance run: a masked one-line reason, then swept here ----------------------


def refused_by_prefect(
    settings: Settings, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> tuple[Any, list[logging.LogRecord], str]:
    """``POST /maintain`` with ``PREFECT_API_URL`` (credentials in it) at a stub that knows no
    deployment: the run as recorded once the app stopped, the refusal's log records, the stub's host:port."""
    caplog.set_level(logging.INFO)  # httpx logs each request at INFO

    def refusals(run_id: str) -> list[logging.LogRecord]:
        return [r for r in caplog.records if r.getMessage().startswith(f"Prefect did not take {run_id} (")]

    with StubModelServer() as stub:  # answers 404 for every Prefect route
        monkeypatch.setenv("PREFECT_API_URL", with_credentials(stub.url) + "/api")
        # Prefect reads its settings once, when prefect.context is first imported (by any earlier test of
        # this process): its root context is built again from the environment for this test
        monkeypatch.setattr(prefect.context, "GLOBAL_SETTINGS_CONTEXT", prefect.context.root_settings_context())
        coordinator = MemoryCoordinator(settings)
        try:
            with TestClient(create_app(coordinator=coordinator)) as client:
                queued = client.post("/api/memory/maintain", headers=user("ann"))
                assert queued.status_code == 202, queued.text
                run_id = queued.json()["runId"]
                deadline = time.monotonic() + 60
                while not refusals(run_id):
                    assert time.monotonic() < deadline, caplog.text
                    time.sleep(0.1)
            run = coordinator.maintenance.get_run("ann", run_id)  # the app's shutdown drained it
        finally:
            coordinator.close()
        return run, refusals(run_id), stub.url.removeprefix("http://")


def test_prefect_refusing_a_run_logs_a_masked_one_line_reason_and_the_run_is_swept_here(
    settings: Settings, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    """Also Prefect's own HTTP client (httpx) logs each request's URL at INFO: before
    ``mask_logged_urls``, ``HTTP Request: GET http://svc:<password>@host/api/deployments/...`` reached the log."""
    run, refused, host_port = refused_by_prefect(settings, monkeypatch, caplog)
    assert run is not None and run.status in ("completed", "deferred"), run  # swept in this process
    assert len(refused) == 1, caplog.text
    message = refused[0].getMessage()
    assert message.startswith(f"Prefect did not take {run.run_id} (memory-lint/nightly-lint): ObjectNotFound")
    assert (
        ": ObjectNotFound: None; PrefectHTTPStatusError: Client error '404 Not Found' for url" in message
    )  # and its cause
    assert f"'http://svc:***@{host_port}/api/deployments/" in message and message.endswith("; sweeping here")
    assert refused[0].exc_info is None and "\n" not in message  # one line, no traceback
    requests = [r.getMessage() for r in caplog.records if r.name == "httpx" and host_port in r.getMessage()]
    assert requests and all(f"http://svc:***@{host_port}/api/" in m for m in requests), requests
    assert PASSWORD not in caplog.text


def test_health_logs_a_remote_embedders_failure_once_masked(
    settings: Settings, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    """A refused remote embedder: /health says degraded without its address, and the server log gets
    the reason (credentials masked) once per outage, not on every probe."""
    port = closed_port()
    embedding = EmbeddingConfig(
        provider="ollama", model="in-house", base_url=with_credentials(f"http://127.0.0.1:{port}"), timeout_s=2
    )
    coordinator = MemoryCoordinator(settings.with_overrides(embedding=embedding))
    clock = Clock()
    monkeypatch.setattr(health_checks, "time", clock)
    caplog.set_level(logging.WARNING, logger="agtos.memory.health_checks")

    def logged() -> list[str]:
        return [r.getMessage() for r in caplog.records if r.getMessage().startswith("embedder health probe failed: ")]

    try:
        with TestClient(create_app(coordinator=coordinator)) as client:
            first = client.get("/health").json()
            assert len(logged()) == 1, logged()  # the first failure is logged
            clock.now += 16  # past the cache period: probed again, still refused
            second = client.get("/health").json()
    finally:
        coordinator.close()
    for body in (first, second):
        assert body["status"] == "degraded"
        assert body["tiers"]["semantic"]["error"] == "embedder unavailable (the server log has the reason)"
    assert len(logged()) == 1, logged()  # not the same outage again
    assert f"http://svc:***@127.0.0.1:{port}" in logged()[0] and PASSWORD not in caplog.text


# -- every HTTP client keeps to its own timeout ------------------------------------------------------------


@pytest.mark.parametrize("kind", [OllamaEmbedder, OpenAICompatibleEmbedder])
def test_an_embedders_ping_waits_the_shorter_of_its_bound_and_the_configured_timeout(
    kind: type[OllamaEmbedder], silent_url: str
) -> None:
    for configured, asked in ((8.0, 0.5), (0.5, 8.0)):
        embedder = kind("nomic-embed-text", silent_url, timeout_s=configured)
        try:
            raised = raised_within(4.0, lambda: embedder.ping(asked))  # noqa: B023 - called at once
        finally:
            embedder.close()
        assert isinstance(raised, EmbeddingTimeout), raised
        assert "no answer within 0.5 s" in str(raised)


def test_an_openai_compatible_answer_without_data_names_the_provider_and_what_is_missing() -> None:
    with StubModelServer() as stub:
        stub.fail_next(200)  # HTTP 200 with {"error": ...}: no data[]
        embedder = OpenAICompatibleEmbedder("text-embedding-3-small", stub.url + "/v1", timeout_s=5)
        with pytest.raises(EmbeddingError) as caught:
            embedder.embed(["hello"])
        embedder.close()
    assert str(caught.value).startswith("openai-compatible answered without data[].embedding/index: ")


def test_an_llm_base_url_with_a_trailing_slash_reaches_the_chat_route(caplog: pytest.LogCaptureFixture) -> None:
    """The stub (http.server) folds a leading ``//`` into ``/``; Ollama's Go server redirects it: the
    request line httpx logs shows what was asked."""
    caplog.set_level(logging.INFO, logger="httpx")
    with StubModelServer() as stub:
        llm = OllamaProvider("ollama", "llama3", with_credentials(stub.url) + "/", timeout_s=5)
        assert llm.chat([{"role": "user", "content": "hi"}]) == "stub reply"
        assert [r.path for r in stub.requests] == ["/api/chat"]
        asked = f"HTTP Request: POST {stub.url}/api/chat "
    assert next(r.getMessage() for r in caplog.records if r.name == "httpx").startswith(asked)


def test_an_llm_call_waits_its_configured_timeout_only(silent_url: str) -> None:
    llm = OllamaProvider("ollama", "llama3", silent_url, timeout_s=0.5)
    raised = raised_within(4.0, lambda: llm.chat([{"role": "user", "content": "hi"}]))
    assert isinstance(raised, LLMError), raised


def test_the_guards_ollama_probe_waits_its_configured_timeout_only(silent_url: str) -> None:
    """A hung Ollama must not hold background work: ``/api/ps`` is given ``ollama_timeout_s``."""
    guard = ResourceGuard(
        LLMSlot(provider="ollama", base_url=silent_url),
        config=GuardConfig(ollama_timeout_s=0.5),
        activity=ActivityTracker(),
        loadavg=lambda: (0.0, 0.0, 0.0),
        registry=CollectorRegistry(),
    )
    decisions: list[Any] = []
    assert raised_within(4.0, lambda: decisions.append(guard.check())) is None
    assert decisions[0].reason == "idle"


def test_an_embedder_url_with_an_invalid_port_degrades_health_and_search_instead_of_a_500(settings: Settings) -> None:
    """A typo in AGTOS_EMBEDDING_BASE_URL's port: httpx raises InvalidURL (no HTTPError), which
    answered 500 on /health and on every search before; now the embedder is unavailable (keyword search)."""
    embedding = EmbeddingConfig(provider="ollama", model="nomic-embed-text", base_url="http://svc:pw@127.0.0.1:1x")
    coordinator = MemoryCoordinator(settings.with_overrides(embedding=embedding))
    try:
        with TestClient(create_app(coordinator=coordinator)) as client:
            health = client.get("/health")
            found = client.get("/api/memory/search", params={"q": "tea"}, headers=user("ann"))
    finally:
        coordinator.close()
    assert health.status_code == 200 and health.json()["status"] == "degraded"
    assert health.json()["tiers"]["semantic"]["error"] == "embedder unavailable (the server log has the reason)"
    assert found.status_code == 200 and found.json()["degraded"] == "embedder unavailable: keyword search only"


# -- benchmarks/suite.py: the README's note on the default search mode -----------------------------------

HYBRID_WHY = (
    ". Hybrid fuses the BM25 ranking with the vector ranking (RRF, k = 60): sessions that share words with the "
    "question without answering it (the same persona's other sessions) rank high in BM25, and the fused list can "
    "move the answering session off rank 1 while keeping it in the top 10. Hybrid stays the default because it "
    "finds exact tokens the embedding misses (rare codes, ids, names: the recall benchmark's exact-token queries, "
    "where vector search finds few)"
)
VECTOR_TIP = (
    "; an agent that reads only the top hit of mostly paraphrased questions can set `AGTOS_MEMORY_SEARCH_MODE=vector`."
)


def mode(r1: float, mrr: float, r5: float, r10: float, update: float | None, **by_type: float | None) -> dict[str, Any]:
    overall = {"recall_any@1": r1, "mrr": mrr, "recall_any@5": r5, "recall_any@10": r10, "update": {"accuracy": update}}
    return {"overall": overall, "by_type": {t.replace("_", "-"): {"recall_any@1": v} for t, v in by_type.items()}}


def test_default_mode_note_with_three_modes_names_each_metrics_leader_gains_leads_and_ties() -> None:
    """bm25 leads R@1, vector leads MRR and R@5, hybrid (the default, listed last) ties vector at the
    top on R@10 and update accuracy; bm25 has no update accuracy (counted 0) and one type without R@1."""
    modes = {
        "bm25": mode(
            0.80,
            0.80,
            0.90,
            0.96,
            None,
            open_domain=0.30,
            temporal=0.60,
            multi_hop=0.68,
            single_hop=0.75,
            preference=0.90,
            commonsense=None,
        ),
        "vector": mode(0.70, 0.86, 0.97, 0.96, 0.70),
        "hybrid": mode(
            0.75,
            0.82,
            0.95,
            0.96,
            0.70,
            open_domain=None,
            temporal=0.50,
            multi_hop=0.60,
            single_hop=0.70,
            preference=0.90,
            commonsense=0.0,
        ),
    }
    assert suite.default_mode_note(modes, "hybrid") == [
        "**The default is not the best mode on this set**: bm25 0.800 vs hybrid 0.750 on R@1; "
        "vector 0.860 vs hybrid 0.820 on mrr; vector 0.970 vs hybrid 0.950 on R@5; "
        "bm25 gains most on open-domain (R@1 +0.30), temporal (R@1 +0.10), multi-hop (R@1 +0.08); "
        "hybrid leads on mrr 0.820 vs 0.800, R@5 0.950 vs 0.900, update accuracy 0.700 vs 0.000; "
        "the two tie on R@10" + HYBRID_WHY + " and leads here on mrr, R@5, update accuracy" + VECTOR_TIP
    ]


def test_default_mode_note_behind_everywhere_says_no_lead_no_tie_and_no_gain_without_types() -> None:
    modes = {"hybrid": mode(0.70, 0.75, 0.80, 0.85, 0.50), "vector": mode(0.80, 0.85, 0.90, 0.95, 0.60)}
    del modes["hybrid"]["by_type"]  # a mode evaluated without per-type figures
    assert suite.default_mode_note(modes, "hybrid") == [
        "**The default is not the best mode on this set**: vector 0.800 vs hybrid 0.700 on R@1; "
        "vector 0.850 vs hybrid 0.750 on mrr; vector 0.900 vs hybrid 0.800 on R@5; "
        "vector 0.950 vs hybrid 0.850 on R@10; vector 0.600 vs hybrid 0.500 on update accuracy"
        + HYBRID_WHY
        + VECTOR_TIP
    ]
    modes = {"hybrid": mode(0.70, 0.75, 0.80, 0.85, 0.50, temporal=0.5), "vector": mode(0.80, 0.75, 0.80, 0.85, 0.50)}
    del modes["vector"]["by_type"]
    note = suite.default_mode_note(modes, "hybrid")[0]
    assert note.startswith("**The default is not the best mode on this set**: vector 0.800 vs hybrid 0.700 on R@1; ")
    assert "gains most" not in note and "; the two tie on mrr, R@5, R@10, update accuracy. Hybrid" in note
    equal = {
        "hybrid": mode(0.7, 0.8, 0.8, 0.9, 0.5, temporal=0.5),
        "vector": mode(0.8, 0.8, 0.8, 0.9, 0.5, temporal=0.5),
    }
    assert "gains most" not in suite.default_mode_note(equal, "hybrid")[0]  # a gain of 0 is none


def test_a_silent_embedder_probed_again_after_the_period_is_still_reported_degraded(
    settings: Settings, silent_url: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Requests bounded at 1 s: the probe ends (timed out) after /health answered; within the period
    /health answers what the probe found (a timeout: silent), and the next period's /health probes
    again and still answers 200 degraded (a probe that failed unexpectedly must not leave /health raising)."""
    embedding = EmbeddingConfig(provider="ollama", model="nomic-embed-text", base_url=silent_url, timeout_s=1)
    coordinator = MemoryCoordinator(settings.with_overrides(embedding=embedding))
    clock = Clock()
    monkeypatch.setattr(health_checks, "time", clock)
    try:
        with TestClient(create_app(coordinator=coordinator)) as client:
            answers = [client.get("/health")]
            time.sleep(3.5)  # the probe's requests (dimension, then ping) time out meanwhile
            answers.append(client.get("/health"))  # the probe's own finding, cached
            clock.now += 16
            answers.append(client.get("/health"))
    finally:
        coordinator.close()
    for answer in answers:
        assert answer.status_code == 200 and answer.json()["status"] == "degraded", answer.text
    first, cached = (a.json()["tiers"]["semantic"]["error"] for a in answers[:2])
    assert first == "embedder did not answer within 2 s"
    # what the probe found: its timeout (or, once two calls failed, the open circuit breaker), not "unavailable"
    assert cached in ("embedder did not answer within 2 s", BREAKER_OPEN), cached


BREAKER_OPEN = "embedder failed just now: calls fail at once until its cool-down ends (circuit breaker open)"


def test_health_waits_for_the_local_model_to_load_instead_of_calling_it_silent(
    settings: Settings, monkeypatch: pytest.MonkeyPatch
) -> None:
    """``AGTOS_EMBEDDING_PROVIDER=local`` is the bundled model, in process: /health asks it directly,
    so a load that takes longer than the 2 s remote-probe bound is not reported as a silent service."""
    coordinator = MemoryCoordinator(settings.with_overrides(embedding=EmbeddingConfig(provider="local")))
    semantic = coordinator.services.semantic
    load = semantic._embedder_factory

    def slow_load() -> Any:
        time.sleep(2.5)
        return load()

    monkeypatch.setattr(semantic, "_embedder_factory", slow_load)
    try:
        with TestClient(create_app(coordinator=coordinator)) as client:
            body = client.get("/health").json()
    finally:
        coordinator.close()
    assert body["status"] == "ok", body
    assert body["tiers"]["semantic"]["available"] is True and body["tiers"]["semantic"]["embedder"] == "onnx"


def test_a_backfill_stored_without_vectors_logs_the_reason_masked(
    settings: Settings, caplog: pytest.LogCaptureFixture
) -> None:
    """96df8bd took the embedder's error (its URL) out of the response's ``degraded`` note: the reason
    must then be in the server log, credentials masked."""
    port = closed_port()
    embedding = EmbeddingConfig(
        provider="ollama", model="in-house", base_url=with_credentials(f"http://127.0.0.1:{port}"), timeout_s=2
    )
    coordinator = MemoryCoordinator(settings.with_overrides(embedding=embedding))
    caplog.set_level(logging.WARNING, logger="agtos.memory.ingestion_pipeline")
    turns = [
        {"role": "user", "content": "My sister Maria lives in Berlin and works at Siemens."},
        {"role": "assistant", "content": "Got it, Maria in Berlin."},
    ]
    try:
        with TestClient(create_app(coordinator=coordinator)) as client:
            stored = client.post(
                "/api/memory/conversations", json={"sessions": [{"id": "b1", "turns": turns}]}, headers=user("ann")
            )
    finally:
        coordinator.close()
    assert stored.status_code == 200 and stored.json()["stored"] == 1
    assert stored.json()["degraded"] == "embedder unavailable, stored for keyword search only"
    reasons = [
        r.getMessage()
        for r in caplog.records
        if r.name == "agtos.memory.ingestion_pipeline"
        and r.getMessage().startswith("embedder unavailable, 1 episodes stored for keyword search only: ")
    ]
    assert len(reasons) == 1 and f"http://svc:***@127.0.0.1:{port}/api/embed" in reasons[0], caplog.text
    assert PASSWORD not in caplog.text


def test_an_entity_graph_failure_says_so_without_its_error(
    coordinator: MemoryCoordinator, client: TestClient, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The stored batch stands without its entity graph; the note names no error text (a connection
    error names hosts and URLs), the log has it."""

    def down(*_args: Any) -> Any:
        raise ConnectionError(f"Error connecting to redis://default:{PASSWORD}@db.internal:6379")

    monkeypatch.setattr(coordinator.services.entities, "ingest", down)
    turns = [
        {"role": "user", "content": "My sister Maria lives in Berlin and works at Siemens."},
        {"role": "assistant", "content": "Got it, Maria in Berlin."},
    ]
    stored = client.post(
        "/api/memory/conversations", json={"sessions": [{"id": "e1", "turns": turns}]}, headers=user("ann")
    )
    assert stored.status_code == 200 and stored.json()["stored"] == 1
    assert stored.json()["degraded"] == "entity graph not updated (the server log has the reason)"
    assert "db.internal" not in stored.text and PASSWORD not in stored.text


def test_an_embed_call_waits_the_configured_timeout_and_says_so(silent_url: str) -> None:
    embedder = OllamaEmbedder("nomic-embed-text", silent_url, timeout_s=0.5)
    try:
        raised = raised_within(4.0, lambda: embedder.embed(["hello"]))
    finally:
        embedder.close()
    assert isinstance(raised, EmbeddingTimeout), raised
    assert str(raised) == f"ollama embedding request to {silent_url}/api/embed: no answer within 0.5 s"


def test_an_embedders_errors_name_the_http_status_or_the_connection_failure() -> None:
    with StubModelServer() as stub:
        stub.fail_next(400)  # the lowest client error
        embedder = OllamaEmbedder("nomic-embed-text", stub.url, timeout_s=5)
        with pytest.raises(EmbeddingError) as caught:
            embedder.embed(["hello"])
        embedder.close()
        url = stub.url
    assert str(caught.value).startswith(f"ollama embedding request to {url}/api/embed failed: HTTP 400 ")
    refused = OllamaEmbedder("nomic-embed-text", f"http://127.0.0.1:{closed_port()}", timeout_s=5)
    with pytest.raises(EmbeddingError) as caught:
        refused.embed(["hello"])
    assert "Connection refused" in str(caught.value)  # the reason, not just "failed"


def test_an_embedder_url_with_a_trailing_slash_is_requested_and_named_without_it() -> None:
    with StubModelServer() as stub:
        embedder = OllamaEmbedder("nomic-embed-text", with_credentials(stub.url) + "/", timeout_s=5)
        assert embedder.embed(["tea"]).shape == (1, 64)
        embedder.close()
        assert [r.path for r in stub.requests] == ["/api/embed"]
    port = closed_port()
    refused = OllamaEmbedder("nomic-embed-text", with_credentials(f"http://127.0.0.1:{port}") + "/", timeout_s=5)
    with pytest.raises(EmbeddingError) as caught:
        refused.embed(["tea"])
    assert f"ollama embedding request to http://svc:***@127.0.0.1:{port}/api/embed failed: " in str(caught.value)


def test_an_embedder_sends_at_most_64_texts_per_request_by_default_and_at_least_one() -> None:
    with StubModelServer() as stub:
        default = OllamaEmbedder("nomic-embed-text", stub.url, timeout_s=5)
        assert default.embed([f"text {i}" for i in range(65)]).shape == (65, 64)
        one = OllamaEmbedder("nomic-embed-text", stub.url, timeout_s=5, batch_size=0)  # at least one per request
        assert one.embed(["a", "b"]).shape == (2, 64)
        default.close()
        one.close()
        sizes = [len(r.body["input"]) for r in stub.requests_to("/api/embed")]
    assert sizes == [64, 1, 1, 1]


def test_an_embedder_without_a_base_url_is_refused_with_its_name() -> None:
    with pytest.raises(ValueError, match=r"^embedding provider 'ollama' needs a base_url$"):
        OllamaEmbedder("nomic-embed-text", "")


@pytest.mark.parametrize(
    ("url", "split"),
    [
        ("http://svc:p@ss@10.0.0.5:11434/v1", ("http://10.0.0.5:11434/v1", ("svc", "p@ss"))),  # the last '@' ends it
        ("http://svc:pa:ss@10.0.0.5:11434", ("http://10.0.0.5:11434", ("svc", "pa:ss"))),  # the first ':' splits it
        ("https://tok3n@host/v1", ("https://host/v1", ("tok3n", ""))),
    ],
)
def test_split_userinfo_takes_the_last_at_and_the_first_colon(url: str, split: tuple[str, Any]) -> None:
    assert split_userinfo(url) == split


def test_the_index_check_names_no_embedder_error(
    coordinator: MemoryCoordinator, client: TestClient, monkeypatch: pytest.MonkeyPatch
) -> None:
    """/health's index probe meets an embedder error (its text names the service's URL): the open
    check says only that the embedder is unavailable."""

    def failing(_namespace: str) -> Any:
        raise EmbeddingError(f"ollama embedding request to http://svc:{PASSWORD}@10.0.0.5:11434/api/embed failed")

    monkeypatch.setattr(coordinator.services.semantic, "store", failing)
    body = client.get("/health").json()
    assert body["checks"]["memory-semantic"] == {
        "healthy": False,
        "reason": "embedder unavailable (the server log has the reason)",
    }
    assert "10.0.0.5" not in str(body)


def test_an_embedder_caches_the_last_256_queries() -> None:
    """``embed_one`` (a search's query) is served from a 256-entry LRU: the 257th distinct query
    evicts the oldest, which then costs a request again."""
    with StubModelServer() as stub:
        embedder = OllamaEmbedder("nomic-embed-text", stub.url, timeout_s=5)
        for i in range(256):
            embedder.embed_one(f"query {i}")
        embedder.embed_one("query 0")  # still cached
        asked = len(stub.requests_to("/api/embed"))
        embedder.embed_one("query 256")  # evicts "query 1", the least recently used
        embedder.embed_one("query 0")
        embedder.embed_one("query 1")
        embedder.close()
        requests = stub.requests_to("/api/embed")
    assert asked == 256
    assert [r.body["input"] for r in requests[256:]] == [["query 256"], ["query 1"]]


def test_health_names_the_search_mode_hybrid_while_the_embedder_serves(client: TestClient) -> None:
    """README: hybrid is the default search mode; /health says bm25 only when the embedder is down."""
    semantic = client.get("/health").json()["tiers"]["semantic"]
    assert (semantic["available"], semantic["searchMode"], semantic["embedder"]) == (True, "hybrid", "onnx")


def test_an_embedders_answer_is_checked_and_each_fault_named(monkeypatch: pytest.MonkeyPatch) -> None:
    """What the service answers (its ``embeddings``), faked behind the HTTP call: garbage, a wrong
    count, no dimensions, a changed dimension and non-finite values are each an EmbeddingError that
    says which; a one-dimensional answer is valid."""
    embedder = OllamaEmbedder("nomic-embed-text", "http://127.0.0.1:9", timeout_s=5)
    answers: list[Any] = []
    monkeypatch.setattr(embedder, "_post", lambda payload, timeout_s=None: answers.pop(0))

    def fault(answer: Any, texts: list[str]) -> str:
        answers.append({"embeddings": answer} if isinstance(answer, list) else answer)
        with pytest.raises(EmbeddingError) as caught:
            embedder.embed(texts)
        return str(caught.value)

    assert fault([["a", "b"]], ["x"]).startswith("ollama returned malformed embeddings: ")
    assert fault([[1.0, 2.0]], ["x", "y"]) == "ollama returned embeddings of shape (1, 2) for 2 texts"
    assert fault([[], []], ["x", "y"]) == "ollama returned embeddings of shape (2, 0) for 2 texts"
    assert fault([[1.0, float("nan")]], ["x"]) == "ollama returned non-finite embedding values"
    assert (
        fault({"error": "model not found"}, ["x"])
        == "ollama answered without 'embeddings': {'error': 'model not found'}"
    )
    answers.append({"embeddings": [[3.0]]})
    assert embedder.embed(["x"]).tolist() == [[1.0]]  # one dimension, normalised
    assert fault([[1.0, 2.0]], ["x"]) == "ollama returned 2-dim embeddings, earlier 1-dim"
    embedder.close()
