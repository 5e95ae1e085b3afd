"""Plumbing shared by the in-process Hugging Face models (LLM slot, NER, NLI).

``transformers`` and ``torch`` come from the optional extra (``pip install -e '.[transformers]'``) and
are imported only when a model directory is actually loaded, so nothing here costs anything when no
slot names one. Every load passes ``local_files_only=True``: a directory that is not complete on
disk fails with :class:`ModelDirError`, it never triggers a download.
"""

from __future__ import annotations

import importlib.util
import json
import threading
from collections.abc import Callable
from pathlib import Path
from typing import Any, TypeVar

T = TypeVar("T")

EXTRA_HINT = "pip install -e '.[transformers]'"


class ModelDirError(ValueError):
    """A model directory that cannot be used: missing, unreadable, of the wrong kind, or no transformers."""


def transformers_available() -> bool:
    """Whether the optional extra is installed (without importing it)."""
    return all(importlib.util.find_spec(name) is not None for name in ("transformers", "torch"))


def import_transformers() -> Any:
    """The ``transformers`` module (progress bars off), or :class:`ModelDirError` naming the extra."""
    try:
        import transformers
    except ImportError as exc:
        raise ModelDirError(f"the transformers extra is not installed ({EXTRA_HINT}): {exc}") from exc
    transformers.utils.logging.disable_progress_bar()
    return transformers


def read_config(model_dir: Path) -> dict[str, Any]:
    """The directory's ``config.json`` (a cheap check before any model is loaded)."""
    if not model_dir.is_dir():
        raise ModelDirError(f"model directory {model_dir} does not exist")
    try:
        config = json.loads((model_dir / "config.json").read_text(encoding="utf-8"))
    except FileNotFoundError:
        raise ModelDirError(f"{model_dir} has no config.json: not a transformers model directory") from None
    except (OSError, UnicodeDecodeError, json.JSONDecodeError) as exc:
        raise ModelDirError(f"{model_dir}/config.json is unreadable: {exc}") from exc
    if not isinstance(config, dict):
        raise ModelDirError(f"{model_dir}/config.json is not a JSON object")
    return config


def id2label(config: dict[str, Any]) -> dict[int, str]:
    """``config.id2label`` with integer keys (JSON stores them as strings)."""
    raw = config.get("id2label")
    if not isinstance(raw, dict) or not raw:
        raise ModelDirError("config.json has no id2label")
    try:
        return {int(k): str(v) for k, v in raw.items()}
    except ValueError as exc:
        raise ModelDirError(f"config.json id2label has a non-integer id: {exc}") from exc


_LOADED: dict[tuple[str, str], Any] = {}
_LOAD_LOCK = threading.Lock()


def load_once(kind: str, model_dir: Path, loader: Callable[[Path], T], *, keep: bool = True) -> T:
    """``loader(model_dir)`` once per process and resolved path; failures are not cached.

    Anything ``loader`` raises besides :class:`ModelDirError` (transformers' ``OSError`` for a missing
    weight file, safetensors' errors for a truncated one...) becomes a :class:`ModelDirError`.
    ``keep=False`` loads the same way without keeping the model (one needed once, e.g. for an export).
    """
    key = (kind, str(model_dir.resolve()))
    with _LOAD_LOCK:  # loads are rare and heavy: one at a time
        if key in _LOADED:
            return _LOADED[key]
        try:
            model = loader(model_dir)
        except ModelDirError:
            raise
        except Exception as exc:
            raise ModelDirError(f"{kind} model at {model_dir} could not be loaded: {exc!r:.300}") from exc
        if keep:
            _LOADED[key] = model
        return model


def forget_loaded() -> None:
    """Drop every cached model (tests, or an operator replacing a directory in place)."""
    with _LOAD_LOCK:
        _LOADED.clear()
