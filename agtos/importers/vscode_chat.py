"""VS Code chat sessions (GitHub Copilot Chat): the ``chatSessions`` JSON document and its JSONL
mutation log, shared by the Copilot parser and the ``interactive.sessions`` key of state.vscdb."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from agtos.importers.base import (
    ImportedSession,
    make_turn,
    parse_ts,
    path_str,
    session_key,
    text_of,
)
from agtos.schemas.records import Role, Turn

_TEXT_KINDS = ("markdownContent", "markdownVuln")
_TOOL_KINDS = ("toolInvocationSerialized", "toolInvocation")


def _walk(state: Any, keys: list[Any]) -> Any:
    for key in keys:
        if isinstance(state, dict) and isinstance(key, str):
            state = state.get(key)
        elif isinstance(state, list) and isinstance(key, int) and -len(state) <= key < len(state):
            state = state[key]
        else:
            return None
    return state


def _apply(state: dict[str, Any], entry: dict[str, Any]) -> bool:
    """Apply one set (1) / push (2) / delete (3) mutation; False when it does not fit."""
    kind, keys = entry.get("kind"), entry.get("k")
    if not isinstance(keys, list) or not keys:
        return False
    if kind == 2:
        target = _walk(state, keys)
        if not isinstance(target, list):
            return False
        if isinstance(entry.get("i"), int):
            del target[entry["i"] :]
        if isinstance(entry.get("v"), list):
            target.extend(entry["v"])
        return True
    parent, last = _walk(state, keys[:-1]), keys[-1]
    if isinstance(parent, dict) and isinstance(last, str):
        if kind == 1:
            parent[last] = entry.get("v")
        elif kind == 3:
            parent.pop(last, None)
        return kind in (1, 3)
    if isinstance(parent, list) and isinstance(last, int) and -len(parent) <= last < len(parent):
        if kind == 1:
            parent[last] = entry.get("v")
        elif kind == 3:
            del parent[last]
        return kind in (1, 3)
    return False


def replay_mutation_log(lines: list[str]) -> tuple[dict[str, Any] | None, int]:
    """Final session state of a ``{"kind":0,"v":...}`` + mutations JSONL log, and the bad-line count."""
    state: dict[str, Any] | None = None
    bad = 0
    for line in lines:
        if not line.strip():
            continue
        try:
            entry = json.loads(line)
        except ValueError:
            bad += 1
            continue
        if not isinstance(entry, dict):
            bad += 1
        elif entry.get("kind") == 0 and isinstance(entry.get("v"), dict):
            state = entry["v"]
        elif state is None or not _apply(state, entry):
            bad += 1
    return state, bad


def unwrap_session(obj: Any) -> dict[str, Any] | None:
    """The session object of a plain document or a single ``{"kind":0,"v":...}`` snapshot."""
    if isinstance(obj, dict) and obj.get("kind") == 0 and isinstance(obj.get("v"), dict):
        obj = obj["v"]
    return obj if isinstance(obj, dict) and isinstance(obj.get("requests"), list) else None


def _user_text(request: dict[str, Any]) -> str:
    message = request.get("message")
    if isinstance(message, str):
        return message
    if not isinstance(message, dict):
        return ""
    if isinstance(message.get("text"), str):
        return message["text"]
    parts = message.get("parts")
    return "".join(text_of(p) for p in parts) if isinstance(parts, list) else ""


def _reference_name(item: dict[str, Any]) -> str:
    ref = item.get("inlineReference")
    name = item.get("name") or (ref.get("name") if isinstance(ref, dict) else None)
    if not name and isinstance(ref, dict):
        uri: dict[str, Any] = ref["uri"] if isinstance(ref.get("uri"), dict) else ref
        name = Path(str(uri.get("path") or uri.get("fsPath") or "")).name
    return f"`{name}`" if isinstance(name, str) and name else ""


def _response_turns(response: Any, ts: int) -> list[Turn]:
    """Assistant text (markdown pieces joined) interleaved with tool-invocation turns."""
    if isinstance(response, str | dict):
        response = [response]
    if not isinstance(response, list):
        return []
    turns: list[Turn | None] = []
    buffer: list[str] = []

    def flush() -> None:
        turns.append(make_turn(Role.assistant, "".join(buffer), ts))
        buffer.clear()

    for item in response:
        if isinstance(item, str):
            buffer.append(item)
            continue
        if not isinstance(item, dict):
            continue
        kind = item.get("kind")
        if kind is None and isinstance(item.get("value"), str):
            buffer.append(item["value"])
        elif kind in _TEXT_KINDS:
            buffer.append(text_of(item.get("content")))
        elif kind == "inlineReference":
            buffer.append(_reference_name(item))
        elif kind in _TOOL_KINDS:
            flush()
            name = item.get("toolId") if isinstance(item.get("toolId"), str) else "tool"
            text = text_of(item.get("pastTenseMessage")) or text_of(item.get("invocationMessage"))
            turns.append(make_turn(Role.tool, text or f"called {name}", ts, name=name))
    flush()
    return [t for t in turns if t is not None]


def session_from_chat(
    data: dict[str, Any], *, source: str, path: Path, key_parts: tuple[str, ...], fallback_ts: int
) -> ImportedSession | None:
    """An ImportedSession from a VS Code chat session object, or None if it has no turns."""
    started = parse_ts(data.get("creationDate"))
    turns: list[Turn] = []
    for request in data.get("requests") or []:
        if not isinstance(request, dict):
            continue
        ts = parse_ts(request.get("timestamp")) or (turns[-1].timestamp if turns else started or fallback_ts)
        user = make_turn(Role.user, _user_text(request), ts)
        if user is not None:
            turns.append(user)
        turns.extend(_response_turns(request.get("response"), ts))
    if not turns:
        return None
    title = data.get("customTitle") if isinstance(data.get("customTitle"), str) else None
    return ImportedSession(
        source=source,
        source_path=path_str(path),
        session_key=session_key(source, path, *key_parts),
        turns=turns,
        title=title or None,
        started_at=started or turns[0].timestamp,
    )
