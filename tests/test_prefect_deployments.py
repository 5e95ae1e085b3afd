"""Deployments served against a real local Prefect server: a triggered lint run completes."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest

from agtos.config import Settings
from agtos.memory.coordinator import MemoryCoordinator
from tests.redis_process import free_port
from tests.test_lint import U, crafted

pytestmark = pytest.mark.slow

REPO = Path(__file__).resolve().parent.parent


def _wait(url: str, timeout_s: float) -> None:
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        try:
            if httpx.get(url, timeout=2).status_code == 200:
                return
        except httpx.HTTPError:
            pass
        time.sleep(0.5)
    raise TimeoutError(f"{url} did not answer within {timeout_s} s")


class RetryBusyTransport(httpx.HTTPTransport):
    """Retries 503 answers as Prefect's own client does: the server sends 503 while its SQLite
    database is momentarily locked (e.g. by its background services on a busy machine)."""

    def handle_request(self, request: httpx.Request) -> httpx.Response:
        for _ in range(40):
            response = super().handle_request(request)
            if response.status_code != 503:
                return response
            response.close()
            time.sleep(0.5)
        return response


def api_client(api: str) -> httpx.Client:
    return httpx.Client(base_url=api, timeout=10, transport=RetryBusyTransport())


def _clean(api: str) -> None:
    """No deployment and no ``agtos`` work pool on the server (each test reads only flow runs it
    created itself, by their ids)."""
    with api_client(api) as client:
        for deployment in client.post("/deployments/filter", json={}).json():
            assert client.delete(f"/deployments/{deployment['id']}").status_code in (200, 204, 404)
        assert client.delete("/work_pools/agtos").status_code in (200, 204, 404)


@pytest.fixture(scope="module")
def module_prefect_server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    """The Prefect server test_prefect_submit / test_readme_examples started in this pytest process when
    one runs (no second start-up: 15-30 s on a loaded machine); else one for this module, stopped after
    it (an idle server's services cost about 2 % of a core for the rest of the session)."""
    from tests.test_prefect_submit import _SERVER  # that module imports this one

    if "api" in _SERVER:
        yield _SERVER["api"]
        return
    port = free_port()
    env = {
        **os.environ,
        "PREFECT_HOME": str(tmp_path_factory.mktemp("prefect")),
        "PREFECT_SERVER_ANALYTICS_ENABLED": "false",
        "PREFECT_UI_ENABLED": "false",
    }
    env.pop("PREFECT_API_URL", None)
    proc = subprocess.Popen(
        [sys.executable, "-m", "prefect", "server", "start", "--host", "127.0.0.1", "--port", str(port)],
        env=env,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    api = f"http://127.0.0.1:{port}/api"
    try:
        _wait(f"{api}/health", 120)
        yield api
    finally:
        proc.terminate()
        proc.wait(timeout=30)


@pytest.fixture
def prefect_server(module_prefect_server: str) -> Iterator[str]:
    """The module's server with no deployment or work pool before the test and none left after it (a
    served deployment's schedule would add flow runs that the other modules' lint deployment, of the
    same flow and name, would then hold)."""
    _clean(module_prefect_server)
    yield module_prefect_server
    _clean(module_prefect_server)


def test_served_lint_deployment_completes(
    prefect_server: str, settings: Settings, redis_url: str, key_prefix: str, tmp_path: Path
) -> None:
    coordinator = MemoryCoordinator(settings.with_overrides(background_work_policy="always"))
    crafted(coordinator)
    env = {
        **os.environ,
        "PREFECT_API_URL": prefect_server,
        "PREFECT_HOME": str(tmp_path / "runner"),
        "PREFECT_RUNNER_POLL_FREQUENCY": "1",  # serve()'s runner looks for runs every 10 s by default
        "REDIS_URL": redis_url,
        "AGTOS_KEY_PREFIX": key_prefix,
        "AGTOS_BACKGROUND_WORK_POLICY": "always",
        "AGTOS_MAINTENANCE_TIMEZONE": "Europe/Berlin",
        "AGTOS_CONFIG_DIR": str(tmp_path / "cfg"),
    }
    runner = subprocess.Popen(
        [sys.executable, "-c", "from agtos.flows.deployments import serve_deployments; serve_deployments()"],
        env=env,
        cwd=REPO,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    try:
        client = api_client(prefect_server)
        deployment = None
        deadline = time.monotonic() + 120
        while deployment is None and time.monotonic() < deadline:
            found = client.post("/deployments/filter", json={"deployments": {"name": {"any_": ["nightly-lint"]}}})
            deployment = (found.json() or [None])[0] if found.status_code == 200 else None
            time.sleep(0.25)
        assert deployment is not None, "the runner never registered nightly-lint"
        schedule = deployment["schedules"][0]["schedule"]
        assert schedule["cron"] == "0 3 * * *" and schedule["timezone"] == "Europe/Berlin"

        run = client.post(f"/deployments/{deployment['id']}/create_flow_run", json={"parameters": {"user_id": U}})
        assert run.status_code in (200, 201), run.text
        run_id = run.json()["id"]
        assert _wait_for_runs(client, [run_id], 240) == {run_id: "COMPLETED"}
        reports = coordinator.maintenance.history(U)
        assert len(reports) == 1 and reports[0].summary["status"] == "completed"

        run = _maintain_through_the_api(env, U)  # with PREFECT_API_URL: the deployment takes the run
        assert run["status"] == "completed" and run["flowRunId"], run
        assert _wait_for_runs(client, [run["flowRunId"]], 0) == {run["flowRunId"]: "COMPLETED"}
        reports = coordinator.maintenance.history(U)
        assert len(reports) == 2 and reports[0].summary["runId"] == run["runId"]
    finally:
        runner.terminate()
        runner.wait(timeout=30)
        coordinator.close()


MAINTAIN_THROUGH_THE_API = """
import json, sys, time
from fastapi.testclient import TestClient
from agtos.serving.app import create_app
with TestClient(create_app()) as client:
    headers = {"X-User-Id": sys.argv[1]}
    run = client.post("/api/memory/maintain", headers=headers).json()
    deadline = time.monotonic() + 240
    while run["status"] in ("queued", "running") and time.monotonic() < deadline:
        time.sleep(0.2)
        run = client.get(f"/api/memory/maintain/runs/{run['runId']}", headers=headers).json()
print(json.dumps(run))
"""


def _maintain_through_the_api(env: dict[str, str], user_id: str) -> dict[str, Any]:
    """``POST /api/memory/maintain`` in an API process of ``env``; the run once it has finished."""
    done = subprocess.run(
        [sys.executable, "-c", MAINTAIN_THROUGH_THE_API, user_id], env=env, capture_output=True, text=True, timeout=300
    )
    assert done.returncode == 0, done.stderr
    return dict(json.loads(done.stdout.strip().splitlines()[-1]))


def _prefect(env: dict[str, str], *args: str) -> None:
    """One ``prefect`` CLI call from the repository root (where prefect.yaml lives); fails loudly."""
    done = subprocess.run(
        [sys.executable, "-m", "prefect", *args], env=env, cwd=REPO, capture_output=True, text=True, timeout=180
    )
    assert done.returncode == 0, f"prefect {' '.join(args)} failed:\n{done.stdout}\n{done.stderr}"


def _wait_for_runs(client: httpx.Client, run_ids: list[str], timeout_s: float) -> dict[str, str]:
    """Final state type of each flow run (or its last state when time runs out)."""
    deadline = time.monotonic() + timeout_s
    while True:  # read at least once (timeout 0: the states now)
        states = {rid: client.get(f"/flow_runs/{rid}").json()["state"]["type"] for rid in run_ids}
        if time.monotonic() >= deadline or all(
            s in ("COMPLETED", "FAILED", "CRASHED", "CANCELLED") for s in states.values()
        ):
            return states
        time.sleep(0.25)


def _worker(env: dict[str, str], name: str, log: Path, *options: str) -> subprocess.Popen[bytes]:
    """A process worker of the ``agtos`` pool, its output in ``log``."""
    cmd = [sys.executable, "-m", "prefect", "worker", "start", "--pool", "agtos", "--name", name, *options]
    return subprocess.Popen(cmd, env=env, cwd=REPO, stdout=log.open("w"), stderr=subprocess.STDOUT)


def _claimed_runs(worker: str, log: str, run_ids: list[str]) -> set[str]:
    """Runs this worker submitted and was not refused (were two workers to try one run, the server
    would let one of them move it to PENDING and abort the other's submission)."""
    tried = {rid for rid in run_ids if f"Worker '{worker}' submitting flow run '{rid}'" in log}
    return {rid for rid in tried if f"Aborted submission of flow run '{rid}'" not in log}


def test_process_work_pool_with_two_workers_runs_ingestion(
    prefect_server: str, settings: Settings, redis_url: str, key_prefix: str, tmp_path: Path
) -> None:
    """prefect.yaml deployed to a process work pool; two workers share the queued ingestion runs,
    each run is executed exactly once, and every episode lands in Redis exactly once."""
    env = {
        **os.environ,
        "PREFECT_API_URL": prefect_server,
        "PREFECT_HOME": str(tmp_path / "runner"),
        "PREFECT_WORKER_QUERY_SECONDS": "1",
        "PREFECT_LOGGING_LEVEL": "INFO",  # the workers' "submitting flow run" lines (agtos.flows sets WARNING)
        "COLUMNS": "500",  # no wrapping of those lines
        "PWD": str(REPO),  # prefect.yaml's pull step: {{ $PWD }}
        "REDIS_URL": redis_url,
        "AGTOS_KEY_PREFIX": key_prefix,
        "AGTOS_DATA_DIR": str(tmp_path / "data"),
        "AGTOS_CONFIG_DIR": str(tmp_path / "cfg"),
        "AGTOS_MAINTENANCE_TIMEZONE": "UTC",
    }
    _prefect(env, "work-pool", "create", "agtos", "--type", "process")
    _prefect(env, "--no-prompt", "deploy", "--all")
    client = api_client(prefect_server)
    found = client.post("/deployments/filter", json={"deployments": {"name": {"any_": ["ingestion"]}}}).json()
    assert len(found) == 1, found
    runs = 4
    batches = [
        [
            {"user_id": "pool-user", "episode": {"id": f"pool-{b}-{i}", "user_id": "pool-user", "summary": text}}
            for i, text in enumerate([f"Batch {b} planned a trip to Lisbon", f"Batch {b} repaired the bike brakes"])
        ]
        for b in range(runs)
    ]
    run_ids = []
    for items in batches:
        run = client.post(f"/deployments/{found[0]['id']}/create_flow_run", json={"parameters": {"items": items}})
        assert run.status_code in (200, 201), run.text
        run_ids.append(run.json()["id"])

    # No race decides who works: worker A polls once with room for one run and exits when that
    # run is done; the three left must then go to worker B (room for three).
    logs = {name: tmp_path / f"{name}.log" for name in ("worker-a", "worker-b")}
    worker_a = _worker(env, "worker-a", logs["worker-a"], "--limit", "1", "--run-once")
    try:
        worker_a.wait(timeout=300)
    finally:
        worker_a.kill()  # a no-op once it has exited
    after_a = _wait_for_runs(client, run_ids, 0)
    assert sorted(after_a.values()) == ["COMPLETED", "SCHEDULED", "SCHEDULED", "SCHEDULED"], after_a
    worker_b = _worker(env, "worker-b", logs["worker-b"], "--limit", "3")
    try:
        states = _wait_for_runs(client, run_ids, 300)
    finally:
        worker_b.terminate()
        worker_b.wait(timeout=60)
    assert set(states.values()) == {"COMPLETED"}, states
    claimed = {name: _claimed_runs(name, log.read_text(), run_ids) for name, log in logs.items()}
    assert claimed == {
        "worker-a": {rid for rid, state in after_a.items() if state == "COMPLETED"},
        "worker-b": {rid for rid, state in after_a.items() if state == "SCHEDULED"},
    }, claimed  # each run submitted by exactly one worker, A's one and B's three

    coordinator = MemoryCoordinator(settings)
    try:
        episodes = coordinator.list_episodes("pool-user", 100)
    finally:
        coordinator.close()
    ids = [e.id for e in episodes]
    assert sorted(ids) == sorted(item["episode"]["id"] for items in batches for item in items)
