"""``POST /api/memory/maintain`` handing its run to Prefect, in this process (issue 20): the app's
maintenance thread submits the ``memory-lint/nightly-lint`` deployment to a real local Prefect server
and does not sweep; without a Prefect API it sweeps here. Prefect's own API is the oracle: the flow runs
it holds, their parameters and idempotency keys, and the requests Prefect's client made (its httpx log).

No worker runs the flow runs: they stay scheduled, and the run records the API queued stay ``queued``.
"""

from __future__ import annotations

import logging
import os
import re
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from typing import Any

import httpx
import prefect.context
import pytest
from fastapi.testclient import TestClient

from agtos.config import Settings
from agtos.memory.coordinator import MemoryCoordinator
from agtos.serving.app import create_app
from tests.helpers import user
from tests.redis_process import free_port
from tests.test_prefect_deployments import _wait, api_client

# mutmut kills a mutant's test process that runs past its time limit (a thread waiting on a flow run that
# no worker runs): the server it started must not outlive it (prctl PR_SET_PDEATHSIG holds across exec)
DIES_WITH_ITS_PARENT = (
    "import ctypes, os, signal, sys; ctypes.CDLL(None).prctl(1, signal.SIGTERM); "
    "os.execv(sys.executable, [sys.executable, *sys.argv[1:]])"
)


_SERVER: dict[str, str] = {}  # this pytest process's Prefect server for the lint deployment: its API URL


def prefect_server(config: pytest.Config, tmp_path_factory: pytest.TempPathFactory) -> str:
    """A real Prefect server (its own home), started on first use and stopped when the session ends:
    this module and test_readme_examples share it (one start-up, 15-30 s on a loaded machine)."""
    if "api" in _SERVER:
        return _SERVER["api"]
    port = free_port()
    env = {
        **os.environ,
        "PREFECT_HOME": str(tmp_path_factory.mktemp("prefect-server")),
        "PREFECT_SERVER_ANALYTICS_ENABLED": "false",
        "PREFECT_UI_ENABLED": "false",
    }
    env.pop("PREFECT_API_URL", None)
    server = ["-m", "prefect", "server", "start", "--host", "127.0.0.1", "--port", str(port)]
    proc = subprocess.Popen(
        [sys.executable, "-c", DIES_WITH_ITS_PARENT, *server] if sys.platform == "linux" else [sys.executable, *server],
        env=env,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )

    def stop() -> None:
        proc.terminate()
        proc.wait(timeout=30)

    config.add_cleanup(stop)
    api = f"http://127.0.0.1:{port}/api"
    _wait(f"{api}/health", 120)
    _SERVER["api"] = api
    return api


@pytest.fixture(scope="module")
def lint_deployment(
    request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[tuple[str, str]]:
    """The Prefect server knowing the flow ``memory-lint`` and its deployment ``nightly-lint``,
    registered through its REST API (no runner, no worker): (API URL, deployment id). The deployment
    is deleted after the module: the next module's is new, with none of this one's flow runs."""
    api = prefect_server(request.config, tmp_path_factory)
    with api_client(api) as client:
        flow = client.post("/flows/", json={"name": "memory-lint"})
        assert flow.status_code in (200, 201), flow.text
        deployment = client.post("/deployments/", json={"name": "nightly-lint", "flow_id": flow.json()["id"]})
        assert deployment.status_code in (200, 201), deployment.text
    deployment_id = deployment.json()["id"]
    yield api, deployment_id
    with api_client(api) as client:
        deleted = client.delete(f"/deployments/{deployment_id}")
        assert deleted.status_code == 204, deleted.text


def use_prefect_api(monkeypatch: pytest.MonkeyPatch, api: str | None) -> None:
    """``PREFECT_API_URL`` set to ``api`` (or unset) for this test: Prefect reads its settings once per
    process, so its root settings context is built again from the environment."""
    if api is None:
        monkeypatch.delenv("PREFECT_API_URL", raising=False)
    else:
        monkeypatch.setenv("PREFECT_API_URL", api)
    monkeypatch.setattr(prefect.context, "GLOBAL_SETTINGS_CONTEXT", prefect.context.root_settings_context())


def flow_runs(client: httpx.Client, deployment_id: str) -> list[dict[str, Any]]:
    found = client.post("/flow_runs/filter", json={"flow_runs": {"deployment_id": {"any_": [deployment_id]}}})
    assert found.status_code == 200, found.text
    return list(found.json())


def cancel_flow_runs(api: str, deployment_id: str, until: threading.Event) -> None:
    """Cancel the deployment's flow runs until ``until`` is set (a failed test's app can then stop:
    a thread waiting on a flow run, ann's or the one it submits next, returns when that run is final)."""
    with api_client(api) as client:
        while not until.wait(0.5):
            for made in flow_runs(client, deployment_id):
                if made["state"]["type"] == "SCHEDULED":
                    cancel = {"state": {"type": "CANCELLED"}, "force": True}
                    client.post(f"/flow_runs/{made['id']}/set_state", json=cancel)


def test_prefect_takes_the_run_with_its_parameters_once_without_waiting_and_nothing_sweeps_here(
    lint_deployment: tuple[str, str],
    settings: Settings,
    monkeypatch: pytest.MonkeyPatch,
    caplog: pytest.LogCaptureFixture,
) -> None:
    api, deployment_id = lint_deployment
    use_prefect_api(monkeypatch, api)
    caplog.set_level(logging.INFO)  # Prefect's client logs each request (httpx) at INFO
    caplog.set_level(logging.INFO, logger="httpx")
    coordinator = MemoryCoordinator(settings.with_overrides(background_work_policy="always"))
    prefect_api = api_client(api)
    app_stopped = threading.Event()
    try:
        with TestClient(create_app(coordinator=coordinator)) as client:
            run_ids = {}
            for user_id in ("ann", "bob"):  # one maintenance thread: bob's run is submitted after ann's
                queued = client.post("/api/memory/maintain", headers=user(user_id))
                assert queued.status_code == 202, queued.text
                run_ids[user_id] = queued.json()["runId"]
            deadline = time.monotonic() + 30
            try:
                while len(flow_runs(prefect_api, deployment_id)) < 2:
                    for user_id, run_id in run_ids.items():  # a run Prefect took is not swept here
                        stored = coordinator.maintenance.get_run(user_id, run_id)
                        assert stored is not None and stored.status == "queued", stored
                    # a thread that waited for ann's flow run to finish (no worker runs it) never gets to bob
                    assert time.monotonic() < deadline, f"bob's run never reached Prefect: {run_ids}"
                    time.sleep(0.25)
            except AssertionError:  # a thread waiting on a flow run returns once that run is final
                threading.Thread(target=cancel_flow_runs, args=(api, deployment_id, app_stopped), daemon=True).start()
                raise
            polled = {
                u: client.get(f"/api/memory/maintain/runs/{r}", headers=user(u)).json() for u, r in run_ids.items()
            }
        # the app's shutdown has drained the maintenance thread
        made = sorted(flow_runs(prefect_api, deployment_id), key=lambda r: str(r["parameters"]["user_id"]))
        assert [r["parameters"] for r in made] == [
            {"user_id": "ann", "run_id": run_ids["ann"]},
            {"user_id": "bob", "run_id": run_ids["bob"]},
        ]
        assert [r["idempotency_key"] for r in made] == [run_ids["ann"], run_ids["bob"]]
        assert [r["state"]["type"] for r in made] == ["SCHEDULED", "SCHEDULED"]  # nothing ran them

        # submitted again, the same run is the same flow run (a retried submission creates no second sweep)
        runner = client.app.state.maintenance_runner  # type: ignore[attr-defined]
        again = coordinator.maintenance.get_run("ann", run_ids["ann"])
        assert again is not None
        assert runner._submitted_to_prefect(again) is True
        assert sorted(r["id"] for r in flow_runs(prefect_api, deployment_id)) == sorted(r["id"] for r in made)

        # the thread returned as soon as Prefect had the flow run: it never read a flow run back (waiting)
        requests = [r.getMessage() for r in caplog.records if r.name == "httpx"]
        assert any(re.search(r"POST \S+/deployments/\S+/create_flow_run", m) for m in requests), requests
        read_back = [m for m in requests if any(f"/flow_runs/{r['id']}" in m for r in made)]
        assert read_back == [], read_back

        # nothing swept here: each record is still queued (a worker's flow would take it further), no report
        for user_id, run_id in run_ids.items():
            assert polled[user_id]["status"] == "queued", polled[user_id]
            stored = coordinator.maintenance.get_run(user_id, run_id)
            assert stored is not None and stored.status == "queued" and stored.report is None, stored
            assert coordinator.maintenance.history(user_id) == []
    finally:
        app_stopped.set()
        prefect_api.close()
        coordinator.close()


def test_without_a_prefect_api_the_run_is_swept_in_this_process(
    settings: Settings, monkeypatch: pytest.MonkeyPatch
) -> None:
    use_prefect_api(monkeypatch, None)
    coordinator = MemoryCoordinator(settings.with_overrides(background_work_policy="always"))
    try:
        with TestClient(create_app(coordinator=coordinator)) as client:
            queued = client.post("/api/memory/maintain", headers=user("ann"))
            assert queued.status_code == 202, queued.text
            run_id = queued.json()["runId"]
        # the app's shutdown has drained the maintenance thread: the sweep ran in it, no Prefect flow run
        run = coordinator.maintenance.get_run("ann", run_id)
        assert run is not None and run.status == "completed" and run.flow_run_id is None, run
        assert run.report is not None and run.report.summary["runId"] == run_id
        history = coordinator.maintenance.history("ann")
        assert len(history) == 1 and history[0].summary["runId"] == run_id
    finally:
        coordinator.close()
