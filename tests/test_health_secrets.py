"""Issue 15, "safe to expose": service URLs' credentials stay out of the server log, and ``/health``
tells a silent remote embedder from a working one within a bounded time.

Credentials: each client that talks to a configured URL (the remote embedder, the LLM slots, the
Prefect API) is run against a refused port or a local stub with ``user:secret@`` in its URL; the log
must never hold the password and must still name the host and port. ``/health``: an Ollama embedder
whose service accepts the connection and never answers must be reported degraded in a few seconds,
one that answers must be ok, probed at most once per cache period, and the local ONNX default is
never probed.
"""

from __future__ import annotations

import base64
import logging
import os
import socket
import subprocess
import sys
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest
from fastapi.testclient import TestClient
from prometheus_client import CollectorRegistry

from agtos.config import EmbeddingConfig, LLMSlot, Settings
from agtos.memory.coordinator import MemoryCoordinator
from agtos.memory.resource_guard import ActivityTracker, ResourceGuard
from agtos.providers.embeddings import EmbeddingError, OllamaEmbedder
from agtos.providers.llm import LLMError, OllamaProvider
from agtos.serving.app import create_app
from agtos.tasks.url_credentials import mask_urls, split_userinfo
from tests.helpers import silent_listener, user
from tests.stub_servers import StubModelServer

PASSWORD = "secret-Pa55"
BASIC = "Basic " + base64.b64encode(f"svc:{PASSWORD}".encode()).decode()


def closed_port() -> int:
    """A loopback port nothing listens on (a connection is refused at once)."""
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


def with_credentials(url: str) -> str:
    return url.replace("http://", f"http://svc:{PASSWORD}@", 1)


@pytest.fixture
def silent_server() -> Iterator[int]:
    """A port that accepts connections and never answers (a hung model server)."""
    with silent_listener() as port:
        yield port


# -- the masking helper --------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("text", "masked"),
    [
        ("http://user:secret@127.0.0.1:9/api", "http://user:***@127.0.0.1:9/api"),
        ("redis://:secret@db:6379/0", "redis://:***@db:6379/0"),
        ("https://tok3n@host/v1", "https://***@host/v1"),  # a lone user name is often a token
        ("http://u:p@ss@h:1/x", "http://u:***@h:1/x"),  # an unencoded '@' in the password
        ("for url 'http://a:b@h:1/p' and http://c:d@k:2", "for url 'http://a:***@h:1/p' and http://c:***@k:2"),
        ("http://127.0.0.1:9/api failed for ann@example.org", "http://127.0.0.1:9/api failed for ann@example.org"),
    ],
)
def test_mask_urls_hides_each_urls_credentials_and_nothing_else(text: str, masked: str) -> None:
    assert mask_urls(text) == masked


def test_split_userinfo_gives_the_bare_url_and_the_decoded_credentials() -> None:
    assert split_userinfo("http://svc:p%40ss@10.0.0.5:11434/v1") == ("http://10.0.0.5:11434/v1", ("svc", "p@ss"))
    assert split_userinfo("http://10.0.0.5:11434") == ("http://10.0.0.5:11434", None)


# -- clients: errors and logs name host:port, never the password ------------------------------------------


def test_an_unreachable_embedder_error_names_host_and_port_masked() -> None:
    port = closed_port()
    embedder = OllamaEmbedder("in-house", with_credentials(f"http://127.0.0.1:{port}"), timeout_s=2)
    with pytest.raises(EmbeddingError) as caught:
        embedder.embed(["hello"])
    assert f"http://svc:***@127.0.0.1:{port}/api/embed" in str(caught.value)
    assert PASSWORD not in str(caught.value)


def test_url_credentials_still_authenticate_and_httpx_logs_omit_them(caplog: pytest.LogCaptureFixture) -> None:
    caplog.set_level(logging.DEBUG)
    with StubModelServer() as stub:
        embedder = OllamaEmbedder("in-house", with_credentials(stub.url), timeout_s=5)
        assert embedder.embed(["tea in the morning"]).shape == (1, 64)
        llm = OllamaProvider("ollama", "llama3", with_credentials(stub.url), timeout_s=5)
        assert llm.chat([{"role": "user", "content": "hi"}]) == "stub reply"
        host_port = stub.url.removeprefix("http://")
    assert [r.headers.get("authorization") for r in stub.requests] == [BASIC, BASIC]  # sent as Basic auth
    assert f"POST http://{host_port}/api/embed" in caplog.text  # httpx's request log line, bare URL
    assert PASSWORD not in caplog.text


def test_an_llm_http_error_names_no_password() -> None:
    with StubModelServer() as stub:
        stub.fail_next(500)
        llm = OllamaProvider("ollama", "llama3", with_credentials(stub.url) + "/", timeout_s=5)
        with pytest.raises(LLMError) as caught:
            llm.chat([{"role": "user", "content": "hi"}])
        host_port = stub.url.removeprefix("http://")
    assert "500" in str(caught.value) and host_port in str(caught.value)
    assert PASSWORD not in str(caught.value)


def test_the_guards_ollama_probe_logs_no_password(caplog: pytest.LogCaptureFixture) -> None:
    """The resource guard asks a configured Ollama's ``/api/ps`` (its LLM slot's base URL)."""
    caplog.set_level(logging.DEBUG)
    with StubModelServer() as stub:
        stub.fail_next(500, path_suffix="/api/ps")
        for _ in range(2):  # an HTTP error, then an answer
            guard = ResourceGuard(
                LLMSlot(provider="ollama", base_url=with_credentials(stub.url)),
                activity=ActivityTracker(),
                loadavg=lambda: (0.0, 0.0, 0.0),
                registry=CollectorRegistry(),
            )
            assert guard.check().reason == "idle"
        host_port = stub.url.removeprefix("http://")
    assert [r.headers.get("authorization") for r in stub.requests_to("/api/ps")] == [BASIC, BASIC]
    assert f"GET http://{host_port}/api/ps" in caplog.text
    assert PASSWORD not in caplog.text


def test_the_served_api_logs_no_service_credentials(redis_url: str, key_prefix: str, tmp_path: Path) -> None:
    """``agtos serve`` with every configured URL carrying a password: a refused embedder, LLM slots
    answering HTTP 500, a Prefect API that knows no deployment, and Redis itself (which accepts any
    password for its default user); ingest, search, ask and a maintenance run, then its output."""
    dead, port = closed_port(), closed_port()
    log_path = tmp_path / "serve.log"
    with StubModelServer() as stub:
        stub.fail_next(500, times=50, path_suffix="/api/chat")
        env = {
            **os.environ,
            "REDIS_URL": redis_url.replace("redis://", f"redis://default:{PASSWORD}@", 1),
            "AGTOS_KEY_PREFIX": key_prefix,
            "AGTOS_DATA_DIR": str(tmp_path / "data"),
            "AGTOS_CONFIG_DIR": str(tmp_path / "cfg"),
            "AGTOS_EMBEDDING_PROVIDER": "ollama",
            "AGTOS_EMBEDDING_MODEL": "in-house",
            "AGTOS_EMBEDDING_BASE_URL": with_credentials(f"http://127.0.0.1:{dead}"),
            "AGTOS_EMBEDDING_TIMEOUT_S": "2",
            "AGTOS_LLM_PROVIDER": "ollama",
            "AGTOS_LLM_MODEL": "llama3",
            "AGTOS_LLM_BASE_URL": with_credentials(stub.url),
            "AGTOS_LLM_TIMEOUT_S": "5",
            "PREFECT_API_URL": with_credentials(stub.url) + "/api",
        }
        with log_path.open("w") as out:
            server = subprocess.Popen(
                [sys.executable, "-m", "agtos.cli", "serve", "--port", str(port)], env=env, stdout=out, stderr=out
            )
            try:
                _exercise(f"http://127.0.0.1:{port}", server, log_path)
            finally:
                server.terminate()
                server.wait(timeout=30)
        stub_host_port = stub.url.removeprefix("http://")
    log = log_path.read_text()
    assert PASSWORD not in log
    assert f"http://svc:***@127.0.0.1:{dead}/api/embed" in log  # the embedder's failure, masked
    assert f"http://svc:***@{stub_host_port}/api/deployments" in log  # Prefect refused the run, masked
    assert f"'http://{stub_host_port}/api/chat'" in log  # the LLM's HTTP 500 names the bare URL


def _exercise(base: str, server: subprocess.Popen[bytes], log_path: Path) -> None:
    deadline = time.monotonic() + 90
    while True:
        assert server.poll() is None, "agtos serve exited"
        assert time.monotonic() < deadline, "agtos serve did not answer /health in 90 s"
        try:
            httpx.get(base + "/health", timeout=5)
            break
        except httpx.TransportError:
            time.sleep(0.3)
    turns = [{"role": "user", "content": "My sister Maria lives in Berlin."}, {"role": "assistant", "content": "ok"}]
    with httpx.Client(base_url=base, headers=user("ann"), timeout=60) as http:
        stored = http.post("/api/memory/conversations", json={"sessions": [{"id": "b1", "turns": turns}]})
        assert stored.status_code == 200, stored.text
        assert http.get("/api/memory/search", params={"q": "Maria"}).status_code == 200
        assert http.post("/api/memory/ask", json={"question": "Where does Maria live?"}).status_code == 200
        assert http.post("/api/memory/maintain").status_code == 202
    for _ in range(100):  # handed to Prefect first, which refuses it
        if "Prefect did not take" in log_path.read_text():
            break
        time.sleep(0.3)


# -- /health and the remote embedder ---------------------------------------------------------------------


def _app(settings: Settings, embedding: EmbeddingConfig) -> tuple[MemoryCoordinator, TestClient]:
    coordinator = MemoryCoordinator(settings.with_overrides(embedding=embedding))
    return coordinator, TestClient(create_app(coordinator=coordinator))


def test_health_reports_a_silent_embedder_degraded_within_seconds(settings: Settings, silent_server: int) -> None:
    """A known model (its dimension is published) at a service that never answers: before, /health
    hung for the 30 s request timeout and then said ok."""
    embedding = EmbeddingConfig(
        provider="ollama", model="nomic-embed-text", base_url=f"http://127.0.0.1:{silent_server}"
    )
    coordinator, app = _app(settings, embedding)
    try:
        with app as client:
            started = time.monotonic()
            first = client.get("/health")
            waited = time.monotonic() - started
            started = time.monotonic()
            second = client.get("/health")  # cached: no second wait
            cached = time.monotonic() - started
    finally:
        coordinator.close()
    assert first.status_code == 200 and waited < 5.0
    body = first.json()
    assert body["status"] == "degraded" and "semantic" in body["degraded"]
    assert body["tiers"]["semantic"]["error"] == "embedder did not answer within 2 s"
    assert body["tiers"]["semantic"]["available"] is False
    assert str(silent_server) not in first.text
    assert cached < 1.0 and second.json()["tiers"]["semantic"]["available"] is False


def test_health_probes_an_answering_embedder_once_per_period(settings: Settings) -> None:
    with StubModelServer() as stub:
        embedding = EmbeddingConfig(provider="ollama", model="nomic-embed-text", base_url=with_credentials(stub.url))
        coordinator, app = _app(settings, embedding)
        try:
            with app as client:
                answers = [client.get("/health") for _ in range(3)]
        finally:
            coordinator.close()
        probes = stub.requests_to("/api/embed")
    assert [a.json()["status"] for a in answers] == ["ok", "ok", "ok"]
    semantic = answers[0].json()["tiers"]["semantic"]
    assert (semantic["available"], semantic["embedder"]) == (True, "ollama")
    assert 1 <= len(probes) <= 2  # the build's dimension probe and one health probe, not one per /health
    assert all(p.headers.get("authorization") == BASIC for p in probes)


def test_health_never_calls_the_local_default_model(
    coordinator: MemoryCoordinator, client: TestClient, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The bundled ONNX model is in process: loaded means available, so /health runs no inference."""
    embedder = coordinator.services.semantic.embedder
    calls: list[str] = []

    def counted(name: str) -> Callable[..., Any]:
        real = getattr(embedder, name)

        def call(*args: Any, **kwargs: Any) -> Any:
            calls.append(name)
            return real(*args, **kwargs)

        return call

    for name in ("embed", "embed_one"):
        monkeypatch.setattr(embedder, name, counted(name))
    answers = [client.get("/health") for _ in range(3)]
    assert [a.json()["tiers"]["semantic"]["available"] for a in answers] == [True, True, True]
    assert answers[0].json()["tiers"]["semantic"]["embedder"] == "onnx"
    assert calls == []
