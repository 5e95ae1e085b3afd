"""The common model of imported chat history and memories, and the helpers every parser shares."""

from __future__ import annotations

import hashlib
import json
import os
from abc import ABC, abstractmethod
from collections.abc import Iterable
from datetime import datetime
from pathlib import Path
from typing import Any, ClassVar

from pydantic import BaseModel, ConfigDict, Field

from agtos.schemas.records import Role, Turn

MAX_FILE_BYTES = 200 * 1024 * 1024
"""Text files (JSONL, JSON, Markdown) larger than this are skipped with a warning."""
MAX_DB_BYTES = 20 * 1024**3
"""SQLite files are queried by key, never read whole, so their cap is much higher."""
MAX_VALUE_BYTES = 64 * 1024 * 1024
"""A single SQLite value larger than this is skipped with a warning."""
MAX_TURN_CHARS = 100_000
MAX_TOOL_CHARS = 20_000
MAX_MEMORY_CHARS = 20_000


class ImportedSession(BaseModel):
    """One conversation found on disk, ready to be fed through session ingestion."""

    model_config = ConfigDict(extra="forbid")

    source: str
    source_path: str
    session_key: str = Field(max_length=128)
    turns: list[Turn]
    title: str | None = None
    started_at: int | None = None


class ImportedMemory(BaseModel):
    """One memory item (a bullet or section of a rules/memory file)."""

    model_config = ConfigDict(extra="forbid")

    source: str
    source_path: str
    key: str = Field(max_length=128)
    text: str = Field(min_length=1, max_length=MAX_MEMORY_CHARS)


class ParseResult(BaseModel):
    """What one or more files yielded; problems are warnings, never exceptions."""

    model_config = ConfigDict(extra="forbid")

    sessions: list[ImportedSession] = Field(default_factory=list)
    memories: list[ImportedMemory] = Field(default_factory=list)
    warnings: list[str] = Field(default_factory=list)

    @property
    def item_count(self) -> int:
        return len(self.sessions) + len(self.memories)

    def warn(self, source: str, path: Path | str, message: str) -> None:
        self.warnings.append(f"{source}: {path}: {message}")

    def merge(self, other: ParseResult) -> None:
        """Append another result, dropping sessions/memories whose key is already present."""
        session_keys = {s.session_key for s in self.sessions}
        for session in other.sessions:
            if session.session_key not in session_keys:
                session_keys.add(session.session_key)
                self.sessions.append(session)
        memory_keys = {m.key for m in self.memories}
        for memory in other.memories:
            if memory.key not in memory_keys:
                memory_keys.add(memory.key)
                self.memories.append(memory)
        self.warnings.extend(other.warnings)


class SourceSummary(BaseModel):
    """One discovered file and how many items it would import (GET /api/memory/sources)."""

    model_config = ConfigDict(extra="forbid")

    source: str
    path: str
    item_count: int
    warnings: list[str] = Field(default_factory=list)


class Parser(ABC):
    """Finds one tool's files under a home directory and reads them."""

    name: ClassVar[str]

    @abstractmethod
    def discover(self, home: Path) -> list[Path]:
        """Every file of this tool under ``home`` (sorted, de-duplicated)."""

    @abstractmethod
    def parse(self, path: Path) -> ParseResult:
        """Sessions and memories of one discovered file."""


# -- keys and paths ---------------------------------------------------------------------------


def path_str(path: Path | str) -> str:
    return os.path.abspath(path)


def stable_key(prefix: str, source: str, *parts: str) -> str:
    """A deterministic id: the same source, path and id always give the same key."""
    raw = "\x00".join((source, *parts)).encode("utf-8", "surrogatepass")
    return f"{prefix}-{source}-{hashlib.sha256(raw).hexdigest()[:24]}"


def session_key(source: str, path: Path | str, *parts: str) -> str:
    return stable_key("imp", source, path_str(path), *parts)


def memory_key(source: str, path: Path | str, text: str) -> str:
    return stable_key("impmem", source, path_str(path), text)


def inside(path: Path | str, home: Path) -> bool:
    """True when ``path``, with every symlink and ``..`` resolved, lies under ``home`` (resolved too)."""
    try:
        return Path(path).resolve().is_relative_to(home.resolve())
    except (OSError, RuntimeError):  # a symlink loop, an unreadable parent
        return False


def relative_path(path: Path | str, home: Path) -> str:
    """``path`` relative to ``home`` (POSIX form, ``.`` for home itself), never an absolute host path."""
    for base, target in ((Path(path_str(home)), Path(path_str(path))), (home.resolve(), Path(path).resolve())):
        if target.is_relative_to(base):
            return target.relative_to(base).as_posix()
    return Path(path).name


def unique_paths(paths: Iterable[Path]) -> list[Path]:
    seen: dict[str, Path] = {}
    for path in paths:
        seen.setdefault(path_str(path), path)
    return [seen[k] for k in sorted(seen)]


def is_file(path: Path) -> bool:
    try:
        return path.is_file()
    except OSError:
        return False


def safe_glob(root: Path, pattern: str) -> list[Path]:
    try:
        return [p for p in root.glob(pattern) if is_file(p)]
    except OSError:
        return []


def vscode_user_dirs(home: Path, app: str) -> list[Path]:
    """The ``User`` data dirs of a VS Code-style app on Linux, macOS and Windows."""
    return [
        home / ".config" / app / "User",
        home / "Library" / "Application Support" / app / "User",
        home / "AppData" / "Roaming" / app / "User",
    ]


def mtime_ms(path: Path) -> int:
    try:
        return int(path.stat().st_mtime * 1000)
    except OSError:
        return 0


# -- reading ----------------------------------------------------------------------------------


def file_too_big(path: Path, limit: int, result: ParseResult, source: str) -> bool:
    """True (with a warning) when the file is missing, unreadable or over ``limit`` bytes."""
    try:
        size = path.stat().st_size
    except OSError as exc:
        result.warn(source, path, f"cannot stat: {exc}")
        return True
    if size > limit:
        result.warn(source, path, f"skipped: {size} bytes is over the {limit}-byte limit")
        return True
    return False


def read_text(path: Path, result: ParseResult, source: str) -> str | None:
    """The file as text, or None with a warning (too big, unreadable, empty or binary)."""
    if file_too_big(path, MAX_FILE_BYTES, result, source):
        return None
    try:
        data = path.read_bytes()
    except OSError as exc:
        result.warn(source, path, f"cannot read: {exc}")
        return None
    if not data.strip():
        result.warn(source, path, "empty file")
        return None
    if b"\x00" in data[:8192]:
        result.warn(source, path, "binary data, not text")
        return None
    text = data.decode("utf-8-sig", errors="replace")
    if text.count("\ufffd") > max(16, len(text) // 10):
        result.warn(source, path, "mostly undecodable bytes, not UTF-8 text")
        return None
    return text


def parse_jsonl(text: str) -> tuple[list[dict[str, Any]], int]:
    """The JSON objects of a JSONL text and the number of lines that were not objects."""
    objects: list[dict[str, Any]] = []
    bad = 0
    for line in text.splitlines():
        if not line.strip():
            continue
        try:
            obj = json.loads(line)
        except ValueError:
            bad += 1
            continue
        if isinstance(obj, dict):
            objects.append(obj)
        else:
            bad += 1
    return objects, bad


def loads(value: Any) -> Any:
    """JSON from a str/bytes value; raises ValueError when it is not JSON."""
    if isinstance(value, bytes | bytearray | memoryview):
        value = bytes(value).decode("utf-8", errors="replace")
    if not isinstance(value, str):
        raise ValueError(f"expected JSON text, got {type(value).__name__}")
    return json.loads(value)


# -- turns and timestamps ---------------------------------------------------------------------


def parse_ts(value: Any) -> int | None:
    """Milliseconds since the epoch from epoch seconds/ms numbers or ISO-8601 strings."""
    if isinstance(value, bool):
        return None
    if isinstance(value, int | float):
        ms = int(value if value > 1e11 else value * 1000)
        return ms if ms > 0 else None
    if isinstance(value, str) and value.strip():
        text = value.strip()
        if text.isdigit():
            return parse_ts(int(text))
        try:
            ms = int(datetime.fromisoformat(text.replace("Z", "+00:00")).timestamp() * 1000)
        except (ValueError, OverflowError, OSError):
            return None
        return ms if ms > 0 else None
    return None


_CLIPPED = "\n[…truncated]"


def clip(text: str, limit: int) -> str:
    """``text`` cut to at most ``limit`` characters, marked when cut."""
    return text if len(text) <= limit else text[: limit - len(_CLIPPED)] + _CLIPPED


def make_turn(
    role: Role,
    content: Any,
    timestamp: int,
    name: str | None = None,
    is_summary: bool = False,
) -> Turn | None:
    """A valid Turn, or None when there is no text; long content is truncated."""
    if not isinstance(content, str) or not content.strip():
        return None
    limit = MAX_TOOL_CHARS if role == Role.tool else MAX_TURN_CHARS
    return Turn(
        role=role,
        content=clip(content.strip(), limit),
        timestamp=max(0, int(timestamp)),
        name=name[:128] if isinstance(name, str) and name else None,
        is_summary=is_summary,
    )


def text_of(value: Any) -> str:
    """Plain text of a str or a ``{"value": str}`` / ``{"text": str}`` object."""
    if isinstance(value, str):
        return value
    if isinstance(value, dict):
        for field in ("value", "text", "content"):
            if isinstance(value.get(field), str):
                return value[field]
    return ""
