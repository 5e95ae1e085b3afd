"""Finding what a forgotten conversation said (a word, a code, an id) in stored keys and replies.

A needle of digits only (a PIN "4417", a locker code "8812") counts only as a whole number, not inside
a longer run of letters and digits nor as part of a decimal: as a plain substring it also turns up by
chance inside the random hex of ids, key prefixes and index epochs (a UUID's 32 hex digits hold a given
4-digit string about once in 2,300), inside millisecond times and inside scores ("0.8812"), so a test of
"nothing left" failed now and then on clean code (mutmut's set-up, docs/testing.md). Other needles
(words, ids) are plain substrings.
"""

from __future__ import annotations

import re


def _whole_number(needle: str) -> re.Pattern[bytes]:
    """The digits of ``needle`` with no letter or digit on either side, and not a decimal's part
    ("0.8812" and "8812.5" are other numbers; "is 8812." ends a sentence)."""
    return re.compile(rb"(?<![0-9A-Za-z])(?<![0-9]\.)" + re.escape(needle.encode()) + rb"(?![0-9A-Za-z])(?!\.[0-9])")


def occurrences(haystack: bytes | str, needle: str) -> int:
    """How many times ``needle`` is in ``haystack`` (a digits-only needle as a whole number only)."""
    data = haystack.encode() if isinstance(haystack, str) else haystack
    if needle.isdigit():
        return len(_whole_number(needle).findall(data))
    return data.count(needle.encode())


def holds(haystack: bytes | str, needle: str) -> bool:
    """Whether ``needle`` is in ``haystack`` (a digits-only needle as a whole number only)."""
    return occurrences(haystack, needle) > 0
