"""Reading chat history out of VS Code-style ``state.vscdb`` SQLite files (Cursor, Windsurf).

The file is opened read-only (``mode=ro``; ``immutable=1`` when it is a WAL database with no
``-wal`` file, so that not even empty ``-wal``/``-shm`` files are left behind)."""

from __future__ import annotations

import sqlite3
from collections.abc import Iterator
from contextlib import closing
from pathlib import Path
from typing import Any

from agtos.importers.base import (
    MAX_DB_BYTES,
    MAX_MEMORY_CHARS,
    MAX_VALUE_BYTES,
    ImportedMemory,
    ImportedSession,
    ParseResult,
    clip,
    file_too_big,
    loads,
    make_turn,
    memory_key,
    mtime_ms,
    parse_ts,
    path_str,
    safe_glob,
    session_key,
    text_of,
    unique_paths,
    vscode_user_dirs,
)
from agtos.importers.markdown_memory import split_markdown
from agtos.importers.vscode_chat import session_from_chat
from agtos.schemas.records import Role, Turn

SQLITE_MAGIC = b"SQLite format 3\x00"
LOCK_TIMEOUT_S = 1.0

CHATDATA_KEY = "workbench.panel.aichat.view.aichat.chatdata"
PROMPTS_KEY = "aiService.prompts"
COMPOSERS_KEY = "composer.composerData"
INTERACTIVE_KEY = "interactive.sessions"
USER_RULES_KEY = "aicontext.personalContext"


def find_state_dbs(home: Path, app: str) -> list[Path]:
    """Global and per-workspace ``state.vscdb`` files of a VS Code-style app."""
    found: list[Path] = []
    for user in vscode_user_dirs(home, app):
        found += safe_glob(user / "globalStorage", "state.vscdb")
        found += safe_glob(user / "workspaceStorage", "*/state.vscdb")
    return unique_paths(found)


def open_readonly(path: Path) -> sqlite3.Connection:
    """A read-only connection that never writes to, or next to, the database file."""
    with path.open("rb") as fh:
        header = fh.read(100)
    wal = len(header) > 19 and header[18] == 2 and header[19] == 2
    no_wal_file = not Path(f"{path}-wal").exists()
    query = "?mode=ro&immutable=1" if wal and no_wal_file else "?mode=ro"
    return sqlite3.connect(path.absolute().as_uri() + query, uri=True, timeout=LOCK_TIMEOUT_S)


class _Db:
    """Key lookups in ItemTable / cursorDiskKV with size caps and JSON decoding."""

    def __init__(self, conn: sqlite3.Connection, path: Path, source: str, result: ParseResult) -> None:
        self.conn, self.path, self.source, self.result = conn, path, source, result
        rows = conn.execute("SELECT name FROM sqlite_master WHERE type = 'table'").fetchall()
        self.tables = {r[0] for r in rows}

    def _value(self, key: str, value: Any) -> Any:
        if value is None:
            return None
        if isinstance(value, str | bytes) and len(value) > MAX_VALUE_BYTES:
            self.result.warn(self.source, self.path, f"value of {key!r} is over {MAX_VALUE_BYTES} bytes")
            return None
        return value

    def raw(self, table: str, key: str) -> Any:
        if table not in self.tables:
            return None
        row = self.conn.execute(f"SELECT value FROM {table} WHERE key = ?", (key,)).fetchone()
        return self._value(key, row[0]) if row else None

    def json(self, table: str, key: str) -> Any:
        value = self.raw(table, key)
        if value is None:
            return None
        try:
            return loads(value)
        except ValueError:
            self.result.warn(self.source, self.path, f"value of {key!r} is not JSON")
            return None

    def prefixed(self, table: str, prefix: str) -> Iterator[tuple[str, Any]]:
        """(key, JSON) rows whose key starts with ``prefix`` (an index range scan)."""
        if table not in self.tables:
            return
        upper = prefix[:-1] + chr(ord(prefix[-1]) + 1)
        sql = f"SELECT key, value FROM {table} WHERE key >= ? AND key < ? ORDER BY key"
        for key, value in self.conn.execute(sql, (prefix, upper)):
            value = self._value(key, value)
            if value is None:
                continue
            try:
                yield key, loads(value)
            except ValueError:
                self.result.warn(self.source, self.path, f"value of {key!r} is not JSON")


def _bubble_turns(bubbles: list[Any], base_ts: int) -> list[Turn]:
    """Turns of Cursor bubbles: type "user"/1 is the user, "ai"/"assistant"/2 the model."""
    turns: list[Turn | None] = []
    for i, bubble in enumerate(bubbles):
        if not isinstance(bubble, dict):
            continue
        kind = bubble.get("type")
        ts = parse_ts(bubble.get("createdAt")) or parse_ts(bubble.get("timestamp")) or base_ts + i
        text = bubble.get("text") or bubble.get("rawText") or ""
        if kind in ("user", 1):
            turns.append(make_turn(Role.user, text, ts))
        elif kind in ("ai", "assistant", 2):
            tool = bubble.get("toolFormerData")
            if not text and isinstance(tool, dict) and isinstance(tool.get("name"), str):
                body = text_of(tool.get("result")) or text_of(tool.get("rawArgs")) or f"called {tool['name']}"
                turns.append(make_turn(Role.tool, body, ts, name=tool["name"]))
            else:
                turns.append(make_turn(Role.assistant, text, ts))
    return [t for t in turns if t is not None]


def _session(
    source: str, path: Path, parts: tuple[str, ...], turns: list[Turn], title: Any, started: int | None
) -> ImportedSession | None:
    if not turns:
        return None
    return ImportedSession(
        source=source,
        source_path=path_str(path),
        session_key=session_key(source, path, *parts),
        turns=turns,
        title=title.strip()[:500] or None if isinstance(title, str) else None,
        started_at=started or turns[0].timestamp,
    )


def _chatdata(db: _Db, fallback: int) -> list[ImportedSession | None]:
    data = db.json("ItemTable", CHATDATA_KEY)
    if data is None:
        return []
    tabs = data.get("tabs") if isinstance(data, dict) else None
    if not isinstance(tabs, list):
        db.result.warn(db.source, db.path, f"{CHATDATA_KEY!r} has no 'tabs' list")
        return []
    out: list[ImportedSession | None] = []
    for i, tab in enumerate(tabs):
        if not isinstance(tab, dict) or not isinstance(tab.get("bubbles"), list):
            continue
        started = parse_ts(tab.get("createdAt")) or parse_ts(tab.get("lastSendTime"))
        turns = _bubble_turns(tab["bubbles"], started or fallback)
        tab_id = str(tab.get("tabId") or tab.get("id") or i)
        title = tab.get("chatTitle") or tab.get("title")
        out.append(_session(db.source, db.path, ("chatdata", tab_id), turns, title, started))
    return out


def _composer_bubbles(db: _Db, cid: str, data: dict[str, Any]) -> list[Any]:
    inline = data.get("conversation")
    if isinstance(inline, list) and inline:
        return inline
    headers = data.get("fullConversationHeadersOnly")
    if not isinstance(headers, list):
        return []
    cmap: dict[str, Any] = data["conversationMap"] if isinstance(data.get("conversationMap"), dict) else {}
    bubbles: list[Any] = []
    for header in headers:
        bid = header.get("bubbleId") if isinstance(header, dict) else None
        if isinstance(bid, str):
            bubble = cmap.get(bid) or db.json("cursorDiskKV", f"bubbleId:{cid}:{bid}")
            if isinstance(bubble, dict):
                bubbles.append({"type": header.get("type"), **bubble})
    return bubbles


def _composers(db: _Db, fallback: int) -> list[ImportedSession | None]:
    out: list[ImportedSession | None] = []
    for key, data in db.prefixed("cursorDiskKV", "composerData:"):
        if not isinstance(data, dict):
            db.result.warn(db.source, db.path, f"{key!r} is not an object")
            continue
        cid = key.split(":", 1)[1]
        started = parse_ts(data.get("createdAt"))
        turns = _bubble_turns(_composer_bubbles(db, cid, data), started or fallback)
        out.append(_session(db.source, db.path, ("composer", cid), turns, data.get("name"), started))
    return out


def _workspace_composers(db: _Db, fallback: int) -> tuple[list[ImportedSession | None], int]:
    """Legacy inline composer conversations, and how many composers the workspace lists."""
    data = db.json("ItemTable", COMPOSERS_KEY)
    listed = data.get("allComposers") if isinstance(data, dict) else None
    if not isinstance(listed, list):
        return [], 0
    out: list[ImportedSession | None] = []
    for comp in listed:
        if isinstance(comp, dict) and isinstance(comp.get("conversation"), list):
            cid = str(comp.get("composerId") or "")
            started = parse_ts(comp.get("createdAt"))
            turns = _bubble_turns(comp["conversation"], started or fallback)
            out.append(_session(db.source, db.path, ("composer", cid), turns, comp.get("name"), started))
    return out, len(listed)


def _interactive(db: _Db, fallback: int) -> list[ImportedSession | None]:
    data = db.json("ItemTable", INTERACTIVE_KEY)
    if not isinstance(data, list):
        return []
    return [
        session_from_chat(
            s,
            source=db.source,
            path=db.path,
            key_parts=("interactive", str(s.get("sessionId") or i)),
            fallback_ts=fallback,
        )
        for i, s in enumerate(data)
        if isinstance(s, dict) and isinstance(s.get("requests"), list)
    ]


def _prompts(db: _Db, fallback: int) -> ImportedSession | None:
    data = db.json("ItemTable", PROMPTS_KEY)
    if not isinstance(data, list):
        return None
    texts = [text_of(p) for p in data]
    unique = [t for i, t in enumerate(texts) if t.strip() and (i == 0 or t != texts[i - 1])]
    turns = [t for i, text in enumerate(unique) if (t := make_turn(Role.user, text, fallback + i))]
    return _session(db.source, db.path, ("prompts",), turns, "prompt history", None)


def _user_rules(db: _Db) -> list[ImportedMemory]:
    raw = db.raw("ItemTable", USER_RULES_KEY)
    if raw is None:
        return []
    text = bytes(raw).decode("utf-8", "replace") if isinstance(raw, bytes) else str(raw)
    try:
        decoded = loads(text)
        text = decoded if isinstance(decoded, str) else text
    except ValueError:
        pass
    return [
        ImportedMemory(
            source=db.source,
            source_path=path_str(db.path),
            key=memory_key(db.source, db.path, f"{USER_RULES_KEY}\x00{item}"),
            text=clip(item, MAX_MEMORY_CHARS),
        )
        for item in split_markdown(text)
    ]


def _read(db: _Db, fallback: int) -> None:
    sessions = _chatdata(db, fallback) + _composers(db, fallback) + _interactive(db, fallback)
    inline, listed = _workspace_composers(db, fallback)
    sessions += inline
    found = [s for s in sessions if s is not None]
    if not found and not listed:
        found += [s for s in [_prompts(db, fallback)] if s is not None]
    db.result.sessions.extend(found)
    db.result.memories.extend(_user_rules(db))


def parse_state_db(path: Path, source: str) -> ParseResult:
    """Every chat session and memory in one ``state.vscdb``; failures become warnings."""
    result = ParseResult()
    if file_too_big(path, MAX_DB_BYTES, result, source):
        return result
    try:
        with path.open("rb") as fh:
            magic = fh.read(len(SQLITE_MAGIC))
    except OSError as exc:
        result.warn(source, path, f"cannot read: {exc}")
        return result
    if magic != SQLITE_MAGIC:
        result.warn(source, path, "not a SQLite database" if magic else "empty file")
        return result
    try:
        with closing(open_readonly(path)) as conn:
            _read(_Db(conn, path, source, result), mtime_ms(path))
    except sqlite3.Error as exc:
        result.warn(source, path, f"SQLite error: {exc}")
    return result
