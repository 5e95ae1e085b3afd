"""NER by a transformers token-classification model (``AGTOS_NER_MODEL_DIR``), with the same rules
on top as the spaCy recognizer (:mod:`agtos.tasks.ner`), used instead of spaCy when configured.

Label mapping: PER -> person, LOC -> place, ORG -> organization, MISC -> thing (CoNLL-03's MISC
mixes events, nationalities and works, so no finer type is safe); a model trained on OntoNotes
labels (PERSON, GPE, EVENT...) maps as spaCy's does, EVENT -> event included. Other labels are
dropped. A directory that is missing, not a token classifier, or fails to load gives a warning,
``error`` and the spaCy recognizer instead.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable
from pathlib import Path
from typing import Any

from agtos.providers.transformers_ner import TokenClassifier, entity_labels
from agtos.providers.transformers_runtime import ModelDirError
from agtos.schemas import EntityType
from agtos.tasks.mentions import MODEL_LABELS, EntityRecognizer, Mention
from agtos.tasks.ner import LineModelRecognizer, ModelSpan, SpacyRecognizer, model_mentions

log = logging.getLogger(__name__)

#: the model labels kept, and the entity type each becomes
NER_LABELS: dict[str, EntityType] = {
    **MODEL_LABELS,
    "PER": EntityType.person,
    "LOC": EntityType.place,
    "ORG": EntityType.organization,
    "MISC": EntityType.thing,
}


class TransformersRecognizer(LineModelRecognizer):
    """Token-classification NER from a model directory plus the strong rules; spaCy when it cannot load."""

    def __init__(self, model_dir: str, fallback: Callable[[], EntityRecognizer] = SpacyRecognizer) -> None:
        self.model_dir = Path(model_dir)
        self.error: str | None = None
        self._make_fallback = fallback
        self._fallback = None
        self._classifier: TokenClassifier | None = None
        self._lock = threading.Lock()
        try:
            labels = entity_labels(self.model_dir)
            if not labels & NER_LABELS.keys():
                raise ModelDirError(f"{self.model_dir}: config.json id2label has none of PER/LOC/ORG/MISC ({labels})")
            self._classifier = TokenClassifier(self.model_dir)
        except ModelDirError as exc:
            self._fall_back(exc)

    @property
    def name(self) -> str:
        """``transformers-ner:<dir name>+rules``, or the fallback's name once it took over."""
        if self._fallback is not None:
            return self._fallback.name
        return f"transformers-ner:{self.model_dir.name}+rules"

    def status(self) -> dict[str, Any]:
        """What ``/health`` shows: backend, configured directory, why it fell back."""
        return {"backend": self.name, "modelDir": str(self.model_dir), "error": self.error}

    def _fall_back(self, exc: Exception) -> None:
        self.error = f"NER model at {self.model_dir} unusable ({exc}); using spaCy instead"
        log.warning(self.error)
        self._classifier = None
        self._fallback = self._make_fallback()

    def load(self) -> bool:
        """Load the model now; False (and the fallback from then on) if it cannot be loaded."""
        with self._lock:
            if self._classifier is not None:
                try:
                    self._classifier.load()
                except ModelDirError as exc:
                    self._fall_back(exc)
        return self._classifier is not None

    def _recognize_lines(self, lines: list[str]) -> list[list[Mention]]:
        assert self._classifier is not None
        found = self._classifier.entities(lines)
        return [
            model_mentions(
                line,
                [
                    ModelSpan(e.start, e.end, NER_LABELS[e.label], e.score, e.label)
                    for e in ents
                    if e.label in NER_LABELS
                ],
            )
            for line, ents in zip(lines, found, strict=True)
        ]
