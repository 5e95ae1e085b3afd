"""Importers for chat history and memories that other AI coding tools left on this machine.

``scan_sources(home)`` lists what can be imported; ``collect(home, sources)`` parses it all into
``ImportedSession``/``ImportedMemory`` items with stable keys, so re-importing is idempotent."""

from agtos.importers.base import (
    ImportedMemory,
    ImportedSession,
    Parser,
    ParseResult,
    SourceSummary,
)
from agtos.importers.registry import (
    ALL_PARSERS,
    SOURCE_NAMES,
    collect,
    parse_file,
    resolve_home,
    scan_sources,
)

__all__ = [
    "ALL_PARSERS",
    "SOURCE_NAMES",
    "ImportedMemory",
    "ImportedSession",
    "ParseResult",
    "Parser",
    "SourceSummary",
    "collect",
    "parse_file",
    "resolve_home",
    "scan_sources",
]
