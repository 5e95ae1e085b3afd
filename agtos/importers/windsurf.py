"""Windsurf: VS Code-style ``state.vscdb`` chat keys and the ``global_rules.md`` memory file.

Cascade conversations themselves (``~/.codeium/windsurf/cascade/*.pb``) are encrypted protobuf
and are deliberately not read."""

from __future__ import annotations

from pathlib import Path

from agtos.importers.base import Parser, ParseResult, is_file, unique_paths
from agtos.importers.markdown_memory import parse_memory_file
from agtos.importers.vscdb import find_state_dbs, parse_state_db


class WindsurfParser(Parser):
    """Windsurf ``state.vscdb`` files and ``~/.codeium/windsurf/memories/global_rules.md``."""

    name = "windsurf"

    def discover(self, home: Path) -> list[Path]:
        rules = home / ".codeium" / "windsurf" / "memories" / "global_rules.md"
        return unique_paths([*find_state_dbs(home, "Windsurf"), *([rules] if is_file(rules) else [])])

    def parse(self, path: Path) -> ParseResult:
        if path.suffix == ".md":
            return parse_memory_file(path, self.name)
        return parse_state_db(path, self.name)
