"""Small helpers shared by the API tests."""

from __future__ import annotations

import socket
import threading
import time
import uuid
from collections.abc import Iterator
from contextlib import contextmanager
from datetime import datetime, timedelta
from pathlib import Path
from typing import Any

import redis
from fastapi.testclient import TestClient

from agtos.config import MaintenanceConfig, Settings
from agtos.memory.coordinator import MemoryCoordinator
from agtos.providers.embeddings import EmbeddingError
from agtos.schemas import Conclusion
from agtos.serving.app import create_app


def user(user_id: str) -> dict[str, str]:
    return {"X-User-Id": user_id}


def talk(client: TestClient, user_id: str, session_id: str, *exchanges: tuple[str, str]) -> dict[str, Any]:
    """Post (role, content) turns to a session, end it, and return the end-session body."""
    return end_session(client, user_id, session_id, [{"role": r, "content": c} for r, c in exchanges])


def end_session(client: TestClient, user_id: str, session_id: str, turns: list[dict[str, Any]]) -> dict[str, Any]:
    """Post turns (JSON bodies) to a session in one request, end it, and return the end-session body."""
    response = client.post(f"/api/memory/sessions/{session_id}/turns", json={"turns": turns}, headers=user(user_id))
    assert response.status_code == 200, response.text
    ended = client.post(f"/api/memory/sessions/{session_id}/end", headers=user(user_id))
    assert ended.status_code == 200, ended.text
    return ended.json()


def run_maintenance(client: TestClient, user_id: str, timeout_s: float = 120.0) -> dict[str, Any]:
    """``POST /api/memory/maintain`` (202 with a queued run), then poll the run until it is done;
    returns the finished run (``status``, ``report``...)."""
    response = client.post("/api/memory/maintain", headers=user(user_id))
    assert response.status_code == 202, response.text
    run = response.json()
    assert response.headers["location"] == f"/api/memory/maintain/runs/{run['runId']}"
    deadline = time.monotonic() + timeout_s
    while run["status"] in ("queued", "running"):
        assert time.monotonic() < deadline, f"maintenance run still {run['status']} after {timeout_s} s: {run}"
        time.sleep(0.02)
        polled = client.get(response.headers["location"], headers=user(user_id))
        assert polled.status_code == 200, polled.text
        run = polled.json()
    return run


def delete_prefix(redis_url: str, prefix: str) -> None:
    """Delete every key of a test namespace."""
    client = redis.Redis.from_url(redis_url)
    keys = list(client.scan_iter(match=f"{prefix}:*", count=1000))
    if keys:
        client.delete(*keys)


def isolation_settings(redis_url: str, prefix: str, tmp: Path) -> Settings:
    """Settings of a module-scoped app: lint and LLM work run at once (no ResourceGuard waits)."""
    return Settings(
        redis_url=redis_url,
        key_prefix=prefix,
        data_dir=tmp / "data",
        config_dir=tmp / "config",
        background_work_policy="always",
        maintenance=MaintenanceConfig(guard_retries=0, guard_delay_s=0.0),
    )


@contextmanager
def isolated_app(redis_url: str, tmp: Path) -> Iterator[tuple[TestClient, MemoryCoordinator, str]]:
    """An app over a key prefix of its own (:func:`isolation_settings`), entered: its client, its coordinator
    and the prefix. Afterwards the coordinator is closed and every key of the prefix deleted."""
    prefix = f"agtos-test-{uuid.uuid4().hex[:10]}"
    coordinator = MemoryCoordinator(isolation_settings(redis_url, prefix, tmp))
    try:
        with TestClient(create_app(coordinator=coordinator)) as client:
            yield client, coordinator, prefix
    finally:
        coordinator.close()
        delete_prefix(redis_url, prefix)


def key_owner(prefix: str, key: str) -> str | None:
    """The user of a ``{prefix}:u:{<user>}:…`` key (the README's layout); None for a global key."""
    rest = key[len(prefix) + 1 :]
    if not rest.startswith("u:{") or "}:" not in rest:
        return None
    return rest[3:].split("}:", 1)[0]


def user_key_names(raw: redis.Redis, prefix: str, user_id: str) -> set[str]:
    """Every key of one user, by SCAN (``{`` and ``}`` are not glob characters)."""
    return {k.decode() for k in raw.scan_iter(match=f"{prefix}:u:{{{user_id}}}:*", count=1_000)}


def bm25_oracle(terms: dict[str, list[str]], query: list[str], limit: int = 10) -> list[tuple[str, float]]:
    """BM25 scores from ``bm25s``, an independent implementation, best first (ties by id).

    agtos documents Okapi BM25 with k1 = 1.2, b = 0.75, the Lucene idf ``ln(1 + (N - df + 0.5) /
    (df + 0.5))`` (never negative) and the classic ``tf·(k1 + 1) / (tf + k1·(1 - b + b·dl/avgdl))``
    term weight. In bm25s that is ``method="atire"`` (the (k1 + 1) numerator) with
    ``idf_method="lucene"``, so scores must agree exactly, not only in ranking (rank_bm25's
    BM25Okapi uses another idf, negative for common terms, so it is not used).
    """
    import bm25s

    ids = list(terms)
    retriever = bm25s.BM25(k1=1.2, b=0.75, method="atire", idf_method="lucene", dtype="float64")
    retriever.index([terms[i] for i in ids], show_progress=False)
    scores = retriever.get_scores(list(dict.fromkeys(query)))
    ranked = sorted(((i, float(s)) for i, s in zip(ids, scores, strict=True) if s > 0), key=lambda x: (-x[1], x[0]))
    return ranked[:limit]


def inductive_conclusion(user_id: str, conclusion_id: str, text: str, stamp: int) -> Conclusion:
    """A confident inductive conclusion from one episode, created and updated at ``stamp``."""
    return Conclusion(
        id=conclusion_id,
        user_id=user_id,
        text=text,
        type="inductive",
        confidence=0.9,
        source_episode_ids=["ep-1"],
        created_at=stamp,
        updated_at=stamp,
    )


class BrokenEmbedder:
    """An embedder whose model cannot load: every use raises ``EmbeddingError``."""

    name = "broken"
    model = "none"

    @property
    def dim(self) -> int:
        raise EmbeddingError("model file missing")


# what POST …/end adds to a session end that stored nothing (README "Ingestion queue")
SKIPPED = {"episodeId": None, "status": "skipped", "turnsAccepted": 0, "queuePosition": None, "searchableInS": None}


def gina_jon_turns(start: datetime, lines: list[tuple[str, str]]) -> list[dict[str, Any]]:
    """A named two-person session's turn bodies, 30 s apart from ``start``: Gina is the user."""
    return [
        {
            "role": "user" if name == "Gina" else "assistant",
            "name": name,
            "content": text,
            "timestamp": int((start + timedelta(seconds=30 * i)).timestamp() * 1000),
        }
        for i, (name, text) in enumerate(lines)
    ]


@contextmanager
def silent_listener() -> Iterator[int]:
    """A loopback port that accepts connections and never answers (a hung model server); yields the port."""
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
        yield int(listener.getsockname()[1])
    finally:
        stop.set()
        thread.join(timeout=2)
        for conn in held:
            conn.close()
        listener.close()


@contextmanager
def served_by_uvicorn(app: Any, http: str = "auto") -> Iterator[int]:
    """``app`` served by uvicorn (its ``http`` protocol) on a free loopback port, in a thread: the port."""
    import uvicorn

    sock = socket.socket()
    sock.bind(("127.0.0.1", 0))
    server = uvicorn.Server(uvicorn.Config(app, http=http, log_level="warning"))
    thread = threading.Thread(target=server.run, kwargs={"sockets": [sock]}, daemon=True)
    thread.start()
    try:
        deadline = time.monotonic() + 60
        while not server.started and thread.is_alive() and time.monotonic() < deadline:
            time.sleep(0.05)
        assert server.started, "uvicorn did not start"
        yield sock.getsockname()[1]
    finally:
        server.should_exit = True
        thread.join(30)
        sock.close()
