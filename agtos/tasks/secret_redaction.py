"""Secret redaction of imported text with the ``detect-secrets`` ruleset (Yelp's maintained plugins).

Every plugin of the package (AWS, GitHub, GitLab, Slack, Stripe, OpenAI, JWT, basic auth in URLs,
private-key headers, …) runs on each line of the text; the keyword plugin (``password = "…"``,
``DB_PASSWORD=…``, ``api_key: …``) and the two high-entropy plugins (quoted strings, and unquoted
base64-like tokens) run with the limits below. Each found value is replaced by
``[REDACTED:<type>]``; whole private-key blocks (``BEGIN … PRIVATE KEY`` … ``END …``) are removed
first, across lines. Only the plugins' pure ``analyze_string`` is used: nothing is verified over the
network and no global detect-secrets settings are touched."""

from __future__ import annotations

import re
from collections.abc import Iterator
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


def _matched_secret(match: re.Match[str]) -> str:
    """The secret of one plugin match: its captured value (a URL's password), or the whole match when
    the group is only the token's prefix (GitHub's ``ghp``) or a short optional part."""
    groups = [(len(g), i) for i, g in enumerate(match.groups(), start=1) if g]
    best = max(groups)[1] if groups else 0
    if best and len(match.group(best)) >= 8 and match.start(best) != match.start():
        return match.group(best)
    tail = _TOKEN_TAIL.match(match.string, match.end())  # a token longer than the pattern's fixed length
    return match.group(0) + (tail.group(0) if tail else "")


_KEYWORD = KeywordDetector()
_BASE64 = Base64HighEntropyString(limit=BASE64_ENTROPY_LIMIT)
_HEX = HexHighEntropyString(limit=HEX_ENTROPY_LIMIT)
_UNQUOTED_BASE64 = re.compile(rf"[{re.escape(_BASE64.charset.replace('=', ''))}]{{{MIN_ENTROPY_CHARS},}}={{0,2}}")
"""An unquoted token of the base64 charset; ``=`` only as padding, so ``NAME=value`` splits in two."""
_KEYWORD_NAMES = re.compile("|".join(DENYLIST), re.IGNORECASE)
"""The plugin's secret-sounding names: a cheap test before its (slow) assignment patterns run."""
_KEYWORD_RULES = (QUOTES_REQUIRED_DENYLIST_REGEX_TO_GROUP, CONFIG_DENYLIST_REGEX_TO_GROUP)


def _keyword_values(line: str) -> Iterator[str]:
    """Values assigned to secret-sounding names; an unquoted value ends at the first space."""
    if not _KEYWORD_NAMES.search(line) or is_indirect_reference(line):  # password = get_password()
        return
    for rules in _KEYWORD_RULES:
        for value in _KEYWORD.analyze_string(line, denylist_regex_to_group=rules):
            if any(f"{q}{value}{q}" in line for q in "\"'`"):
                yield value
            elif (token := value.split()[0] if value.split() else value) and not (token.isalpha() and token.islower()):
                yield token  # a lower-case word after "secret:" is prose, not a password


def _entropy_values(line: str) -> Iterator[tuple[str, str]]:
    """Quoted hex/base64 strings over their entropy limit, and unquoted base64-like tokens."""
    for plugin in (_HEX, _BASE64):
        for value in plugin.analyze_string(line):
            if len(value) >= MIN_ENTROPY_CHARS and plugin.calculate_shannon_entropy(value) > plugin.entropy_limit:
                yield value, _slug(plugin.secret_type)
    for value in _UNQUOTED_BASE64.findall(line):
        if _BASE64.calculate_shannon_entropy(value) > BASE64_ENTROPY_LIMIT:
            yield value, _slug(_BASE64.secret_type)


def _plausible(value: str) -> bool:
    """detect-secrets' own false-positive heuristics: templates, ``$VARS``, UUIDs, ``****``, ABCDEF…"""
    return not (
        len(value) < MIN_SECRET_CHARS
        or is_templated_secret(value)
        or is_prefixed_with_dollar_sign(value)
        or is_potential_uuid(value)
        or is_not_alphanumeric_string(value)
        or is_sequential_string(value)
        or value.startswith("[REDACTED:")
    )


def line_secrets(line: str) -> dict[str, str]:
    """Every secret value found in one line, mapped to its redaction label."""
    found: dict[str, str] = {}
    for patterns, label in _regex_plugins():
        for pattern in patterns:
            for match in pattern.finditer(line):
                found.setdefault(_matched_secret(match), label)
    for value in _keyword_values(line):
        found.setdefault(value, _slug(_KEYWORD.secret_type))
    for value, label in _entropy_values(line):
        if not any(known in value for known in found):  # the specific detector's label wins
            found.setdefault(value, label)
    return {value: label for value, label in found.items() if _plausible(value)}


def _replace(line: str, secrets: dict[str, str]) -> str:
    for value in sorted(secrets, key=len, reverse=True):  # a secret inside a longer one goes second
        line = line.replace(value, f"[REDACTED:{secrets[value]}]")
    return line


def redact_secrets(text: str) -> str:
    """``text`` with private-key blocks removed and every detected secret replaced by ``[REDACTED:<type>]``."""
    text = _PRIVATE_KEY_BLOCK.sub("[REDACTED:private_key]", text)
    lines = text.split("\n")
    for i, line in enumerate(lines):
        if secrets := line_secrets(line):
            lines[i] = _replace(line, secrets)
    return "\n".join(lines)
