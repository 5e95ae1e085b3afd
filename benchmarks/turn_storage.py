"""Redis bytes per stored turn: the verbatim turn lists, and the turn BM25 and vector indexes.

Stores ``--sessions`` sessions of real chat turns (realtalk-dev when present, cycled; else a
synthetic chat) through :class:`TurnStore` under a throw-away key prefix, sums ``MEMORY USAGE
<key> SAMPLES 0`` per key family and divides by the turns stored. Vectors are random unit rows
of the embedder's width (their bytes do not depend on their values).

    python -m benchmarks.turn_storage [--sessions 200] [--dtype f4 --dtype f2] [--redis-url redis://127.0.0.1:6379/0]

Redis 7, 100 realtalk-dev sessions (2,290 turns, 214 content bytes each): turn lists 412, BM25
index 1,602, vector index 1,982 with float32 blobs, 1,080 with float16 (the turn index's format);
3,997 → 3,094 bytes per turn in all.
"""

from __future__ import annotations

import argparse
import json
import sys
import uuid
from collections import Counter
from pathlib import Path
from typing import Any

import numpy as np
import redis

from agtos.schemas import Turn
from agtos.storage.bm25_index import BM25Index
from agtos.storage.keys import GlobalKeys
from agtos.storage.redis_conn import RedisConnector
from agtos.storage.turns import TurnStore
from agtos.storage.vector_index import VectorIndex
from agtos.tasks.verbatim_turns import stored_turns, turn_units

DIM = 384
DATASET = Path(__file__).resolve().parents[2] / "shared" / "datasets" / "realtalk-dev" / "realtalk-dev.json"
SYNTHETIC = [
    ("Caroline", "I went to the support group yesterday, it was really moving."),
    ("Melanie", "That's great to hear! What did you talk about there?"),
    ("Caroline", "Mostly about adoption. I'm thinking of adopting kids next year with my partner."),
    ("Melanie", "Wow, that's a big step. I painted a sunset last Friday, want to see it?"),
]


def chat_sessions() -> list[list[tuple[str, str]]]:
    """(speaker, text) sessions of real chats when the data set is there, else one synthetic one."""
    if not DATASET.is_file():
        return [SYNTHETIC * 5]
    out = []
    for sample in json.loads(DATASET.read_text()):
        conv = sample["conversation"]
        n = 1
        while f"session_{n}" in conv:
            out.append([(t["speaker"], t["text"]) for t in conv[f"session_{n}"] if t["text"].strip()])
            n += 1
    return out


def measure(redis_url: str, sessions: int, dtype: str = "f2") -> dict[str, Any]:
    prefix = f"agtos-bench-{uuid.uuid4().hex[:8]}"
    keys = GlobalKeys(prefix)
    connector = RedisConnector(redis_url, None, 5.0)
    store = TurnStore(
        connector,
        keys,
        VectorIndex(connector, keys, "turn", DIM, storage_dtype=dtype),
        BM25Index(connector, keys, "turn"),
        3600,
    )
    rng = np.random.default_rng(0)
    chats, n_turns, content_bytes = chat_sessions(), 0, 0
    for i in range(sessions):
        said = chats[i % len(chats)]
        turns = [
            Turn(role="user" if j % 2 == 0 else "assistant", name=name, content=text, timestamp=1_700_000_000_000 + j)
            for j, (name, text) in enumerate(said)
        ]
        kept = stored_turns("bench-user", f"ep-{i:06d}", f"s-{i}", turns)
        units = turn_units(kept)
        vectors = rng.standard_normal((len(units), DIM)).astype(np.float32)
        n_turns += store.save(kept, units, vectors)
        content_bytes += sum(len(t.content.encode()) for t in kept)
    client = redis.Redis.from_url(redis_url)
    families: Counter[str] = Counter()
    try:
        for key in client.scan_iter(match=f"{prefix}:u:*", count=1_000):
            name = key.decode()
            family = "turn lists" if ":turns:" in name else ("bm25 index" if ":bm25:" in name else "vector index")
            families[family] += int(client.memory_usage(key, samples=0) or 0)
    finally:
        for key in client.scan_iter(match=f"{prefix}:*", count=1_000):
            client.unlink(key)
    per_turn = {family: round(total / n_turns, 1) for family, total in sorted(families.items())}
    return {
        "vector blobs": {"f2": "float16", "f4": "float32"}[dtype],
        "sessions": sessions,
        "turns": n_turns,
        "content bytes per turn": round(content_bytes / n_turns, 1),
        **{f"{family} bytes per turn": value for family, value in per_turn.items()},
        "total bytes per turn": round(sum(families.values()) / n_turns, 1),
    }


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sessions", type=int, default=200)
    parser.add_argument("--redis-url", default="redis://127.0.0.1:6379/0")
    parser.add_argument("--dtype", choices=["f2", "f4"], action="append", help="vector blobs (default: both)")
    args = parser.parse_args(argv)
    print(json.dumps([measure(args.redis_url, args.sessions, d) for d in args.dtype or ["f4", "f2"]], indent=2))
    return 0


if __name__ == "__main__":
    sys.exit(main())
