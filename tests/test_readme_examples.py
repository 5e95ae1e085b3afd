"""The README followed word by word by a new user (issues 14/15/20): what the command line promises there.

- "An invalid value ... stops the service at start with the variable named": `agtos serve` with a
  bad `AGTOS_PORT` printed a 33-line rich traceback (with source lines) before the message; now
  the message alone, exit status 2.
- "a symlink ... that resolves outside it is skipped with a warning": `agtos memory import` dropped
  the warnings of its scan (the listing kept only rows with items), so a symlinked `global_rules.md`
  or a transcript's malformed lines vanished silently, and a session the save heuristics skip
  (README: "greetings and single-turn trivial lookups skipped") was listed with 1 item and then
  imported as 0 without a word. Both are printed now.
- `agtos memory maintain` says why the ResourceGuard deferred it; `agtos flows serve` needs PREFECT_API_URL;
  the NLI pinning command answers a wrong call in one line; a second POST /maintain while the user's run is
  still queued returns that run.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest
from fastapi.testclient import TestClient
from typer.testing import CliRunner

from agtos.cli import app
from agtos.config import Settings
from agtos.memory.coordinator import MemoryCoordinator
from agtos.serving.app import create_app
from tests import test_prefect_submit
from tests.helpers import user
from tests.test_prefect_deployments import api_client
from tests.test_prefect_submit import cancel_flow_runs, flow_runs, use_prefect_api

lint_deployment = test_prefect_submit.lint_deployment  # its Prefect server with the lint deployment, no worker


def test_invalid_setting_stops_serve_with_one_line_naming_it(tmp_path: Path) -> None:
    agtos = Path(sys.executable).parent / "agtos"  # the console script `make run` runs
    env = {"PATH": str(agtos.parent), "HOME": str(tmp_path), "AGTOS_PORT": "abc"}
    done = subprocess.run([str(agtos), "serve"], env=env, capture_output=True, text=True, timeout=60)
    assert done.returncode == 2, done.stderr
    assert "Traceback" not in done.stderr + done.stdout
    assert done.stderr.strip().splitlines() == ["agtos: invalid setting: AGTOS_PORT='abc' is not an integer"]


def _home(tmp_path: Path) -> Path:
    home, outside = tmp_path / "home", tmp_path / "outside"
    (outside).mkdir()
    # Windsurf's memory file, a symlink out of the import home
    (outside / "rules.md").write_text("- secret rules from outside\n")
    rules = home / ".codeium" / "windsurf" / "memories" / "global_rules.md"
    rules.parent.mkdir(parents=True)
    rules.symlink_to(outside / "rules.md")
    # a Claude Code transcript with one malformed line
    project = home / ".claude" / "projects" / "-home-dev-shop"
    project.mkdir(parents=True)
    lines = [
        {"type": "user", "uuid": "u1", "sessionId": "cc1", "timestamp": "2026-11-01T10:00:00Z",
         "message": {"role": "user", "content": "The checkout page fails with a 500 after the Stripe upgrade."}},
        {"type": "assistant", "uuid": "a1", "sessionId": "cc1", "timestamp": "2026-11-01T10:00:05Z",
         "message": {"role": "assistant", "content": [{"type": "text", "text": "I fixed the webhook secret."}]}},
    ]  # fmt: skip
    (project / "cc1.jsonl").write_text("\n".join(json.dumps(x) for x in lines) + "\n{not json\n")
    # an aider session of small talk only, which the save heuristics skip
    (home / "shop").mkdir()
    (home / "shop" / ".aider.chat.history.md").write_text(
        "# aider chat started at 2026-11-02 09:00:00\n\n#### hi\n\nHello! How can I help you today?\n"
    )
    return home


def test_memory_import_prints_what_it_left_out(
    tmp_path: Path, settings: Settings, redis_url: str, key_prefix: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    home = _home(tmp_path)
    for name, value in {
        "REDIS_URL": redis_url,
        "AGTOS_KEY_PREFIX": key_prefix,
        "AGTOS_IMPORT_HOME": str(home),
        "AGTOS_CONFIG_DIR": str(settings.config_dir),
        "AGTOS_DATA_DIR": str(settings.data_dir),
    }.items():
        monkeypatch.setenv(name, value)
    done = CliRunner().invoke(app, ["memory", "import", "--user", "readme", "--all"])
    assert done.exit_code == 0, done.output
    said = " ".join(done.output.split())  # rich wraps at the terminal's width
    assert "warning: windsurf: skipped 1 path(s) outside the import home" in said
    assert "warning: claude_code: .claude/projects/-home-dev-shop/cc1.jsonl: skipped 1 malformed line(s)" in said
    assert "added 1 episode(s), updated 0, added 0 memory item(s), skipped 1 session(s)" in said
    assert "greeting or small talk only" in said


def test_memory_maintain_says_why_it_was_deferred(
    settings: Settings, redis_url: str, key_prefix: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """`agtos memory maintain` ("lint now") on a busy machine: the guard defers it (README: load average >
    cores × 0.3 for `idle-only`); the table said only `deferred`, with no reason, even with --verbose."""
    for name, value in {
        "REDIS_URL": redis_url,
        "AGTOS_KEY_PREFIX": key_prefix,
        "AGTOS_CONFIG_DIR": str(settings.config_dir),
        "AGTOS_DATA_DIR": str(settings.data_dir),
        "AGTOS_BACKGROUND_WORK_POLICY": "idle-only",
        "AGTOS_MAINTENANCE_GUARD_RETRIES": "1",
        "AGTOS_MAINTENANCE_GUARD_DELAY_S": "0",
    }.items():
        monkeypatch.setenv(name, value)
    monkeypatch.setattr("os.getloadavg", lambda: (64.0, 64.0, 64.0))  # the machine, not our code
    done = CliRunner().invoke(app, ["memory", "maintain", "--user", "readme"])
    assert done.exit_code == 0, done.output
    said = " ".join(done.output.split())
    assert "readme: deferred by the ResourceGuard after 2 check(s) (cpu-load), nothing changed" in said
    assert "AGTOS_BACKGROUND_WORK_POLICY=always runs it now" in said
    monkeypatch.setenv("AGTOS_BACKGROUND_WORK_POLICY", "always")
    done = CliRunner().invoke(app, ["memory", "maintain", "--user", "readme"])
    assert done.exit_code == 0, done.output
    assert "deferred" not in done.output and "completed" in done.output


def test_flows_serve_without_a_prefect_server_says_so(tmp_path: Path) -> None:
    """README: `agtos flows serve  # serve the Prefect deployments (needs PREFECT_API_URL)`. Without it,
    it served them on Prefect's throwaway in-process server (no UI, nothing else can reach it) and
    printed ~390 lines of ConnectError tracebacks when stopped."""
    agtos = Path(sys.executable).parent / "agtos"
    env = {"PATH": str(agtos.parent), "HOME": str(tmp_path)}  # no PREFECT_API_URL, no Prefect profile
    proc = subprocess.Popen(
        [str(agtos), "flows", "serve"], env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
        start_new_session=True,  # so a serving one is stopped with the Prefect server it started
    )  # fmt: skip
    try:
        out, err = proc.communicate(timeout=30)
    finally:
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait()
    assert proc.returncode == 2, out + err
    assert "set PREFECT_API_URL" in err and "Traceback" not in err


def test_nli_pinning_command_answers_a_wrong_call_in_one_line(tmp_path: Path) -> None:
    """README: `python -m agtos.providers.transformers_nli DIR` writes `manifest.json`. Without DIR it was an
    IndexError traceback, with a missing directory a ModelDirError traceback."""
    missing = tmp_path / "nope"
    for args, said in (
        ([], "usage: python -m agtos.providers.transformers_nli DIR  (writes DIR/manifest.json)"),
        ([str(missing)], f"cannot pin {missing}: model directory {missing} does not exist"),
    ):
        done = subprocess.run(
            [sys.executable, "-m", "agtos.providers.transformers_nli", *args],
            capture_output=True, text=True, timeout=120,
        )  # fmt: skip
        assert done.returncode == 1 and done.stdout == ""
        assert done.stderr.strip().splitlines() == [said]
    assert not missing.exists()


def test_asking_again_while_the_lint_run_is_queued_returns_that_run(
    lint_deployment: tuple[str, str], settings: Settings, monkeypatch: pytest.MonkeyPatch
) -> None:
    """README: "a second request while the user's run is still queued returns that run". It did only while
    the run waited for the maintenance thread: once the thread took it (through agtos serve: two POSTs
    190 ms apart got two runs, the first still `queued`) or handed it to Prefect, where it stays queued
    until a worker runs the flow, every request queued another run and another flow run."""
    api, deployment_id = lint_deployment
    use_prefect_api(monkeypatch, api)
    coordinator = MemoryCoordinator(settings.with_overrides(background_work_policy="always"))
    prefect_api = api_client(api)
    app_stopped = threading.Event()
    try:
        with TestClient(create_app(coordinator=coordinator)) as client:
            first = client.post("/api/memory/maintain", headers=user("ann"))
            assert first.status_code == 202, first.text
            run_id = first.json()["runId"]
            deadline = time.monotonic() + 30
            while not flow_runs(prefect_api, deployment_id):  # the thread has handed it to Prefect
                assert time.monotonic() < deadline, "the run never reached Prefect"
                time.sleep(0.25)
            try:
                again = client.post("/api/memory/maintain", headers=user("ann"))
                assert again.status_code == 202, again.text
                assert again.json()["runId"] == run_id and again.json()["status"] == "queued"
                assert again.headers["location"] == f"/api/memory/maintain/runs/{run_id}"
                assert len(flow_runs(prefect_api, deployment_id)) == 1
                other = client.post("/api/memory/maintain", headers=user("bob"))  # another user: a run of its own
                assert other.status_code == 202 and other.json()["runId"] != run_id
            except AssertionError:  # a thread waiting on a flow run returns once that run is final
                threading.Thread(target=cancel_flow_runs, args=(api, deployment_id, app_stopped), daemon=True).start()
                raise
    finally:
        app_stopped.set()
        prefect_api.close()
        coordinator.close()
