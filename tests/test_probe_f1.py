"""What a careful tester's probe of ``agtos serve`` found (issue 15, f1), each through HTTP on real Redis.

schemathesis (all checks, service key and user key) found ``POST /api/memory/maintain`` answering 202 with a
``Location`` that answered 404: a run queued while the runner thread was busy, then the user forgot everything
(``PUT /privacy`` with ``forget_existing``); every later ``POST /maintain`` handed out that forgotten run again,
and when the thread reached it, it wrote the run's record back (for a user who had opted out, too). Redis
stopped under a running API: ``GET /privacy`` answered ``optOut: false`` for a user who had opted out, a
setting it could not read. ``PUT /profile`` refused blank list items (422) that its JSON Schema allowed.
"""

from __future__ import annotations

import re
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import redis
from fastapi.testclient import TestClient

from agtos.config import MaintenanceConfig, Settings
from agtos.memory.coordinator import MemoryCoordinator
from agtos.serving.app import create_app
from tests.helpers import user
from tests.redis_process import RedisProcess

#: the guard defers a sweep while a session is active: the runner thread is busy for 3 x 0.5 s
BUSY = MaintenanceConfig(guard_retries=3, guard_delay_s=0.5)


@pytest.fixture
def busy(settings: Settings) -> Iterator[TestClient]:
    """The API with the runner thread held by a sweep the guard defers (another user's session is live)."""
    coordinator = MemoryCoordinator(settings.with_overrides(background_work_policy="auto", maintenance=BUSY))
    try:
        with TestClient(create_app(coordinator=coordinator)) as client:
            turn = {"turns": [{"role": "user", "content": "Still typing."}]}
            assert client.post("/api/memory/sessions/live/turns", json=turn, headers=user("bea")).status_code == 200
            assert client.post("/api/memory/maintain", headers=user("bea")).status_code == 202  # holds the thread
            yield client
    finally:
        coordinator.close()


def _maintain(client: TestClient, user_id: str) -> dict[str, Any]:
    response = client.post("/api/memory/maintain", headers=user(user_id))
    assert response.status_code == 202, response.text
    assert response.headers["location"] == f"/api/memory/maintain/runs/{response.json()['runId']}"
    return dict(response.json())


def _run(client: TestClient, user_id: str, run_id: str) -> int:
    return client.get(f"/api/memory/maintain/runs/{run_id}", headers=user(user_id)).status_code


def _settled(client: TestClient, user_id: str, run_id: str) -> None:
    """Wait until the run is done (the thread took every run queued before it)."""
    deadline = time.monotonic() + 60
    while client.get(f"/api/memory/maintain/runs/{run_id}", headers=user(user_id)).json()["status"] in (
        "queued",
        "running",
    ):
        assert time.monotonic() < deadline, "the maintenance run never finished"
        time.sleep(0.05)


def test_a_run_queued_before_a_forget_all_is_not_handed_out_again_nor_written_back(
    busy: TestClient, raw_redis: redis.Redis, key_prefix: str
) -> None:
    """Ann's run waits behind Bea's; Ann forgets everything. Her next ``POST /maintain`` queues a new run whose
    ``Location`` answers 200 (it was the forgotten run's id: 404); once the thread has passed, the forgotten
    run's record is still gone (it was written back when the thread reached it)."""
    first = _maintain(busy, "ann")
    assert _run(busy, "ann", first["runId"]) == 200
    forgot = busy.post("/api/memory/forget", json={"kind": "all"}, headers=user("ann"))
    assert forgot.status_code == 200, forgot.text

    again = _maintain(busy, "ann")

    assert again["runId"] != first["runId"], again
    assert _run(busy, "ann", again["runId"]) == 200
    _settled(busy, "ann", again["runId"])
    assert _run(busy, "ann", first["runId"]) == 404
    runs = {k.decode() for k in raw_redis.scan_iter(match=f"{key_prefix}:u:{{ann}}:lintrun:*", count=1_000)}
    assert runs == {f"{key_prefix}:u:{{ann}}:lintrun:{again['runId']}"}


def test_a_run_queued_before_an_opt_out_writes_nothing_for_the_user(
    busy: TestClient, raw_redis: redis.Redis, key_prefix: str
) -> None:
    """Ann's run waits behind Bea's; Ann opts out and forgets what was stored. When the thread has passed her
    run, no key of hers exists (her run's record came back, ``failed``, for a user who had opted out)."""
    first = _maintain(busy, "ann")
    out = busy.put("/api/memory/privacy", json={"opt_out": True, "forget_existing": True}, headers=user("ann"))
    assert out.status_code == 200, out.text
    assert busy.post("/api/memory/maintain", headers=user("ann")).status_code == 403

    _settled(busy, "bea", _maintain(busy, "bea")["runId"])  # queued after Ann's: the thread has passed hers

    assert _run(busy, "ann", first["runId"]) == 404
    assert list(raw_redis.scan_iter(match=f"{key_prefix}:u:{{ann}}:*", count=1_000)) == []


def test_an_opt_out_landing_as_the_thread_takes_the_run_leaves_no_key(
    settings: Settings, raw_redis: redis.Redis, key_prefix: str
) -> None:
    """The runner thread has read Ann's queued run (it is there: not dropped) when she opts out and forgets
    everything, just before the sweep starts (where the Prefect hand-off check sits). The sweep then fails
    for an opted-out user; its record, written back ``failed``, must go with the rest: no key of Ann's is
    left (the forget's fence was compared with a time read after it, so the record stayed; f4's review)."""
    coordinator = MemoryCoordinator(settings)
    forgot: list[int] = []
    taken = threading.Event()
    try:
        with TestClient(create_app(coordinator=coordinator)) as client:
            run_it = coordinator.maintain_run

            def opt_out_first(run: Any, sleep: Any = time.sleep, since_ms: int | None = None) -> Any:
                try:
                    body = {"opt_out": True, "forget_existing": True}
                    forgot.append(client.put("/api/memory/privacy", json=body, headers=user("ann")).status_code)
                    return run_it(run, sleep) if since_ms is None else run_it(run, sleep, since_ms)
                finally:
                    taken.set()

            coordinator.maintain_run = opt_out_first  # type: ignore[method-assign]
            first = _maintain(client, "ann")
            assert taken.wait(60), "the runner thread never took the run"

            assert forgot == [200]
            assert _run(client, "ann", first["runId"]) == 404
            assert list(raw_redis.scan_iter(match=f"{key_prefix}:u:{{ann}}:*", count=1_000)) == []
    finally:
        coordinator.close()


def test_the_profile_says_an_opt_out_made_in_another_process_at_once(settings: Settings) -> None:
    """Two API processes on one Redis: Cal's profile read on the first (its opt-out now known there as
    false), Cal opts out on the second; the first's next ``GET /profile`` says ``opt_out: true`` at once, as
    its ``GET /privacy`` does (the profile read the writers' 2-second cache of the setting; f4's review)."""
    first, second = MemoryCoordinator(settings), MemoryCoordinator(settings)
    try:
        with TestClient(create_app(coordinator=first)) as one, TestClient(create_app(coordinator=second)) as two:
            assert one.get("/api/memory/profile", headers=user("cal")).json()["profile"]["opt_out"] is False
            out = two.put("/api/memory/privacy", json={"opt_out": True}, headers=user("cal"))
            assert out.status_code == 200, out.text
            assert one.get("/api/memory/profile", headers=user("cal")).json()["profile"]["opt_out"] is True
            assert one.get("/api/memory/privacy", headers=user("cal")).json()["optOut"] is True
    finally:
        first.close()
        second.close()


def test_the_privacy_setting_is_not_made_up_while_redis_is_down(settings: Settings, tmp_path: Path) -> None:
    """Cid opts out; Redis (a private server) stops; ``GET /api/memory/privacy`` from another API process (the
    setting not cached there) answers 503, not ``optOut: false``. Back up: ``optOut: true``."""
    server = RedisProcess(tmp_path / "redis", appendonly=True, extra_args=("--appendfsync", "always")).start()
    own = settings.with_overrides(redis_url=server.url, redis_timeout_s=0.3)
    first, second = MemoryCoordinator(own), MemoryCoordinator(own)
    try:
        with TestClient(create_app(coordinator=first)) as one, TestClient(create_app(coordinator=second)) as two:
            assert two.get("/api/memory/privacy", headers=user("dan")).json()["optOut"] is False  # Redis seen
            out = one.put("/api/memory/privacy", json={"opt_out": True}, headers=user("cid"))
            assert out.status_code == 200, out.text
            server.stop()

            down = two.get("/api/memory/privacy", headers=user("cid"))

            assert down.status_code == 503, down.text
            assert set(down.json()) == {"message"} and str(server.port) not in down.text
            server.start()
            back = two.get("/api/memory/privacy", headers=user("cid"))
            assert (back.status_code, back.json()) == (200, {"userId": "cid", "optOut": True})
    finally:
        first.close()
        second.close()
        server.stop()


def test_the_profiles_blank_list_items_rule_is_in_its_json_schema(client: TestClient) -> None:
    """``PUT /api/memory/profile`` refuses a blank item of preferences, patterns or facts (422); its JSON Schema
    says so (an item must hold a character that is not a space: its ``pattern``), so a client that follows the
    schema is not refused."""
    schema = client.get("/openapi.json").json()["components"]["schemas"]["ProfileUpdate"]["properties"]
    for field in ("preferences", "patterns", "facts"):
        items = next(a["items"] for a in schema[field]["anyOf"] if a.get("type") == "array")
        stated = re.compile(items["pattern"])  # JSON Schema patterns are searched, not anchored
        assert [bool(stated.search(t)) for t in ("tea", " ", "\u3000\t", "\ufeff", " x ")] == [1, 0, 0, 0, 1], items
        for blank in (" ", "\ufeff"):  # U+FEFF: a space to ECMAScript's \s, not to Python's str.strip
            refused = client.put("/api/memory/profile", json={field: ["tea", blank]}, headers=user("eve"))
            assert refused.status_code == 422, refused.text
        kept = client.put("/api/memory/profile", json={field: ["tea", " x "]}, headers=user("eve"))
        assert kept.status_code == 200, kept.text
