"""Importers of other AI tools' chat history and memories, against a fake home directory."""

from __future__ import annotations

import importlib.util
import json
import os
import sqlite3
from datetime import datetime
from pathlib import Path

import pytest

from agtos.config import Settings
from agtos.importers import (
    ImportedSession,
    ParseResult,
    collect,
    scan_sources,
    vscdb,
)
from agtos.importers import base as importer_base
from agtos.importers.aider import AiderParser
from agtos.importers.base import make_turn, memory_key, session_key
from agtos.importers.claude_code import ClaudeCodeParser
from agtos.importers.copilot import CopilotParser
from agtos.importers.cursor import CursorParser
from agtos.importers.markdown_memory import split_markdown
from agtos.importers.vscode_chat import replay_mutation_log
from agtos.schemas.records import Role

_spec = importlib.util.spec_from_file_location(
    "make_import_fixtures", Path(__file__).parent / "fixtures" / "make_import_fixtures.py"
)
assert _spec is not None and _spec.loader is not None
make_fixtures = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(make_fixtures)

CLAUDE_SESSION = "5f3c2a1e-8b7d-4c6a-9e2f-1a2b3c4d5e6f"
CLAUDE_TRANSCRIPT = f".claude/projects/-home-alex-projects-webapp/{CLAUDE_SESSION}.jsonl"
CURSOR_USER = ".config/Cursor/User"
COPILOT_WS = ".config/Code/User/workspaceStorage/8f3e2a1b9c4d5e6f7a8b9c0d1e2f3a4b/chatSessions"
COPILOT_SESSION = "3b9c1d2e-4f5a-6b7c-8d9e-0f1a2b3c4d5e"
COPILOT_LOG = ".config/Code/User/globalStorage/emptyWindowChatSessions/7d1e2f3a-4b5c-6d7e-8f9a-0b1c2d3e4f5a.jsonl"


@pytest.fixture(scope="module")
def home(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return make_fixtures.build_home(tmp_path_factory.mktemp("import") / "home")


@pytest.fixture(scope="module")
def everything(home: Path) -> ParseResult:
    return collect(home)


def _sessions(result: ParseResult, source: str, rel: str, home: Path) -> list[ImportedSession]:
    return [s for s in result.sessions if s.source == source and s.source_path == str(home / rel)]


def _turns(session: ImportedSession) -> list[tuple[str, str | None, str]]:
    return [(t.role, t.name, t.content) for t in session.turns]


def test_scan_sources_lists_each_file_with_its_item_count(home: Path) -> None:
    # paths are relative to the import home: no absolute host path is listed (issue 15)
    found = {(s.source, s.path): (s.item_count, len(s.warnings)) for s in scan_sources(home)}
    assert found == {
        ("claude_code", ".claude/CLAUDE.md"): (5, 0),
        ("claude_code", CLAUDE_TRANSCRIPT): (1, 0),
        (
            "claude_code",
            ".claude/projects/-home-alex-projects-broken/0b0b0b0b-1111-2222-3333-444455556666.jsonl",
        ): (
            1,
            1,
        ),
        (
            "claude_code",
            ".claude/projects/-home-alex-projects-broken/deadbeef-0000-0000-0000-000000000000.jsonl",
        ): (
            0,
            1,
        ),
        ("claude_code", "projects/webapp/CLAUDE.md"): (3, 0),
        ("cursor", f"{CURSOR_USER}/globalStorage/state.vscdb"): (4, 1),
        ("cursor", f"{CURSOR_USER}/workspaceStorage/1a2b3c4d5e6f/state.vscdb"): (1, 0),
        ("cursor", f"{CURSOR_USER}/workspaceStorage/7f8e9d0c1b2a/state.vscdb"): (1, 0),
        ("cursor", f"{CURSOR_USER}/workspaceStorage/bad0/state.vscdb"): (0, 1),
        ("cursor", f"{CURSOR_USER}/workspaceStorage/bad1/state.vscdb"): (0, 1),
        ("windsurf", ".codeium/windsurf/memories/global_rules.md"): (2, 0),
        ("windsurf", "Library/Application Support/Windsurf/User/globalStorage/state.vscdb"): (0, 1),
        ("windsurf", "Library/Application Support/Windsurf/User/workspaceStorage/9f8e7d6c/state.vscdb"): (
            1,
            0,
        ),
        ("aider", "projects/notes/.aider.chat.history.md"): (0, 1),
        ("aider", "projects/webapp/.aider.chat.history.md"): (2, 0),
        ("copilot", COPILOT_LOG): (1, 0),
        ("copilot", f"{COPILOT_WS}/{COPILOT_SESSION}.json"): (1, 0),
        (
            "copilot",
            "Library/Application Support/Code - Insiders/User/workspaceStorage/"
            "aa11bb22cc33dd44ee55ff6677889900/chatSessions/9e8d7c6b-truncated.json",
        ): (0, 1),
    }


def test_claude_code_transcript_turns(home: Path, everything: ParseResult) -> None:
    [session] = _sessions(everything, "claude_code", CLAUDE_TRANSCRIPT, home)
    assert session.title == "Add rate limiting to the login endpoint"
    assert session.session_key == session_key("claude_code", home / CLAUDE_TRANSCRIPT, CLAUDE_SESSION)
    assert session.started_at == 1748244460079
    assert _turns(session) == [
        ("user", None, "Please add rate limiting to the /login endpoint. I prefer using Redis for this."),
        ("assistant", None, "I'll look at the current login handler first."),
        ("tool", "Read", f'call Read {{"file_path": "{home}/projects/webapp/app/auth.py"}}'),
        ("tool", "Read", "1\tdef login(request):\n     2\t    return check_password(request)"),
        (
            "assistant",
            None,
            "I've added a Redis-backed limiter to the login handler.\n\nIt allows 5 attempts per minute per IP.",
        ),
        ("user", None, "Thanks! Always run the tests with pytest -x."),
    ]
    stamps = [t.timestamp for t in session.turns]
    assert stamps == sorted(stamps)


def test_claude_md_memories_one_per_bullet_or_paragraph(home: Path, everything: ParseResult) -> None:
    by_file = {
        rel: [m.text for m in everything.memories if m.source_path == str(home / rel)]
        for rel in (".claude/CLAUDE.md", "projects/webapp/CLAUDE.md")
    }
    assert by_file[".claude/CLAUDE.md"] == [
        "Personal preferences: I prefer concise answers without preamble.",
        "Personal preferences: Use British English in prose.",
        "Tooling: Python: always use `uv` for environments\n  - never pip install globally",
        "Tooling: Run `ruff format` before committing.",
        "Tooling: Keep commit messages in the imperative mood.",
    ]
    # The project file is found through the transcript's cwd; the @import line is not a memory.
    assert by_file["projects/webapp/CLAUDE.md"] == [
        "webapp: This is a Flask app served by gunicorn.",
        "Conventions: Tests live in tests/ and use pytest fixtures.",
        "Conventions: Never commit secrets; read them from environment variables.",
    ]
    memory = next(m for m in everything.memories if m.text.startswith("webapp:"))
    assert memory.key == memory_key("claude_code", home / "projects/webapp/CLAUDE.md", memory.text)


def test_claude_partial_transcript_keeps_good_lines(home: Path) -> None:
    path = home / ".claude/projects/-home-alex-projects-broken/0b0b0b0b-1111-2222-3333-444455556666.jsonl"
    result = ClaudeCodeParser().parse(path)
    assert [_turns(s) for s in result.sessions] == [[("user", None, "Why does the build fail on CI?")]]
    assert result.warnings == [f"claude_code: {path}: skipped 3 malformed line(s)"]


def test_cursor_global_db_composers_and_user_rules(home: Path, everything: ParseResult) -> None:
    sessions = _sessions(everything, "cursor", f"{CURSOR_USER}/globalStorage/state.vscdb", home)
    by_title = {s.title: s for s in sessions}
    assert set(by_title) == {"Refactor auth module", None}
    modern = by_title["Refactor auth module"]
    assert _turns(modern) == [
        ("user", None, "Split auth.py into login and session modules."),
        ("tool", "read_file", '{"contents": "def login(): ..."}'),
        ("assistant", None, "Done: auth/login.py and auth/session.py now hold the two halves."),
    ]
    assert modern.started_at == 1735000000000
    assert modern.turns[0].timestamp == 1735000000000  # the bubble's ISO createdAt
    assert _turns(by_title[None]) == [
        ("user", None, "What does this regex match?"),
        ("assistant", None, "It matches ISO-8601 dates like 2024-01-31."),
    ]
    rules = [m.text for m in everything.memories if m.source == "cursor"]
    assert rules == ["Always write type hints.", "Prefer pathlib over os.path."]


def test_cursor_workspace_chatdata_and_prompt_fallback(home: Path, everything: ParseResult) -> None:
    [tab] = _sessions(everything, "cursor", f"{CURSOR_USER}/workspaceStorage/1a2b3c4d5e6f/state.vscdb", home)
    assert tab.title == "Explain the limiter"
    assert _turns(tab) == [
        ("user", None, "Explain how the limiter works"),
        ("assistant", None, "It keeps a sliding window per IP."),
    ]
    # aiService.prompts is only a fallback when the database has no full conversations.
    [prompts] = _sessions(everything, "cursor", f"{CURSOR_USER}/workspaceStorage/7f8e9d0c1b2a/state.vscdb", home)
    assert _turns(prompts) == [("user", None, "Generate a README"), ("user", None, "Add a CI badge")]


def test_windsurf_sessions_and_global_rules(home: Path, everything: ParseResult) -> None:
    [session] = [s for s in everything.sessions if s.source == "windsurf"]
    assert _turns(session) == [
        ("user", None, "Why is my build slow?"),
        ("assistant", None, "Your webpack cache is disabled."),
    ]
    assert [m.text for m in everything.memories if m.source == "windsurf"] == [
        "Global rules: Answer in English even if I write in German.",
        "Global rules: Prefer functional React components with hooks.",
    ]


def test_aider_sessions_split_by_header(home: Path, everything: ParseResult) -> None:
    first, second = _sessions(everything, "aider", "projects/webapp/.aider.chat.history.md", home)
    assert first.started_at == int(datetime(2024, 5, 1, 10, 0, 0).timestamp() * 1000)
    assert first.title == "aider chat in webapp at 2024-05-01 10:00:00"
    assert [(role, name) for role, name, _ in _turns(first)] == [
        ("tool", "aider"),
        ("tool", "aider"),
        ("user", None),
        ("assistant", None),
        ("tool", "aider"),
    ]
    assert first.turns[0].content == "Aider v0.40.0\nModels: gpt-4o with diff edit format\nGit repo: .git with 12 files"
    assert first.turns[2].content == "Add a docstring to the login function.\nKeep it short."
    assert first.turns[3].content.startswith("Here is the change:\n\napp/auth.py\n```python\n<<<<<<< SEARCH")
    assert first.turns[3].content.endswith(">>>>>>> REPLACE\n```")
    assert _turns(second) == [
        ("user", None, "what does the limiter do?"),
        ("assistant", None, "It counts attempts per IP in Redis and rejects after five per minute."),
    ]
    assert first.session_key != second.session_key


def test_aider_discovery_skips_hidden_and_heavy_dirs(home: Path) -> None:
    found = {os.path.relpath(p, home) for p in AiderParser().discover(home)}
    assert found == {"projects/webapp/.aider.chat.history.md", "projects/notes/.aider.chat.history.md"}


def test_copilot_json_session(home: Path, everything: ParseResult) -> None:
    [session] = _sessions(everything, "copilot", f"{COPILOT_WS}/{COPILOT_SESSION}.json", home)
    assert session.title == "Configurable login rate limit"
    assert session.started_at == 1716999990000
    assert session.session_key == session_key("copilot", home / COPILOT_WS / f"{COPILOT_SESSION}.json", COPILOT_SESSION)
    assert _turns(session) == [
        ("user", None, "How do I make the login rate limit configurable?"),
        (
            "assistant",
            None,
            "Read it from an environment variable, for example in `config.py`, and pass it to the limiter.",
        ),
        ("user", None, "Run the tests"),
        ("tool", "run_in_terminal", "Ran `pytest -x`"),
        ("assistant", None, "All 42 tests passed."),
    ]
    assert [t.timestamp for t in session.turns] == [1717000000000] * 2 + [1717000060000] * 3


def test_copilot_jsonl_mutation_log(home: Path, everything: ParseResult) -> None:
    [session] = _sessions(everything, "copilot", COPILOT_LOG, home)
    assert session.title == "Naming a rate limiter"
    assert _turns(session) == [
        ("user", None, "What is a good name for a rate limiter class?"),
        ("assistant", None, "`LoginRateLimiter` is clear and specific."),
    ]


def test_every_source_reports_its_malformed_file(everything: ParseResult) -> None:
    warned = {w.split(":", 1)[0] for w in everything.warnings}
    assert warned == {"claude_code", "cursor", "windsurf", "aider", "copilot"}
    assert any("not a SQLite database" in w for w in everything.warnings)
    assert any("binary data" in w for w in everything.warnings)
    assert any("invalid JSON" in w for w in everything.warnings)


def test_reimport_gives_identical_keys_and_content(home: Path, everything: ParseResult) -> None:
    again = collect(home)
    assert [s.session_key for s in again.sessions] == [s.session_key for s in everything.sessions]
    assert [m.key for m in again.memories] == [m.key for m in everything.memories]
    assert again.model_dump() == everything.model_dump()
    keys = [s.session_key for s in again.sessions] + [m.key for m in again.memories]
    assert len(keys) == len(set(keys))
    assert all(len(k) <= 128 for k in keys)


def test_sqlite_files_are_left_untouched(tmp_path: Path) -> None:
    home = make_fixtures.build_home(tmp_path / "home")
    dbs = sorted(home.rglob("state.vscdb*"))
    before = {p: (p.read_bytes(), p.stat().st_mtime_ns) for p in dbs}
    listing = {p.parent: sorted(os.listdir(p.parent)) for p in dbs}
    collect(home, ["cursor", "windsurf"])
    assert {p: (p.read_bytes(), p.stat().st_mtime_ns) for p in dbs} == before
    assert {d: sorted(os.listdir(d)) for d in listing} == listing


def test_locked_database_is_a_warning(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(vscdb, "LOCK_TIMEOUT_S", 0.05)
    db = tmp_path / ".config/Cursor/User/globalStorage/state.vscdb"
    db.parent.mkdir(parents=True)
    conn = sqlite3.connect(db, isolation_level=None)
    conn.execute("CREATE TABLE ItemTable (key TEXT UNIQUE ON CONFLICT REPLACE, value BLOB)")
    conn.execute("BEGIN EXCLUSIVE")
    conn.execute("INSERT INTO ItemTable VALUES ('aiService.prompts', '[]')")
    try:
        result = collect(tmp_path, ["cursor"])
    finally:
        conn.rollback()
        conn.close()
    assert result.sessions == []
    assert len(result.warnings) == 1 and "database is locked" in result.warnings[0]


def test_corrupt_database_is_a_warning(tmp_path: Path) -> None:
    db = tmp_path / "state.vscdb"
    db.write_bytes(vscdb.SQLITE_MAGIC + os.urandom(4096))
    result = CursorParser().parse(db)
    assert result.item_count == 0
    assert len(result.warnings) == 1 and "SQLite error" in result.warnings[0]


def test_oversized_file_is_skipped(home: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(importer_base, "MAX_FILE_BYTES", 100)
    result = CopilotParser().parse(home / COPILOT_WS / f"{COPILOT_SESSION}.json")
    assert result.sessions == []
    assert "over the 100-byte limit" in result.warnings[0]


def test_parser_exceptions_never_escape(home: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    def boom(self: CursorParser, path: Path) -> ParseResult:
        raise RuntimeError("kaboom")

    def bad_discover(self: AiderParser, home: Path) -> list[Path]:
        raise PermissionError("denied")

    monkeypatch.setattr(CursorParser, "parse", boom)
    monkeypatch.setattr(AiderParser, "discover", bad_discover)
    result = collect(home, ["cursor", "aider"])
    assert result.item_count == 0
    assert any("kaboom" in w for w in result.warnings)
    assert any(w.startswith("aider: discovery failed") for w in result.warnings)
    summaries = scan_sources(home, ["cursor", "aider", "nope"])
    assert all(s.item_count == 0 for s in summaries)
    assert {(s.source, bool(s.path)) for s in summaries if "kaboom" not in str(s.warnings)} == {
        ("nope", False),
        ("aider", True),
    }


def test_source_filter_and_unknown_source(home: Path) -> None:
    result = collect(home, ["aider", "nope"])
    assert {s.source for s in result.sessions} == {"aider"}
    assert result.memories == []
    assert any("unknown source 'nope'" in w for w in result.warnings)


def test_home_from_environment(home: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("AGTOS_IMPORT_HOME", str(home))
    configured = Settings.from_env().import_home
    assert {s.source for s in scan_sources(configured, sources=["copilot"])} == {"copilot"}
    assert len(collect(configured, sources=["copilot"]).sessions) == 2


def test_empty_home_finds_nothing(tmp_path: Path) -> None:
    assert scan_sources(tmp_path) == []
    assert collect(tmp_path).model_dump() == ParseResult().model_dump()


def test_split_markdown_handles_frontmatter_fences_and_comments() -> None:
    text = (
        "---\ntrigger: always_on\n---\n# Rules\n<!-- hidden note -->\n"
        "1. First rule\n2) Second rule\n\n```bash\n# not a heading\nmake test\n```\n"
        "\n---\n\nPlain closing words.\n"
    )
    assert split_markdown(text) == [
        "Rules: First rule",
        "Rules: Second rule",
        "Rules: ```bash\n# not a heading\nmake test\n```",
        "Rules: Plain closing words.",
    ]


def test_mutation_log_replay() -> None:
    lines = [
        '{"kind":0,"v":{"requests":[{"message":{"text":"a"}},{"message":{"text":"b"}}],"x":1}}',
        '{"kind":2,"k":["requests"],"v":[{"message":{"text":"c"}}],"i":1}',
        '{"kind":3,"k":["x"]}',
        '{"kind":1,"k":["requests",5,"message"],"v":{}}',
        "not json",
    ]
    state, bad = replay_mutation_log(lines)
    assert state == {"requests": [{"message": {"text": "a"}}, {"message": {"text": "c"}}]}
    assert bad == 2


def test_long_turns_are_truncated_and_blank_ones_dropped() -> None:
    turn = make_turn(Role.assistant, "x" * (100_000 + 50), 1)
    assert turn is not None and len(turn.content) == 100_000  # Turn.content's limit
    assert make_turn(Role.user, "   \n", 1) is None


def test_claude_compact_summary_and_tool_errors(tmp_path: Path) -> None:
    path = tmp_path / "s.jsonl"
    lines = [
        {
            "type": "user",
            "isCompactSummary": True,
            "uuid": "c1",
            "sessionId": "s-1",
            "timestamp": "2025-07-01T08:00:00Z",
            "message": {"role": "user", "content": "This session is being continued. Summary: fixed CI."},
        },
        {
            "type": "assistant",
            "uuid": "c2",
            "timestamp": "2025-07-01T08:00:05Z",
            "message": {
                "id": "m1",
                "role": "assistant",
                "content": [{"type": "tool_use", "id": "t1", "name": "Bash", "input": {"command": "make"}}],
            },
        },
        {
            "type": "user",
            "uuid": "c3",
            "timestamp": "2025-07-01T08:00:09Z",
            "message": {
                "role": "user",
                "content": [
                    {
                        "type": "tool_result",
                        "tool_use_id": "t1",
                        "is_error": True,
                        "content": [{"type": "text", "text": "make: *** No rule"}],
                    }
                ],
            },
        },
    ]
    path.write_text("\n".join(json.dumps(line) for line in lines) + "\n")
    [session] = ClaudeCodeParser().parse(path).sessions
    assert [(t.role, t.name, t.content, t.is_summary) for t in session.turns] == [
        ("user", None, "This session is being continued. Summary: fixed CI.", True),
        ("tool", "Bash", 'call Bash {"command": "make"}', False),
        ("tool", "Bash", "[error] make: *** No rule", False),
    ]
    assert session.session_key == session_key("claude_code", path, "s-1")
