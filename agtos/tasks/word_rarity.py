"""How rare an English word is, and which words name a time, for picking an episode's keywords.

Rarity comes from the embedding model's WordPiece vocabulary (:mod:`agtos.tasks.tokens`), whose word
entries are ordered by their frequency in its training corpus: by Zipf's law a word's probability is
about 1/rank, so ``log(rank)`` is its inverse document frequency up to a constant. Words the vocabulary
splits into pieces are rarer than all of it. Time words come from dateparser's English locale data.
"""

from __future__ import annotations

import math
from functools import lru_cache

from dateparser.data.date_translation_data import en as _dateparser_en

from agtos.tasks.tokens import load_tokenizer

#: the locale entries that are not lists of time words
_NOT_TIME = {"name", "date_order", "relative-type-regex", "locale_specific", "skip", "pertain", "in", "ago"}
_NOT_TIME |= {"sentence_splitter_group", "simplifications", "am", "pm"}


@lru_cache(maxsize=1)
def time_words() -> frozenset[str]:
    """English words that name a time or a span ("day", "weeks", "monday", "tonight", "last", "next")."""
    phrases: list[str] = []
    for key, value in _dateparser_en.info.items():
        if key == "relative-type":
            phrases += [p for ps in value.values() for p in ps]
        elif key not in _NOT_TIME and isinstance(value, list):
            phrases += [p for p in value if isinstance(p, str)]
    return frozenset(w for p in phrases for w in p.lower().split() if len(w) > 1 and w.isalpha())


@lru_cache(maxsize=1)
def _ranks() -> tuple[dict[str, int], int]:
    vocab = load_tokenizer().get_vocab()
    first = vocab.get("the", 0)  # the entries before it are special tokens and single characters
    ranks = {w: i - first + 1 for w, i in vocab.items() if i >= first and w.isalpha()}
    return ranks, len(vocab)


@lru_cache(maxsize=16_384)
def rarity(word: str) -> float:
    """``log`` of the word's frequency rank in English (0 for "the", ~10.3 for a word out of the vocabulary)."""
    ranks, size = _ranks()
    return math.log(ranks.get(word, size))
