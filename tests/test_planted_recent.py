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
from agtos.tasks.url_credentials import mask_urls
from tests.helpers import user
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
    listener = socket.socket()
    listener.bind(("127.0.0.1", 0))
    listener.listen(16)
    held: list[socket.socket] = []
    stop = threading.Event()

    def accept() -> None:
        listener.settimeout(0.1)
        while not stop.is_set():
            try:
                held.append(listener.accept()[0])
            except OSError:
                continue

    thread = threading.Thread(target=accept, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{listener.getsockname()[1]}"
    finally:
        stop.set()
        thread.join(timeout=2)
        for conn in held:
            conn.close()
        listener.close()


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
    assert "PrefectHTTPStatusError: Client error '404 Not Found' for url" in message
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
    try:
        with TestClient(create_app(coordinator=coordinator)) as client:
            first = client.get("/health").json()
            clock.now += 16  # past the cache period: probed again, still refused
            second = client.get("/health").json()
    finally:
        coordinator.close()
    for body in (first, second):
        assert body["status"] == "degraded"
        assert body["tiers"]["semantic"]["error"] == "embedder unavailable (the server log has the reason)"
    logged = [r.getMessage() for r in caplog.records if r.getMessage().startswith("embedder health probe failed: ")]
    assert len(logged) == 1, logged
    assert f"http://svc:***@127.0.0.1:{port}" in logged[0] and PASSWORD not in caplog.text


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


def test_an_llm_base_url_with_a_trailing_slash_reaches_the_chat_route() -> None:
    with StubModelServer() as stub:
        llm = OllamaProvider("ollama", "llama3", with_credentials(stub.url) + "/", timeout_s=5)
        assert llm.chat([{"role": "user", "content": "hi"}]) == "stub reply"
        assert [r.path for r in stub.requests] == ["/api/chat"]


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
