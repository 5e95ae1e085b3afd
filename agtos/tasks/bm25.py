"""Okapi BM25 scoring (pure): tokens, idf, per-term and per-document scores."""

from __future__ import annotations

import math
import unicodedata
from collections import Counter
from collections.abc import Mapping

import Stemmer

from agtos.tasks.lemmas import lemma_targets, lemma_terms
from agtos.tasks.text import STOPWORDS, words

K1 = 1.2
B = 0.75
MAX_TERM_LENGTH = 64
#: recorded with each stored index (``agtos.storage.bm25_index``), whose older terms are upgraded
#: 1: plurals folded (light_stem); 2: then Snowball English stems (stem); 3: a possessive "'s" (either
#: apostrophe) folded to its word ("kate's" -> "kate"), the marks of non-Latin scripts kept ("がぎ" not "かき");
#: 4: irregular inflections as their lemma's stem ("bought" -> "buy", "went" -> "go": :mod:`agtos.tasks.lemmas`);
#: 5: the "-men" plurals spaCy relates by its noun rule ("women" -> "woman", "firemen" -> "fireman"), "oxen" -> "ox"
TOKENIZER_VERSION = 5

_STEMMER = Stemmer.Stemmer("english")


def light_stem(word: str) -> str:
    """Plural folding only ("dogs" → "dog", "cities" → "city"); codes and short words untouched."""
    if len(word) <= 3 or not word.isalpha():
        return word
    if word.endswith("ies") and len(word) > 4:
        return word[:-3] + "y"
    if word.endswith("s") and not word.endswith(("ss", "us", "is", "ous")):
        return word[:-1]
    return word


def bare(word: str) -> str:
    """A word without its possessive (or "is") "'s" ("kate's" -> "kate"); other apostrophes stay ("o'neill")."""
    return word[:-2] if word.endswith("'s") else word


def stem(word: str) -> str:
    """A word's index term: its possessive dropped (:func:`bare`), plurals folded (:func:`light_stem`), then its
    Snowball (Porter2) English stem ("cooking", "cooked" → "cook", "adoption" → "adopt", "cities" → "citi",
    "kate's" → "kate"), an irregular form's the stem of its lemma ("bought" → "buy", :func:`lemma_term`);
    codes and numbers ("gpt-4", "4521") untouched. ``stem`` of a version-1 term (:func:`light_stem`) is the
    term of the word it was made from (:func:`upgraded_term`)."""
    word = bare(word)
    return lemma_term(_STEMMER.stemWord(light_stem(word))) if word.isalpha() else word


def lemma_term(term: str) -> str:
    """A Snowball stem as the stem of its lemma where it is an irregular form's ("bought" → "buy", "went" →
    "go", "children" → "child"); any other term as it is."""
    return lemma_terms().get(term, term)


def tokenize(text: str) -> list[str]:
    """Index/query terms: :func:`words` minus stopwords (as written and without "'s"), 1-char noise and
    over-long tokens, stemmed.

    Unlike ``content_words`` numbers are kept (order ids, error codes, years).
    """
    out: list[str] = []
    lemmas = lemma_terms()
    for word in words(text):
        if word in STOPWORDS:
            continue
        if word.endswith("'s"):  # bare(), inlined: this loop runs for every word indexed
            word = word[:-2]
        if 1 < len(word) <= MAX_TERM_LENGTH and word not in STOPWORDS:
            if word.isalpha():  # stem(), inlined
                word = _STEMMER.stemWord(light_stem(word))
                word = lemmas.get(word, word)
            out.append(word)
    return out


def _kept(word: str) -> bool:
    return 1 < len(word) <= MAX_TERM_LENGTH and word not in STOPWORDS


def upgraded_term(term: str, version: int) -> str | None:
    """The term this tokenizer makes of the word a ``version`` one stored as ``term`` (None: none, a
    stopword once its "'s" is off, or a length :func:`tokenize` does not keep). Version 1 terms are stemmed;
    version 2-3 terms are stems already, only those with "'s" (left as written) are stemmed now, the others
    only related to their lemma (:func:`lemma_term`: version 3 "bought" -> "buy"), and so are version 4 terms
    ("women" -> "woman") but those that are a lemma's term already (:func:`lemma_targets`: "marchesi" was
    stored as "marches", which the table maps on to "marchesa"); Hangul stored as jamo
    before version 3 is composed (NFC). A stored stem that is a stopword was made of a word that is not
    ("others" -> "other") and stays. Marks that versions 1-2 dropped cannot be restored: see
    :func:`legacy_terms`."""
    word = unicodedata.normalize("NFC", bare(term))
    possessive = term.endswith("'s")
    if not 1 < len(word) <= MAX_TERM_LENGTH or (possessive and word in STOPWORDS):
        return None
    if version < 2 or possessive:
        return stem(word)
    return word if version >= 4 and word in lemma_targets() else lemma_term(word)


def legacy_terms(terms: list[str]) -> list[str]:
    """The version-2 terms of query ``terms`` whose marks version 3 keeps ("がぎ" -> "かき", "हिंदी" -> "हद"),
    not already among them: how an index upgraded from version 2 still finds its older documents."""
    out: list[str] = []
    for term in terms:
        decomposed = unicodedata.normalize("NFKD", term)
        old = unicodedata.normalize("NFC", "".join(c for c in decomposed if unicodedata.category(c)[0] != "M"))
        if old != term and _kept(old) and stem(old) not in terms and stem(old) not in out:
            out.append(stem(old))
    return out


def lost_marks(term: str) -> bool:
    """Whether a version-1/2 ``term`` is of a script whose marks version 3 keeps (letters past Arabic,
    U+0700 on: Indic, Thai, kana...), so it may have lost them (:func:`legacy_terms`)."""
    return any(ord(c) >= 0x0700 for c in term)


def query_terms(text: str) -> list[str]:
    """Unique query terms in first-seen order."""
    return list(dict.fromkeys(tokenize(text)))


def term_frequencies(tokens: list[str]) -> dict[str, int]:
    return dict(Counter(tokens))


def idf(n_docs: int, df: int) -> float:
    """``ln(1 + (N - df + 0.5) / (df + 0.5))``: always > 0, so every match adds score."""
    return math.log(1.0 + (n_docs - df + 0.5) / (df + 0.5))


def term_score(tf: float, doc_len: float, avg_len: float, term_idf: float, k1: float = K1, b: float = B) -> float:
    """One term's contribution to one document."""
    if tf <= 0:
        return 0.0
    norm = 1.0 - b + b * (doc_len / avg_len if avg_len > 0 else 1.0)
    return term_idf * tf * (k1 + 1.0) / (tf + k1 * norm)


def score_documents(
    postings: Mapping[str, tuple[int, Mapping[str, float]]],
    doc_lengths: Mapping[str, float],
    n_docs: int,
    avg_len: float,
    k1: float = K1,
    b: float = B,
) -> dict[str, float]:
    """Sum BM25 over query terms. ``postings``: term -> (df, {doc_id: tf}).

    Documents missing from ``doc_lengths`` (removed meanwhile) are skipped.
    """
    scores: dict[str, float] = {}
    for df, tfs in postings.values():
        if df <= 0:
            continue
        term_idf = idf(n_docs, df)
        for doc_id, tf in tfs.items():
            doc_len = doc_lengths.get(doc_id)
            if doc_len is None:
                continue
            scores[doc_id] = scores.get(doc_id, 0.0) + term_score(tf, doc_len, avg_len, term_idf, k1, b)
    return scores


def top(scores: Mapping[str, float], limit: int) -> list[tuple[str, float]]:
    """Best first; equal scores ordered by id so results are deterministic."""
    ranked = sorted(scores.items(), key=lambda item: (-item[1], item[0]))
    return ranked[: max(0, limit)]


def rank_texts(query: str, docs: Mapping[str, str], limit: int) -> list[tuple[str, float]]:
    """BM25 over an in-memory ``{doc_id: text}`` corpus (small sets, tests, baselines)."""
    terms = query_terms(query)
    if not terms or not docs:
        return []
    doc_tf = {doc_id: term_frequencies(tokenize(text)) for doc_id, text in docs.items()}
    lengths = {doc_id: float(sum(tf.values())) for doc_id, tf in doc_tf.items()}
    avg_len = sum(lengths.values()) / len(lengths)
    postings: dict[str, tuple[int, dict[str, float]]] = {}
    for term in terms:
        hits = {doc_id: float(tf[term]) for doc_id, tf in doc_tf.items() if term in tf}
        postings[term] = (len(hits), hits)
    return top(score_documents(postings, lengths, len(docs), avg_len), limit)
