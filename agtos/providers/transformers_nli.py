"""NLI (contradiction stage 2) by a transformers sequence-classification model directory.

``AGTOS_NLI_MODEL_DIR`` may name a ``save_pretrained`` directory of an MNLI cross-encoder (e.g. a
DeBERTa-v3 or MiniLM MNLI model) instead of an ONNX export. As for the ONNX model, a
``manifest.json`` pins the SHA-256 of every file in the directory; a file that differs, or one the
manifest does not name, refuses the model (``python -m agtos.providers.transformers_nli DIR`` writes
the manifest for a directory you trust). The labels come from ``config.id2label`` (entailment,
neutral, contradiction, matched without case; ``contradiction`` is required). It runs through torch
on the CPU: no ONNX export is made (the directory stays as pinned).
"""

from __future__ import annotations

import hashlib
import json
import sys
import threading
from pathlib import Path
from typing import Any

import numpy as np

from agtos.providers.transformers_runtime import ModelDirError, id2label, import_transformers, load_once, read_config
from agtos.tasks.contradiction import NLIVerdict, verdicts

MANIFEST = "manifest.json"
NLI_LABELS = frozenset({"entailment", "neutral", "contradiction"})
MAX_TOKENS = 256
BATCH_PAIRS = 16


def uses_transformers(model_dir: Path) -> bool:
    """True for a transformers directory: a manifest without an ONNX ``model`` entry, or, with no
    manifest, a ``config.json`` (an ONNX export keeps its ``model.onnx`` manifest as before)."""
    try:
        manifest = json.loads((model_dir / MANIFEST).read_text(encoding="utf-8"))
    except FileNotFoundError:
        return (model_dir / "config.json").is_file()
    except (OSError, UnicodeDecodeError, json.JSONDecodeError):
        return False
    return isinstance(manifest, dict) and "model" not in manifest


def _pinned_files(model_dir: Path) -> list[str]:
    """Every file of the directory but the manifest (and hidden files), relative, sorted."""
    return sorted(
        str(p.relative_to(model_dir))
        for p in model_dir.rglob("*")
        if p.is_file()
        and p.name != MANIFEST
        and not any(part.startswith(".") for part in p.relative_to(model_dir).parts)
    )


def _sha256(path: Path) -> str:
    with path.open("rb") as fh:
        return hashlib.file_digest(fh, "sha256").hexdigest()


def pin(model_dir: Path) -> dict[str, Any]:
    """Write ``manifest.json`` with the SHA-256 of every file of ``model_dir``; returns it."""
    manifest = {
        "format": "transformers",
        "sha256": {name: _sha256(model_dir / name) for name in _pinned_files(model_dir)},
    }
    (model_dir / MANIFEST).write_text(json.dumps(manifest, indent=1) + "\n", encoding="utf-8")
    return manifest


def verify_pins(model_dir: Path) -> None:
    """:class:`ModelDirError` unless every file of the directory is pinned by the manifest and matches."""
    try:
        pins = json.loads((model_dir / MANIFEST).read_text(encoding="utf-8"))["sha256"]
    except FileNotFoundError:
        hint = f"python -m agtos.providers.transformers_nli {model_dir}"
        raise ModelDirError(f"{model_dir} has no {MANIFEST}: pin its files first ({hint})") from None
    except (OSError, UnicodeDecodeError, json.JSONDecodeError, KeyError, TypeError) as exc:
        raise ModelDirError(f"{model_dir}/{MANIFEST} is unreadable or has no sha256 map: {exc!r}") from exc
    unpinned = set(_pinned_files(model_dir)) - set(pins)
    if unpinned:
        raise ModelDirError(f"NLI model files not pinned by {MANIFEST}: {sorted(unpinned)}")
    for name, digest in pins.items():
        path = model_dir / name
        if not path.is_file() or _sha256(path) != digest:
            raise ModelDirError(f"NLI model file {name} does not match its pinned SHA-256")


def nli_labels(config: dict[str, Any]) -> list[str]:
    """The label of each logit, from ``config.id2label``, lower-cased and checked."""
    by_id = id2label(config)
    if sorted(by_id) != list(range(len(by_id))):
        raise ModelDirError(f"config.json id2label ids are not 0..{len(by_id) - 1}: {sorted(by_id)}")
    labels = [by_id[i].strip().lower() for i in range(len(by_id))]
    if "contradiction" not in labels or len(set(labels)) != len(labels) or not set(labels) <= NLI_LABELS:
        raise ModelDirError(f"config.json id2label {labels} must be distinct NLI labels including 'contradiction'")
    return labels


def _load_classifier(model_dir: Path) -> tuple[Any, Any]:
    transformers = import_transformers()
    tokenizer = transformers.AutoTokenizer.from_pretrained(model_dir, local_files_only=True)
    model = transformers.AutoModelForSequenceClassification.from_pretrained(model_dir, local_files_only=True)
    model.eval()
    return tokenizer, model


class TransformersNLIModel:
    """A cross-encoder NLI model from a pinned transformers directory, on torch (CPU); thread-safe."""

    def __init__(self, model_dir: Path) -> None:
        self.model_dir = model_dir
        self.name = f"transformers-nli:{model_dir.name}"
        self._model: tuple[Any, Any] | None = None
        self._labels: list[str] = []
        self._lock = threading.Lock()

    def load(self) -> None:
        """Check the pins and labels, load, and probe one pair; replaces nothing until all succeeded."""
        labels = nli_labels(read_config(self.model_dir))
        verify_pins(self.model_dir)
        model = load_once("sequence-classification", self.model_dir, _load_classifier)
        shape = self._logits(model, [("probe", "probe")]).shape
        if shape != (1, len(labels)):
            raise ModelDirError(f"NLI model gives logits of shape {shape} for one pair, not (1, {len(labels)})")
        with self._lock:
            self._model, self._labels = model, labels

    @staticmethod
    def _logits(model: tuple[Any, Any], pairs: list[tuple[str, str]]) -> np.ndarray:
        import torch

        tokenizer, classifier = model
        rows = []
        for start in range(0, len(pairs), BATCH_PAIRS):
            batch = pairs[start : start + BATCH_PAIRS]
            encoded = tokenizer(
                [a for a, _ in batch],
                [b for _, b in batch],
                truncation=True,
                max_length=MAX_TOKENS,
                padding=True,
                return_tensors="pt",
            )
            with torch.inference_mode():
                rows.append(classifier(**encoded).logits.float().numpy())
        return np.concatenate(rows) if rows else np.zeros((0, 0), dtype=np.float32)

    def predict(self, pairs: list[tuple[str, str]]) -> list[NLIVerdict]:
        if self._model is None:
            self.load()
        with self._lock:
            model, labels = self._model, self._labels
        assert model is not None
        if not pairs:
            return []
        return verdicts(self._logits(model, pairs), labels)


if __name__ == "__main__":  # python -m agtos.providers.transformers_nli DIR: pin a trusted directory
    target = Path(sys.argv[1])
    read_config(target)
    print(json.dumps(pin(target), indent=1))
