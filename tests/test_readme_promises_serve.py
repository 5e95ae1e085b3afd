"""``agtos serve``'s worker layout as the README's configuration table documents it:

* ``AGTOS_SERVE_WORKER`` (``process``): "one worker child process at ``SCHED_IDLE``, a ``thread`` in each
  API process, or ``none`` (``--worker`` / ``--no-worker`` override it)";
* ``AGTOS_INGEST_WORKER``: "set to false with no ``--worker`` or ``AGTOS_SERVE_WORKER``, it means ``none``";
* an invalid value stops the command with the variable named, exit 2.

Other tests ran the flags only. Through the CLI (typer's runner), with ``uvicorn.run`` and the worker
child replaced by recorders: what the API processes would be told (``AGTOS_INGEST_WORKER``: their own
worker thread) and whether a worker child would start.
"""

from __future__ import annotations

import os
from contextlib import nullcontext

import pytest
from typer.testing import CliRunner

import agtos.cli
from agtos.cli import app

CHILD, THREAD, NONE = (True, "false"), (False, "true"), (False, "false")  # (worker child?, API worker thread?)


@pytest.fixture
def launches(monkeypatch: pytest.MonkeyPatch) -> list[tuple[bool, str | None]]:
    """Each ``agtos serve``'s (worker child started, AGTOS_INGEST_WORKER the API processes see)."""
    import uvicorn

    for name in list(os.environ):
        if name.startswith("AGTOS_") or name == "REDIS_URL":
            monkeypatch.delenv(name)
    monkeypatch.setenv("REDIS_URL", "redis://127.0.0.1:1/0")  # never reached: no server runs
    children: list[bool] = []
    seen: list[tuple[bool, str | None]] = []

    def worker_child(run: bool) -> nullcontext[None]:
        children.append(run)
        return nullcontext()

    def uvicorn_run(*_args: object, **_kwargs: object) -> None:
        seen.append((children[-1], os.environ.get("AGTOS_INGEST_WORKER")))

    monkeypatch.setattr(agtos.cli, "worker_child", worker_child)
    monkeypatch.setattr(uvicorn, "run", uvicorn_run)
    return seen


@pytest.mark.parametrize(
    ("variables", "args", "layout"),
    [
        ({}, [], CHILD),  # the default: process
        ({"AGTOS_SERVE_WORKER": "process"}, [], CHILD),
        ({"AGTOS_SERVE_WORKER": "thread"}, [], THREAD),
        ({"AGTOS_SERVE_WORKER": "none"}, [], NONE),
        ({"AGTOS_SERVE_WORKER": "thread"}, ["--worker", "process"], CHILD),  # the flag overrides it
        ({"AGTOS_SERVE_WORKER": "none"}, ["--worker", "thread"], THREAD),
        ({"AGTOS_SERVE_WORKER": "process"}, ["--no-worker"], NONE),
        ({"AGTOS_INGEST_WORKER": "false"}, [], NONE),  # false alone means none
        ({"AGTOS_INGEST_WORKER": "false", "AGTOS_SERVE_WORKER": "thread"}, [], THREAD),
        ({"AGTOS_INGEST_WORKER": "false"}, ["--worker", "process"], CHILD),
    ],
)
def test_serve_worker_layout(
    launches: list[tuple[bool, str | None]],
    monkeypatch: pytest.MonkeyPatch,
    variables: dict[str, str],
    args: list[str],
    layout: tuple[bool, str],
) -> None:
    for name, value in variables.items():
        monkeypatch.setenv(name, value)
    result = CliRunner().invoke(app, ["serve", *args])
    assert result.exit_code == 0, result.output
    assert launches == [layout]


def test_an_invalid_serve_worker_stops_serve_naming_it(
    launches: list[tuple[bool, str | None]], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("AGTOS_SERVE_WORKER", "threads")
    result = CliRunner().invoke(app, ["serve"])
    assert result.exit_code == 2 and "AGTOS_SERVE_WORKER" in result.output
    assert launches == []
