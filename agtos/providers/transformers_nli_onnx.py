"""One-time ONNX export of a transformers NLI directory, then run on onnxruntime (issue 18, item 3).

The first load of a pinned sequence-classification directory exports the model with
``torch.onnx.export`` (the TorchScript exporter, which needs only the ``onnx`` package) into a cache
directory: ``<model_dir>/.agtos-onnx/`` when it can be written (hidden, so the directory's own pins
ignore it), else ``$XDG_CACHE_HOME/agtos/nli-onnx/<digest of the directory's path>/``. The cache holds
the graph, the fast tokenizer's ``tokenizer.json`` and a ``manifest.json`` in
:class:`~agtos.tasks.contradiction.OnnxNLIModel`'s format (SHA-256 of each file, the config's labels)
plus the SHA-256 of the source directory's ``manifest.json``: a re-pinned model is exported again, a
cached file that no longer matches its SHA-256 too. Each file is written under a temporary name and
moved in place with ``os.replace`` (the manifest last), the graph under a content-addressed name, so
a concurrent export never leaves a half-written file behind a manifest. An export is kept only when
onnxruntime gives torch's probabilities on probe pairs; otherwise :class:`ExportError` says why and
the caller runs the model through torch.
"""

from __future__ import annotations

import hashlib
import json
import logging
import os
import shutil
import tempfile
import warnings
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np

from agtos.tasks.contradiction import OnnxNLIModel, verdicts

log = logging.getLogger(__name__)

CACHE_NAME = ".agtos-onnx"
MANIFEST = "manifest.json"
OPSET = 17
FEEDS = ("input_ids", "attention_mask", "token_type_ids")  # what OnnxNLIModel feeds a graph
#: pairs of different lengths (the batch is padded) on which the export must reproduce torch
PROBES = [
    ("The user likes tea.", "The user does not like tea."),
    ("Alice moved to Paris in 2019 and works at a bakery.", "Alice has never lived in France."),
    ("probe", "probe"),
]
MAX_PROBABILITY_GAP = 1e-3
Pairs = list[tuple[str, str]]


class ExportError(RuntimeError):
    """Why a model could not be exported to ONNX (the caller then runs it through torch)."""


def cache_dirs(model_dir: Path) -> list[Path]:
    """Where an export may live, in order of preference: inside the model directory, else per user."""
    base = Path(os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache")
    digest = hashlib.sha256(str(model_dir.resolve()).encode()).hexdigest()[:16]
    return [model_dir / CACHE_NAME, base / "agtos" / "nli-onnx" / digest]


def _sha256(path: Path) -> str:
    with path.open("rb") as fh:
        return hashlib.file_digest(fh, "sha256").hexdigest()


def cached(model_dir: Path, labels: list[str]) -> OnnxNLIModel | None:
    """The loaded export of ``model_dir`` as pinned now, or None (none yet, stale, or corrupt: logged)."""
    source = _sha256(model_dir / MANIFEST)
    for directory in cache_dirs(model_dir):
        try:
            manifest = json.loads((directory / MANIFEST).read_text(encoding="utf-8"))
        except (OSError, UnicodeDecodeError, json.JSONDecodeError):
            continue
        if not isinstance(manifest, dict) or manifest.get("source") != source or manifest.get("labels") != labels:
            continue  # an export of an earlier version of the directory
        model = OnnxNLIModel(directory)
        try:
            model.load()  # checks every file's SHA-256 first
        except (OSError, ValueError, KeyError, TypeError) as exc:
            log.warning("the ONNX export in %s is unusable (%s); exporting %s again", directory, exc, model_dir)
            continue
        return model
    return None


def export(
    model_dir: Path, tokenizer: Any, model: Any, labels: list[str], torch_logits: Callable[[Pairs], np.ndarray]
) -> OnnxNLIModel:
    """Export the loaded torch classifier, check it against ``torch_logits`` (the same model run by
    torch), cache it and load it; :class:`ExportError` when any step fails."""
    try:
        return _export(model_dir, tokenizer, model, labels, torch_logits)
    except (OSError, ValueError) as exc:  # a full disk, an export replaced while being read back...
        raise ExportError(f"the export could not be written or read back: {exc}") from exc


def _export(
    model_dir: Path, tokenizer: Any, model: Any, labels: list[str], torch_logits: Callable[[Pairs], np.ndarray]
) -> OnnxNLIModel:
    names = _input_names(tokenizer)
    work, directory = _work_dir(model_dir)
    try:
        graph = work / "graph.onnx"
        _export_graph(tokenizer, model, names, graph)
        if sorted(p.name for p in work.iterdir()) != [graph.name]:  # a model over 2 GB: external data
            raise ExportError("the exported graph needs external data files (model over 2 GB), not supported")
        files = {f"model-{_sha256(graph)[:16]}.onnx": graph, "tokenizer.json": work / "tokenizer.json"}
        tokenizer.backend_tokenizer.save(str(files["tokenizer.json"]))
        graph.rename(work / next(iter(files)))
        manifest = {
            "model": next(iter(files)),
            "tokenizer": "tokenizer.json",
            "sha256": {name: _sha256(work / name) for name in files},
            "labels": labels,
            "source": _sha256(model_dir / MANIFEST),
            "exporter": f"torch.onnx TorchScript exporter, opset {OPSET}",
        }
        (work / MANIFEST).write_text(json.dumps(manifest, indent=1) + "\n", encoding="utf-8")
        _check_against_torch(work, labels, torch_logits)
        for name in [*files, MANIFEST]:  # the manifest last: it names only files already in place
            os.replace(work / name, directory / name)
    finally:
        shutil.rmtree(work, ignore_errors=True)
    for stale in directory.glob("model-*.onnx"):
        if stale.name != manifest["model"]:
            stale.unlink(missing_ok=True)
    loaded = OnnxNLIModel(directory)
    loaded.load()
    log.info("exported NLI model %s to ONNX in %s", model_dir, directory)
    return loaded


def _input_names(tokenizer: Any) -> list[str]:
    """The tokenizer's model inputs, which become the graph's; refused unless OnnxNLIModel feeds them."""
    try:
        import onnx  # noqa: F401 - torch.onnx's exporter writes through it
    except ImportError as exc:
        raise ExportError(f"the onnx package is not installed ({exc})") from exc
    if not getattr(tokenizer, "is_fast", False):
        raise ExportError(f"the tokenizer ({type(tokenizer).__name__}) has no fast tokenizers version")
    names = list(tokenizer.model_input_names)
    if not set(names) <= set(FEEDS) or "input_ids" not in names:
        raise ExportError(f"model inputs {names} are not among {list(FEEDS)}")
    return names


def _work_dir(model_dir: Path) -> tuple[Path, Path]:
    """A fresh temporary directory inside the first cache directory that can be written, and that one."""
    failures = []
    for directory in cache_dirs(model_dir):
        try:
            directory.mkdir(parents=True, exist_ok=True)
            return Path(tempfile.mkdtemp(prefix=".export-", dir=directory)), directory
        except OSError as exc:
            failures.append(f"{directory}: {exc.strerror or exc}")
    raise ExportError(f"no cache directory can be written ({'; '.join(failures)})")


def _export_graph(tokenizer: Any, model: Any, names: list[str], target: Path) -> None:
    """``torch.onnx.export`` of ``model``'s logits, inputs named ``names`` with dynamic batch and length."""
    import torch

    class Logits(torch.nn.Module):  # positional inputs in ``names`` order, whatever forward's order is
        def __init__(self) -> None:
            super().__init__()
            self.classifier = model

        def forward(self, *inputs: Any) -> Any:
            return self.classifier(**dict(zip(names, inputs, strict=True))).logits

    pairs = PROBES[:2]  # of different lengths: the example batch is padded
    example = tokenizer([a for a, _ in pairs], [b for _, b in pairs], padding=True, return_tensors="pt")
    axes = {name: {0: "batch", 1: "sequence"} for name in names} | {"logits": {0: "batch"}}
    wrapper = Logits().eval()  # the exporter restores the wrapper's mode: eval, so dropout stays off
    try:
        with warnings.catch_warnings():  # the TorchScript exporter's deprecation and tracer warnings
            warnings.simplefilter("ignore")
            torch.onnx.export(
                wrapper,
                tuple(example[name] for name in names),
                str(target),
                input_names=names,
                output_names=["logits"],
                dynamic_axes=axes,
                opset_version=OPSET,
                dynamo=False,
            )
    except Exception as exc:  # torch raises many kinds (unsupported operator, tracing failure...)
        raise ExportError(f"torch.onnx.export failed: {exc!r:.300}") from exc


def _check_against_torch(work: Path, labels: list[str], torch_logits: Callable[[Pairs], np.ndarray]) -> None:
    """:class:`ExportError` unless onnxruntime's probabilities on :data:`PROBES` are torch's."""
    try:
        got = OnnxNLIModel(work).predict(PROBES)
    except (OSError, ValueError, KeyError) as exc:
        raise ExportError(f"onnxruntime cannot run the export: {exc}") from exc
    want = verdicts(torch_logits(PROBES), labels)
    gap = max(abs(g.scores[label] - w.scores[label]) for g, w in zip(got, want, strict=True) for label in labels)
    if not np.isfinite(gap) or gap > MAX_PROBABILITY_GAP:
        raise ExportError(f"the export's probabilities differ from torch's by {gap:.2g} on the probe pairs")
