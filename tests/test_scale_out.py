"""Two API processes against one Redis see each other's writes at once (shared Redis indexes)."""

from __future__ import annotations

import os
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest

from tests.redis_process import free_port

pytestmark = pytest.mark.slow


@pytest.fixture
def two_apis(redis_url: str, key_prefix: str, tmp_path: Path) -> Iterator[tuple[str, str]]:
    env = {
        **os.environ,
        "REDIS_URL": redis_url,
        "AGTOS_KEY_PREFIX": key_prefix,
        "AGTOS_CONFIG_DIR": str(tmp_path / "cfg"),
    }
    procs, urls = [], []
    for _ in range(2):
        port = free_port()
        procs.append(
            subprocess.Popen(
                [sys.executable, "-m", "agtos.cli", "serve", "--port", str(port)],
                env=env,
                stdout=subprocess.DEVNULL,
                stderr=subprocess.DEVNULL,
            )
        )
        urls.append(f"http://127.0.0.1:{port}")
    try:
        for url in urls:
            deadline = time.monotonic() + 90
            while True:
                try:
                    if httpx.get(f"{url}/health", timeout=5).status_code == 200:
                        break
                except httpx.HTTPError:
                    pass
                if time.monotonic() > deadline:
                    raise TimeoutError(f"{url} did not start")
                time.sleep(0.5)
        yield urls[0], urls[1]
    finally:
        for proc in procs:  # both told first: their shutdowns overlap
            proc.terminate()
        for proc in procs:
            proc.wait(timeout=30)


def test_writes_on_one_process_are_searchable_on_the_other(two_apis: tuple[str, str]) -> None:
    a, b = two_apis
    headers = {"X-User-Id": "shared"}
    turns = {
        "turns": [
            {"role": "user", "content": "I prefer the QZ-4417 keyboard for coding."},
            {"role": "assistant", "content": "Noted."},
        ]
    }
    assert httpx.post(f"{a}/api/memory/sessions/s1/turns", json=turns, headers=headers, timeout=60).status_code == 200
    # the session journal lives in Redis: process B can end a session that process A started
    # `agtos serve` queues the ingestion (a worker thread in each process): wait for the episode
    ended = httpx.post(f"{b}/api/memory/sessions/s1/end", params={"wait": 60}, headers=headers, timeout=90).json()
    assert ended["status"] == "done"
    assert ended["saved"] is True
    for url in (a, b):
        for mode in ("bm25", "vector", "hybrid"):
            found = httpx.get(
                f"{url}/api/memory/search", params={"q": "QZ-4417 keyboard", "mode": mode}, headers=headers, timeout=60
            ).json()
            assert [r["id"] for r in found["results"]][:1] == [ended["episode"]["id"]], (url, mode)
    gone = httpx.post(
        f"{a}/api/memory/forget", json={"kind": "episode", "id": ended["episode"]["id"]}, headers=headers, timeout=60
    )
    assert gone.status_code == 200
    after = httpx.get(
        f"{b}/api/memory/search", params={"q": "QZ-4417 keyboard", "mode": "vector"}, headers=headers, timeout=60
    ).json()
    assert after["count"] == 0
