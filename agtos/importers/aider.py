"""Aider: ``.aider.chat.history.md`` files in project directories under the home directory.

Format (as aider writes and restores it): ``# aider chat started at YYYY-MM-DD HH:MM:SS`` opens a
session, ``#### `` lines are user input, ``> `` lines are tool/command output and everything else
is the model's reply."""

from __future__ import annotations

import os
import re
from collections import deque
from datetime import datetime
from pathlib import Path

from agtos.importers.base import (
    ImportedSession,
    Parser,
    ParseResult,
    make_turn,
    mtime_ms,
    path_str,
    read_text,
    session_key,
    unique_paths,
)
from agtos.schemas.records import Role, Turn

HISTORY_NAME = ".aider.chat.history.md"
MAX_DEPTH = 5
MAX_DIRS = 20_000
SKIP_DIRS = frozenset(
    {"node_modules", "__pycache__", "site-packages", "venv", "env", "Library", "AppData",
     "target", "dist", "build", "snap", "go", "Pictures", "Music", "Movies", "Videos"}
)  # fmt: skip
_HEADER = re.compile(r"^# aider chat started at (.*?)\s*$")
_CHAT_COMMANDS = ("/ask ", "/code ", "/architect ", "/chat ")


def _walk(home: Path) -> list[Path]:
    """Breadth-first search for history files, bounded in depth and directory count."""
    found: list[Path] = []
    queue: deque[tuple[str, int]] = deque([(str(home), 0)])
    visited = 0
    while queue and visited < MAX_DIRS:
        directory, depth = queue.popleft()
        visited += 1
        try:
            with os.scandir(directory) as entries:
                for entry in entries:
                    try:
                        if entry.name == HISTORY_NAME and entry.is_file(follow_symlinks=False):
                            found.append(Path(entry.path))
                        elif (
                            depth < MAX_DEPTH
                            and not entry.name.startswith(".")
                            and entry.name not in SKIP_DIRS
                            and entry.is_dir(follow_symlinks=False)
                        ):
                            queue.append((entry.path, depth + 1))
                    except OSError:
                        continue
        except OSError:
            continue
    return found


def _started_at(stamp: str) -> int | None:
    try:
        return int(datetime.strptime(stamp, "%Y-%m-%d %H:%M:%S").timestamp() * 1000)
    except (ValueError, OverflowError, OSError):
        return None


def _user_line(line: str) -> str | None:
    """The user's text of a ``#### `` line; None for bookkeeping commands like ``/add``."""
    text = line[5:].rstrip()
    if text == "<blank>":
        return ""
    if text.startswith("/"):
        for command in _CHAT_COMMANDS:
            if text.startswith(command):
                return text[len(command) :]
        return None
    return text


def _turns(lines: list[str], base_ts: int) -> list[Turn]:
    """Aider's own split: consecutive user / tool / assistant lines form one turn each."""
    turns: list[Turn | None] = []
    role: Role | None = None
    buffer: list[str] = []

    def flush() -> None:
        if role is not None:
            name = "aider" if role == Role.tool else None
            turns.append(make_turn(role, "\n".join(buffer), base_ts + len(turns), name=name))
        buffer.clear()

    for line in lines:
        if line.startswith("#### "):
            new_role, text = Role.user, _user_line(line)
            if text is None:
                continue
        elif line.startswith("> ") or line.rstrip() == ">":
            new_role, text = Role.tool, line[2:].rstrip()
        elif line.startswith("# "):
            continue
        else:
            new_role, text = Role.assistant, line.rstrip()
        if new_role != role:
            flush()
            role = new_role
        buffer.append(text)
    flush()
    return [t for t in turns if t is not None]


class AiderParser(Parser):
    """Aider chat history files found under the home directory (bounded search)."""

    name = "aider"

    def discover(self, home: Path) -> list[Path]:
        return unique_paths(_walk(home))

    def parse(self, path: Path) -> ParseResult:
        result = ParseResult()
        text = read_text(path, result, self.name)
        if text is None:
            return result
        chunks: list[tuple[str, list[str]]] = [("", [])]
        for line in text.splitlines():
            if m := _HEADER.match(line):
                chunks.append((m.group(1), []))
            else:
                chunks[-1][1].append(line)
        seen: dict[str, int] = {}
        fallback = mtime_ms(path)
        for stamp, lines in chunks:
            started = _started_at(stamp) if stamp else None
            turns = _turns(lines, started or fallback)
            if not turns:
                continue
            ordinal = seen.get(stamp, 0)
            seen[stamp] = ordinal + 1
            result.sessions.append(
                ImportedSession(
                    source=self.name,
                    source_path=path_str(path),
                    session_key=session_key(self.name, path, stamp or "preamble", str(ordinal)),
                    turns=turns,
                    title=f"aider chat in {path.parent.name}" + (f" at {stamp}" if stamp else ""),
                    started_at=started,
                )
            )
        has_user = any(t.role == Role.user.value for s in result.sessions for t in s.turns)
        if len(chunks) == 1 and not has_user:
            result.sessions.clear()
            result.warn(self.name, path, "no '# aider chat started at' header or '#### ' user lines")
        return result
