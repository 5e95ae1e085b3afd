"""Secret redaction of imported text with the ``detect-secrets`` ruleset (Yelp's maintained plugins).

Every plugin of the package (AWS, GitHub, GitLab, Slack, Stripe, OpenAI, JWT, basic auth in URLs,
private-key headers, …) runs over the text; the keyword plugin (line by line) (``password = "…"``,
``DB_PASSWORD=…``, ``api_key: …``) and the two high-entropy plugins (quoted strings, and unquoted
base64-like tokens) run with the limits below. Each found value is replaced by
``[REDACTED:<type>]``; whole private-key blocks (``BEGIN … PRIVATE KEY`` … ``END …``) are removed,
across lines; a value found once is also redacted where it recurs without a detectable context
(``redact_all`` does this across all the texts of an import). Only the plugins' patterns are used:
nothing is verified over the network and no global detect-secrets settings are touched.
Cost: about 0.6 s of CPU per MB of transcript text."""

from __future__ import annotations

import re
from collections.abc import Iterator, Mapping, Sequence
from functools import lru_cache

from detect_secrets.core.plugins.util import get_mapping_from_secret_type_to_class
from detect_secrets.filters.heuristic import (
    is_indirect_reference,
    is_not_alphanumeric_string,
    is_potential_uuid,
    is_prefixed_with_dollar_sign,
    is_sequential_string,
    is_templated_secret,
)
from detect_secrets.plugins.base import BasePlugin, RegexBasedDetector
from detect_secrets.plugins.high_entropy_strings import (
    Base64HighEntropyString,
    HexHighEntropyString,
    HighEntropyStringsPlugin,
)
from detect_secrets.plugins.ip_public import IPPublicDetector
from detect_secrets.plugins.keyword import (
    CONFIG_DENYLIST_REGEX_TO_GROUP,
    DENYLIST,
    QUOTES_REQUIRED_DENYLIST_REGEX_TO_GROUP,
    KeywordDetector,
)

BASE64_ENTROPY_LIMIT = 4.5
"""detect-secrets' default: a random 24+ character base64 token passes it, words and paths do not."""
HEX_ENTROPY_LIMIT = 3.0
"""detect-secrets' default for quoted hex strings."""
MIN_ENTROPY_CHARS = 20
"""Quoted or unquoted strings shorter than this are never flagged for entropy alone."""
MIN_SECRET_CHARS = 3
"""Shorter values (``password = "x"``) are too weak to matter and too common to replace safely."""
MIN_ECHO_CHARS = 6
"""A found secret at least this long is also redacted where it occurs without a detectable context."""

_PRIVATE_KEY_BLOCK = re.compile(
    r"-----BEGIN[A-Z0-9 ]*PRIVATE KEY(?: BLOCK)?-----.*?(?:-----END[A-Z0-9 ]*PRIVATE KEY(?: BLOCK)?-----|\Z)"
    r"|PuTTY-User-Key-File-\d+:.*?(?:Private-MAC:[ \t]*\S*|\Z)",
    re.DOTALL,
)
_TOKEN_TAIL = re.compile(r"[A-Za-z0-9_-]*")
_SKIPPED_PLUGINS = (IPPublicDetector, KeywordDetector, HighEntropyStringsPlugin)
"""Public IP addresses are not secrets; the keyword and entropy plugins run with the settings below."""


def _slug(secret_type: str) -> str:
    return re.sub(r"[^a-z0-9]+", "_", secret_type.lower()).strip("_")


@lru_cache(maxsize=1)
def _regex_plugins() -> tuple[tuple[tuple[re.Pattern[str], ...], str], ...]:
    """The patterns of every regex plugin of the installed detect-secrets, with its redaction label."""
    classes: list[type[BasePlugin]] = list(get_mapping_from_secret_type_to_class().values())
    plugins = [cls() for cls in sorted(classes, key=lambda c: c.__name__) if not issubclass(cls, _SKIPPED_PLUGINS)]
    return tuple((tuple(p.denylist), _slug(p.secret_type)) for p in plugins if isinstance(p, RegexBasedDetector))


Span = tuple[int, int, str]
"""Start and end offset of one secret in the text, and its redaction label."""


def _secret_span(match: re.Match[str]) -> tuple[int, int]:
    """Where one plugin match's secret is: its captured value (a URL's password), or the whole match
    when the group is only the token's prefix (GitHub's ``ghp``) or a short optional part."""
    groups = [(len(g), i) for i, g in enumerate(match.groups(), start=1) if g]
    best = max(groups)[1] if groups else 0
    if best and len(match.group(best)) >= 8 and match.start(best) != match.start():
        return match.span(best)
    tail = _TOKEN_TAIL.match(match.string, match.end())  # a token longer than the pattern's fixed length
    return match.start(), tail.end() if tail else match.end()


_KEYWORD = KeywordDetector()
_KEYWORD_LABEL = _slug(_KEYWORD.secret_type)
_BASE64 = Base64HighEntropyString(limit=BASE64_ENTROPY_LIMIT)
_HEX = HexHighEntropyString(limit=HEX_ENTROPY_LIMIT)
_UNQUOTED_BASE64 = re.compile(rf"[{re.escape(_BASE64.charset.replace('=', ''))}]{{{MIN_ENTROPY_CHARS},}}={{0,2}}")
"""An unquoted token of the base64 charset; ``=`` only as padding, so ``NAME=value`` splits in two."""
_KEYWORD_NAMES = re.compile("|".join(DENYLIST), re.IGNORECASE)
"""The plugin's secret-sounding names: only lines with one go through its (slow) assignment patterns."""
_KEYWORD_RULES = (QUOTES_REQUIRED_DENYLIST_REGEX_TO_GROUP, CONFIG_DENYLIST_REGEX_TO_GROUP)
_QUOTES = "\"'`"


def _plugin_spans(text: str) -> Iterator[Span]:
    """Token formats (AWS, GitHub, Slack, JWT, ``scheme://user:password@``, …), over the whole text."""
    for patterns, label in _regex_plugins():
        for pattern in patterns:
            for match in pattern.finditer(text):
                yield (*_secret_span(match), label)


def _keyword_lines(text: str) -> Iterator[int]:
    """Start offsets of the lines that name a secret-sounding keyword."""
    last = -1
    for match in _KEYWORD_NAMES.finditer(text):
        start = text.rfind("\n", 0, match.start()) + 1
        if start != last:
            last = start
            yield start


def _keyword_spans(text: str) -> Iterator[Span]:
    """Values assigned to secret-sounding names, line by line (the plugin's patterns are per line);
    an unquoted value ends at the first space, and a lower-case word there is prose, not a password."""
    for start in _keyword_lines(text):
        end = text.find("\n", start)
        line = text[start : end if end >= 0 else len(text)]
        if is_indirect_reference(line):  # password = get_password()
            continue
        for rules in _KEYWORD_RULES:
            for pattern, group in rules.items():
                for match in pattern.finditer(line):
                    first, last = match.span(group)
                    value = match.group(group)
                    if not (first and line[first - 1] in _QUOTES and line[last : last + 1] == line[first - 1]):
                        value = value.split()[0] if value.split() else value
                        if value.isalpha() and value.islower():
                            continue
                    yield start + first, start + first + len(value), _KEYWORD_LABEL


def _entropy_spans(text: str) -> Iterator[Span]:
    """Quoted hex/base64 strings over their entropy limit, and unquoted base64-like tokens."""
    for plugin in (_HEX, _BASE64):
        for match in plugin.regex.finditer(text):
            value = match.group(2)
            if len(value) >= MIN_ENTROPY_CHARS and plugin.calculate_shannon_entropy(value) > plugin.entropy_limit:
                yield (*match.span(2), _slug(plugin.secret_type))
    for match in _UNQUOTED_BASE64.finditer(text):
        if _BASE64.calculate_shannon_entropy(match.group(0)) > BASE64_ENTROPY_LIMIT:
            yield (*match.span(), _slug(_BASE64.secret_type))


def _plausible(value: str) -> bool:
    """detect-secrets' own false-positive heuristics: templates, ``$VARS``, UUIDs, ``****``, ABCDEF…"""
    return not (
        len(value) < MIN_SECRET_CHARS
        or is_templated_secret(value)
        or is_prefixed_with_dollar_sign(value)
        or is_potential_uuid(value)
        or is_not_alphanumeric_string(value)
        or is_sequential_string(value)
        or "[REDACTED:" in value
    )


def _private_key_spans(text: str) -> Iterator[Span]:
    for match in _PRIVATE_KEY_BLOCK.finditer(text):
        yield (*match.span(), "private_key")


def _merge(ranked: list[tuple[int, int, int, str]]) -> list[Span]:
    """Overlapping spans as one; its label is the best-ranked one's."""
    merged: list[tuple[int, int, int, str]] = []
    for start, end, rank, label in sorted(ranked):
        if merged and start < merged[-1][1]:
            prev = merged[-1]
            best = min((prev[2], prev[3]), (rank, label))
            merged[-1] = (prev[0], max(prev[1], end), *best)
        else:
            merged.append((start, end, rank, label))
    return [(start, end, label) for start, end, _, label in merged]


def secret_spans(text: str) -> list[Span]:
    """Every secret in ``text``, overlaps merged; a merged span keeps the most specific label
    (private-key block, then token format, then keyword, then entropy)."""
    detectors = (_private_key_spans(text), _plugin_spans(text), _keyword_spans(text), _entropy_spans(text))
    return _merge(
        [
            (start, end, rank, label)
            for rank, spans in enumerate(detectors)
            for start, end, label in spans
            if label == "private_key" or _plausible(text[start:end])
        ]
    )


def secret_values(text: str, spans: list[Span]) -> dict[str, str]:
    """The values behind ``spans`` that are long enough to redact wherever else they occur."""
    return {
        text[start:end]: label
        for start, end, label in spans
        if label != "private_key" and end - start >= MIN_ECHO_CHARS
    }


@lru_cache(maxsize=4)
def _alternation(values: tuple[str, ...]) -> re.Pattern[str]:
    """One pattern for the known values (longest first), compiled once for all texts of an import."""
    return re.compile("|".join(re.escape(v) for v in values))


def redact(text: str, spans: list[Span], known: Mapping[str, str] | None = None) -> str:
    """``text`` with ``spans`` and every occurrence of a ``known`` value replaced by ``[REDACTED:<type>]``."""
    ranked = [(start, end, 0, label) for start, end, label in spans]
    if known:
        pattern = _alternation(tuple(sorted(known, key=lambda v: (-len(v), v))))
        ranked += [(*m.span(), 1, known[m.group(0)]) for m in pattern.finditer(text)]
    out: list[str] = []
    done = 0
    for start, end, label in _merge(ranked):
        out += [text[done:start], f"[REDACTED:{label}]"]
        done = end
    return "".join(out) + text[done:]


def redact_secrets(text: str) -> str:
    """``text`` with every detected secret, and each repetition of one, replaced by ``[REDACTED:<type>]``;
    a private-key block (``BEGIN … PRIVATE KEY`` to ``END …``, or to the end when cut off) goes whole."""
    spans = secret_spans(text)
    return redact(text, spans, secret_values(text, spans))


def redact_all(texts: Sequence[str]) -> list[str]:
    """Each text redacted, where a secret found in one text is also redacted in all the others
    (a password pasted in one turn and echoed in a later one)."""
    spans = [secret_spans(text) for text in texts]
    known: dict[str, str] = {}
    for text, found in zip(texts, spans, strict=True):
        known.update(secret_values(text, found))
    return [redact(text, found, known) for text, found in zip(texts, spans, strict=True)]
