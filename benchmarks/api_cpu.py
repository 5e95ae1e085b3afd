"""CPU per request of the HTTP routes of the load mix, in process, without a network or a load generator.

    python benchmarks/api_cpu.py [--requests 400] [--users 8] [--redis-url redis://127.0.0.1:6379/0]

The app of ``agtos.serving.app`` (its middleware, dependencies, routes, thread hand-offs) is called
as uvicorn calls it (raw ASGI messages) on a real Redis under a fresh key prefix (deleted at the
end), one request at a time. Each user first ends 2 sessions of 6 turns (ingested before the timed
part, so searches find episodes); then each route of ``benchmarks.load``'s mix (turn append, search,
context, session end) runs ``--requests`` times, and the mix itself. Prints the CPU time
(``time.process_time``: every thread of the process) and the wall time per request. Run as a file
with ``PYTHONPATH`` naming another checkout to measure that tree's ``agtos`` with the same driver
(trees compared in alternating processes).
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import random
import sys
import time
import uuid
from pathlib import Path
from typing import Any
from urllib.parse import urlencode

# run as a file: its own checkout last on the path, so that PYTHONPATH may name another tree's agtos
sys.path.append(str(Path(__file__).resolve().parents[1]))

from benchmarks.load import MIX, QUERIES, delete_prefix, turn

Message = dict[str, Any]


class Asgi:
    """Sends one HTTP request through an ASGI app and collects the status and body."""

    def __init__(self, app: Any) -> None:
        self.app = app

    async def request(
        self, method: str, path: str, user: str, query: dict[str, str] | None = None, body: Any = None
    ) -> tuple[int, bytes]:
        raw = b"" if body is None else json.dumps(body).encode()
        headers = [(b"host", b"127.0.0.1:4102"), (b"x-user-id", user.encode()), (b"user-agent", b"api-cpu")]
        if body is not None:
            headers += [(b"content-type", b"application/json"), (b"content-length", str(len(raw)).encode())]
        scope = {
            "type": "http",
            "asgi": {"version": "3.0", "spec_version": "2.3"},
            "http_version": "1.1",
            "method": method,
            "scheme": "http",
            "path": path,
            "raw_path": path.encode(),
            "query_string": urlencode(query or {}).encode(),
            "root_path": "",
            "headers": headers,
            "client": ("127.0.0.1", 50000),
            "server": ("127.0.0.1", 4102),
            "state": {},
        }
        sent = False
        status, chunks = 0, []

        async def receive() -> Message:
            nonlocal sent
            if sent:
                await asyncio.sleep(3600)
            sent = True
            return {"type": "http.request", "body": raw, "more_body": False}

        async def send(message: Message) -> None:
            nonlocal status
            if message["type"] == "http.response.start":
                status = message["status"]
            elif message["type"] == "http.response.body":
                chunks.append(message.get("body", b""))

        await self.app(scope, receive, send)
        return status, b"".join(chunks)


class User:
    def __init__(self, asgi: Asgi, index: int, rng: random.Random) -> None:
        self.asgi, self.name, self.rng, self.session = asgi, f"cpu-{index}", rng, 0

    async def call(self, op: str) -> int:
        a, r, sid = self.asgi, self.rng, f"s{self.session}"
        if op == "append":
            body = {"turns": [turn(r)]}
            status, _ = await a.request("POST", f"/api/memory/sessions/{sid}/turns", self.name, body=body)
        elif op == "search":
            status, _ = await a.request("GET", "/api/memory/search", self.name, query={"q": r.choice(QUERIES)})
        elif op == "context":
            status, _ = await a.request(
                "POST", "/api/memory/context", self.name, body={"query": r.choice(QUERIES), "session_id": sid}
            )
        else:
            status, _ = await a.request("POST", f"/api/memory/sessions/{sid}/end", self.name)
            self.session += 1
        return status


async def measure(users: list[User], op: str | None, requests: int, rng: random.Random) -> tuple[float, float, int]:
    """CPU and wall ms per request of ``requests`` calls of ``op`` (None: the load mix), and the errors."""
    names, weights = [n for n, _ in MIX], [w for _, w in MIX]
    errors = 0
    cpu, wall = time.process_time(), time.perf_counter()
    for i in range(requests):
        user = users[i % len(users)]
        if op == "end":  # a session with a few turns, as in the mix (the appends are not timed apart)
            await user.call("append")
        errors += (await user.call(op or rng.choices(names, weights)[0])) >= 400
    return (time.process_time() - cpu) * 1e3 / requests, (time.perf_counter() - wall) * 1e3 / requests, errors


async def run(args: argparse.Namespace) -> None:
    import agtos
    from agtos.config import Settings
    from agtos.serving.app import create_app

    settings = Settings.from_env()
    app = create_app(settings)
    coordinator = app.state.coordinator
    asgi = Asgi(app)
    rng = random.Random(args.seed)
    users = [User(asgi, i, rng) for i in range(args.users)]
    for user in users:  # warm-up: 2 ended sessions each, then ingested
        for _ in range(2):
            for _ in range(6):
                await user.call("append")
            await user.call("end")
    coordinator.ingest_worker().drain(600)
    for user in users:
        for warm in ("search", "context"):
            await user.call(warm)
    print(f"# agtos from {Path(agtos.__file__).parent}; load {os.getloadavg()[0]:.1f}", flush=True)
    ops: tuple[str | None, ...] = ("append", "search", "context", "end", None)
    for step in ops:
        cpu, wall, errors = await measure(users, step, args.requests, rng)
        print(f"{step or 'mix':<8} cpu {cpu:7.3f} ms  wall {wall:7.3f} ms  errors {errors}", flush=True)
    coordinator.close()


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--requests", type=int, default=400)
    parser.add_argument("--users", type=int, default=8)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--redis-url", default=os.environ.get("AGTOS_TEST_REDIS_URL", "redis://127.0.0.1:6379/0"))
    args = parser.parse_args()
    prefix = f"agtos-cpu-{uuid.uuid4().hex[:8]}"
    os.environ.update(
        REDIS_URL=args.redis_url, AGTOS_KEY_PREFIX=prefix, AGTOS_INGEST_MODE="queue", AGTOS_INGEST_WORKER="0"
    )
    try:
        asyncio.run(run(args))
    finally:
        delete_prefix(args.redis_url, prefix)
    return 0


if __name__ == "__main__":
    sys.exit(main())
