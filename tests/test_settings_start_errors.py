"""README "Configuration": an invalid value stops every ``agtos`` command at start with one line naming the variable
(exit 2), not a traceback: infinite numbers (``inf``, ``1e999``) and an LLM slot that no provider serves included;
``agtos serve``'s own ``AGTOS_SERVE_WORKER`` and ``AGTOS_ACCESS_LOG`` in the same words (they lacked the
``agtos: invalid setting:`` prefix), and a blank ``AGTOS_ACCESS_LOG`` counts as unset, as every blank setting does
(it stopped ``agtos serve``: ``AGTOS_ACCESS_LOG='': expected true/false``), and so does a blank
``AGTOS_INGEST_MODE`` (``agtos serve`` ran inline with it, not in its default queue mode).

Before, ``AGTOS_REDIS_TIMEOUT_S=inf`` ended ``agtos keys list`` in a 176-line OverflowError traceback,
``AGTOS_EPISODE_TTL_DAYS=inf`` and ``AGTOS_LLM_PROVIDER=bogus`` were accepted and ``agtos serve`` then died in a
traceback (``cannot convert float infinity to integer``, ``unknown LLM provider 'bogus'``).
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from agtos.cli import app
from tests import test_env_settings, test_readme_promises_serve

env = test_env_settings.env  # fixture: a clean environment with the test Redis and namespace
launches = test_readme_promises_serve.launches  # fixture: agtos serve with uvicorn and the worker child recorded

PROVIDERS = "'none', 'builtin', 'ollama', 'openai', 'openrouter', 'openai-compatible', 'transformers'"


def agtos(capsys: pytest.CaptureFixture[str], *args: str) -> tuple[object, str, str]:
    """``agtos ARGS`` in this process, as the console script calls it: exit code, stdout, stderr."""
    with pytest.raises(SystemExit) as ended:
        app(list(args), prog_name="agtos")
    out = capsys.readouterr()
    return ended.value.code, out.out, out.err


def refused(
    env: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str], variables: dict[str, str], *command: str
) -> list[str]:
    """``agtos COMMAND`` with ``variables`` set: it must stop with exit 2; the lines it wrote to stderr."""
    for name, value in variables.items():
        env.setenv(name, value)
    code, _, err = agtos(capsys, *command)
    assert code == 2, err
    return err.strip().splitlines()


@pytest.mark.parametrize(
    ("variables", "line"),
    [
        ({"AGTOS_REDIS_TIMEOUT_S": "inf"}, "AGTOS_REDIS_TIMEOUT_S='inf' is not a finite number"),
        ({"AGTOS_EPISODE_TTL_DAYS": "1e999"}, "AGTOS_EPISODE_TTL_DAYS='1e999' is not a finite number"),
        ({"AGTOS_SESSION_JOURNAL_TTL_HOURS": "inf"}, "AGTOS_SESSION_JOURNAL_TTL_HOURS='inf' is not a finite number"),
        ({"AGTOS_EMBEDDING_TIMEOUT_S": "Infinity"}, "AGTOS_EMBEDDING_TIMEOUT_S='Infinity' is not a finite number"),
        ({"AGTOS_MAINTENANCE_GUARD_DELAY_S": "inf"}, "AGTOS_MAINTENANCE_GUARD_DELAY_S='inf' is not a finite number"),
        ({"AGTOS_READ_CATCHUP_AFTER_S": "inf"}, "AGTOS_READ_CATCHUP_AFTER_S='inf' is not a finite number"),
        ({"AGTOS_LLM_PROVIDER": "bogus"}, f"AGTOS_LLM_PROVIDER must be one of {PROVIDERS}, not 'bogus'"),
        (
            {"AGTOS_CONSOLIDATION_PROVIDER": "gpt"},
            f"AGTOS_CONSOLIDATION_PROVIDER must be one of {PROVIDERS}, not 'gpt'",
        ),
        (
            {"AGTOS_DIALECTIC_PROVIDER": "openai-compatible"},
            "AGTOS_DIALECTIC_BASE_URL is needed with PROVIDER='openai-compatible'",
        ),
    ],
)
def test_an_invalid_value_ends_a_command_with_one_line(
    env: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str], variables: dict[str, str], line: str
) -> None:
    assert refused(env, capsys, variables, "keys", "list") == [f"agtos: invalid setting: {line}"]


def test_a_config_file_slot_with_an_unknown_provider_is_named(
    env: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    config = tmp_path / "config"
    config.mkdir()
    (config / "config.json").write_text(json.dumps({"slots": {"consolidation": {"provider": "claude"}}}))
    code, _, err = agtos(capsys, "keys", "list")
    assert code == 2, err
    assert err.strip() == (
        f"agtos: invalid setting: config file {config / 'config.json'}, slot 'consolidation': "
        f"PROVIDER must be one of {PROVIDERS}, not 'claude'"
    )


@pytest.mark.parametrize(
    "content", ['["consolidation"]', '{"slots": ["ollama"]}', '{"slots": {"dialectic": "ollama"}}']
)
def test_a_config_file_of_another_shape_is_named(
    env: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str], tmp_path: Path, content: str
) -> None:
    """It ended every command in an AttributeError traceback ('list' object has no attribute 'get')."""
    config = tmp_path / "config"
    config.mkdir()
    (config / "config.json").write_text(content)
    code, _, err = agtos(capsys, "keys", "list")
    assert code == 2, err
    shape = '{"slots": {"<slot>": {"provider": ...}}}'
    assert err.strip() == f"agtos: invalid setting: config file {config / 'config.json'} is not {shape}"


@pytest.mark.parametrize(
    "variables",
    [
        {"AGTOS_LLM_PROVIDER": "Ollama"},  # any case, as build_llm reads it
        {"AGTOS_SUMMARIZE_PROVIDER": "none"},
        {"AGTOS_DIALECTIC_PROVIDER": "openai-compatible", "AGTOS_DIALECTIC_BASE_URL": "http://127.0.0.1:9/v1"},
        {"AGTOS_READ_CATCHUP_AFTER_S": "-inf"},  # README: negative means never
        {"AGTOS_EPISODE_TTL_DAYS": "3650"},
    ],
)
def test_valid_values_still_start(
    env: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str], variables: dict[str, str]
) -> None:
    for name, value in variables.items():
        env.setenv(name, value)
    code, out, err = agtos(capsys, "keys", "list")
    assert code == 0, err
    assert "0 API key(s)" in out


@pytest.mark.parametrize(
    ("name", "value", "line"),
    [
        ("AGTOS_EPISODE_TTL_DAYS", "inf", "AGTOS_EPISODE_TTL_DAYS='inf' is not a finite number"),
        ("AGTOS_LLM_PROVIDER", "bogus", f"AGTOS_LLM_PROVIDER must be one of {PROVIDERS}, not 'bogus'"),
    ],
)
def test_agtos_serve_stops_with_the_line_not_a_traceback(
    env: pytest.MonkeyPatch, name: str, value: str, line: str
) -> None:
    env.setenv(name, value)
    agtos = Path(sys.executable).with_name("agtos")
    done = subprocess.run(
        [str(agtos), "serve", "--port", "4799"], env=dict(os.environ), capture_output=True, text=True, timeout=90
    )
    assert done.returncode == 2, done.stderr[-2000:]
    assert "Traceback" not in done.stderr + done.stdout
    assert done.stderr.strip().splitlines() == [f"agtos: invalid setting: {line}"]


@pytest.mark.parametrize(
    ("variables", "line"),
    [
        (
            {"AGTOS_SERVE_WORKER": "Proc"},
            "AGTOS_SERVE_WORKER must be one of 'process', 'thread' or 'none', not 'Proc'",
        ),
        (
            {"AGTOS_ACCESS_LOG": "Maybe"},
            "AGTOS_ACCESS_LOG='Maybe' is not a boolean (true/false, 1/0, yes/no, on/off)",
        ),
        (  # blank is unset: the command goes on to the next variable
            {"AGTOS_ACCESS_LOG": "  ", "AGTOS_SERVE_WORKER": "threads"},
            "AGTOS_SERVE_WORKER must be one of 'process', 'thread' or 'none', not 'threads'",
        ),
    ],
)
def test_serve_options_from_the_environment_are_said_as_every_setting(
    env: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str], variables: dict[str, str], line: str
) -> None:
    assert refused(env, capsys, variables, "serve", "--port", "4799") == [f"agtos: invalid setting: {line}"]


@pytest.mark.parametrize(
    ("value", "launched"),
    [
        ("  ", (True, "false")),  # blank: agtos serve's default, queue mode with its worker child
        (" Queue ", (True, "false")),
        ("inline", (False, None)),  # no worker child, the API processes told nothing
    ],
)
def test_a_blank_ingest_mode_is_serves_default(
    launches: list[tuple[bool, str | None]],
    capsys: pytest.CaptureFixture[str],
    monkeypatch: pytest.MonkeyPatch,
    value: str,
    launched: tuple[bool, str | None],
) -> None:
    monkeypatch.setenv("AGTOS_INGEST_MODE", value)
    code, _, err = agtos(capsys, "serve")
    assert code == 0, err
    assert launches == [launched]
