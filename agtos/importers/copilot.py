"""GitHub Copilot Chat in VS Code: ``chatSessions/*.json`` documents and ``*.jsonl`` mutation logs."""

from __future__ import annotations

import json
from pathlib import Path

from agtos.importers.base import (
    Parser,
    ParseResult,
    mtime_ms,
    read_text,
    safe_glob,
    unique_paths,
    vscode_user_dirs,
)
from agtos.importers.vscode_chat import replay_mutation_log, session_from_chat, unwrap_session

_APPS = ("Code", "Code - Insiders")
_PATTERNS = (
    "workspaceStorage/*/chatSessions/*.json",
    "workspaceStorage/*/chatSessions/*.jsonl",
    "globalStorage/emptyWindowChatSessions/*.json",
    "globalStorage/emptyWindowChatSessions/*.jsonl",
    "globalStorage/transferredChatSessions/*.json",
    "globalStorage/transferredChatSessions/*.jsonl",
)


class CopilotParser(Parser):
    """VS Code (stable and Insiders) chat sessions of every workspace and of empty windows."""

    name = "copilot"

    def discover(self, home: Path) -> list[Path]:
        found: list[Path] = []
        for app in _APPS:
            for user in vscode_user_dirs(home, app):
                for pattern in _PATTERNS:
                    found += safe_glob(user, pattern)
        return unique_paths(found)

    def parse(self, path: Path) -> ParseResult:
        result = ParseResult()
        text = read_text(path, result, self.name)
        if text is None:
            return result
        if path.suffix == ".jsonl":
            state, bad = replay_mutation_log(text.splitlines())
            if bad:
                result.warn(self.name, path, f"skipped {bad} malformed line(s)")
        else:
            try:
                state = json.loads(text)
            except ValueError as exc:
                result.warn(self.name, path, f"invalid JSON: {exc}")
                return result
        data = unwrap_session(state)
        if data is None:
            result.warn(self.name, path, "not a chat session (no 'requests' list)")
            return result
        sid = str(data.get("sessionId") or path.stem)
        session = session_from_chat(data, source=self.name, path=path, key_parts=(sid,), fallback_ts=mtime_ms(path))
        if session is not None:
            result.sessions.append(session)
        return result
