"""Imports never store secrets and never read outside the import home (issue 15, item 2).

A fake home holds Claude Code, Cursor and Aider history with planted credentials (an AWS key, a
database URL's password, a ``password = "…"`` assignment, a GitHub token, ``cat ~/.ssh/id_rsa``
output); a directory beside it holds files that only a followed ``cwd`` or symlink could reach.
The import runs the way an operator runs it (``agtos memory import``); what it stored is read
back from Redis, ``POST /api/memory/context`` and ``agtos memory export``."""

from __future__ import annotations

import json
from pathlib import Path

import pyarrow.parquet as pq
import pytest
import redis
from fastapi.testclient import TestClient
from typer.testing import CliRunner

from agtos.cli import app
from agtos.config import Settings
from agtos.importers import scan_sources
from agtos.memory.coordinator import MemoryCoordinator
from agtos.serving.app import create_app
from agtos.tasks.secret_redaction import redact_all, redact_secrets
from tests.helpers import user
from tests.test_privacy_import import make_fixtures

AWS_KEY = "AKIAQYLPMN5HFIQR7XYZ"
DB_PASSWORD = "hunter2secret"
APP_PASSWORD = "Tr0ub4dor&3horse"
GITHUB_TOKEN = "ghp_R8kTq2WbZx7LmN4pVc9sYd3Hf6Gj1Ke5Ua0o"
KEY_BODY = (
    "b3BlbnNzaC1rZXktdjEAAAAABG5vbmUAAAAEbm9uZQAAAAAAAAABAAAAMwAAAAtzc2gtZW",
    "QyNTUxOQAAACDmZXRjaGVkLWZyb20tdGhlLXRlc3Qtc3VpdGUtb25seQAAAJhWq3Jr",
)
PRIVATE_KEY = "-----BEGIN OPENSSH PRIVATE KEY-----\n" + "\n".join(KEY_BODY) + "\n-----END OPENSSH PRIVATE KEY-----"
SECRETS = (AWS_KEY, DB_PASSWORD, APP_PASSWORD, GITHUB_TOKEN, *KEY_BODY, "PRIVATE KEY-----")
MARKER = "OUTSIDEWOMBAT"  # only in files outside the import home
SESSION = "7a1c2e3f-0b4d-4e5f-8a9b-0c1d2e3f4a5b"


def _jsonl(path: Path, entries: list[dict[str, object]]) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text("".join(json.dumps(e) + "\n" for e in entries))


def _claude_entry(n: int, kind: str, content: object, cwd: str) -> dict[str, object]:
    return {
        "type": kind,
        "uuid": f"u{n}",
        "sessionId": SESSION,
        "cwd": cwd,
        "timestamp": f"2025-05-26T07:{n:02d}:00.000Z",
        "message": {"role": kind, "content": content},
    }


def _claude(home: Path, outside: Path) -> None:
    project = home / "projects" / "shop"
    (project / "CLAUDE.md").parent.mkdir(parents=True, exist_ok=True)
    (project / "CLAUDE.md").write_text(
        "# Orders\n\n- DATABASE_URL=postgres://u:hunter2secret@db/x is the orders database\n"
    )
    (outside / "proj").mkdir(parents=True)
    (outside / "proj" / "CLAUDE.md").write_text(f"- The codeword is {MARKER}.\n")
    (outside / "proj2").mkdir()
    (outside / "proj2" / "CLAUDE.md").write_text(f"- Another codeword: {MARKER}.\n")
    tool_use = [{"type": "tool_use", "id": "t1", "name": "Bash", "input": {"command": "cat ~/.ssh/id_rsa"}}]
    tool_result = [{"type": "tool_result", "tool_use_id": "t1", "content": PRIVATE_KEY}]
    _jsonl(
        home / ".claude" / "projects" / "-home-dev-shop" / f"{SESSION}.jsonl",
        [
            _claude_entry(
                1, "user", f"Deploy the shop to staging; the AWS key is {AWS_KEY} in region eu-west-1", str(project)
            ),
            _claude_entry(2, "assistant", tool_use, str(outside / "proj")),
            _claude_entry(3, "user", tool_result, f"{home}/../outside/proj2"),
            _claude_entry(
                4, "user", f'In settings.py set password = "{APP_PASSWORD}" for the admin panel', str(project)
            ),
            # no detectable context: redacted because the same value was found in the CLAUDE.md
            _claude_entry(5, "assistant", f"Logged in with {DB_PASSWORD}; the orders table exists.", str(project)),
        ],
    )
    # a symlinked transcript and a symlinked project directory that both lead outside
    _jsonl(outside / "claude" / "leak.jsonl", [_claude_entry(1, "user", f"I am {MARKER} the leak", str(project))])
    (home / ".claude" / "projects" / "-home-dev-shop" / "zz-link.jsonl").symlink_to(outside / "claude" / "leak.jsonl")
    (home / ".claude" / "projects" / "-linked").symlink_to(outside / "claude", target_is_directory=True)


def _cursor(home: Path, outside: Path) -> None:
    conversation = [
        {"type": 1, "bubbleId": "x1", "text": f"Set GITHUB_TOKEN={GITHUB_TOKEN} for the release workflow"},
        {"type": 2, "bubbleId": "x2", "text": "Done: the release workflow now reads the token from secrets."},
    ]
    composer = {"composerId": "c1", "createdAt": 1735000000000, "conversation": conversation}
    user_dir = home / ".config" / "Cursor" / "User"
    make_fixtures._state_db(user_dir / "globalStorage" / "state.vscdb", {}, {"composerData:c1": composer})
    leak = {"composerId": "c9", "createdAt": 1735000000000, "conversation": [{"type": 1, "text": f"{MARKER} here"}]}
    make_fixtures._state_db(outside / "cursorws" / "state.vscdb", {}, {"composerData:c9": leak})
    (user_dir / "workspaceStorage").mkdir(parents=True)
    (user_dir / "workspaceStorage" / "linked").symlink_to(outside / "cursorws", target_is_directory=True)


def _aider(home: Path, outside: Path) -> None:
    (home / "projects" / "shop" / ".aider.chat.history.md").write_text(
        "# aider chat started at 2024-05-01 10:00:00\n\n"
        f"#### the cache password: {DB_PASSWORD} and the AWS key {AWS_KEY}\n\n"
        "Noted, I will keep the cache settings private.\n\n"
        "#### Now move the cache to Redis and document the setup in README.md\n\n"
        "I moved the cache to Redis and documented the setup in README.md.\n"
    )
    (outside / "aiderproj").mkdir()
    (outside / "aiderproj" / ".aider.chat.history.md").write_text(f"#### {MARKER}\n\nok\n")
    (home / "projects" / "linked").symlink_to(outside / "aiderproj", target_is_directory=True)
    # a memory file that is itself a symlink out of the home
    (outside / "rules.md").write_text(f"- {MARKER} rules\n")
    rules = home / ".codeium" / "windsurf" / "memories" / "global_rules.md"
    rules.parent.mkdir(parents=True)
    rules.symlink_to(outside / "rules.md")


@pytest.fixture
def planted(tmp_path: Path) -> Path:
    """The import home; ``tmp_path / "outside"`` is the directory next to it."""
    home, outside = tmp_path / "home", tmp_path / "outside"
    home.mkdir()
    outside.mkdir()
    _claude(home, outside)
    _cursor(home, outside)
    _aider(home, outside)
    return home


def test_listing_is_relative_and_confined_to_the_home(planted: Path) -> None:
    listed = scan_sources(planted)
    assert {(s.source, s.path, s.item_count) for s in listed} == {
        ("claude_code", f".claude/projects/-home-dev-shop/{SESSION}.jsonl", 1),
        ("claude_code", "projects/shop/CLAUDE.md", 1),  # the one cwd inside the home
        ("cursor", ".config/Cursor/User/globalStorage/state.vscdb", 1),
        ("aider", "projects/shop/.aider.chat.history.md", 1),
        ("cursor", ".", 0),  # the symlinked workspace
        ("windsurf", ".", 0),  # the symlinked global_rules.md
    }
    assert [s.warnings for s in listed if s.path == "."] == [
        ["cursor: skipped 1 path(s) outside the import home"],
        ["windsurf: skipped 1 path(s) outside the import home"],
    ]
    assert str(planted.parent) not in json.dumps([s.model_dump() for s in listed])


def _stored(raw: redis.Redis, prefix: str) -> str:
    """Every value under the test's key prefix, as one text."""
    parts: list[bytes] = []
    for key in raw.scan_iter(match=f"{prefix}:*", count=1000):
        kind = raw.type(key).decode()
        if kind == "string":
            parts.append(raw.get(key) or b"")
        elif kind == "hash":
            parts += [b for pair in raw.hgetall(key).items() for b in pair]
        elif kind == "list":
            parts += raw.lrange(key, 0, -1)
        elif kind == "set":
            parts += list(raw.smembers(key))
        elif kind == "zset":
            parts += raw.zrange(key, 0, -1)
        elif kind == "stream":
            parts += [json.dumps({k.decode(): v.decode(errors="replace") for k, v in f.items()}).encode()
                      for _, f in raw.xrange(key)]  # fmt: skip
    return b"\n".join(parts).decode("utf-8", errors="replace")


def test_operator_import_stores_no_secret_and_nothing_from_outside(
    planted: Path,
    settings: Settings,
    raw_redis: redis.Redis,
    key_prefix: str,
    redis_url: str,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    for name, value in {
        "REDIS_URL": redis_url,
        "AGTOS_KEY_PREFIX": key_prefix,
        "AGTOS_IMPORT_HOME": str(planted),
        "AGTOS_CONFIG_DIR": str(settings.config_dir),
        "AGTOS_DATA_DIR": str(settings.data_dir),
    }.items():
        monkeypatch.setenv(name, value)
    imported = CliRunner().invoke(app, ["memory", "import", "--user", "ops", "--all"])
    assert imported.exit_code == 0, imported.output
    assert "added 3 episode(s)" in imported.output and "added 1 memory item(s)" in imported.output

    stored = _stored(raw_redis, key_prefix)
    assert [s for s in (*SECRETS, MARKER) if s in stored] == []
    # the redacted turns and memory were stored, with the words around each secret
    for kept in (
        "[REDACTED:aws_access_key] in region eu-west-1",
        "DATABASE_URL=postgres://u:[REDACTED:basic_auth_credentials]@db/x is the orders database",
        'password = "[REDACTED:secret_keyword]" for the admin panel',
        "GITHUB_TOKEN=[REDACTED:github_token] for the release workflow",
        "call Bash",
        "cat ~/.ssh/id_rsa",
        "[REDACTED:private_key]",
        "the cache password: [REDACTED:secret_keyword] and the AWS key [REDACTED:aws_access_key]",
    ):
        assert json.dumps(kept)[1:-1] in stored, kept  # records are stored as JSON

    coordinator = MemoryCoordinator(settings)
    try:
        with TestClient(create_app(coordinator=coordinator)) as client:
            for query in ("AWS key deploy staging", "orders database password", "GitHub token release workflow"):
                body = client.post("/api/memory/context", json={"query": query}, headers=user("ops"))
                assert body.status_code == 200, body.text
                text = json.dumps(body.json())
                assert body.json()["items"] and [s for s in (*SECRETS, MARKER) if s in text] == []
    finally:
        coordinator.close()

    snapshot = tmp_path / "snapshot"
    exported = CliRunner().invoke(app, ["memory", "export", "--out", str(snapshot), "--user", "ops"])
    assert exported.exit_code == 0, exported.output
    rows = [row for f in sorted(snapshot.glob("*.parquet")) for row in pq.read_table(f).to_pylist()]
    dumped = json.dumps(rows, default=str)
    assert "release workflow" in dumped and "[REDACTED:github_token]" in dumped
    assert [s for s in (*SECRETS, MARKER) if s in dumped] == []


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        (
            "export AWS_ACCESS_KEY_ID=AKIAIOSFODNN7EXAMPLE then deploy",
            "export AWS_ACCESS_KEY_ID=[REDACTED:aws_access_key] then deploy",
        ),
        ("token ghp_R8kTq2WbZx7LmN4pVc9sYd3Hf6Gj1Ke5Ua0oXY ok", "token [REDACTED:github_token] ok"),
        (
            "slack xoxb-123456789012-1234567890123-AbCdEfGhIjKlMnOpQrStUvWx bot",
            "slack [REDACTED:slack_token] bot",
        ),
        ("stripe sk_live_4eC39HqLyjWDarjtT1zdp7dc key", "stripe [REDACTED:stripe_access_key] key"),
        (
            "jwt eyJhbGciOiJIUzI1NiJ9.eyJzdWIiOiIxMjM0NTY3ODkwIn0.dozjgNryP4J3jVmNHl0w5N_XgL0n3I9PlFUP0THsR8U end",
            "jwt [REDACTED:json_web_token] end",
        ),
        ("DB_PASSWORD=s3cr3tValue42 here", "DB_PASSWORD=[REDACTED:secret_keyword] here"),
        ("api_key: 'abcd1234efgh' set", "api_key: '[REDACTED:secret_keyword]' set"),
        (
            "before\n-----BEGIN RSA PRIVATE KEY-----\nMIIEowIBAAKCAQEA\nq3Jr\n-----END RSA PRIVATE KEY-----\nafter",
            "before\n[REDACTED:private_key]\nafter",
        ),
        ("cut off: -----BEGIN EC PRIVATE KEY-----\nMHcCAQEEIB", "cut off: [REDACTED:private_key]"),
        (
            'blob = "Zm9vYmFyYmF6cXV4MTIzNDU2Nzg5MEFCQ0RFRkdISUpL" here',
            'blob = "[REDACTED:base64_high_entropy_string]" here',
        ),
        # not secrets: indirect references, ids, paths, hashes, prose after "Secret:"
        ("password = get_password()", "password = get_password()"),
        ("session 5f3c2a1e-8b7d-4c6a-9e2f-1a2b3c4d5e6f", "session 5f3c2a1e-8b7d-4c6a-9e2f-1a2b3c4d5e6f"),
        (
            "commit a94a8fe5ccb19ba61c4c0873d391e987982fbbd3 fixed it",
            "commit a94a8fe5ccb19ba61c4c0873d391e987982fbbd3 fixed it",
        ),
        (
            'call Read {"file_path": "/home/alex/webapp/app/auth.py"}',
            'call Read {"file_path": "/home/alex/webapp/app/auth.py"}',
        ),
        ("Secret: make sure to rotate keys monthly", "Secret: make sure to rotate keys monthly"),
        (
            "test_scan_sources_lists_each_file_with_its_item_count",
            "test_scan_sources_lists_each_file_with_its_item_count",
        ),
    ],
)
def test_redact_secrets(text: str, expected: str) -> None:
    assert redact_secrets(text) == expected


def test_a_secret_found_once_is_redacted_where_it_recurs() -> None:
    texts = ["DB_PASSWORD=s3cr3tValue42", "it was s3cr3tValue42 all along", "s3cr3tValue42 again: s3cr3tValue42"]
    assert redact_all(texts) == [
        "DB_PASSWORD=[REDACTED:secret_keyword]",
        "it was [REDACTED:secret_keyword] all along",
        "[REDACTED:secret_keyword] again: [REDACTED:secret_keyword]",
    ]
    assert redact_secrets("secret = 'Xy7pQ2rZ' and later Xy7pQ2rZ") == (
        "secret = '[REDACTED:secret_keyword]' and later [REDACTED:secret_keyword]"
    )
