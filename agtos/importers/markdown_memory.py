"""Splitting memory/rules Markdown (CLAUDE.md, global_rules.md) into one item per bullet or section."""

from __future__ import annotations

import re
from pathlib import Path

from agtos.importers.base import (
    MAX_MEMORY_CHARS,
    ImportedMemory,
    ParseResult,
    clip,
    memory_key,
    path_str,
    read_text,
)

_HEADING = re.compile(r"^\s{0,3}(#{1,6})\s+(.*?)\s*#*\s*$")
_BULLET = re.compile(r"^\s{0,1}(?:[-*+]|\d{1,3}[.)])\s+(.*)$")
_FENCE = re.compile(r"^\s{0,3}(```|~~~)")
_RULE = re.compile(r"^\s{0,3}([-*_])(\s*\1){2,}\s*$")
_IMPORT = re.compile(r"^@\S+$")
_COMMENT = re.compile(r"<!--.*?-->", re.DOTALL)
_FRONTMATTER = re.compile(r"\A---[ \t]*\r?\n.*?\r?\n---[ \t]*(?:\r?\n|\Z)", re.DOTALL)


def _strip_frontmatter(text: str) -> str:
    return _FRONTMATTER.sub("", text, count=1)


def split_markdown(text: str) -> list[str]:
    """Top-level bullets and paragraphs, each prefixed with its nearest heading."""
    lines = _COMMENT.sub("", _strip_frontmatter(text)).splitlines()
    items: list[str] = []
    heading = ""
    block: list[str] = []
    kind = ""  # "bullet", "para" or "" (no open block)
    in_fence = False

    def flush() -> None:
        nonlocal block, kind
        body = "\n".join(block).strip()
        if body and not _IMPORT.match(body):
            items.append(f"{heading}: {body}" if heading else body)
        block, kind = [], ""

    for line in lines:
        if _FENCE.match(line):
            if not in_fence and kind == "bullet" and not line[:1].isspace():
                flush()
            in_fence = not in_fence
            block.append(line)
            kind = kind or "para"
            continue
        if in_fence:
            block.append(line)
            continue
        if not line.strip():
            if kind == "para":
                flush()
            continue
        if m := _HEADING.match(line):
            flush()
            heading = m.group(2).strip()
            continue
        if _RULE.match(line):
            flush()
            continue
        if m := _BULLET.match(line):
            flush()
            block, kind = [m.group(1)], "bullet"
            continue
        if kind == "bullet" and (line[:1].isspace() or not block):
            block.append(line.rstrip())
            continue
        if kind != "para":
            flush()
            kind = "para"
        block.append(line.rstrip())
    flush()
    return list(dict.fromkeys(items))


def parse_memory_file(path: Path, source: str) -> ParseResult:
    """A memory/rules Markdown file as one ImportedMemory per bullet or section."""
    result = ParseResult()
    text = read_text(path, result, source)
    if text is None:
        return result
    for item in split_markdown(text):
        body = clip(item, MAX_MEMORY_CHARS)
        result.memories.append(
            ImportedMemory(
                source=source,
                source_path=path_str(path),
                key=memory_key(source, path, body),
                text=body,
            )
        )
    return result
