"""Cheap reads under a mixed load of long requests: how long does a 404 or ``/health`` wait?

    nice -n 10 python -m benchmarks.cheap_reads [--clients 48] [--duration 20] [--rounds 2]

Starts ``agtos serve`` (``benchmarks.load.start_server``, layout ``child``) on a loopback port
against ``--redis-url`` under a fresh key prefix, then runs ``--clients`` users in closed loops of
long requests (session ends, ``/maintain``, searches, and the sync routes that take the longest:
``/ask``, ``/dream``, a ``/conversations`` back-fill) while one prober asks, one after the other,
``GET /health``, ``GET /api/memory/episodes`` and ``GET /api/memory/maintain/runs/{unknown}``.
Prints the prober's p50/p99/max per read, the long requests' counts, and the box's load average.
Loopback only, bounded by ``--duration``. Not a test.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import os
import random
import sys
import tempfile
import time
import uuid
from collections import defaultdict
from pathlib import Path

import httpx

from benchmarks.load import QUERIES, delete_prefix, pct_ms, start_server, turn

PROBES = (
    ("health", "/health"),
    ("episodes", "/api/memory/episodes"),
    ("run-404", "/api/memory/maintain/runs/run_unknown"),
)
MIXES = {
    "all": (("end", 0.3), ("maintain", 0.1), ("search", 0.2), ("ask", 0.15), ("dream", 0.1), ("conversations", 0.15)),
    "ends": (("end", 0.6), ("maintain", 0.1), ("search", 0.3)),  # the async hot routes and /maintain only
}


async def long_loop(http: httpx.AsyncClient, index: int, until: float, mix: str, counts: dict[str, int]) -> None:
    """One user's closed loop of long requests drawn from ``MIXES[mix]``."""
    rng = random.Random(index)
    headers = {"X-User-Id": f"cheap-{index}"}
    names, weights = [n for n, _ in MIXES[mix]], [w for _, w in MIXES[mix]]
    n = 0
    while time.monotonic() < until:
        op = rng.choices(names, weights)[0]
        n += 1
        try:
            if op == "end":
                sid = f"s{n}"
                body = {"turns": [turn(rng) for _ in range(6)]}
                await http.post(f"/api/memory/sessions/{sid}/turns", headers=headers, json=body)
                response = await http.post(f"/api/memory/sessions/{sid}/end", headers=headers)
            elif op == "maintain":
                response = await http.post("/api/memory/maintain", headers=headers, json={})
            elif op == "search":
                response = await http.get("/api/memory/search", headers=headers, params={"q": rng.choice(QUERIES)})
            elif op == "ask":
                response = await http.post("/api/memory/ask", headers=headers, json={"question": rng.choice(QUERIES)})
            elif op == "dream":
                response = await http.post("/api/memory/dream", headers=headers, json={})
            else:
                sessions = [{"id": f"c{n}-{k}", "turns": [turn(rng) for _ in range(8)]} for k in range(4)]
                response = await http.post("/api/memory/conversations", headers=headers, json={"sessions": sessions})
            counts[f"{op} {response.status_code}"] += 1
        except httpx.HTTPError as exc:
            counts[f"{op} {type(exc).__name__}"] += 1


async def probe(http: httpx.AsyncClient, until: float, seen: dict[str, list[float]]) -> None:
    """Cheap reads one after the other, 20 ms apart."""
    headers = {"X-User-Id": "cheap-probe"}
    while time.monotonic() < until:
        for name, path in PROBES:
            started = time.monotonic()
            with contextlib.suppress(httpx.HTTPError):
                await http.get(path, headers=headers)
            seen[name].append(time.monotonic() - started)
            await asyncio.sleep(0.02)


async def measure(url: str, clients: int, duration: float, mix: str) -> str:
    limits = httpx.Limits(max_connections=clients + 4)
    async with httpx.AsyncClient(base_url=url, timeout=120, limits=limits) as http:
        load_before = os.getloadavg()[0]
        until = time.monotonic() + duration
        counts: dict[str, int] = defaultdict(int)
        seen: dict[str, list[float]] = defaultdict(list)
        users = (long_loop(http, i, until, mix, counts) for i in range(clients))
        await asyncio.gather(probe(http, until, seen), *users)
        lines = [f"load {load_before:.1f} -> {os.getloadavg()[0]:.1f}; long requests: {dict(sorted(counts.items()))}"]
        for name, _ in PROBES:
            v = seen[name]
            lines.append(
                f"  {name:9} n={len(v):4} p50 {pct_ms(v, 50):8.1f} ms  p99 {pct_ms(v, 99):8.1f} ms"
                f"  max {max(v) * 1e3:8.1f} ms"
            )
        return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--clients", type=int, default=48)
    parser.add_argument("--duration", type=float, default=20.0)
    parser.add_argument("--rounds", type=int, default=1)
    parser.add_argument("--layout", default="child")
    parser.add_argument("--mix", choices=sorted(MIXES), default="all", help="the long requests' mix")
    parser.add_argument("--redis-url", default=os.environ.get("AGTOS_TEST_REDIS_URL", "redis://127.0.0.1:6379/0"))
    args = parser.parse_args(argv)
    duration = min(args.duration, 300.0)
    with tempfile.TemporaryDirectory(prefix="agtos-cheap-") as tmp:
        for r in range(args.rounds):
            prefix = f"agtos-cheap-{uuid.uuid4().hex[:8]}"
            server = start_server(args.redis_url, prefix, Path(tmp) / f"r{r}", args.layout)
            try:
                print(f"round {r + 1}, {args.clients} clients, mix {args.mix}, {duration:g} s", flush=True)
                print(asyncio.run(measure(server.url, args.clients, duration, args.mix)), flush=True)
            finally:
                server.stop()
                delete_prefix(args.redis_url, prefix)
    return 0


if __name__ == "__main__":
    sys.exit(main())
