"""Mixed load on the HTTP API: do reads stay fast while session ends are ingested?

    nice -n 10 python -m benchmarks.load [--clients 20,100] [--duration 20] [--layouts child,thread,process]
    nice -n 10 python -m benchmarks.load --url http://127.0.0.1:PORT [--pid PID]

Each client is one user in a closed loop (no think time): 50 % turn appends, 30 % searches,
15 % context requests, 5 % session ends (then a new session). Without ``--url`` it starts its own
server for each ``--layouts`` entry, one after the other, on a free loopback port against
``--redis-url`` under a fresh key prefix per layout (deleted at the end):

- ``child``: ``agtos serve`` as ``make run`` starts it: queue mode, its one ``agtos worker`` child
  process at the lowest CPU priority (``SCHED_IDLE``), no worker thread in the API process;
- ``thread``: ``agtos serve --worker thread``: a worker thread in the API process, yielding to requests;
- ``process``: ``agtos serve --no-worker`` and one ``agtos worker`` process at ``nice`` +10;
- ``workersN`` (e.g. ``workers2``): ``agtos serve --workers N --no-worker`` and one niced ``agtos worker``.

A layout may carry environment variables for its processes, ``+NAME=VALUE`` each (e.g.
``thread+AGTOS_ACCESS_LOG=false``); ``--rounds N`` runs the list of layouts N times in turn, so an
A/B of two settings is measured alternately under the same load on the box.

Before each level every user gets ``--warm`` ended sessions (so searches have episodes to find);
after it the benchmark waits for the ingestion queue to drain (``/health``). Prints per-endpoint
p50/p99 and errors, throughput, the RSS and CPU per request of the server processes (and of a
separate worker, and ``/health``'s live workers sampled during the load), whether the
queue drained, and with more than one layout a side-by-side table (``--gc-stats``: also the API
processes' garbage collections during each load, through ``AGTOS_GC_STATS_DIR``). Loopback only;
bounded by ``--duration`` and ``--drain-timeout``. Not a test (``tests/test_load_bench.py`` runs it tiny).
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import json
import os
import random
import re
import socket
import statistics
import subprocess
import sys
import tempfile
import time
import uuid
from collections import defaultdict
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any
from urllib.parse import urlencode, urlsplit

import httpx
import psutil  # type: ignore[import-untyped]
import redis

from agtos.serving.gc_tuning import summarise

MIX = (("append", 0.50), ("search", 0.30), ("context", 0.15), ("end", 0.05))
TOPICS = (
    "hiking in the Alps",
    "a sourdough starter",
    "the QZ-4417 keyboard",
    "Rust borrow checker errors",
    "a trip to Lisbon",
    "marathon training",
    "the garden tomatoes",
    "a jazz piano course",
)
SAYINGS = (
    "I prefer {t} to anything else this month.",
    "Remember that I spent the weekend on {t}.",
    "My sister recommended {t} and I loved it.",
    "I need to plan more time for {t} next week.",
)
QUERIES = (
    "what do I prefer",
    "weekend plans",
    "keyboard",
    "Lisbon trip",
    "training schedule",
    "tomatoes",
    "what did my sister recommend",
    "piano",
)
LOOPBACK = {"127.0.0.1", "localhost", "::1"}


LAYOUTS = {
    "child": "agtos serve (queue mode, its worker child process at SCHED_IDLE)",
    "thread": "agtos serve --worker thread (queue mode, worker thread in the API process)",
    "process": "agtos serve --no-worker + agtos worker (nice +10)",
}
WORKERS_LAYOUT = re.compile(r"^workers([1-8])$")


def layout_help(name: str) -> str:
    found = WORKERS_LAYOUT.match(name)
    if found:
        return f"agtos serve --workers {found.group(1)} --no-worker + agtos worker (nice +10)"
    return LAYOUTS[name]


@dataclass
class Level:
    clients: int
    layout: str = "external"
    seconds: float = 0.0
    latencies: dict[str, list[float]] = field(default_factory=lambda: defaultdict(list))
    errors: dict[str, int] = field(default_factory=lambda: defaultdict(int))
    samples: list[str] = field(default_factory=list)  # first few error descriptions
    rss_mib: float | None = None
    drained_s: float | None = None
    depth_after: int | None = None
    cpu_ms: dict[str, float] = field(default_factory=dict)  # CPU ms per request: "server", "generator"
    load: tuple[float, float] = (0.0, 0.0)  # the box's 1-minute load average as the timed load starts and ends
    alive: list[int] = field(default_factory=list)  # /health's workersAlive, sampled every 2 s during the load
    wall: tuple[float, float] = (0.0, 0.0)  # the timed load's start and end (time.time(), for --gc-stats)


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def pct_ms(values: list[float], q: float) -> float:
    if not values:
        return float("nan")
    if len(values) == 1:
        return values[0] * 1e3
    return statistics.quantiles(values, n=100, method="inclusive")[int(q) - 1] * 1e3


def turn(rng: random.Random) -> dict[str, str]:
    return {"role": rng.choice(("user", "assistant")), "content": rng.choice(SAYINGS).format(t=rng.choice(TOPICS))}


Params = dict[str, str] | None


@dataclass
class Reply:
    status_code: int
    content: bytes

    @property
    def text(self) -> str:
        return self.content.decode("utf-8", "replace")


class HttpFailed(Exception):
    """The request got no complete HTTP response (connection refused, reset or closed, a timeout)."""


class KeepAlive:
    """A minimal HTTP/1.1 client on one keep-alive connection, for one user's closed loop.

    The requests httpx sends (same method, target, headers, JSON body; ``Connection: keep-alive``),
    at a fraction of its CPU: httpx cost the generator ~1.5-2 ms per request on the same 2 cores as
    the server. Reads a ``Content-Length`` or chunked body; a connection idle for ``idle_s`` (below
    uvicorn's 5 s keep-alive) or closed by the server is opened again before the next request."""

    def __init__(self, url: str, timeout: float = 30.0, idle_s: float = 2.0) -> None:
        parts = urlsplit(url)
        self.host, self.port = parts.hostname or "127.0.0.1", parts.port or 80
        self.head = f"Host: {parts.netloc}\r\nAccept: */*\r\nConnection: keep-alive\r\n"
        self.timeout, self.idle_s = timeout, idle_s
        self.streams: tuple[asyncio.StreamReader, asyncio.StreamWriter] | None = None
        self.last = 0.0

    async def request(
        self,
        method: str,
        path: str,
        headers: dict[str, str],
        params: dict[str, str] | None = None,
        json_body: Any = None,
    ) -> Reply:
        try:
            return await asyncio.wait_for(self._exchange(method, path, headers, params, json_body), self.timeout)
        except (OSError, asyncio.IncompleteReadError, asyncio.LimitOverrunError, TimeoutError, ValueError) as exc:
            await self.close()
            raise HttpFailed(f"{type(exc).__name__}: {exc}") from exc

    async def _exchange(self, method: str, path: str, headers: dict[str, str], params: Params, json_body: Any) -> Reply:
        if self.streams is None or time.monotonic() - self.last > self.idle_s:
            await self.close()
            self.streams = await asyncio.open_connection(self.host, self.port)
        reader, writer = self.streams
        body = b"" if json_body is None else json.dumps(json_body).encode()
        lines = [f"{method} {path}{'?' + urlencode(params) if params else ''} HTTP/1.1\r\n{self.head}"]
        lines += [f"{name}: {value}\r\n" for name, value in headers.items()]
        if json_body is not None:
            lines.append("Content-Type: application/json\r\n")
        if body or method in ("POST", "PUT", "PATCH"):
            lines.append(f"Content-Length: {len(body)}\r\n")
        writer.write("".join(lines).encode("latin-1") + b"\r\n" + body)
        await writer.drain()
        status, fields = parse_head(await reader.readuntil(b"\r\n\r\n"))
        if fields.get("transfer-encoding", "").lower() == "chunked":
            content = await read_chunked(reader)
        else:
            content = await reader.readexactly(int(fields.get("content-length", "0")))
        if fields.get("connection", "").lower() == "close":
            await self.close()
        self.last = time.monotonic()
        return Reply(status, content)

    async def close(self) -> None:
        if self.streams is not None:
            writer, self.streams = self.streams[1], None
            writer.close()
            with contextlib.suppress(OSError):
                await writer.wait_closed()


def parse_head(head: bytes) -> tuple[int, dict[str, str]]:
    """The status code and the (lower-cased) header fields of a response head."""
    status_line, *rest = head.decode("latin-1").split("\r\n")
    fields = {}
    for line in rest:
        name, sep, value = line.partition(":")
        if sep:
            fields[name.strip().lower()] = value.strip()
    return int(status_line.split(" ", 2)[1]), fields


async def read_chunked(reader: asyncio.StreamReader) -> bytes:
    chunks = []
    while size := int((await reader.readuntil(b"\r\n")).split(b";", 1)[0], 16):
        chunks.append(await reader.readexactly(size))
        await reader.readexactly(2)
    await reader.readuntil(b"\r\n")  # the empty trailer
    return b"".join(chunks)


Http = KeepAlive | httpx.AsyncClient
Response = Reply | httpx.Response


async def send(
    http: Http,
    method: str,
    path: str,
    headers: dict[str, str],
    params: dict[str, str] | None = None,
    json_body: Any = None,
) -> Response:
    if isinstance(http, KeepAlive):
        return await http.request(method, path, headers, params, json_body)
    return await http.request(method, path, headers=headers, params=params, json=json_body)


class Client:
    """One user: a live session and a closed request loop."""

    def __init__(self, http: Http, index: int, seed: int, headers: dict[str, str]) -> None:
        self.http, self.user = http, f"load-{index}"
        self.rng = random.Random(seed * 1_000 + index)
        self.headers = {"X-User-Id": self.user, **headers}
        self.session = 0

    @property
    def sid(self) -> str:
        return f"s{self.session}"

    async def call(self, op: str) -> Response:
        h, r = self.headers, self.rng
        if op == "append":
            body_turns = {"turns": [turn(r)]}
            return await send(self.http, "POST", f"/api/memory/sessions/{self.sid}/turns", h, json_body=body_turns)
        if op == "search":
            return await send(self.http, "GET", "/api/memory/search", h, params={"q": r.choice(QUERIES)})
        if op == "context":
            body: dict[str, Any] = {"query": r.choice(QUERIES), "session_id": self.sid}
            return await send(self.http, "POST", "/api/memory/context", h, json_body=body)
        response = await send(self.http, "POST", f"/api/memory/sessions/{self.sid}/end", h)
        self.session += 1
        return response

    async def warm(self, sessions: int) -> None:
        """End ``sessions`` sessions, then search and build a context twice (every API process loads
        its models and index mirrors before the timed load, whichever process a request reaches)."""
        for _ in range(sessions):
            turns = [turn(self.rng) for _ in range(6)]
            path = f"/api/memory/sessions/{self.sid}/turns"
            await send(self.http, "POST", path, self.headers, json_body={"turns": turns})
            await self.call("end")
        for op in ("search", "context", "search", "context"):
            await self.call(op)

    async def loop(self, until: float, level: Level) -> None:
        names, weights = [name for name, _ in MIX], [weight for _, weight in MIX]
        while time.monotonic() < until:
            op = self.rng.choices(names, weights)[0]
            started = time.monotonic()
            try:
                response = await self.call(op)
                failed = response.status_code >= 400
                detail = f"{op} {response.status_code} {response.text[:120]}" if failed else ""
            except (httpx.HTTPError, HttpFailed) as exc:
                failed, detail = True, f"{op} {type(exc).__name__}: {exc}"
            level.latencies[op].append(time.monotonic() - started)
            if failed:
                level.errors[op] += 1
                if len(level.samples) < 5:
                    level.samples.append(detail)


def queue_state(url: str) -> dict[str, Any]:
    return dict(httpx.get(f"{url}/health", timeout=10).json()["checks"].get("ingest-queue") or {})


def cpu_seconds(*pids: int, workers_only: bool = False) -> float:
    """User + system CPU time of these processes and their children so far (``workers_only``: of
    the ``agtos worker`` processes among them)."""
    total = 0.0
    for pid in pids:
        proc = psutil.Process(pid)
        for p in [proc, *proc.children(recursive=True)]:
            with contextlib.suppress(psutil.Error):
                if not workers_only or "worker" in p.cmdline():
                    times = p.cpu_times()
                    total += times.user + times.system
    return total


async def run_level(
    url: str,
    clients: int,
    duration: float,
    seed: int,
    warm: int,
    headers: dict[str, str],
    pids: list[int],
    client: str = "raw",
) -> Level:
    """One timed level; ``pids``: the server's processes, whose CPU per request is reported beside the
    load generator's own (both share the machine). ``client``: ``raw`` (:class:`KeepAlive`) or ``httpx``."""
    level = Level(clients)
    # each user has its own client and connection: one pool shared by every user costs the generator
    # CPU per request that grows with the number of connections (httpcore scans its pool on every
    # request: 3.8 ms per request at 20 clients, 9.8 ms at 100, more than the server's 9 ms). Idle
    # connections are dropped before uvicorn's 5 s keep-alive closes them (a request sent on a
    # connection the server is closing fails with ReadError: the client's race, not a server error)
    limits = httpx.Limits(max_connections=1, max_keepalive_connections=1, keepalive_expiry=2.0)
    async with contextlib.AsyncExitStack() as stack:
        https: list[Http] = []
        for _ in range(clients):
            if client == "httpx":
                https.append(
                    await stack.enter_async_context(httpx.AsyncClient(base_url=url, limits=limits, timeout=30))
                )
            else:
                raw = KeepAlive(url)
                stack.push_async_callback(raw.close)
                https.append(raw)
        users = [Client(http, i, seed, headers) for i, http in enumerate(https)]
        await asyncio.gather(*(u.warm(warm) for u in users))
        wait_drained(url, 300)
        await asyncio.gather(*(u.call("search") for u in users))  # after the warm-up episodes are indexed
        print(f"# {clients} clients warmed up; timed load for {duration:g} s", file=sys.stderr, flush=True)
        started, cpu_before, own_before = time.monotonic(), cpu_seconds(*pids), time.process_time()
        worker_before = cpu_seconds(*pids, workers_only=True)
        load_before, wall_before = os.getloadavg()[0], time.time()
        await asyncio.gather(
            watch_workers(url, started + duration, level), *(u.loop(started + duration, level) for u in users)
        )
        level.seconds = time.monotonic() - started
        level.wall = (wall_before, time.time())
        level.load = (load_before, os.getloadavg()[0])
        requests = max(1, totals(level)[0])
        level.cpu_ms["generator"] = (time.process_time() - own_before) * 1e3 / requests
        if pids:
            level.cpu_ms["server"] = (cpu_seconds(*pids) - cpu_before) * 1e3 / requests
            # of which a separate worker process (child or not): ingestion done during the load
            level.cpu_ms["worker process"] = (cpu_seconds(*pids, workers_only=True) - worker_before) * 1e3 / requests
            # the rest: the API process(es), requests and any worker thread in them
            level.cpu_ms["api process"] = level.cpu_ms["server"] - level.cpu_ms["worker process"]
    return level


async def watch_workers(url: str, until: float, level: Level, every_s: float = 2.0) -> None:
    """Sample ``/health``'s live workers during the load (a starved worker stops beating)."""
    http = KeepAlive(url)
    try:
        while time.monotonic() + every_s < until:
            await asyncio.sleep(every_s)
            with contextlib.suppress(HttpFailed, ValueError, KeyError):
                reply = await http.request("GET", "/health", {})
                level.alive.append(int(json.loads(reply.content)["checks"]["ingest-queue"]["workersAlive"]))
    finally:
        await http.close()


def wait_drained(url: str, timeout_s: float) -> tuple[float | None, int | None]:
    """Seconds until the ingestion queue is empty (None if not within ``timeout_s``), and the depth seen last."""
    started = time.monotonic()
    depth = None
    while time.monotonic() - started < timeout_s:
        depth = queue_state(url).get("depth")
        if not depth:
            return time.monotonic() - started, depth
        time.sleep(0.5)
    return None, depth


def totals(level: Level) -> tuple[int, int, float]:
    total = sum(len(v) for v in level.latencies.values())
    return total, sum(level.errors.values()), total / level.seconds if level.seconds else 0.0


def report(level: Level) -> str:
    total, errors, rate = totals(level)
    where = "" if level.layout == "external" else f" [{level.layout}]"
    lines = [
        f"== {level.clients} clients{where}, {level.seconds:.1f} s: {total} requests, {rate:.1f} req/s, {errors} errors"
    ]
    lines.append(f"{'endpoint':<10}{'count':>8}{'p50 ms':>10}{'p99 ms':>10}{'errors':>8}")
    for op, _ in MIX:
        values = level.latencies.get(op, [])
        lines.append(
            f"{op:<10}{len(values):>8}{pct_ms(values, 50):>10.1f}{pct_ms(values, 99):>10.1f}"
            f"{level.errors.get(op, 0):>8}"
        )
    rss = "n/a" if level.rss_mib is None else f"{level.rss_mib:.0f} MiB"
    drained = "no" if level.drained_s is None else f"yes, {level.drained_s:.1f} s after the load stopped"
    lines.append(f"server RSS {rss}; ingestion queue drained: {drained} (depth {level.depth_after})")
    cpu = ", ".join(f"{who} {ms:.2f}" for who, ms in level.cpu_ms.items())
    load = f"load average {level.load[0]:.1f} -> {level.load[1]:.1f}"
    lines.append(f"CPU ms per request: {cpu} (on {os.cpu_count()} cores); {load}")
    if level.alive:
        lines.append(f"workers alive in /health during the load: min {min(level.alive)} of {len(level.alive)} samples")
    lines += [f"  error: {s}" for s in level.samples]
    return "\n".join(lines)


def summary(levels: list[Level]) -> str:
    """One row per layout and level, side by side."""
    head = (
        f"{'layout':<10}{'clients':>8}{'req/s':>8}{'search p50/p99 ms':>20}{'context p99':>12}"
        f"{'append p99':>11}{'end p99':>9}{'errors':>7}{'RSS MiB':>9}{'CPU ms/req srv/api/gen':>24}  drained"
    )
    rows = [head]
    for lv in levels:
        _total, errors, rate = totals(lv)
        lat = lv.latencies
        search = f"{pct_ms(lat.get('search', []), 50):.0f} / {pct_ms(lat.get('search', []), 99):.0f}"
        rss = "n/a" if lv.rss_mib is None else f"{lv.rss_mib:.0f}"
        drained = "no" if lv.drained_s is None else f"{lv.drained_s:.1f} s"
        cpu = " / ".join(
            f"{lv.cpu_ms[k]:.2f}" if k in lv.cpu_ms else "n/a" for k in ("server", "api process", "generator")
        )
        rows.append(
            f"{lv.layout:<10}{lv.clients:>8}{rate:>8.1f}{search:>20}{pct_ms(lat.get('context', []), 99):>12.0f}"
            f"{pct_ms(lat.get('append', []), 99):>11.0f}{pct_ms(lat.get('end', []), 99):>9.0f}{errors:>7}{rss:>9}"
            f"{cpu:>24}  {drained}"
        )
    return "\n".join(rows)


@dataclass
class Server:
    """The processes of one layout: the API (``agtos serve``) and, if separate, the worker."""

    url: str
    api: subprocess.Popen[bytes]
    worker: subprocess.Popen[bytes] | None = None

    @property
    def pids(self) -> list[int]:
        return [p.pid for p in (self.api, self.worker) if p is not None]

    def stop(self) -> None:
        for proc in (self.api, self.worker):
            if proc is not None and proc.poll() is None:
                proc.terminate()
        for proc in (self.api, self.worker):
            if proc is None:
                continue
            try:
                proc.wait(timeout=60)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait(timeout=10)


def split_layout(spec: str) -> tuple[str, dict[str, str]]:
    """``thread+A=1+B=2`` -> (``thread``, {A: 1, B: 2})."""
    name, *assignments = spec.split("+")
    env = {}
    for assignment in assignments:
        var, sep, value = assignment.partition("=")
        if not sep or not var:
            raise ValueError(f"{assignment!r}: expected NAME=VALUE")
        env[var] = value
    return name, env


def start_server(redis_url: str, prefix: str, tmp: Path, layout: str = "thread") -> Server:
    """Start the processes of ``layout`` (see the module docstring) and wait for ``/health``."""
    layout, extra_env = split_layout(layout)
    port = free_port()
    tmp.mkdir(parents=True, exist_ok=True)
    env = {
        **os.environ,
        "REDIS_URL": redis_url,
        "AGTOS_KEY_PREFIX": prefix,
        "AGTOS_DATA_DIR": str(tmp / "data"),
        "AGTOS_CONFIG_DIR": str(tmp / "config"),
    }
    env.pop("AGTOS_INGEST_MODE", None)  # the `agtos serve` default: queue
    env.pop("AGTOS_INGEST_WORKER", None)
    env.update(extra_env)
    serve = [sys.executable, "-m", "agtos.cli", "serve", "--port", str(port)]
    separate = layout not in ("thread", "child")
    if layout == "thread":
        serve += ["--worker", "thread"]
    found = WORKERS_LAYOUT.match(layout)
    if found:
        serve += ["--workers", found.group(1)]
    elif layout not in LAYOUTS:
        raise ValueError(f"unknown layout {layout!r}")
    if separate:
        serve.append("--no-worker")
    api = subprocess.Popen(serve, env=env, stdout=(tmp / "server.log").open("wb"), stderr=subprocess.STDOUT)
    server = Server(f"http://127.0.0.1:{port}", api)
    if separate:
        server.worker = subprocess.Popen(
            ["nice", "-n", "10", sys.executable, "-m", "agtos.cli", "worker"],
            env={**env, "AGTOS_INGEST_MODE": "queue"},
            stdout=(tmp / "worker.log").open("wb"),
            stderr=subprocess.STDOUT,
        )
    deadline = time.monotonic() + 180
    while time.monotonic() < deadline:
        for proc, name in ((api, "server"), (server.worker, "worker")):
            if proc is not None and proc.poll() is not None:
                server.stop()
                raise RuntimeError(f"{name} exited ({proc.returncode}); see {tmp / (name + '.log')}")
        try:
            if httpx.get(f"{server.url}/health", timeout=5).status_code == 200 and workers_ready(server):
                return server
        except httpx.HTTPError:
            pass
        time.sleep(0.5)
    server.stop()
    raise RuntimeError("server did not start within 180 s")


def workers_ready(server: Server) -> bool:
    """A worker (thread, child or separate process) counts once its heartbeat shows in ``/health``."""
    return bool(queue_state(server.url).get("workersAlive"))


def rss_mib(*pids: int) -> float:
    """The resident memory of these processes and their children (uvicorn's workers)."""
    total = 0
    for pid in pids:
        proc = psutil.Process(pid)
        total += sum(p.memory_info().rss for p in [proc, *proc.children(recursive=True)])
    return total / 2**20


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--clients", default="20,100", help="comma-separated concurrency levels")
    parser.add_argument("--duration", type=float, default=20.0, help="seconds of load per level (max 300)")
    parser.add_argument(
        "--layouts",
        default="child",
        help="comma-separated server layouts, each run in turn: child, thread, process, workersN (N 1-8), "
        "each optionally with +NAME=VALUE environment variables",
    )
    parser.add_argument("--rounds", type=int, default=1, help="run the list of layouts this many times in turn")
    parser.add_argument("--url", help="an API already running on loopback (default: start one per layout)")
    parser.add_argument("--pid", type=int, help="with --url: the server's pid, for its RSS")
    parser.add_argument("--redis-url", default=os.environ.get("AGTOS_TEST_REDIS_URL", "redis://127.0.0.1:6379/0"))
    parser.add_argument("--api-key", help="sent as Authorization: Bearer (a service key)")
    parser.add_argument("--warm", type=int, default=2, help="sessions each user ends before the timed load")
    parser.add_argument("--drain-timeout", type=float, default=300.0)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument(
        "--client",
        choices=("raw", "httpx"),
        default="raw",
        help="the generator's HTTP client: raw (a minimal keep-alive HTTP/1.1 client, the cheaper) or httpx",
    )
    parser.add_argument(
        "--gc-stats",
        action="store_true",
        help="print the server's garbage-collector pauses during each load (sets AGTOS_GC_STATS_DIR)",
    )
    args = parser.parse_args(argv)
    levels = [int(c) for c in args.clients.split(",")]
    layouts = [name.strip() for name in args.layouts.split(",") if name.strip()] * max(1, args.rounds)
    if not 0 < args.duration <= 300 or not all(0 < c <= 500 for c in levels):
        parser.error("--duration must be in (0, 300] and each client count in (0, 500]")
    try:
        names = [split_layout(spec)[0] for spec in layouts]
    except ValueError as exc:
        parser.error(f"--layouts: {exc}")
    if not layouts or any(name not in LAYOUTS and not WORKERS_LAYOUT.match(name) for name in names):
        parser.error("--layouts: child, thread, process or workersN (N 1-8), comma-separated")
    if args.url and urlsplit(args.url).hostname not in LOOPBACK:
        parser.error("--url must be a loopback address (this benchmark never loads a remote server)")
    headers = {"Authorization": f"Bearer {args.api_key}"} if args.api_key else {}
    results: list[Level] = []

    def measure(url: str, pids: list[int], layout: str) -> None:
        for n in levels:
            level = asyncio.run(run_level(url, n, args.duration, args.seed, args.warm, headers, pids, args.client))
            level.layout = layout
            level.rss_mib = rss_mib(*pids) if pids else None
            level.drained_s, level.depth_after = wait_drained(url, args.drain_timeout)
            print(report(level), flush=True)
            results.append(level)

    if args.url:
        measure(args.url, [args.pid] if args.pid else [], "external")
        return 0
    with tempfile.TemporaryDirectory(prefix="agtos-load-") as tmp:
        for layout in layouts:
            prefix = f"agtos-load-{uuid.uuid4().hex[:8]}"
            name, extra_env = split_layout(layout)
            settings = "".join(f" {var}={value}" for var, value in extra_env.items())
            print(f"# layout {layout}: {layout_help(name)}{settings}", flush=True)
            gc_dir = Path(tmp) / f"gc-{prefix}"
            spec = f"{layout}+AGTOS_GC_STATS_DIR={gc_dir}" if args.gc_stats else layout
            server = start_server(args.redis_url, prefix, Path(tmp) / layout, spec)
            first = len(results)
            try:
                measure(server.url, server.pids, layout)
            finally:
                server.stop()
                delete_prefix(args.redis_url, prefix)
            if args.gc_stats:
                print(gc_report(gc_dir, results[first:]), flush=True)
    if len(results) > 1:
        print("== side by side\n" + summary(results), flush=True)
    return 0


def gc_report(directory: Path, levels: list[Level]) -> str:
    """The collections of the server's processes during each level's timed load, per generation
    (``gc-<pid>.json``, written by ``AGTOS_GC_STATS_DIR`` when the process stops)."""
    lines = []
    for path in sorted(directory.glob("gc-*.json")):
        data = json.loads(path.read_text(encoding="utf-8"))
        head = (
            f"pid {data['pid']} (freeze {data['freeze']}, {data['frozen']} frozen, threshold {data['threshold']},"
            f" {data['tracked_at_start']} -> {data['tracked_at_stop']} tracked)"
        )
        for lv in levels:
            gens = summarise(data["pauses"], *lv.wall)
            total = sum(g["total_ms"] for g in gens.values())
            parts = "; ".join(
                f"gen{gen} {g['count']:.0f} x, {g['total_ms']:.0f} ms, max {g['max_ms']:.1f} ms"
                for gen, g in gens.items()
            )
            share = total / (lv.seconds * 10) if lv.seconds else 0.0
            lines.append(
                f"gc [{lv.layout}] {lv.clients} clients, {head}: {parts or 'none'} ({share:.1f} % of the load)"
            )
    return "\n".join(lines) or f"gc: no statistics in {directory}"


def delete_prefix(redis_url: str, prefix: str) -> None:
    client = redis.Redis.from_url(redis_url)
    keys = list(client.scan_iter(match=f"{prefix}:*", count=2000))
    for i in range(0, len(keys), 1000):
        client.unlink(*keys[i : i + 1000])


if __name__ == "__main__":
    sys.exit(main())
