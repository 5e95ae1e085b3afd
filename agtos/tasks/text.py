"""Shared text primitives: sentence split, word tokens, stopwords."""

from __future__ import annotations

import re
import unicodedata
from functools import lru_cache
from typing import Any

_SENTENCE_SPLIT = re.compile(r"(?<=[.!?])\s+|\n+")
# on folded text (:func:`fold`: lower case, no accents, no "_"), where \w is a letter or digit of any script
_WORD = re.compile(r"\w[\w'+#.-]*[\w+#]|\w")

_STOPWORD_TEXT = """
a about above after again against all also am an and any are aren't as at be because been
before being below between both but by can can't could couldn't did didn't do does doesn't
doing don't down during each few for from further get got had hadn't has hasn't have haven't
having he he'd he'll he's her here here's hers herself him himself his how how's i i'd i'll i'm
i've if in into is isn't it it's its itself just let's like me more most much my myself no nor
not now of off on once only or other ought our ours ourselves out over own please same shall
she she'd she'll she's should shouldn't so some such than that that's the their theirs them
themselves then there there's these they they'd they'll they're they've this those through to
too under until up us very was wasn't we we'd we'll we're we've were weren't what what's when
when's where where's which while who who's whom why why's will with won't would wouldn't yes
yet you you'd you'll you're you've your yours yourself yourselves ok okay sure thanks thank hi
hello hey really actually well going want tell know think one two also could would maybe today
tomorrow need lot something anything things thing way make use using used user assistant
"""
STOPWORDS: frozenset[str] = frozenset(_STOPWORD_TEXT.split())


_ABBREVIATION = re.compile(
    r"(?:\b(?:prof|dr|mr|mrs|ms|st|sr|jr|vs|etc|e\.g|i\.e|no|approx|dept|inc|ltd|co)|\b[a-z])\.$", re.I
)


def sentences(text: str) -> list[str]:
    """Split text into trimmed, non-empty sentences ("Prof. Ito", "e.g. this" stay whole)."""
    out: list[str] = []
    for part in _SENTENCE_SPLIT.split(text):
        part = part.strip() if part else ""
        if not part:
            continue
        if out and _ABBREVIATION.search(out[-1]) and not out[-1].endswith("\n"):
            out[-1] = f"{out[-1]} {part}"
        else:
            out.append(part)
    return out


_ASCII_WORD = re.compile(r"[a-z0-9][a-z0-9'+#.-]*[a-z0-9+#]|[a-z0-9]")  # the same tokens on ASCII text, faster
_NON_ASCII = re.compile(r"[^\x00-\x7f]")


@lru_cache(maxsize=8192)
def _fold_char(char: str) -> str:
    return "".join(c for c in unicodedata.normalize("NFKD", char) if not unicodedata.category(c).startswith("M"))


def fold(text: str) -> str:
    """``text`` lower-cased, without accents or other marks ("Zoë Ñúñez, café" -> "zoe nunez, cafe") and with
    "_" as a space."""
    text = text.lower()
    if not text.isascii():
        text = _NON_ASCII.sub(lambda m: _fold_char(m.group()), text)
    return text.replace("_", " ")


def words(text: str) -> list[str]:
    """Lower-cased word tokens of any script, accents folded (keeps tokens such as c++, node.js, gpt-4):
    "Zoë" and "Zoe" are one word, "Москве" one too (ASCII letters only cut "zo" and nothing of them)."""
    if text.isascii():
        return _ASCII_WORD.findall(text.lower())
    return _WORD.findall(fold(text))


def content_words(text: str) -> list[str]:
    """Word tokens without stopwords and one-character noise."""
    return [w for w in words(text) if w not in STOPWORDS and len(w) > 1 and not w.isdigit()]


@lru_cache(maxsize=4096)
def normalise(text: str) -> str:
    """Lower-case, punctuation-free, single-spaced form for exact-ish comparisons."""
    return " ".join(words(text))


def episode_text(episode: Any) -> str:
    """The text an episode is embedded and BM25-indexed by: summary, facts, keywords, topic."""
    parts = [episode.summary, *episode.facts, " ".join(episode.keywords), episode.topic]
    return "\n".join(p for p in parts if p)
