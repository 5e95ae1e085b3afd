"""NLI (contradiction stage 2) by a transformers sequence-classification model directory.

``AGTOS_NLI_MODEL_DIR`` may name a ``save_pretrained`` directory of an MNLI cross-encoder (e.g. a
DeBERTa-v3 or MiniLM MNLI model) instead of an ONNX export. As for the ONNX model, a
``manifest.json`` pins the SHA-256 of every file in the directory; a file that differs, or one the
manifest does not name, refuses the model (``python -m agtos.providers.transformers_nli DIR`` writes
the manifest for a directory you trust). The labels come from ``config.id2label`` (entailment,
neutral, contradiction, matched without case; ``contradiction`` is required). It is exported once
to ONNX and run on onnxruntime (:mod:`agtos.providers.transformers_nli_onnx`: the export is cached
beside, never over, the pinned files), or, when it cannot be exported, through torch on the CPU.
"""

from __future__ import annotations

import hashlib
import json
import logging
import sys
import threading
from functools import partial
from pathlib import Path
from typing import Any

import numpy as np

from agtos.providers import transformers_nli_onnx as onnx_export
from agtos.providers.transformers_runtime import ModelDirError, id2label, import_transformers, load_once, read_config
from agtos.tasks.contradiction import NLIVerdict, OnnxNLIModel, verdicts

log = logging.getLogger(__name__)

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


def torch_logits(tokenizer: Any, classifier: Any, pairs: list[tuple[str, str]]) -> np.ndarray:
    """The classifier's logits (float32), one row per pair, in padded batches of :data:`BATCH_PAIRS`."""
    import torch

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


class TransformersNLIModel:
    """A cross-encoder NLI model from a pinned transformers directory (CPU); thread-safe.

    With ``export_onnx`` (the default) it runs on onnxruntime from a one-time export
    (:mod:`agtos.providers.transformers_nli_onnx`; later loads neither export again nor import
    torch), else, or when the export is impossible, through torch; :meth:`runtime_status` says which
    and why (``/health``).
    """

    def __init__(self, model_dir: Path, *, export_onnx: bool = True) -> None:
        self.model_dir = model_dir
        self.name = f"transformers-nli:{model_dir.name}"  # one name for both runtimes: they agree
        self.export_onnx = export_onnx
        self._backend: OnnxNLIModel | tuple[Any, Any] | None = None
        self._labels: list[str] = []
        self._status: dict[str, str] = {}
        self._lock = threading.Lock()

    def load(self) -> None:
        """Check the pins and labels, load (the cached export, a new one, or torch's model), probe one
        pair; replaces nothing until all succeeded. A model that torch cannot load is refused
        (:class:`ModelDirError`); one that cannot be exported runs through torch."""
        labels = nli_labels(read_config(self.model_dir))
        verify_pins(self.model_dir)
        cached = onnx_export.cached(self.model_dir, labels) if self.export_onnx else None
        backend: OnnxNLIModel | tuple[Any, Any]
        if cached is None:
            backend, status = self._export_or_torch(labels)
        else:
            backend, status = cached, {"runtime": "onnxruntime", "onnxExport": str(cached.model_dir)}
        with self._lock:
            self._backend, self._labels, self._status = backend, labels, status

    def _export_or_torch(self, labels: list[str]) -> tuple[OnnxNLIModel | tuple[Any, Any], dict[str, str]]:
        """Load torch's model (kept only if it is the one that runs) and export it when asked."""
        kind = "sequence-classification"
        tokenizer, model = load_once(kind, self.model_dir, _load_classifier, keep=not self.export_onnx)
        shape = torch_logits(tokenizer, model, [("probe", "probe")]).shape
        if shape != (1, len(labels)):
            raise ModelDirError(f"NLI model gives logits of shape {shape} for one pair, not (1, {len(labels)})")
        if not self.export_onnx:
            return (tokenizer, model), {"runtime": "torch", "onnxError": "ONNX export switched off"}
        try:
            exported = onnx_export.export(
                self.model_dir, tokenizer, model, labels, partial(torch_logits, tokenizer, model)
            )
        except onnx_export.ExportError as exc:
            log.warning("NLI model %s runs through torch: %s", self.model_dir, exc)
            kept = load_once(kind, self.model_dir, lambda _: (tokenizer, model))
            return kept, {"runtime": "torch", "onnxError": str(exc)}
        return exported, {"runtime": "onnxruntime", "onnxExport": str(exported.model_dir)}

    def runtime_status(self) -> dict[str, str]:
        """``runtime`` (onnxruntime or torch) and the export used or why there is none; empty until loaded."""
        with self._lock:
            return dict(self._status)

    def predict(self, pairs: list[tuple[str, str]]) -> list[NLIVerdict]:
        if self._backend is None:
            self.load()
        with self._lock:
            backend, labels = self._backend, self._labels
        assert backend is not None
        if not pairs:
            return []
        if isinstance(backend, OnnxNLIModel):
            return backend.predict(pairs)
        return verdicts(torch_logits(*backend, pairs), labels)


if __name__ == "__main__":  # python -m agtos.providers.transformers_nli DIR: pin a trusted directory
    if len(sys.argv) != 2 or sys.argv[1].startswith("-"):
        sys.exit("usage: python -m agtos.providers.transformers_nli DIR  (writes DIR/manifest.json)")
    target = Path(sys.argv[1])
    try:
        read_config(target)
    except ModelDirError as exc:  # one line, not a traceback
        sys.exit(f"cannot pin {target}: {exc}")
    print(json.dumps(pin(target), indent=1))
