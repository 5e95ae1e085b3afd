"""When is a gold answer "present" in a text? One rule, applied to every text the eval scores.

The rule (:func:`answer_present`): the answer's **content tokens** are the tokens of the
normalised answer that are not English stop words (spaCy's list, with number words kept as
digits); the answer is present when at least 80 % of them (rounded up, so all of them for
answers of up to four tokens) occur among the normalised text's tokens. An answer without
content tokens ("No", "yes") is present when its normalised form occurs as a whole phrase.

Normalisation: Unicode NFKD without accents, lower case, apostrophes dropped, a final "s" cut
from tokens of four letters or more ("Kate's" → "kate", "cats" → "cat"; on both sides), number
words zero–twenty → digits, and **dates** rewritten to canonical tokens
before tokenising, so "7 May 2023", "May 7th, 2023", "07 May, 2023", "2023-05-07", "2023/05/07"
and "07.05.2023" (day first) all become ``2023-05-07``. A text's full date also yields its month (``2023-05``),
its year and its day of the year (``05-07``), so the answers "May 2023", "2023" and "7 May"
are found in a text that says "(7 May 2023)"; an answer date must be matched at its own
precision. Times of day are ignored.

It is a bag-of-tokens test over the whole text: lenient for long texts (the words of a long
answer may come from different places) and blind to paraphrase ("twice" vs "two times").
Every system is scored with the same rule on texts of the same kind, so the comparison holds.
"""

from __future__ import annotations

import math
import re
import unicodedata
from calendar import month_abbr, month_name
from functools import lru_cache

from spacy.lang.en.stop_words import STOP_WORDS

THRESHOLD = 0.8

_MONTHS = {name.lower(): i for i, name in enumerate(month_name) if name}
_MONTHS |= {abbr.lower(): i for i, abbr in enumerate(month_abbr) if abbr}
_MONTHS["sept"] = 9
_MONTH = r"(?P<{g}>" + "|".join(sorted(_MONTHS, key=len, reverse=True)) + r")\.?"
_DAY = r"(?P<{g}>[0-3]?\d)(?:st|nd|rd|th)?"
_YEAR = r"(?P<{g}>(?:19|20)\d\d)"

_DATE_PATTERNS = (
    # 2023-05-07, 2023/05/07
    re.compile(r"\b(?P<y>(?:19|20)\d\d)[-/](?P<m>[01]?\d)[-/](?P<d>[0-3]?\d)\b"),
    # 07.05.2023: day first, as written in Europe (agtos.tasks.dates.named_days reads it so too)
    re.compile(r"\b(?P<d>[0-3]?\d)\.(?P<m>[01]?\d)\.(?P<y>(?:19|20)\d\d)\b"),
    # 7 May 2023, 7th of May, 2023, 07 May, 2023
    re.compile(
        rf"\b{_DAY.format(g='d')}(?:\s+of)?\s+{_MONTH.format(g='m')},?\s+{_YEAR.format(g='y')}\b", re.IGNORECASE
    ),
    # May 7, 2023, May 7th 2023
    re.compile(rf"\b{_MONTH.format(g='m')}\s+{_DAY.format(g='d')},?\s+{_YEAR.format(g='y')}\b", re.IGNORECASE),
    # May 2023, May, 2023
    re.compile(rf"\b{_MONTH.format(g='m')},?\s+{_YEAR.format(g='y')}\b", re.IGNORECASE),
    # 7 May, May 7th (no year)
    re.compile(rf"\b{_DAY.format(g='d')}(?:\s+of)?\s+{_MONTH.format(g='m')}\b", re.IGNORECASE),
    re.compile(rf"\b{_MONTH.format(g='m')}\s+{_DAY.format(g='d')}\b(?!:)", re.IGNORECASE),
)
_TIME = re.compile(r"\b\d{1,2}:\d\d(?::\d\d)?\s*(?:[ap]\.?m\.?)?", re.IGNORECASE)
_TOKEN = re.compile(r"[a-z0-9]+(?:-[0-9]+)*")
_NUMBER_WORDS = {
    w: str(i)
    for i, w in enumerate(
        "zero one two three four five six seven eight nine ten eleven twelve thirteen fourteen fifteen "
        "sixteen seventeen eighteen nineteen twenty".split()
    )
}
_STOP = frozenset(STOP_WORDS) - set(_NUMBER_WORDS)


def _month(text: str) -> int:
    return _MONTHS[text.lower().rstrip(".")]


def _date_tokens(match: re.Match[str], expand: bool) -> str | None:
    parts = match.groupdict()
    month = _month(parts["m"]) if not parts["m"].isdigit() else int(parts["m"])
    day = int(parts["d"]) if parts.get("d") else None
    year = parts.get("y")
    if not 1 <= month <= 12 or (day is not None and not 1 <= day <= 31):
        return None
    if year and day:
        full, ym, md = f"{year}-{month:02d}-{day:02d}", f"{year}-{month:02d}", f"{month:02d}-{day:02d}"
        return f" {full} {ym} {year} {md} " if expand else f" {full} "
    if year:
        return f" {year}-{month:02d} {year} " if expand else f" {year}-{month:02d} "
    return f" {month:02d}-{day:02d} "


def _rewrite_dates(text: str, expand: bool) -> str:
    for pattern in _DATE_PATTERNS:
        text = pattern.sub(lambda m: _date_tokens(m, expand) or m.group(0), text)
    return text


def normalise(text: str, expand_dates: bool = True) -> list[str]:
    """The normalised tokens of ``text`` (dates as canonical tokens; see the module docstring)."""
    text = unicodedata.normalize("NFKD", text)
    text = "".join(c for c in text if not unicodedata.combining(c)).lower()
    text = re.sub(r"['’‘`´]", "", text)  # kate's -> kates, don't -> dont
    text = _TIME.sub(" ", text)
    text = _rewrite_dates(text, expand_dates)
    return [_NUMBER_WORDS.get(t, t) for t in _TOKEN.findall(text)]


def _key(token: str) -> str:
    return token[:-1] if len(token) > 3 and token.endswith("s") and not token.endswith("ss") else token


@lru_cache(maxsize=4096)
def content_tokens(answer: str) -> tuple[str, ...]:
    """The answer's content tokens, in order, without repeats (empty for "No", "yes" …)."""
    return tuple(dict.fromkeys(_key(t) for t in normalise(answer, expand_dates=False) if t not in _STOP))


def text_tokens(text: str) -> frozenset[str]:
    """What a text offers to the rule: the set of its normalised tokens."""
    return frozenset(_key(t) for t in normalise(text))


def token_recall(answer: str, tokens: frozenset[str]) -> float | None:
    """Share of the answer's content tokens found in ``tokens``; None without content tokens."""
    wanted = content_tokens(answer)
    if not wanted:
        return None
    return sum(t in tokens for t in wanted) / len(wanted)


def answer_present(answer: str, text: str | frozenset[str]) -> bool:
    """The eval's single "answer present" rule (module docstring). ``text`` may be pre-tokenised."""
    if not answer.strip():
        return False
    tokens = text_tokens(text) if isinstance(text, str) else text
    wanted = content_tokens(answer)
    if wanted:
        needed = math.ceil(THRESHOLD * len(wanted) - 1e-9)
        return sum(t in tokens for t in wanted) >= needed
    phrase = [_key(t) for t in normalise(answer, expand_dates=False)]
    if not phrase or not isinstance(text, str):
        return bool(phrase) and all(t in tokens for t in phrase)
    return f" {' '.join(phrase)} " in f" {' '.join(_key(t) for t in normalise(text))} "
