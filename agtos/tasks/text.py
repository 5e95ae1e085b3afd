"""Shared text primitives: sentence split, word tokens, stopwords."""

from __future__ import annotations

import re
import unicodedata
from functools import lru_cache
from typing import Any

_SENTENCE_SPLIT = re.compile(r"(?<=[.!?])\s+|\n+")


def _mark_class() -> str:
    """A regex class body of Unicode's combining marks (category M), which ``\\w`` leaves out."""
    codes = [cp for cp, c in enumerate(map(chr, range(0x1E950))) if unicodedata.category(c)[0] == "M"]
    codes += range(0xE0100, 0xE01F0)  # variation selectors supplement
    runs: list[list[int]] = []
    for cp in codes:
        if runs and runs[-1][1] == cp - 1:
            runs[-1][1] = cp
        else:
            runs.append([cp, cp])
    return "".join(chr(a) if a == b else f"{chr(a)}-{chr(b)}" for a, b in runs)


@lru_cache(maxsize=1)
def _word_pattern() -> re.Pattern[str]:
    """Word tokens of folded text (:func:`fold`: lower case, Latin/Greek/Cyrillic accents off, no "_"): a
    letter or digit of any script (``\\w``) with the marks that are parts of letters (Devanagari vowel
    signs, Thai marks, dakuten); built on first use (its mark class takes ~15 ms)."""
    marks = _mark_class()
    return re.compile(rf"\w(?:[\w{marks}'+#.-]*[\w{marks}+#])?")


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
# the marks folded away: accents of Latin, Greek and Cyrillic letters (the combining diacritical blocks and
# Cyrillic's titlo), the optional vowel points of Hebrew and Arabic; the marks of other scripts are parts of
# their letters (Devanagari "हिंदी", Thai, Japanese "が") and kept
_DIACRITICS = re.compile(
    "[\u0300-\u036f\u0483-\u0489\u1ab0-\u1aff\u1dc0-\u1dff\u20d0-\u20ff\ufe20-\ufe2f"
    "\u0591-\u05bd\u05bf\u05c1\u05c2\u05c4\u05c5\u05c7\u064b-\u065f\u0670]+"
)
_APOSTROPHES = str.maketrans({"\u2019": "'", "\u02bc": "'"})  # "Kate’s" is written as "Kate's"


def fold(text: str) -> str:
    """``text`` lower-cased, without the accents of Latin, Greek and Cyrillic letters ("Zoë Ñúñez, café" ->
    "zoe nunez, cafe"), the marks of other scripts kept in NFC form ("ダ", "हिंदी"), compatibility forms
    unified (NFKC: "ｶﾞ" -> "ガ"), "’" as "'" and "_" as a space."""
    text = text.lower()
    if not text.isascii():
        decomposed = _DIACRITICS.sub("", unicodedata.normalize("NFKD", text))
        text = unicodedata.normalize("NFC", decomposed).translate(_APOSTROPHES)
    return text.replace("_", " ")


def words(text: str) -> list[str]:
    """Lower-cased word tokens of any script, accents folded (:func:`fold`; keeps tokens such as c++, node.js,
    gpt-4, kate's): "Zoë" and "Zoe" are one word, "Москве" one too (ASCII letters only cut "zo" and nothing of
    them), "がぎ" and "かき" two."""
    if text.isascii():
        return _ASCII_WORD.findall(text.lower())
    return _word_pattern().findall(fold(text))


_POSSESSIVE = re.compile(r"'s\b")


@lru_cache(maxsize=1)
def _name_word_pattern() -> re.Pattern[str]:
    """Name tokens: letters and digits of any script with their marks, a trailing "+"/"#" kept (c++)."""
    return re.compile(rf"\w[\w{_mark_class()}]*[+#]*")


def name_words(text: str) -> list[str]:
    """The words of a name (:func:`fold`ed, case-folded: "ß" -> "ss"; a possessive "'s" dropped, any other
    character a separator): "O’Neill" -> ["o", "neill"], "José" -> ["jose"], "दाल" and "दल" two words."""
    return _name_word_pattern().findall(_POSSESSIVE.sub("", fold(text.casefold())))


def content_words(text: str) -> list[str]:
    """Word tokens without stopwords and one-character noise."""
    return [w for w in words(text) if w not in STOPWORDS and len(w) > 1 and not w.isdigit()]


@lru_cache(maxsize=4096)
def normalise(text: str) -> str:
    """Lower-case, punctuation-free, single-spaced form for exact-ish comparisons."""
    return " ".join(words(text))


_ID_WORD = re.compile(r"\w[\w'+#.-]*[\w+#]|\w")
_NON_ASCII = re.compile(r"[^\x00-\x7f]")


@lru_cache(maxsize=8192)
def _without_marks(char: str) -> str:
    return "".join(c for c in unicodedata.normalize("NFKD", char) if unicodedata.category(c)[0] != "M")


def id_text(text: str) -> str:
    """The form of ``text`` that ids are made from (memories, conclusions: one record per fact): as
    :func:`normalise` was before BM25 tokenizer version 3, so stored records keep their ids — every mark
    dropped after NFKD ("がぎ" -> "かき", Hangul as jamo) and "’" a separator ("I’m" -> "i m")."""
    if text.isascii():
        return " ".join(_ASCII_WORD.findall(text.lower()))
    folded = _NON_ASCII.sub(lambda m: _without_marks(m.group()), text.lower())
    return " ".join(_ID_WORD.findall(folded.replace("_", " ")))


def episode_text(episode: Any) -> str:
    """The text an episode is embedded and BM25-indexed by: summary, facts, keywords, topic."""
    parts = [episode.summary, *episode.facts, " ".join(episode.keywords), episode.topic]
    return "\n".join(p for p in parts if p)
