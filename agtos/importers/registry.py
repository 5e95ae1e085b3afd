"""All parsers, and the two entry points the REST API uses: ``scan_sources`` and ``collect``."""

from __future__ import annotations

import logging
from pathlib import Path

from agtos.importers.aider import AiderParser
from agtos.importers.base import Parser, ParseResult, SourceSummary, path_str
from agtos.importers.claude_code import ClaudeCodeParser
from agtos.importers.copilot import CopilotParser
from agtos.importers.cursor import CursorParser
from agtos.importers.windsurf import WindsurfParser

log = logging.getLogger(__name__)

ALL_PARSERS: tuple[Parser, ...] = (
    ClaudeCodeParser(),
    CursorParser(),
    WindsurfParser(),
    AiderParser(),
    CopilotParser(),
)
SOURCE_NAMES: tuple[str, ...] = tuple(p.name for p in ALL_PARSERS)


def resolve_home(home: Path | None = None) -> Path:
    """``home`` (the ``AGTOS_IMPORT_HOME`` setting) if given, else the user's home directory."""
    return Path(home).expanduser() if home is not None else Path.home()


def _selected(sources: list[str] | None) -> tuple[list[Parser], list[str]]:
    """The parsers named in ``sources`` (all when None) and the names that match none."""
    if sources is None:
        return list(ALL_PARSERS), []
    unknown = [name for name in sources if name not in SOURCE_NAMES]
    return [p for p in ALL_PARSERS if p.name in sources], unknown


def _unknown_warning(name: str) -> str:
    return f"unknown source {name!r} (known: {', '.join(SOURCE_NAMES)})"


def _discover(parser: Parser, home: Path) -> tuple[list[Path], str | None]:
    try:
        return parser.discover(home), None
    except Exception as exc:
        log.warning("discovery of %s failed", parser.name, exc_info=True)
        return [], f"{parser.name}: discovery failed: {exc!r}"


def parse_file(parser: Parser, path: Path) -> ParseResult:
    """``parser.parse(path)`` that turns any exception into a warning."""
    try:
        return parser.parse(path)
    except Exception as exc:
        log.warning("parsing %s with %s failed", path, parser.name, exc_info=True)
        result = ParseResult()
        result.warn(parser.name, path, f"unreadable: {exc!r}")
        return result


def scan_sources(home: Path | None = None, sources: list[str] | None = None) -> list[SourceSummary]:
    """Every discovered file with something to import or something wrong with it.

    A failed discovery is listed with the home directory as its path, an unknown source name
    with an empty path; both have ``item_count`` 0 and say why in ``warnings``."""
    home = resolve_home(home)
    parsers, unknown = _selected(sources)
    summaries = [SourceSummary(source=n, path="", item_count=0, warnings=[_unknown_warning(n)]) for n in unknown]
    for parser in parsers:
        paths, failure = _discover(parser, home)
        if failure:
            summaries.append(SourceSummary(source=parser.name, path=path_str(home), item_count=0, warnings=[failure]))
        for path in paths:
            parsed = parse_file(parser, path)
            if parsed.item_count or parsed.warnings:
                summaries.append(
                    SourceSummary(
                        source=parser.name,
                        path=path_str(path),
                        item_count=parsed.item_count,
                        warnings=parsed.warnings,
                    )
                )
    return summaries


def collect(home: Path | None = None, sources: list[str] | None = None) -> ParseResult:
    """All sessions and memories of the selected sources (all when None), de-duplicated by key."""
    home = resolve_home(home)
    parsers, unknown = _selected(sources)
    result = ParseResult(warnings=[_unknown_warning(n) for n in unknown])
    for parser in parsers:
        paths, failure = _discover(parser, home)
        if failure:
            result.warnings.append(failure)
        for path in paths:
            result.merge(parse_file(parser, path))
    return result
