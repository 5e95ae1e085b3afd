"""The cost of one ``POST /api/memory/sessions/{id}/turns``, in process, auth off and on (a service key).

    python benchmarks/append_cost.py [--appends 2000] [--per-session 20] [--auth off,on] [--profile DIR]
        [--redis-url redis://127.0.0.1:6379/0]

The app of ``agtos.serving.app`` (queue mode, no worker thread) is called as uvicorn calls it (raw ASGI
messages, no HTTP client in the measurement) on a real Redis under a fresh key prefix (deleted at the
end), one append of one dated, named turn at a time (the convset dev set's turns in order, as
``benchmarks.ingest`` sends them), ``--per-session`` turns per session, then the session is ended (not
timed) and the next one begins. Prints per append: the process CPU (``time.process_time``: every
thread), the wall time and the Redis round trips (each command sent alone and each pipeline, counted on
the coordinator's client); with ``--profile`` writes a cProfile of each mode (the event loop's thread and
the request threads). Run as a file with ``PYTHONPATH`` naming another checkout to measure that tree's
``agtos`` with the same driver (trees compared in alternating processes).
"""

from __future__ import annotations

import argparse
import asyncio
import cProfile
import json
import os
import sys
import threading
import time
import uuid
from collections import Counter
from pathlib import Path
from typing import Any

# run as a file: its own checkout last on the path, so that PYTHONPATH may name another tree's agtos
sys.path.append(str(Path(__file__).resolve().parents[1]))

from benchmarks.api_cpu import Asgi
from benchmarks.load import delete_prefix
from benchmarks.round_trips import RoundTrips

Message = dict[str, Any]
DATASET = Path(__file__).resolve().parent / "eval" / "convset.json"


def said_turns() -> list[dict[str, Any]]:
    """The turns of the convset dev set (the ingestion benchmark's), with their speakers' names, in order."""
    from benchmarks.eval.dataset import load_dataset

    return [
        {"role": t.role, "content": t.content} | ({"name": t.name} if t.name else {})
        for h in load_dataset(str(DATASET)).haystacks
        for session in h.haystack_sessions
        for t in session
        if t.content.strip()
    ]


def with_headers(app: Any, headers: list[tuple[bytes, bytes]]) -> Any:
    """``app`` with ``headers`` added to each request (``benchmarks.api_cpu.Asgi`` sends the user's alone)."""
    if not headers:
        return app

    async def headed(scope: Message, receive: Any, send: Any) -> None:
        await app({**scope, "headers": [*scope["headers"], *headers]}, receive, send)

    return headed


class ThreadProfiles:
    """One cProfile per thread that runs a request's code (the loop's and the executors'), merged at the end."""

    def __init__(self) -> None:
        self.profiles: dict[int, cProfile.Profile] = {}
        self.on = False

    def enter(self) -> None:
        if self.on:
            ident = threading.get_ident()
            prof = self.profiles.setdefault(ident, cProfile.Profile())
            prof.enable()

    def leave(self) -> None:
        prof = self.profiles.get(threading.get_ident())
        if prof is not None:
            prof.disable()

    def dump(self, path: Path) -> None:
        import pstats

        profiles = list(self.profiles.values())
        stats = pstats.Stats(profiles[0])
        for prof in profiles[1:]:
            stats.add(prof)
        stats.dump_stats(str(path))


def profiled_executors(profiles: ThreadProfiles) -> None:
    """Profile the calls the request threads run (``agtos.serving.offload``'s executors)."""
    from agtos.serving import offload

    for pool in (offload.EXECUTOR, offload.READS):
        submit = pool.submit

        def wrapped(fn: Any, /, *args: Any, _submit: Any = submit, **kwargs: Any) -> Any:
            def run() -> Any:
                profiles.enter()
                try:
                    return fn(*args, **kwargs)
                finally:
                    profiles.leave()

            return _submit(run)

        pool.submit = wrapped  # type: ignore[method-assign]


async def measure(
    asgi: Asgi, mode: str, args: argparse.Namespace, trips: RoundTrips, said: list[dict[str, Any]]
) -> dict[str, Any]:
    """``--appends`` appends (after a warm-up session), each session ended after ``--per-session`` of
    them (``?wait=0``, not timed: a user may hold only so many live sessions); CPU, wall and round
    trips per append."""
    tag, user = uuid.uuid4().hex[:6], f"bench-{mode}"
    cpu = wall = 0.0
    sent: Counter[str] = Counter()

    async def append(k: int) -> None:
        nonlocal cpu, wall
        session = f"/api/memory/sessions/{mode}-{tag}-{k // args.per_session}"
        turn = {**said[k % len(said)], "timestamp": f"2023-05-08T10:{k % 60:02d}:00Z"}
        trips.sent.clear()
        cpu0, wall0 = time.process_time(), time.perf_counter()
        status, body = await asgi.request("POST", f"{session}/turns", user, body={"turns": [turn]})
        cpu, wall = cpu + time.process_time() - cpu0, wall + time.perf_counter() - wall0
        sent.update(trips.sent)
        if status != 200:
            raise RuntimeError(f"{mode}: {status} {body!r}")
        if (k + 1) % args.per_session == 0:
            await asgi.request("POST", f"{session}/end", user, query={"wait": "0"})

    for k in range(-args.per_session, 0):  # warm-up
        await append(k)
    cpu = wall = 0.0
    sent.clear()
    for k in range(args.appends):
        await append(k)
    return {
        "mode": mode,
        "cpu_us": cpu * 1e6 / args.appends,
        "wall_us": wall * 1e6 / args.appends,
        "per_s": args.appends / wall,
        "round_trips": sum(sent.values()) / args.appends,
        "commands": {name: round(n / args.appends, 3) for name, n in sent.most_common()},
    }


async def run(args: argparse.Namespace) -> list[dict[str, Any]]:
    import agtos
    from agtos.config import Settings
    from agtos.serving.app import create_app
    from agtos.storage.api_keys import ApiKeyStore

    app = create_app(Settings.from_env())
    coordinator = app.state.coordinator
    trips = RoundTrips(coordinator.connector.client)
    profiles = ThreadProfiles()
    if args.profile:
        profiled_executors(profiles)
    print(f"# agtos from {Path(agtos.__file__).parent}; load {os.getloadavg()[0]:.1f}", flush=True)
    results, said = [], said_turns()
    for mode in args.auth.split(","):
        headers: list[tuple[bytes, bytes]] = []
        if mode == "on":  # a service key, the rate limit out of the way (its token is still taken)
            key, _ = ApiKeyStore(coordinator.connector, coordinator.keys).create("service", "append-cost")
            headers.append((b"authorization", f"Bearer {key}".encode()))
        profiles.on = bool(args.profile)
        profiles.enter()  # the event loop's thread
        result = await measure(Asgi(with_headers(app, headers)), mode, args, trips, said)
        profiles.leave()
        if args.profile:
            Path(args.profile).mkdir(parents=True, exist_ok=True)
            profiles.dump(Path(args.profile) / f"append-auth-{mode}.prof")
            profiles.profiles.clear()
        profiles.on = False
        results.append(result)
        print(
            f"auth {mode:<3} cpu {result['cpu_us']:7.1f} us  wall {result['wall_us']:7.1f} us  "
            f"{result['per_s']:6.0f}/s  round trips {result['round_trips']:.2f} {result['commands']}",
            flush=True,
        )
    coordinator.close()
    return results


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--appends", type=int, default=2000)
    parser.add_argument("--per-session", type=int, default=20)
    parser.add_argument("--auth", default="off,on", help="modes, in order: off (no key exists yet), on (service key)")
    parser.add_argument("--profile", default="", help="directory for a cProfile per mode (slows the run)")
    parser.add_argument("--json", default="", help="write the results here")
    parser.add_argument("--redis-url", default=os.environ.get("AGTOS_TEST_REDIS_URL", "redis://127.0.0.1:6379/0"))
    args = parser.parse_args()
    prefix = f"agtos-append-{uuid.uuid4().hex[:8]}"
    os.environ.update(
        REDIS_URL=args.redis_url,
        AGTOS_KEY_PREFIX=prefix,
        AGTOS_INGEST_MODE="queue",
        AGTOS_INGEST_WORKER="0",
        AGTOS_RATE_LIMIT_PER_S="100000",
        AGTOS_RATE_LIMIT_BURST="100000",
    )
    try:
        results = asyncio.run(run(args))
    finally:
        delete_prefix(args.redis_url, prefix)
    if args.json:
        Path(args.json).write_text(json.dumps(results, indent=2))
    return 0


if __name__ == "__main__":
    sys.exit(main())
