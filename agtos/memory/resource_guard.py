"""ResourceGuard: may background LLM work (consolidation, lint) run on this machine now?

The decision tree, checked in order; the first step that answers wins:

1. policy ``always``                                   -> safe  ``policy-always``
2. the work's LLM is a cloud provider                   -> safe  ``cloud-provider``
3. the work's LLM is Ollama on a remote host            -> safe  ``remote-ollama``
4. a session is active                                  -> defer ``active-session``
5. a session ended less than ``recent_session_s`` ago   -> defer ``recent-session-end``
6. 1-minute load average > cpus x 0.8 (0.3 idle-only)   -> defer ``cpu-load``
7. local Ollama ``/api/ps`` shows a pinned model        -> defer ``ollama-model-pinned``
   otherwise                                            -> safe  ``idle``

A provider other than ``ollama``/``none`` whose ``base_url`` points at a local host
(a llama.cpp or vLLM server on this machine) is *not* treated as cloud: it falls
through to steps 4-6 like the built-in fallback does, and so does ``transformers``
(a model directory run in this process). Step 7 only applies to Ollama.
"""

from __future__ import annotations

import logging
import os
import re
import threading
import time
import weakref
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import datetime
from enum import StrEnum
from typing import Any, Generic, Protocol, TypeVar
from urllib.parse import urlsplit

from prometheus_client import REGISTRY, CollectorRegistry, Counter, Gauge

from agtos.config import LLMSlot, Settings
from agtos.tasks.url_credentials import mask_urls, split_userinfo

log = logging.getLogger(__name__)
T = TypeVar("T")

POLICY_ENV = "AGTOS_BACKGROUND_WORK_POLICY"
DEFAULT_LOCAL_HOSTS = frozenset({"localhost", "127.0.0.1", "::1", "0.0.0.0"})
DEFAULT_OLLAMA_BASE_URL = "http://127.0.0.1:11434"
NO_LLM_PROVIDERS = frozenset({"", "none", "builtin"})
IN_PROCESS_PROVIDERS = frozenset({"transformers"})  # local by construction: never "cloud"
PINNED_YEAR = 2100  # keep_alive=-1 makes Ollama report now + ~292 years (Go's max Duration)
YEAR_PREFIX = re.compile(r"^\s*(\d{4})-")

# machine-readable reasons
POLICY_ALWAYS = "policy-always"
CLOUD_PROVIDER = "cloud-provider"
REMOTE_OLLAMA = "remote-ollama"
ACTIVE_SESSION = "active-session"
RECENT_SESSION_END = "recent-session-end"
CPU_LOAD = "cpu-load"
OLLAMA_MODEL_PINNED = "ollama-model-pinned"
IDLE = "idle"

# run_when_safe outcomes
RAN = "ran"
GAVE_UP = "deferred-giving-up"

DEFER_COUNT_METRIC = "agtos_resource_guard_defer_count"  # exposed as ..._total
SAFE_GAUGE_METRIC = "agtos_background_work_safe"


class Policy(StrEnum):
    """``AGTOS_BACKGROUND_WORK_POLICY``."""

    auto = "auto"
    always = "always"
    idle_only = "idle-only"


def parse_policy(raw: str | None) -> Policy:
    """``auto`` (the default when unset or blank), ``always`` or ``idle-only``; else ValueError."""
    value = (raw or "").strip().lower()
    if not value:
        return Policy.auto
    try:
        return Policy(value)
    except ValueError:
        allowed = ", ".join(p.value for p in Policy)
        raise ValueError(f"{POLICY_ENV}={raw!r} is not one of: {allowed}") from None


@dataclass(frozen=True)
class GuardConfig:
    """Tunables of the guard (all have defaults; ``from_settings`` takes the ``AGTOS_BACKGROUND_*`` ones)."""

    policy: Policy = Policy.auto
    local_hosts: frozenset[str] = DEFAULT_LOCAL_HOSTS
    recent_session_s: float = 30.0
    cpu_factor: float = 0.8
    idle_only_cpu_factor: float = 0.3
    pinned_horizon_s: float = 365 * 86_400.0  # an expiry further out than this counts as pinned
    ollama_timeout_s: float = 2.0

    @classmethod
    def from_settings(cls, settings: Settings) -> GuardConfig:
        """The ``AGTOS_BACKGROUND_*`` settings (read by ``Settings.from_env``) as a guard config."""
        return cls(
            policy=parse_policy(settings.background_work_policy),
            local_hosts=DEFAULT_LOCAL_HOSTS | settings.background_local_hosts,
            recent_session_s=settings.background_recent_session_s,
        )

    def cpu_limit(self, cpus: int) -> float:
        factor = self.idle_only_cpu_factor if self.policy == Policy.idle_only else self.cpu_factor
        return max(1, cpus) * factor


@dataclass(frozen=True)
class GuardDecision:
    """The guard's answer: ``safe`` to run now or not, with a machine-readable ``reason``."""

    safe: bool
    reason: str
    detail: str = ""


class ActivitySource(Protocol):
    """What the guard needs to know about interactive use."""

    def active_session_count(self) -> int: ...

    def last_session_ended_at(self) -> float | None: ...


class ActivityTracker:
    """Thread-safe record of live sessions; a session idle longer than ``idle_timeout_s`` is inactive."""

    def __init__(self, idle_timeout_s: float = 600.0, clock: Callable[[], float] = time.time) -> None:
        self.idle_timeout_s = idle_timeout_s
        self._clock = clock
        self._lock = threading.Lock()
        self._last_seen: dict[tuple[str, str], float] = {}
        self._last_ended: float | None = None

    def session_started(self, user_id: str, session_id: str) -> None:
        """Mark the session active now."""
        with self._lock:
            self._last_seen[(user_id, session_id)] = self._clock()

    def turn(self, user_id: str, session_id: str) -> None:
        """A turn arrived: the session is (still) active."""
        self.session_started(user_id, session_id)

    def session_ended(self, user_id: str, session_id: str) -> None:
        """The session is over; remember when, for the ``recent-session-end`` step."""
        with self._lock:
            self._last_seen.pop((user_id, session_id), None)
            self._last_ended = self._clock()

    def active_session_count(self) -> int:
        """Sessions with activity within ``idle_timeout_s`` (idle ones stay known to ``idle_sessions``)."""
        with self._lock:
            cutoff = self._clock() - self.idle_timeout_s
            return sum(1 for seen in self._last_seen.values() if seen >= cutoff)

    def idle_sessions(self, older_than_s: float) -> list[tuple[str, str]]:
        """``(user, session)`` pairs silent for longer than ``older_than_s`` and never ended."""
        with self._lock:
            cutoff = self._clock() - older_than_s
            return [key for key, seen in self._last_seen.items() if seen <= cutoff]

    def last_session_ended_at(self) -> float | None:
        with self._lock:
            return self._last_ended


HttpGetJson = Callable[[str, float], Any]
"""``(url, timeout_s) -> parsed JSON``; any exception means "unreachable"."""


def httpx_get_json(url: str, timeout_s: float) -> Any:
    """The default HTTP getter."""
    import httpx

    bare, auth = split_userinfo(url)  # URL credentials go as Basic auth: httpx logs the URL it requests
    response = httpx.get(bare, auth=auth, timeout=timeout_s)
    response.raise_for_status()
    return response.json()


def url_host(base_url: str) -> str:
    """Lower-case host of a URL (``localhost`` for a URL without one); tolerates a missing scheme."""
    raw = base_url.strip()
    if raw and "://" not in raw:
        raw = "http://" + raw
    try:
        host = urlsplit(raw).hostname
    except ValueError:
        host = None
    return (host or "localhost").lower()


def parse_expiry(value: Any) -> datetime | None:
    """An Ollama ``expires_at`` (RFC 3339, up to nanoseconds) as a datetime; None if unreadable."""
    if not isinstance(value, str) or not value.strip():
        return None
    text = value.strip()
    if text.endswith(("Z", "z")):
        text = text[:-1] + "+00:00"
    text = re.sub(r"(\.\d{6})\d+", r"\1", text)  # Go prints nanoseconds
    try:
        return datetime.fromisoformat(text)
    except ValueError:
        return None


def is_pinned_expiry(value: Any, now_s: float, horizon_s: float) -> bool:
    """True for a model Ollama will not unload on its own.

    ``keep_alive: -1`` becomes Go's max Duration, so ``expires_at`` is ~292 years out
    (year >= 2100 here); the zero time ``0001-01-01T00:00:00Z`` is what Ollama reports
    while a runner has no expiry timer (held by a request, or pinned by some clients).
    Any expiry more than ``horizon_s`` ahead also counts.
    """
    match = YEAR_PREFIX.match(value) if isinstance(value, str) else None
    if match and (int(match.group(1)) >= PINNED_YEAR or int(match.group(1)) <= 1):
        return True
    expiry = parse_expiry(value)
    if expiry is None:
        return False
    if expiry.year >= PINNED_YEAR or expiry.year <= 1:
        return True
    if expiry.tzinfo is None:
        return False  # no offset: cannot compare reliably, and it is not a sentinel
    return expiry.timestamp() - now_s > horizon_s


@dataclass
class _GuardMetrics:
    defer_count: Counter
    safe: Gauge


_METRICS: weakref.WeakKeyDictionary[CollectorRegistry, _GuardMetrics] = weakref.WeakKeyDictionary()
_METRICS_LOCK = threading.Lock()


def guard_metrics(registry: CollectorRegistry = REGISTRY) -> _GuardMetrics:
    """The guard's collectors in ``registry``, registered once however many guards share it."""
    with _METRICS_LOCK:
        metrics = _METRICS.get(registry)
        if metrics is None:
            metrics = _GuardMetrics(
                defer_count=Counter(
                    DEFER_COUNT_METRIC,
                    "Background LLM work deferred by the resource guard, by reason.",
                    ["reason"],
                    registry=registry,
                ),
                safe=Gauge(
                    SAFE_GAUGE_METRIC,
                    "1 when the last resource-guard decision allowed background work, else 0.",
                    registry=registry,
                ),
            )
            _METRICS[registry] = metrics
        return metrics


class ResourceGuard:
    """Decides whether background LLM work may run now (see the module docstring)."""

    def __init__(
        self,
        slot: LLMSlot | None = None,
        *,
        config: GuardConfig | None = None,
        activity: ActivitySource | None = None,
        clock: Callable[[], float] = time.time,
        loadavg: Callable[[], tuple[float, float, float]] | None = None,
        cpu_count: Callable[[], int | None] = os.cpu_count,
        http_get: HttpGetJson = httpx_get_json,
        registry: CollectorRegistry = REGISTRY,
    ) -> None:
        self.slot = slot or LLMSlot()
        self.config = config or GuardConfig()
        self.activity: ActivitySource = activity or ActivityTracker(clock=clock)
        self._clock = clock
        self._loadavg = loadavg or _os_loadavg
        self._cpu_count = cpu_count
        self._http_get = http_get
        self.metrics = guard_metrics(registry)

    def check(self, slot: LLMSlot | None = None) -> GuardDecision:
        """Walk the decision tree for ``slot`` (default: the guard's own) and record the metrics."""
        decision = self._decide(slot or self.slot)
        if not decision.safe:
            self.metrics.defer_count.labels(reason=decision.reason).inc()
        self.metrics.safe.set(1 if decision.safe else 0)
        log.debug("resource guard: %s (%s) %s", decision.reason, decision.safe, decision.detail)
        return decision

    def _decide(self, slot: LLMSlot) -> GuardDecision:
        cfg = self.config
        if cfg.policy == Policy.always:
            return GuardDecision(True, POLICY_ALWAYS, f"{POLICY_ENV}=always")
        provider = slot.provider.strip().lower()
        host = url_host(slot.base_url or DEFAULT_OLLAMA_BASE_URL) if provider == "ollama" else ""
        if provider not in NO_LLM_PROVIDERS | IN_PROCESS_PROVIDERS and provider != "ollama":
            cloud_host = url_host(slot.base_url) if slot.base_url else ""
            if cloud_host not in cfg.local_hosts:
                return GuardDecision(True, CLOUD_PROVIDER, f"{provider} at {cloud_host or 'its default URL'}")
        if provider == "ollama" and host not in cfg.local_hosts:
            return GuardDecision(True, REMOTE_OLLAMA, f"ollama at {host}")

        active = self.activity.active_session_count()
        if active > 0:
            return GuardDecision(False, ACTIVE_SESSION, f"{active} active session(s)")
        now = self._clock()
        ended = self.activity.last_session_ended_at()
        if ended is not None and now - ended < cfg.recent_session_s:
            return GuardDecision(
                False,
                RECENT_SESSION_END,
                f"last session ended {now - ended:.1f}s ago (< {cfg.recent_session_s:g}s)",
            )
        load = self._loadavg()[0]
        limit = cfg.cpu_limit(self._cpu_count() or 1)
        if load > limit:
            return GuardDecision(False, CPU_LOAD, f"load {load:.2f} > {limit:.2f} ({cfg.policy.value})")
        if provider == "ollama":
            pinned = self._pinned_models(slot.base_url or DEFAULT_OLLAMA_BASE_URL, now)
            if pinned:
                return GuardDecision(False, OLLAMA_MODEL_PINNED, "pinned: " + ", ".join(pinned))
        return GuardDecision(True, IDLE, f"load {load:.2f} <= {limit:.2f}")

    def _pinned_models(self, base_url: str, now: float) -> list[str]:
        """Names of models ``/api/ps`` reports as never expiring; [] when unreachable or unreadable."""
        url = base_url.rstrip("/") + "/api/ps"
        try:
            body = self._http_get(url, self.config.ollama_timeout_s)
        except Exception as exc:  # unreachable Ollama must not block background work
            log.debug("ollama /api/ps unreachable at %s: %s", mask_urls(url), mask_urls(str(exc)))
            return []
        models = body.get("models") if isinstance(body, dict) else None
        pinned: list[str] = []
        for model in models if isinstance(models, list) else []:
            if not isinstance(model, dict):
                continue
            if is_pinned_expiry(model.get("expires_at"), now, self.config.pinned_horizon_s):
                pinned.append(str(model.get("name") or model.get("model") or "?"))
        return pinned


def _os_loadavg() -> tuple[float, float, float]:
    try:
        return os.getloadavg()
    except (AttributeError, OSError):  # not available (Windows): never defer on load
        return (0.0, 0.0, 0.0)


@dataclass(frozen=True)
class RunOutcome(Generic[T]):
    """What ``run_when_safe`` did: ``ran`` or ``deferred-giving-up``, after how many checks."""

    status: str
    attempts: int
    reasons: list[str] = field(default_factory=list)
    result: T | None = None

    @property
    def ran(self) -> bool:
        return self.status == RAN


def run_when_safe(
    guard: ResourceGuard,
    work: Callable[[], T],
    retries: int = 5,
    delay_s: float = 60.0,
    sleep: Callable[[float], None] = time.sleep,
    *,
    backoff: float = 1.0,
    slot: LLMSlot | None = None,
) -> RunOutcome[T]:
    """Run ``work`` once the guard allows it, re-checking up to ``retries`` times.

    Waits ``delay_s`` before the first retry, multiplied by ``backoff`` each further
    retry (1.0: a constant 60 s). ``reasons`` lists every decision's reason in order.
    Exceptions from ``work`` propagate.
    """
    reasons: list[str] = []
    wait = delay_s
    for attempt in range(1, retries + 2):
        decision = guard.check(slot)
        reasons.append(decision.reason)
        if decision.safe:
            return RunOutcome(RAN, attempt, reasons, work())
        if attempt <= retries:
            sleep(wait)
            wait *= backoff
    return RunOutcome(GAVE_UP, retries + 1, reasons, None)
