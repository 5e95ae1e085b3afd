"""Deployments served against a real local Prefect server: a triggered lint run completes."""

from __future__ import annotations

import os
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest

from agtos.config import Settings
from agtos.memory.coordinator import MemoryCoordinator
from tests.redis_process import free_port
from tests.test_lint import U, crafted

pytestmark = pytest.mark.slow


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


@pytest.fixture
def prefect_server(tmp_path: Path) -> Iterator[str]:
    port = free_port()
    env = {
        **os.environ,
        "PREFECT_HOME": str(tmp_path / "prefect"),
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


def test_served_lint_deployment_completes(
    prefect_server: str, settings: Settings, redis_url: str, key_prefix: str, tmp_path: Path
) -> None:
    coordinator = MemoryCoordinator(settings.with_overrides(background_work_policy="always"))
    crafted(coordinator)
    env = {
        **os.environ,
        "PREFECT_API_URL": prefect_server,
        "PREFECT_HOME": str(tmp_path / "runner"),
        "REDIS_URL": redis_url,
        "AGTOS_KEY_PREFIX": key_prefix,
        "AGTOS_BACKGROUND_WORK_POLICY": "always",
        "AGTOS_MAINTENANCE_TIMEZONE": "Europe/Berlin",
        "AGTOS_CONFIG_DIR": str(tmp_path / "cfg"),
    }
    runner = subprocess.Popen(
        [sys.executable, "-c", "from agtos.flows.deployments import serve_deployments; serve_deployments()"],
        env=env,
        cwd=Path(__file__).resolve().parent.parent,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    try:
        client = httpx.Client(base_url=prefect_server, timeout=10)
        deployment = None
        deadline = time.monotonic() + 120
        while deployment is None and time.monotonic() < deadline:
            found = client.post("/deployments/filter", json={"deployments": {"name": {"any_": ["nightly-lint"]}}})
            deployment = (found.json() or [None])[0] if found.status_code == 200 else None
            time.sleep(1)
        assert deployment is not None, "the runner never registered nightly-lint"
        schedule = deployment["schedules"][0]["schedule"]
        assert schedule["cron"] == "0 3 * * *" and schedule["timezone"] == "Europe/Berlin"

        run = client.post(f"/deployments/{deployment['id']}/create_flow_run", json={"parameters": {"user_id": U}})
        assert run.status_code in (200, 201), run.text
        run_id = run.json()["id"]
        state = None
        deadline = time.monotonic() + 240
        while time.monotonic() < deadline:
            state = client.get(f"/flow_runs/{run_id}").json()["state"]["type"]
            if state in ("COMPLETED", "FAILED", "CRASHED", "CANCELLED"):
                break
            time.sleep(1)
        assert state == "COMPLETED"
        reports = coordinator.maintenance.history(U)
        assert len(reports) == 1 and reports[0].summary["status"] == "completed"
    finally:
        runner.terminate()
        runner.wait(timeout=30)
        coordinator.close()
