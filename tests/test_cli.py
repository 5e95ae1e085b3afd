"""The ``agtos memory`` command line against a real Redis (configured through the environment)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from typer.testing import CliRunner

from agtos.cli import app
from tests.test_privacy_import import make_fixtures


@pytest.fixture
def cli_env(monkeypatch: pytest.MonkeyPatch, redis_url: str, key_prefix: str, tmp_path: Path) -> Path:
    home = make_fixtures.build_home(tmp_path / "home")
    for name, value in {
        "REDIS_URL": redis_url,
        "AGTOS_KEY_PREFIX": key_prefix,
        "AGTOS_IMPORT_HOME": str(home),
        "AGTOS_BACKGROUND_WORK_POLICY": "always",
        "AGTOS_CONFIG_DIR": str(tmp_path / "cfg"),
    }.items():
        monkeypatch.setenv(name, value)
    return home


def test_import_search_maintain_forget(cli_env: Path) -> None:
    runner = CliRunner()
    imported = runner.invoke(app, ["memory", "import", "--user", "cli", "--all"])
    assert imported.exit_code == 0, imported.output
    assert "Importable memories" in imported.output and "added" in imported.output
    again = runner.invoke(app, ["memory", "import", "--user", "cli", "--all"])
    said = " ".join(again.output.split())  # rich wraps at the terminal's width
    assert "added 0 episode(s), updated 0," in said  # H3: nothing changed, nothing processed again
    assert "session(s) unchanged since the last import" in said

    found = runner.invoke(app, ["memory", "search", "login docstring", "--user", "cli"])
    assert found.exit_code == 0 and "result(s)" in found.output

    linted = runner.invoke(app, ["memory", "maintain", "--user", "cli", "--verbose"])
    assert linted.exit_code == 0, linted.output
    assert "completed" in linted.output and "contradiction pipeline" in linted.output

    refused = runner.invoke(app, ["memory", "forget", "--user", "cli", "--kind", "all", "--id", "x", "--yes"])
    assert refused.exit_code == 2
    forgotten = runner.invoke(app, ["memory", "forget", "--user", "cli", "--yes"])
    assert forgotten.exit_code == 0, forgotten.output
    answer = json.loads(forgotten.output)  # JSON, as the HTTP route answers (not a Python dict's repr)
    assert answer["forgotten"] == "all" and answer["userId"] == "cli" and answer["keysDeleted"] > 0
    empty = runner.invoke(app, ["memory", "search", "login docstring", "--user", "cli"])
    assert "0 result(s)" in empty.output


def test_import_prompts_for_sources(cli_env: Path) -> None:
    result = CliRunner().invoke(app, ["memory", "import", "--user", "cli2"], input="aider\n")
    assert result.exit_code == 0, result.output
    assert "Import which sources?" in result.output
    bad = CliRunner().invoke(app, ["memory", "import", "--user", "cli2", "--source", "emacs"])
    assert bad.exit_code == 2 and "not found here: emacs" in bad.output


def test_maintain_respects_the_kill_switch(cli_env: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("AGTOS_MAINTENANCE_ENABLED", "false")
    result = CliRunner().invoke(app, ["memory", "maintain", "--user", "cli"])
    assert result.exit_code == 1 and "disabled" in result.output


def test_maintain_over_every_user_skips_an_opted_out_user_and_lints_the_others(cli_env: Path) -> None:
    """A user opted out with their memory kept is still a known user: the sweep over every user said
    why it skipped them and went on (it stopped with a traceback at the first one)."""
    from agtos.config import Settings
    from agtos.memory.coordinator import MemoryCoordinator

    coordinator = MemoryCoordinator(Settings.from_env())
    try:
        for uid in ("aquiet", "bkeen"):
            coordinator.create_memory(uid, f"{uid} keeps bees on the roof")
        coordinator.services.privacy.set_opt_out("aquiet", True, forget_existing=False)
    finally:
        coordinator.close()
    swept = CliRunner().invoke(app, ["memory", "maintain"])
    assert swept.exit_code == 0, swept.output
    said = " ".join(swept.output.split())
    assert "skipped aquiet: opted out of persistence" in said
    assert "bkeen" in said.split("skipped aquiet")[1]  # the sweep went on to the next user's report
    one = CliRunner().invoke(app, ["memory", "maintain", "--user", "aquiet"])
    assert one.exit_code == 1 and "skipped aquiet: opted out of persistence" in " ".join(one.output.split())
