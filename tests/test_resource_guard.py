"""ResourceGuard: each step of the decision tree, the three policies, metrics and retries."""

from __future__ import annotations

import json
import socket
import threading
from collections.abc import Iterator
from dataclasses import dataclass
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

import pytest
from fastapi import FastAPI
from fastapi.testclient import TestClient
from prometheus_client import CollectorRegistry, generate_latest

from agtos.config import LLMSlot, Settings
from agtos.memory.resource_guard import (
    ActivityTracker,
    GuardConfig,
    Policy,
    ResourceGuard,
    httpx_get_json,
    is_pinned_expiry,
    parse_policy,
    run_when_safe,
)
from agtos.serving.routers import metrics as metrics_router
from tests.stub_servers import StubModelServer

NOW = 1_800_000_000.0  # 2027-01-15
PINNED_FOREVER = "2318-03-26T18:47:46.155465147-07:00"  # keep_alive=-1: now + Go's max Duration
ZERO_TIME = "0001-01-01T00:00:00Z"
IN_FIVE_MINUTES = "2027-01-15T08:05:00Z"

LOCAL_OLLAMA = LLMSlot(provider="ollama", model="llama3", base_url="http://127.0.0.1:11434")
DEFAULT_OLLAMA = LLMSlot(provider="ollama", model="llama3")  # no base_url: the local default
REMOTE_OLLAMA = LLMSlot(provider="ollama", model="llama3", base_url="http://gpu-box.lan:11434")
OPENAI = LLMSlot(provider="openai", model="gpt-4o-mini", base_url="https://api.openai.com/v1")
OPENROUTER = LLMSlot(provider="openrouter", model="x", base_url="https://openrouter.ai/api/v1")
LOCAL_OPENAI_COMPAT = LLMSlot(provider="openai", model="qwen", base_url="http://localhost:8080/v1")
NO_LLM = LLMSlot()


@dataclass
class FakeActivity:
    active: int = 0
    ended_at: float | None = None

    def active_session_count(self) -> int:
        return self.active

    def last_session_ended_at(self) -> float | None:
        return self.ended_at


def ps_body(*expiries: str) -> dict[str, Any]:
    return {"models": [{"name": f"m{i}", "model": f"m{i}", "expires_at": e} for i, e in enumerate(expiries)]}


def make_guard(
    slot: LLMSlot = LOCAL_OLLAMA,
    *,
    policy: Policy = Policy.auto,
    active: int = 0,
    ended_ago: float | None = None,
    load: float = 0.0,
    cpus: int = 4,
    ps: dict[str, Any] | Exception | None = None,
    extra_hosts: frozenset[str] = frozenset(),
    registry: CollectorRegistry | None = None,
) -> tuple[ResourceGuard, list[str]]:
    """A guard with everything injected; also returns the URLs its HTTP getter was asked for."""
    asked: list[str] = []

    def http_get(url: str, timeout_s: float) -> Any:
        asked.append(url)
        if isinstance(ps, Exception):
            raise ps
        return ps if ps is not None else {"models": []}

    config = GuardConfig(policy=policy, local_hosts=GuardConfig().local_hosts | extra_hosts)
    activity = FakeActivity(active, None if ended_ago is None else NOW - ended_ago)
    guard = ResourceGuard(
        slot,
        config=config,
        activity=activity,
        clock=lambda: NOW,
        loadavg=lambda: (load, load, load),
        cpu_count=lambda: cpus,
        http_get=http_get,
        registry=registry or CollectorRegistry(),
    )
    return guard, asked


BUSY = {"active": 2, "ended_ago": 1.0, "load": 99.0, "ps": ps_body(PINNED_FOREVER)}

DECISIONS = [
    # 1. policy always beats everything
    pytest.param(LOCAL_OLLAMA, {"policy": Policy.always, **BUSY}, True, "policy-always", id="1-always"),
    # 2. cloud providers never compete for local resources
    pytest.param(OPENAI, {**BUSY}, True, "cloud-provider", id="2-openai"),
    pytest.param(OPENROUTER, {**BUSY}, True, "cloud-provider", id="2-openrouter"),
    pytest.param(OPENAI, {"policy": Policy.idle_only, **BUSY}, True, "cloud-provider", id="2-idle-only"),
    pytest.param(LOCAL_OPENAI_COMPAT, {"active": 1}, False, "active-session", id="2-local-compat-not-cloud"),
    # 3. remote Ollama, unless its host is configured as local
    pytest.param(REMOTE_OLLAMA, {**BUSY}, True, "remote-ollama", id="3-remote"),
    pytest.param(
        REMOTE_OLLAMA,
        {"active": 1, "extra_hosts": frozenset({"gpu-box.lan"})},
        False,
        "active-session",
        id="3-extra-local-host",
    ),
    # 4. active sessions
    pytest.param(LOCAL_OLLAMA, {"active": 1}, False, "active-session", id="4-ollama"),
    pytest.param(DEFAULT_OLLAMA, {"active": 1}, False, "active-session", id="4-default-url-is-local"),
    pytest.param(NO_LLM, {"active": 3}, False, "active-session", id="4-builtin"),
    # 5. a session that just ended
    pytest.param(LOCAL_OLLAMA, {"ended_ago": 10.0}, False, "recent-session-end", id="5-10s"),
    pytest.param(LOCAL_OLLAMA, {"ended_ago": 31.0}, True, "idle", id="5-31s-ok"),
    # 6. CPU load: 4 cpus x 0.8 = 3.2 (auto), x 0.3 = 1.2 (idle-only)
    pytest.param(LOCAL_OLLAMA, {"load": 3.3}, False, "cpu-load", id="6-auto-over"),
    pytest.param(LOCAL_OLLAMA, {"load": 3.1}, True, "idle", id="6-auto-under"),
    pytest.param(LOCAL_OLLAMA, {"policy": Policy.idle_only, "load": 1.3}, False, "cpu-load", id="6-idle-only-over"),
    pytest.param(LOCAL_OLLAMA, {"policy": Policy.idle_only, "load": 1.1}, True, "idle", id="6-idle-only-under"),
    pytest.param(NO_LLM, {"load": 3.3}, False, "cpu-load", id="6-builtin"),
    # 7. Ollama /api/ps
    pytest.param(LOCAL_OLLAMA, {"ps": ps_body(PINNED_FOREVER)}, False, "ollama-model-pinned", id="7-forever"),
    pytest.param(LOCAL_OLLAMA, {"ps": ps_body(ZERO_TIME)}, False, "ollama-model-pinned", id="7-zero-time"),
    pytest.param(
        LOCAL_OLLAMA,
        {"ps": ps_body(IN_FIVE_MINUTES, PINNED_FOREVER)},
        False,
        "ollama-model-pinned",
        id="7-one-of-two",
    ),
    pytest.param(LOCAL_OLLAMA, {"ps": ps_body(IN_FIVE_MINUTES)}, True, "idle", id="7-expiring"),
    pytest.param(LOCAL_OLLAMA, {"ps": {"models": []}}, True, "idle", id="7-nothing-loaded"),
    pytest.param(LOCAL_OLLAMA, {"ps": ConnectionError("refused")}, True, "idle", id="7-unreachable"),
    pytest.param(LOCAL_OLLAMA, {"ps": {"unexpected": 1}}, True, "idle", id="7-odd-body"),
    pytest.param(NO_LLM, {"ps": ps_body(PINNED_FOREVER)}, True, "idle", id="7-not-ollama"),
]


@pytest.mark.parametrize(("slot", "kwargs", "safe", "reason"), DECISIONS)
def test_decision_tree(slot: LLMSlot, kwargs: dict[str, Any], safe: bool, reason: str) -> None:
    guard, _ = make_guard(slot, **kwargs)
    decision = guard.check()
    assert (decision.safe, decision.reason) == (safe, reason), decision.detail
    assert decision.detail


def test_ps_is_asked_at_the_slot_base_url_only_when_needed() -> None:
    guard, asked = make_guard(LLMSlot(provider="ollama", base_url="http://localhost:11999/"))
    assert guard.check().reason == "idle"
    assert asked == ["http://localhost:11999/api/ps"]
    busy, asked_busy = make_guard(LOCAL_OLLAMA, active=1)
    busy.check()
    assert asked_busy == []  # earlier steps answer first


def test_check_can_take_another_slot() -> None:
    guard, _ = make_guard(LOCAL_OLLAMA, active=1)
    assert guard.check().reason == "active-session"
    assert guard.check(OPENAI).reason == "cloud-provider"


@pytest.mark.parametrize(
    ("value", "pinned"),
    [
        (PINNED_FOREVER, True),
        ("2318-03-26T18:47:46Z", True),
        (ZERO_TIME, True),
        ("2100-01-01T00:00:00Z", True),
        ("2029-01-15T08:00:00+00:00", True),  # two years out: beyond the 365-day horizon
        (IN_FIVE_MINUTES, False),
        ("2027-01-15T08:00:00", False),  # no offset, near: not a sentinel
        ("", False),
        (None, False),
        ("garbage", False),
    ],
)
def test_pinned_expiry(value: Any, pinned: bool) -> None:
    assert is_pinned_expiry(value, NOW, 365 * 86_400.0) is pinned


@pytest.mark.parametrize(
    ("raw", "policy"),
    [
        (None, Policy.auto),
        ("", Policy.auto),
        ("auto", Policy.auto),
        ("ALWAYS", Policy.always),
        (" idle-only ", Policy.idle_only),
    ],
)
def test_parse_policy(raw: str | None, policy: Policy) -> None:
    assert parse_policy(raw) is policy


@pytest.mark.parametrize("raw", ["sometimes", "idle_only", "never"])
def test_invalid_policy_is_rejected(raw: str, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("AGTOS_BACKGROUND_WORK_POLICY", raw)
    with pytest.raises(ValueError, match="AGTOS_BACKGROUND_WORK_POLICY"):
        Settings.from_env()


def test_config_from_env(monkeypatch: pytest.MonkeyPatch) -> None:
    """The production path: the environment, read by Settings.from_env, reaches the guard."""
    monkeypatch.setenv("AGTOS_BACKGROUND_WORK_POLICY", "idle-only")
    monkeypatch.setenv("AGTOS_BACKGROUND_LOCAL_HOSTS", "gpu-box.lan, Host.Docker.Internal")
    monkeypatch.setenv("AGTOS_BACKGROUND_RECENT_SESSION_S", "45")
    config = GuardConfig.from_settings(Settings.from_env())
    assert config.policy is Policy.idle_only
    assert config.local_hosts == {"gpu-box.lan", "host.docker.internal", "localhost", "127.0.0.1", "::1", "0.0.0.0"}
    assert config.recent_session_s == 45.0
    for name in ("AGTOS_BACKGROUND_WORK_POLICY", "AGTOS_BACKGROUND_LOCAL_HOSTS", "AGTOS_BACKGROUND_RECENT_SESSION_S"):
        monkeypatch.delenv(name)
    assert GuardConfig.from_settings(Settings.from_env()) == GuardConfig(
        policy=Policy.auto, local_hosts=frozenset({"localhost", "127.0.0.1", "::1", "0.0.0.0"}), recent_session_s=30.0
    )


def test_activity_tracker_counts_and_expires_idle_sessions() -> None:
    now = [NOW]
    tracker = ActivityTracker(idle_timeout_s=600.0, clock=lambda: now[0])
    assert (tracker.active_session_count(), tracker.last_session_ended_at()) == (0, None)
    tracker.session_started("alice", "s1")
    tracker.turn("bob", "s2")
    tracker.turn("alice", "s1")
    assert tracker.active_session_count() == 2
    now[0] += 30
    tracker.session_ended("alice", "s1")
    assert tracker.active_session_count() == 1
    assert tracker.last_session_ended_at() == NOW + 30
    now[0] += 601  # bob went quiet
    assert tracker.active_session_count() == 0


def test_activity_tracker_is_thread_safe() -> None:
    tracker = ActivityTracker()

    def worker(n: int) -> None:
        for i in range(200):
            tracker.turn("u", f"s{n}-{i}")
            if i % 2:
                tracker.session_ended("u", f"s{n}-{i}")

    threads = [threading.Thread(target=worker, args=(n,)) for n in range(8)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert tracker.active_session_count() == 8 * 100


def test_guard_with_tracker_end_to_end() -> None:
    now = [NOW]
    tracker = ActivityTracker(clock=lambda: now[0])
    guard = ResourceGuard(
        NO_LLM,
        activity=tracker,
        clock=lambda: now[0],
        loadavg=lambda: (0.0, 0.0, 0.0),
        cpu_count=lambda: 4,
        registry=CollectorRegistry(),
    )
    tracker.turn("alice", "s1")
    assert guard.check().reason == "active-session"
    tracker.session_ended("alice", "s1")
    assert guard.check().reason == "recent-session-end"
    now[0] += 30
    assert guard.check().reason == "idle"


def test_metrics_count_defers_by_reason_and_track_safety() -> None:
    registry = CollectorRegistry()
    load = [9.0]
    guard = ResourceGuard(
        NO_LLM,
        activity=FakeActivity(),
        clock=lambda: NOW,
        loadavg=lambda: (load[0], 0.0, 0.0),
        cpu_count=lambda: 4,
        registry=registry,
    )

    def sample(name: str, **labels: str) -> float | None:
        return registry.get_sample_value(name, labels)

    guard.check()
    guard.check()
    assert sample("agtos_resource_guard_defer_count_total", reason="cpu-load") == 2
    assert sample("agtos_background_work_safe") == 0
    load[0] = 0.0
    guard.check()
    assert sample("agtos_background_work_safe") == 1
    assert sample("agtos_resource_guard_defer_count_total", reason="cpu-load") == 2

    # a second guard on the same registry shares the collectors instead of failing to register
    other, _ = make_guard(NO_LLM, active=1, registry=registry)
    other.check()
    assert sample("agtos_resource_guard_defer_count_total", reason="active-session") == 1
    assert sample("agtos_background_work_safe") == 0
    text = generate_latest(registry).decode()
    assert 'agtos_resource_guard_defer_count_total{reason="cpu-load"} 2.0' in text
    assert "agtos_background_work_safe 0.0" in text


class Sleeps(list[float]):
    def __call__(self, seconds: float) -> None:
        self.append(seconds)


def test_run_when_safe_retries_then_runs() -> None:
    activity = FakeActivity(active=1)
    guard, _ = make_guard(NO_LLM)
    guard.activity = activity
    sleeps = Sleeps()
    calls: list[int] = []

    def sleep(seconds: float) -> None:
        sleeps(seconds)
        if len(sleeps) == 2:
            activity.active = 0  # the user left during the second wait

    outcome = run_when_safe(guard, lambda: calls.append(1) or "done", retries=5, delay_s=0.01, sleep=sleep)
    assert outcome.ran and outcome.status == "ran"
    assert (outcome.attempts, outcome.result) == (3, "done")
    assert outcome.reasons == ["active-session", "active-session", "idle"]
    assert sleeps == [0.01, 0.01] and calls == [1]


def test_run_when_safe_gives_up_after_retries() -> None:
    guard, _ = make_guard(NO_LLM, load=50.0)
    sleeps = Sleeps()
    ran: list[int] = []
    outcome = run_when_safe(guard, lambda: ran.append(1), sleep=sleeps)
    assert not outcome.ran and outcome.status == "deferred-giving-up"
    assert outcome.attempts == 6 and outcome.reasons == ["cpu-load"] * 6
    assert sleeps == [60.0] * 5  # the default 5 x 60 s
    assert ran == [] and outcome.result is None


def test_run_when_safe_backoff_and_immediate_run() -> None:
    guard, _ = make_guard(NO_LLM, active=1)
    sleeps = Sleeps()
    outcome = run_when_safe(guard, lambda: None, retries=3, delay_s=1.0, sleep=sleeps, backoff=2.0)
    assert outcome.status == "deferred-giving-up" and sleeps == [1.0, 2.0, 4.0]
    idle, _ = make_guard(NO_LLM)
    sleeps_idle = Sleeps()
    assert run_when_safe(idle, lambda: 42, sleep=sleeps_idle).result == 42
    assert sleeps_idle == []


# -- the default HTTP getter against a real (tiny) HTTP server --------------------------------


class _PsHandler(BaseHTTPRequestHandler):
    body: bytes = b"{}"

    def do_GET(self) -> None:
        status = 200 if self.path == "/api/ps" else 404
        self.send_response(status)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(self.body)))
        self.end_headers()
        self.wfile.write(self.body)

    def log_message(self, *args: Any) -> None:
        pass


@pytest.fixture
def ps_server() -> Iterator[tuple[str, type[_PsHandler]]]:
    handler = type("Handler", (_PsHandler,), {})
    server = ThreadingHTTPServer(("127.0.0.1", 0), handler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    yield f"http://127.0.0.1:{server.server_address[1]}", handler
    server.shutdown()
    server.server_close()


def _real_http_guard(base_url: str) -> ResourceGuard:
    return ResourceGuard(
        LLMSlot(provider="ollama", base_url=base_url),
        config=GuardConfig(ollama_timeout_s=1.0),
        activity=FakeActivity(),
        clock=lambda: NOW,
        loadavg=lambda: (0.0, 0.0, 0.0),
        cpu_count=lambda: 4,
        http_get=httpx_get_json,
        registry=CollectorRegistry(),
    )


def test_real_http_pinned_model(ps_server: tuple[str, type[_PsHandler]]) -> None:
    url, handler = ps_server
    handler.body = json.dumps(ps_body(PINNED_FOREVER)).encode()
    assert _real_http_guard(url).check().reason == "ollama-model-pinned"
    handler.body = json.dumps(ps_body(IN_FIVE_MINUTES)).encode()
    assert _real_http_guard(url).check().reason == "idle"


def test_real_http_unreachable_ollama_does_not_defer() -> None:
    with socket.socket() as sock:  # a port nothing listens on
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
    assert _real_http_guard(f"http://127.0.0.1:{port}").check().reason == "idle"


def test_stub_ollama_with_an_expiring_model_or_an_error_does_not_defer() -> None:
    with StubModelServer(loaded_models=["llama3"]) as stub:
        guard = _real_http_guard(stub.url)
        assert guard.check().reason == "idle"  # the stub's models expire in 5 minutes
        stub.fail_next(500, path_suffix="/api/ps")
        assert guard.check().reason == "idle"
        assert len(stub.requests_to("/api/ps")) == 2


# -- GET /metrics ------------------------------------------------------------------------------


def test_metrics_endpoint_serves_the_app_registry() -> None:
    registry = CollectorRegistry()
    guard, _ = make_guard(NO_LLM, active=1, registry=registry)
    guard.check()
    app = FastAPI()
    app.state.metrics_registry = registry
    app.include_router(metrics_router.router)
    with TestClient(app) as client:
        response = client.get("/metrics")
    assert response.status_code == 200
    assert response.headers["content-type"].startswith("text/plain")
    assert 'agtos_resource_guard_defer_count_total{reason="active-session"} 1.0' in response.text
    assert "agtos_background_work_safe 0.0" in response.text


def test_metrics_endpoint_defaults_to_the_global_registry() -> None:
    app = FastAPI()
    app.include_router(metrics_router.router)
    with TestClient(app) as client:
        response = client.get("/metrics")
    assert response.status_code == 200
    assert "python_info" in response.text  # a default collector of prometheus_client.REGISTRY
