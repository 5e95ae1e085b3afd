"""The README followed word by word by a new user (issues 14/15/20): what the command line promises there.

- "An invalid value ... stops the service at start with the variable named": `agtos serve` with a
  bad `AGTOS_PORT` printed a 33-line rich traceback (with source lines) before the message; now
  the message alone, exit status 2.
- "a symlink ... that resolves outside it is skipped with a warning": `agtos memory import` dropped
  the warnings of its scan (the listing kept only rows with items), so a symlinked `global_rules.md`
  or a transcript's malformed lines vanished silently, and a session the save heuristics skip
  (README: "greetings and single-turn trivial lookups skipped") was listed with 1 item and then
  imported as 0 without a word. Both are printed now.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
from pathlib import Path

import pytest
from typer.testing import CliRunner

from agtos.cli import app
from agtos.config import Settings


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
