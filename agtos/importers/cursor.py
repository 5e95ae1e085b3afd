"""Cursor: chat and composer history in its ``state.vscdb`` files, and the "Rules for AI" memory."""

from __future__ import annotations

from pathlib import Path

from agtos.importers.base import Parser, ParseResult
from agtos.importers.vscdb import find_state_dbs, parse_state_db


class CursorParser(Parser):
    """``<User>/globalStorage/state.vscdb`` and ``<User>/workspaceStorage/*/state.vscdb``."""

    name = "cursor"

    def discover(self, home: Path) -> list[Path]:
        return find_state_dbs(home, "Cursor")

    def parse(self, path: Path) -> ParseResult:
        return parse_state_db(path, self.name)
