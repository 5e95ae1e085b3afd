"""README promises of the command line (``## Command line``) that no other test ran:

* ``agtos memory import -s cursor -s aider``: only the sources named, each of them;
* ``agtos memory search "…" --mode bm25``: a keyword search whatever the configured mode;
* ``agtos memory forget --user U --kind episode --id ep-… --yes``: that one episode, nothing else.

Through the CLI (configured by the environment, real Redis), checked through HTTP.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from fastapi.testclient import TestClient
from typer.testing import CliRunner

from agtos.cli import app
from agtos.serving.app import create_app
from tests import test_cli
from tests.helpers import user

WHO = "cli7"
CURSOR_RULES = {"Prefer pathlib over os.path.", "Always write type hints."}  # the fixture home's Cursor rules


cli_env = test_cli.cli_env  # fixture: the fixture home to import from, Redis and settings from the environment


def cli(*args: str) -> str:
    result = CliRunner().invoke(app, list(args))
    assert result.exit_code == 0, result.output
    return " ".join(result.output.split())  # rich wraps at the terminal's width


def http_get(path: str) -> dict[str, Any]:
    with TestClient(create_app()) as client:
        response = client.get(path, headers=user(WHO))
    assert response.status_code == 200, response.text
    return dict(response.json())


def test_import_takes_only_the_sources_named(cli_env: Path) -> None:
    cli("memory", "import", "--user", WHO, "-s", "cursor", "-s", "aider")
    memories = http_get("/api/memory/memories?limit=100")["memories"]
    assert {m["text"] for m in memories} == CURSOR_RULES  # Claude Code's, Windsurf's and Copilot's left out
    found = http_get("/api/memory/search?q=docstring&mode=bm25")["results"]
    assert len(found) == 1, "the Aider chat (a docstring for the login function) was not imported"


def test_search_mode_flag_and_forget_one_episode(cli_env: Path) -> None:
    cli("memory", "import", "--user", WHO, "-s", "aider", "-s", "cursor")
    keyword = cli("memory", "search", "docstring login function", "--user", WHO, "--mode", "bm25")
    # the two episodes that share a word with the query (the Aider chat, Cursor's "login" chat), by keyword
    # only; hybrid and vector also bring the README-badge chat, which shares none, as "semantic"
    assert "2 result(s)" in keyword and keyword.count(" keyword ") == 2
    assert "hybrid" not in keyword and "semantic" not in keyword
    before = [e["id"] for e in http_get("/api/memory/episodes")["episodes"]]
    assert len(before) >= 2
    gone = before[0]
    answer = json.loads(cli("memory", "forget", "--user", WHO, "--kind", "episode", "--id", gone, "--yes"))
    assert answer["forgotten"] == {"kind": "episode", "id": gone}, answer
    assert [e["id"] for e in http_get("/api/memory/episodes")["episodes"]] == before[1:]
    assert len(http_get("/api/memory/memories")["memories"]) == 2  # the imported rules stay
