"""One load of the bundled ONNX embedding model per test process.

Nearly every test builds its own coordinator, and each coordinator's embedder loaded the model
again on first use (SHA-256 of the 23 MB file, an onnxruntime session, the tokenizer): 0.6-0.9 s
a test on the 2-core CI box, about a third of the suite's wall clock. Here the first load of a
given model file (same path, size, mtime, inode, expected digest, threads) is kept and handed to
every later embedder of the process; the embedders' own code (batching, pooling, ``close``) runs
unchanged. A digest mismatch, a missing file, another file or the int8 variant still loads for real.
"""

from __future__ import annotations

import threading
from typing import Any

from agtos.providers.onnx_embedder import OnnxMiniLMEmbedder

_loaded: dict[tuple[Any, ...], Any] = {}
_lock = threading.Lock()


def _kept(kind: str, key: tuple[Any, ...], load: Any) -> Any:
    """``load()``'s result, loaded once per ``(kind, key)`` (a failed load is not kept)."""
    with _lock:
        if (kind, key) not in _loaded:
            _loaded[kind, key] = load()
        return _loaded[kind, key]


def share_bundled_model() -> None:
    """Make every ``OnnxMiniLMEmbedder`` of this process reuse the first load of its model."""
    load_session = OnnxMiniLMEmbedder._load_session
    load_tokenizer = OnnxMiniLMEmbedder._load_tokenizer

    def shared_session(self: OnnxMiniLMEmbedder) -> Any:
        try:
            stat = self.model_path.stat()
        except OSError:
            return load_session(self)  # its own error
        if self.quantize:  # derived into each embedder's own folder
            return load_session(self)
        key = (str(self.model_path), stat.st_size, stat.st_mtime_ns, stat.st_ino, self.expected_sha256)
        return _kept("session", (*key, self.intra_op_threads), lambda: load_session(self))

    def shared_tokenizer(self: OnnxMiniLMEmbedder) -> Any:
        return _kept("tokenizer", (self.max_tokens,), lambda: load_tokenizer(self))

    OnnxMiniLMEmbedder._load_session = shared_session  # type: ignore[method-assign]
    OnnxMiniLMEmbedder._load_tokenizer = shared_tokenizer  # type: ignore[method-assign]
