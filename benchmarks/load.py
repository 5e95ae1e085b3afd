"""Mixed load on the HTTP API: do reads stay fast while session ends are ingested?

    nice -n 10 python -m benchmarks.load [--clients 20,100] [--duration 20] [--url http://127.0.0.1:PORT]

Each client is one user in a closed loop (no think time): 50 % turn appends, 30 % searches,
15 % context requests, 5 % session ends (then a new session). Without ``--url`` it starts its own
``agtos serve`` (queue mode with its worker thread, the ``make run`` set-up) on a free loopback
port, against ``--redis-url`` under a fresh key prefix that is deleted at the end. Before each level
every user gets ``--warm`` ended sessions (so searches have episodes to find). After each level it
waits for the ingestion queue to drain (``/health``). Prints per-endpoint p50/p99 and errors,
throughput, the server's RSS and whether the queue drained. Loopback only; bounded by
``--duration`` and ``--drain-timeout``. Not a test (``tests/test_load_bench.py`` runs it tiny).
"""

from __future__ import annotations

import argparse
import asyncio
import os
import random
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
from urllib.parse import urlsplit

import httpx
import psutil  # type: ignore[import-untyped]
import redis

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


@dataclass
class Level:
    clients: int
    seconds: float = 0.0
    latencies: dict[str, list[float]] = field(default_factory=lambda: defaultdict(list))
    errors: dict[str, int] = field(default_factory=lambda: defaultdict(int))
    samples: list[str] = field(default_factory=list)  # first few error descriptions
    rss_mib: float | None = None
    drained_s: float | None = None
    depth_after: int | None = None


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


class Client:
    """One user: a live session and a closed request loop."""

    def __init__(self, http: httpx.AsyncClient, index: int, seed: int, headers: dict[str, str]) -> None:
        self.http, self.user = http, f"load-{index}"
        self.rng = random.Random(seed * 1_000 + index)
        self.headers = {"X-User-Id": self.user, **headers}
        self.session = 0

    @property
    def sid(self) -> str:
        return f"s{self.session}"

    async def call(self, op: str) -> httpx.Response:
        h, r = self.headers, self.rng
        if op == "append":
            body_turns = {"turns": [turn(r)]}
            return await self.http.post(f"/api/memory/sessions/{self.sid}/turns", json=body_turns, headers=h)
        if op == "search":
            return await self.http.get("/api/memory/search", params={"q": r.choice(QUERIES)}, headers=h)
        if op == "context":
            body: dict[str, Any] = {"query": r.choice(QUERIES), "session_id": self.sid}
            return await self.http.post("/api/memory/context", json=body, headers=h)
        response = await self.http.post(f"/api/memory/sessions/{self.sid}/end", headers=h)
        self.session += 1
        return response

    async def warm(self, sessions: int) -> None:
        for _ in range(sessions):
            turns = [turn(self.rng) for _ in range(6)]
            await self.http.post(f"/api/memory/sessions/{self.sid}/turns", json={"turns": turns}, headers=self.headers)
            await self.call("end")

    async def loop(self, until: float, level: Level) -> None:
        names, weights = [name for name, _ in MIX], [weight for _, weight in MIX]
        while time.monotonic() < until:
            op = self.rng.choices(names, weights)[0]
            started = time.monotonic()
            try:
                response = await self.call(op)
                failed = response.status_code >= 400
                detail = f"{op} {response.status_code} {response.text[:120]}"
            except httpx.HTTPError as exc:
                failed, detail = True, f"{op} {type(exc).__name__}: {exc}"
            level.latencies[op].append(time.monotonic() - started)
            if failed:
                level.errors[op] += 1
                if len(level.samples) < 5:
                    level.samples.append(detail)


def queue_state(url: str) -> dict[str, Any]:
    return dict(httpx.get(f"{url}/health", timeout=10).json()["checks"].get("ingest-queue") or {})


async def run_level(url: str, clients: int, duration: float, seed: int, warm: int, headers: dict[str, str]) -> Level:
    level = Level(clients)
    limits = httpx.Limits(max_connections=clients, max_keepalive_connections=clients)
    async with httpx.AsyncClient(base_url=url, limits=limits, timeout=30) as http:
        users = [Client(http, i, seed, headers) for i in range(clients)]
        await asyncio.gather(*(u.warm(warm) for u in users))
        wait_drained(url, 300)
        started = time.monotonic()
        await asyncio.gather(*(u.loop(started + duration, level) for u in users))
        level.seconds = time.monotonic() - started
    return level


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


def report(level: Level) -> str:
    total = sum(len(v) for v in level.latencies.values())
    errors = sum(level.errors.values())
    lines = [
        f"== {level.clients} clients, {level.seconds:.1f} s: {total} requests, "
        f"{total / level.seconds:.1f} req/s, {errors} errors"
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
    lines += [f"  error: {s}" for s in level.samples]
    return "\n".join(lines)


def start_server(redis_url: str, prefix: str, tmp: Path) -> tuple[subprocess.Popen[bytes], str]:
    port = free_port()
    env = {
        **os.environ,
        "REDIS_URL": redis_url,
        "AGTOS_KEY_PREFIX": prefix,
        "AGTOS_DATA_DIR": str(tmp / "data"),
        "AGTOS_CONFIG_DIR": str(tmp / "config"),
    }
    env.pop("AGTOS_INGEST_MODE", None)  # the `agtos serve` default: queue, with its worker thread
    log = (tmp / "server.log").open("wb")
    proc = subprocess.Popen(
        [sys.executable, "-m", "agtos.cli", "serve", "--port", str(port)], env=env, stdout=log, stderr=subprocess.STDOUT
    )
    url = f"http://127.0.0.1:{port}"
    deadline = time.monotonic() + 180
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            raise RuntimeError(f"server exited ({proc.returncode}); see {tmp / 'server.log'}")
        try:
            if httpx.get(f"{url}/health", timeout=5).status_code == 200:
                return proc, url
        except httpx.HTTPError:
            pass
        time.sleep(0.5)
    proc.terminate()
    raise RuntimeError("server did not start within 180 s")


def rss_mib(pid: int) -> float:
    proc = psutil.Process(pid)
    return sum(p.memory_info().rss for p in [proc, *proc.children(recursive=True)]) / 2**20


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--clients", default="20,100", help="comma-separated concurrency levels")
    parser.add_argument("--duration", type=float, default=20.0, help="seconds of load per level (max 300)")
    parser.add_argument("--url", help="an API already running on loopback (default: start one)")
    parser.add_argument("--pid", type=int, help="with --url: the server's pid, for its RSS")
    parser.add_argument("--redis-url", default=os.environ.get("AGTOS_TEST_REDIS_URL", "redis://127.0.0.1:6379/0"))
    parser.add_argument("--api-key", help="sent as Authorization: Bearer (a service key)")
    parser.add_argument("--warm", type=int, default=2, help="sessions each user ends before the timed load")
    parser.add_argument("--drain-timeout", type=float, default=300.0)
    parser.add_argument("--seed", type=int, default=0)
    args = parser.parse_args(argv)
    levels = [int(c) for c in args.clients.split(",")]
    if not 0 < args.duration <= 300 or not all(0 < c <= 500 for c in levels):
        parser.error("--duration must be in (0, 300] and each client count in (0, 500]")
    if args.url and urlsplit(args.url).hostname not in LOOPBACK:
        parser.error("--url must be a loopback address (this benchmark never loads a remote server)")
    headers = {"Authorization": f"Bearer {args.api_key}"} if args.api_key else {}
    prefix = f"agtos-load-{uuid.uuid4().hex[:8]}"
    with tempfile.TemporaryDirectory(prefix="agtos-load-") as tmp:
        proc, url = (None, args.url) if args.url else start_server(args.redis_url, prefix, Path(tmp))
        pid = proc.pid if proc else args.pid
        try:
            for n in levels:
                level = asyncio.run(run_level(url, n, args.duration, args.seed, args.warm, headers))
                level.rss_mib = rss_mib(pid) if pid else None
                level.drained_s, level.depth_after = wait_drained(url, args.drain_timeout)
                print(report(level), flush=True)
        finally:
            if proc is not None:
                proc.terminate()
                proc.wait(timeout=60)
                client = redis.Redis.from_url(args.redis_url)
                keys = list(client.scan_iter(match=f"{prefix}:*", count=2000))
                for i in range(0, len(keys), 1000):
                    client.unlink(*keys[i : i + 1000])
    return 0


if __name__ == "__main__":
    sys.exit(main())
