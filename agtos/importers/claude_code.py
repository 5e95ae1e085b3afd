"""Claude Code: ``~/.claude/projects/<encoded-cwd>/<session>.jsonl`` transcripts and CLAUDE.md files."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from agtos.importers.base import (
    ImportedSession,
    Parser,
    ParseResult,
    inside,
    is_file,
    make_turn,
    mtime_ms,
    parse_jsonl,
    parse_ts,
    path_str,
    read_text,
    safe_glob,
    session_key,
    unique_paths,
)
from agtos.importers.markdown_memory import parse_memory_file
from agtos.schemas.records import Role, Turn

_CWD_SCAN_BYTES = 64 * 1024
_SKIP_USER_PREFIXES = ("<command-", "<local-command-")
_MEMORY_NAMES = ("CLAUDE.md", ".claude/CLAUDE.md", "CLAUDE.local.md")


def _transcript_cwds(path: Path) -> set[str]:
    """The ``cwd`` values in the head of a transcript (whole lines only)."""
    try:
        with path.open("rb") as fh:
            head = fh.read(_CWD_SCAN_BYTES)
    except OSError:
        return set()
    cwds: set[str] = set()
    for raw in head.splitlines():
        try:
            obj = json.loads(raw)
        except ValueError:
            continue
        cwd = obj.get("cwd") if isinstance(obj, dict) else None
        if isinstance(cwd, str) and cwd.startswith("/"):
            cwds.add(cwd)
    return cwds


def _tool_result_text(block: dict[str, Any]) -> str:
    content = block.get("content")
    if isinstance(content, list):
        content = "\n".join(b["text"] for b in content if isinstance(b, dict) and isinstance(b.get("text"), str))
    text = content if isinstance(content, str) else ""
    return f"[error] {text}" if text and block.get("is_error") is True else text


def _block_turns(role: Role, content: Any, ts: int, tools: dict[str, str]) -> list[Turn]:
    """Turns of one message: text for the speaker, tool_use/tool_result as tool turns."""
    if isinstance(content, str):
        if role == Role.user and content.lstrip().startswith(_SKIP_USER_PREFIXES):
            return []
        turn = make_turn(role, content, ts)
        return [turn] if turn else []
    if not isinstance(content, list):
        return []
    turns: list[Turn | None] = []
    for block in content:
        if not isinstance(block, dict):
            continue
        kind = block.get("type")
        if kind == "text":
            text = block.get("text")
            if role == Role.user and isinstance(text, str) and text.lstrip().startswith(_SKIP_USER_PREFIXES):
                continue
            turns.append(make_turn(role, text, ts))
        elif kind == "tool_use":
            name: str = block["name"] if isinstance(block.get("name"), str) else "tool"
            if isinstance(block.get("id"), str):
                tools[block["id"]] = name
            call = json.dumps(block.get("input"), ensure_ascii=False, default=str)
            turns.append(make_turn(Role.tool, f"call {name} {call}", ts, name=name))
        elif kind == "tool_result":
            name = tools.get(str(block.get("tool_use_id")), "tool")
            turns.append(make_turn(Role.tool, _tool_result_text(block), ts, name=name))
    return [t for t in turns if t is not None]


class ClaudeCodeParser(Parser):
    """Claude Code session transcripts and CLAUDE.md memory files."""

    name = "claude_code"

    def discover(self, home: Path) -> list[Path]:
        """Transcripts, ``~/.claude/CLAUDE.md`` and the CLAUDE.md files of the transcripts' working
        directories; a symlink or ``cwd`` that leads outside ``home`` is never read."""
        root = home / ".claude"
        found = safe_glob(root / "projects", "*/*.jsonl")
        transcripts = [p for p in found if not p.name.startswith("agent-") and inside(p, home)]
        memory = [root / "CLAUDE.md"]
        for transcript in transcripts:
            for cwd in sorted(_transcript_cwds(transcript)):
                memory.extend(Path(cwd) / name for name in _MEMORY_NAMES)
        return unique_paths([*transcripts, *(p for p in memory if inside(p, home) and is_file(p))])

    def parse(self, path: Path) -> ParseResult:
        if path.suffix == ".md":
            return parse_memory_file(path, self.name)
        return self._parse_transcript(path)

    def _parse_transcript(self, path: Path) -> ParseResult:
        result = ParseResult()
        text = read_text(path, result, self.name)
        if text is None:
            return result
        entries, bad = parse_jsonl(text)
        if bad:
            result.warn(self.name, path, f"skipped {bad} malformed line(s)")
        turns: list[Turn] = []
        msg_ids: list[str | None] = []
        tools: dict[str, str] = {}
        seen: set[str] = set()
        title: str | None = None
        session_id: str | None = None
        started_at: int | None = None
        fallback = mtime_ms(path)
        for entry in entries:
            kind = entry.get("type")
            if kind == "summary" and title is None and isinstance(entry.get("summary"), str):
                title = entry["summary"].strip()[:500] or None
                continue
            if kind not in ("user", "assistant") or entry.get("isSidechain") is True:
                continue
            uuid = entry.get("uuid")
            if isinstance(uuid, str):
                if uuid in seen:
                    continue
                seen.add(uuid)
            message = entry.get("message")
            if not isinstance(message, dict) or entry.get("isMeta") is True:
                continue
            if session_id is None and isinstance(entry.get("sessionId"), str):
                session_id = entry["sessionId"]
            ts = parse_ts(entry.get("timestamp"))
            if started_at is None and ts is not None:
                started_at = ts
            ts = ts or (turns[-1].timestamp if turns else fallback)
            role = Role.user if kind == "user" else Role.assistant
            summary = entry.get("isCompactSummary") is True
            msg_id = message.get("id") if isinstance(message.get("id"), str) else None
            for turn in _block_turns(role, message.get("content"), ts, tools):
                if summary:
                    turn = turn.model_copy(update={"is_summary": True})
                prev = turns[-1] if turns else None
                if (
                    prev is not None
                    and msg_id is not None
                    and msg_ids[-1] == msg_id
                    and turn.role == prev.role == Role.assistant.value
                ):
                    merged = make_turn(Role.assistant, f"{prev.content}\n\n{turn.content}", prev.timestamp)
                    if merged is not None:
                        turns[-1] = merged
                    continue
                turns.append(turn)
                msg_ids.append(msg_id)
        if not entries and not bad:
            result.warn(self.name, path, "no JSON entries")
        if turns:
            sid = session_id or path.stem
            result.sessions.append(
                ImportedSession(
                    source=self.name,
                    source_path=path_str(path),
                    session_key=session_key(self.name, path, sid),
                    turns=turns,
                    title=title,
                    started_at=started_at,
                )
            )
        return result
