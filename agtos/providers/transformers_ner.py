"""Token classification (NER) from a local transformers model directory, e.g. bert-base-NER.

The pipeline aggregates word pieces into entities (``aggregation_strategy="simple"``: adjacent
B-/I- tokens of one label become one span with their mean score). This module returns raw spans;
:mod:`agtos.tasks.ner_transformers` maps their labels and puts the rules on top.
"""

from __future__ import annotations

import threading
from pathlib import Path
from typing import Any, NamedTuple

from agtos.providers.transformers_runtime import id2label, import_transformers, load_once, read_config

BATCH_SIZE = 16


class RawEntity(NamedTuple):
    """One aggregated entity of a line: character span, the model's label (without B-/I-), score."""

    start: int
    end: int
    label: str
    score: float


def entity_labels(model_dir: Path) -> set[str]:
    """The entity labels of ``config.id2label`` (B-/I- prefixes dropped, upper case); no torch needed."""
    return {label.split("-", 1)[-1].upper() for label in id2label(read_config(model_dir)).values() if label != "O"}


def _load_pipeline(model_dir: Path) -> Any:
    transformers = import_transformers()
    tokenizer = transformers.AutoTokenizer.from_pretrained(model_dir, local_files_only=True)
    if not getattr(tokenizer, "is_fast", False):  # offsets (character spans) need a fast tokenizer
        raise ValueError(f"{model_dir}: the tokenizer has no fast (tokenizer.json) version, so no character offsets")
    model = transformers.AutoModelForTokenClassification.from_pretrained(model_dir, local_files_only=True)
    model.eval()
    return transformers.pipeline(
        "token-classification", model=model, tokenizer=tokenizer, aggregation_strategy="simple", device="cpu"
    )


class TokenClassifier:
    """The directory's token-classification pipeline, loaded once per process; thread-safe."""

    def __init__(self, model_dir: Path) -> None:
        self.model_dir = model_dir
        self._pipe: Any = None
        self._lock = threading.Lock()

    def load(self) -> None:
        """Load now (:class:`~agtos.providers.transformers_runtime.ModelDirError` when it cannot)."""
        if self._pipe is None:
            self._pipe = load_once("token-classification", self.model_dir, _load_pipeline)

    def entities(self, lines: list[str]) -> list[list[RawEntity]]:
        """Aggregated entities per line (blank lines have none)."""
        self.load()
        asked = [i for i, line in enumerate(lines) if line.strip()]
        found: list[list[RawEntity]] = [[] for _ in lines]
        if not asked:
            return found
        with self._lock:  # a pipeline is not promised to be thread-safe
            results = self._pipe([lines[i] for i in asked], batch_size=BATCH_SIZE)
        for i, groups in zip(asked, results, strict=True):
            found[i] = [
                RawEntity(int(g["start"]), int(g["end"]), str(g["entity_group"]).upper(), float(g["score"]))
                for g in groups
                if g.get("start") is not None and g.get("end") is not None
            ]
        return found
