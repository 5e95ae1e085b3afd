"""All parsers, and the two entry points the REST API uses: ``scan_sources`` and ``collect``.

Both stay inside the import home: a discovered path that resolves (symlinks, ``..``) outside it is
dropped before it is read, and the paths they report are relative to the home."""

from __future__ import annotations

import logging
import os
from pathlib import Path

from agtos.importers.aider import AiderParser
from agtos.importers.base import Parser, ParseResult, SourceSummary, inside, path_str, relative_path
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
    """``home`` (the ``AGTOS_IMPORT_HOME`` setting) if given, else the user's home directory; absolute."""
    return Path(path_str(Path(home).expanduser() if home is not None else Path.home()))


def _selected(sources: list[str] | None) -> tuple[list[Parser], list[str]]:
    """The parsers named in ``sources`` (all when None) and the names that match none."""
    if sources is None:
        return list(ALL_PARSERS), []
    unknown = [name for name in sources if name not in SOURCE_NAMES]
    return [p for p in ALL_PARSERS if p.name in sources], unknown


def _unknown_warning(name: str) -> str:
    return f"unknown source {name!r} (known: {', '.join(SOURCE_NAMES)})"


def _discover(parser: Parser, home: Path) -> tuple[list[Path], str | None]:
    """The parser's files that lie inside ``home``, and a warning (failure, or paths left out)."""
    try:
        found = parser.discover(home)
    except Exception as exc:
        log.warning("discovery of %s failed", parser.name, exc_info=True)
        return [], f"{parser.name}: discovery failed: {exc!r}"
    kept = [path for path in found if inside(path, home)]
    outside = len(found) - len(kept)
    return kept, f"{parser.name}: skipped {outside} path(s) outside the import home" if outside else None


def _relative(warnings: list[str], home: Path) -> list[str]:
    """Warnings with the home's absolute path (as given and resolved) cut from the paths they name."""
    prefixes = sorted({path_str(home), str(home.resolve())}, key=len, reverse=True)
    out = []
    for warning in warnings:
        for prefix in prefixes:
            warning = warning.replace(prefix + os.sep, "").replace(prefix, ".")
        out.append(warning)
    return out


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
    """Every discovered file with something to import or something wrong with it, its path relative
    to the home.

    A failed discovery (or one that found paths outside the home) is listed with ``.`` as its path,
    an unknown source name with an empty path; both have ``item_count`` 0 and say why in ``warnings``."""
    home = resolve_home(home)
    parsers, unknown = _selected(sources)
    summaries = [SourceSummary(source=n, path="", item_count=0, warnings=[_unknown_warning(n)]) for n in unknown]
    for parser in parsers:
        paths, failure = _discover(parser, home)
        if failure:
            summaries.append(
                SourceSummary(source=parser.name, path=".", item_count=0, warnings=_relative([failure], home))
            )
        for path in paths:
            parsed = parse_file(parser, path)
            if parsed.item_count or parsed.warnings:
                summaries.append(
                    SourceSummary(
                        source=parser.name,
                        path=relative_path(path, home),
                        item_count=parsed.item_count,
                        warnings=_relative(parsed.warnings, home),
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
    result.warnings = _relative(result.warnings, home)
    return result
