"""Contradiction detection in three stages.

1. candidates: cosine top-K neighbours per conclusion, plus "interesting pairs" (a shared
   topic word with opposite polarity: negation or an antonym), deduplicated, capped at 500;
2. NLI: a cross-encoder on onnxruntime (model pinned by SHA-256 in a manifest) or, when no
   model is installed, the clearly labelled lexical-negation fallback; verdicts cached;
3. judge: an LLM confirms pairs in batches of 10 with validated JSON. Without an LLM the
   stage-2 verdict stands.
"""

from __future__ import annotations

import hashlib
import json
import logging
import threading
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal, Protocol

import numpy as np
from pydantic import BaseModel, ConfigDict, Field, ValidationError

from agtos.providers.llm import LLMError, LLMProvider, parse_json_reply
from agtos.tasks.polarity import ANTONYMS, conflict_reason, polarity
from agtos.tasks.prompts import CONTRADICTION_JUDGE_PROMPT

log = logging.getLogger(__name__)

Label = Literal["contradiction", "entailment", "neutral"]


@dataclass(frozen=True)
class Candidate:
    a: str
    b: str
    similarity: float
    reason: str  # "cosine" | "polarity"


@dataclass(frozen=True)
class NLIVerdict:
    label: Label
    scores: dict[str, float]


def _key(a: str, b: str) -> tuple[str, str]:
    return (a, b) if a < b else (b, a)


def polarity_clash(text_a: str, text_b: str) -> bool:
    """Opposite polarity on a shared topic: one side negated, or an antonym pair (see tasks/polarity.py)."""
    return conflict_reason(text_a, text_b) is not None


def candidate_pairs(
    ids: list[str],
    vectors: np.ndarray,
    texts: list[str],
    top_k: int = 5,
    cap: int = 500,
    chunk: int = 1024,
    query_rows: list[int] | None = None,
) -> list[Candidate]:
    """Stage 1: polarity pairs first, then cosine neighbours by similarity; unordered pairs, capped.

    ``query_rows`` limits which conclusions look for neighbours (e.g. the most recently
    updated ones); their neighbours are searched among all conclusions.
    """
    n = len(ids)
    if n < 2:
        return []
    best: dict[tuple[str, str], Candidate] = {}
    k = min(top_k, n - 1)
    rows = np.arange(n) if query_rows is None else np.asarray(query_rows, dtype=np.int64)
    for start in range(0, len(rows), chunk):
        block_rows = rows[start : start + chunk]
        block = vectors[block_rows] @ vectors.T
        for i, sims in zip(block_rows.tolist(), block, strict=True):
            sims[i] = -np.inf
            for j in np.argpartition(-sims, k - 1)[:k]:
                pair = _key(ids[i], ids[int(j)])
                sim = float(sims[j])
                reason = "polarity" if polarity_clash(texts[i], texts[int(j)]) else "cosine"
                if pair not in best or best[pair].similarity < sim:
                    best[pair] = Candidate(pair[0], pair[1], sim, reason)
    row_of = {doc_id: i for i, doc_id in enumerate(ids)}
    for pair in _polar_pairs(ids, texts):
        if pair not in best:
            similarity = float(vectors[row_of[pair[0]]] @ vectors[row_of[pair[1]]])
            best[pair] = Candidate(pair[0], pair[1], similarity, "polarity")
    ranked = sorted(best.values(), key=lambda c: (c.reason == "polarity", c.similarity), reverse=True)
    return ranked[:cap]


def _polar_pairs(ids: list[str], texts: list[str], max_posting: int = 200) -> set[tuple[str, str]]:
    """Pairs whose texts hold the two sides of an antonym pair (e.g. 'vegetarian' vs 'steak'),
    found through a small inverted index over lexicon terms and confirmed by ``polarity_clash``."""
    postings: dict[str, list[int]] = {}
    for i, text in enumerate(texts):
        for term in polarity(text).terms:
            postings.setdefault(term, []).append(i)
    found: set[tuple[str, str]] = set()
    for pair in ANTONYMS:
        left = [i for t in pair.left for i in postings.get(t, [])][:max_posting]
        right = [j for t in pair.right for j in postings.get(t, [])][:max_posting]
        for i in left:
            for j in right:
                if i != j and polarity_clash(texts[i], texts[j]):
                    found.add(_key(ids[i], ids[j]))
    return found


class NLIModel(Protocol):
    name: str

    def predict(self, pairs: list[tuple[str, str]]) -> list[NLIVerdict]: ...


class LexicalNegationNLI:
    """FALLBACK, not a neural model: contradiction when the two texts share a topic and differ in
    polarity (negation or an antonym from a small lexicon); otherwise neutral."""

    name = "lexical-negation-fallback"

    def __init__(self, load_error: str | None = None) -> None:
        self.load_error = load_error  # why a configured ONNX model is not used, shown in lint reports

    def predict(self, pairs: list[tuple[str, str]]) -> list[NLIVerdict]:
        out = []
        for a, b in pairs:
            if polarity_clash(a, b):
                out.append(NLIVerdict("contradiction", {"contradiction": 0.8, "entailment": 0.05, "neutral": 0.15}))
            else:
                out.append(NLIVerdict("neutral", {"contradiction": 0.1, "entailment": 0.2, "neutral": 0.7}))
        return out


class OnnxNLIModel:
    """A cross-encoder NLI model (e.g. an MNLI-tuned MiniLM/DeBERTa exported to ONNX) on onnxruntime.

    ``manifest.json`` beside the model names the files, their SHA-256 and the label order:
    ``{"model": "model.onnx", "tokenizer": "tokenizer.json", "sha256": {...}, "labels": [...]}``.
    The session is built and checked completely before it replaces the current one (atomic).
    """

    def __init__(self, model_dir: Path) -> None:
        self.model_dir = model_dir
        self.name = f"onnx-nli:{model_dir.name}"
        self._session: Any = None
        self._tokenizer: Any = None
        self._labels: list[str] = []
        self._lock = threading.Lock()

    def load(self) -> None:
        import onnxruntime as ort
        from tokenizers import Tokenizer

        manifest = json.loads((self.model_dir / "manifest.json").read_text())
        for filename, digest in manifest["sha256"].items():
            actual = hashlib.sha256((self.model_dir / filename).read_bytes()).hexdigest()
            if actual != digest:
                raise ValueError(f"NLI model file {filename} does not match its pinned SHA-256")
        labels = [str(label).lower() for label in manifest["labels"]]
        if "contradiction" not in labels or len(set(labels)) != len(labels):
            raise ValueError(f"NLI manifest labels {labels} must be distinct and include 'contradiction'")
        try:  # onnxruntime and tokenizers raise their own exception types for unreadable files
            session = ort.InferenceSession(str(self.model_dir / manifest["model"]), providers=["CPUExecutionProvider"])
            tokenizer = Tokenizer.from_file(str(self.model_dir / manifest["tokenizer"]))
            tokenizer.enable_truncation(max_length=256)
            tokenizer.enable_padding()
            shape = _logits(session, tokenizer, [("probe", "probe")]).shape
        except (KeyError, OSError, ValueError):
            raise
        except Exception as exc:
            raise ValueError(f"NLI model or tokenizer could not be read: {exc}") from exc
        if shape != (1, len(labels)):  # one row, one logit per label; a 1-D or 3-D output is refused too
            raise ValueError(f"NLI model gives logits of shape {shape} for one pair, not (1, {len(labels)})")
        with self._lock:  # swap only after everything above succeeded
            self._session, self._tokenizer, self._labels = session, tokenizer, labels

    def predict(self, pairs: list[tuple[str, str]]) -> list[NLIVerdict]:
        if self._session is None:
            self.load()
        with self._lock:
            session, tokenizer, labels = self._session, self._tokenizer, self._labels
        return verdicts(_logits(session, tokenizer, pairs), labels)


def verdicts(logits: np.ndarray, labels: list[str]) -> list[NLIVerdict]:
    """One verdict per row of a cross-encoder's logits: softmax scores by label, the top label."""
    probs = np.exp(logits - logits.max(axis=1, keepdims=True))
    probs /= probs.sum(axis=1, keepdims=True)
    out = []
    for row in probs:
        scores = {label: float(p) for label, p in zip(labels, row, strict=True)}
        out.append(NLIVerdict(max(scores, key=scores.__getitem__), scores))  # type: ignore[arg-type]
    return out


def _logits(session: Any, tokenizer: Any, pairs: list[tuple[str, str]]) -> np.ndarray:
    """The cross-encoder's raw logits, one row per pair (only the inputs the graph declares are fed)."""
    encoded = tokenizer.encode_batch(pairs)
    feeds = {
        "input_ids": np.array([e.ids for e in encoded], dtype=np.int64),
        "attention_mask": np.array([e.attention_mask for e in encoded], dtype=np.int64),
        "token_type_ids": np.array([e.type_ids for e in encoded], dtype=np.int64),
    }
    names = {i.name for i in session.get_inputs()}
    return np.asarray(session.run(None, {k: v for k, v in feeds.items() if k in names})[0])


def build_nli(enabled: bool, model_dir: str | None = None) -> NLIModel | None:
    """The installed cross-encoder (ONNX, or a transformers directory), else the lexical fallback;
    None when NLI is switched off."""
    if not enabled:
        return None
    if model_dir:
        from agtos.providers.transformers_nli import TransformersNLIModel, uses_transformers

        path = Path(model_dir)
        model: OnnxNLIModel | TransformersNLIModel
        model = TransformersNLIModel(path) if uses_transformers(path) else OnnxNLIModel(path)
        try:
            model.load()
            return model
        except (OSError, ValueError, KeyError) as exc:
            reason = f"NLI model at {model_dir} could not be loaded ({exc}); using the lexical-negation fallback"
            log.warning(reason)
            return LexicalNegationNLI(reason)
    return LexicalNegationNLI()


class _Verdict(BaseModel):
    model_config = ConfigDict(extra="ignore", strict=True)  # "true" or "0.9" as strings are rejected
    pair: int = Field(ge=0)
    contradiction: bool
    confidence: float = Field(ge=0.0, le=1.0)
    explanation: str = Field(default="", max_length=1_000)


class _Verdicts(BaseModel):
    verdicts: list[_Verdict]


@dataclass(frozen=True)
class Judgement:
    a: str
    b: str
    contradiction: bool
    confidence: float
    explanation: str


class LLMJudge:
    """Stage 3: batches of ``batch_size`` pairs per call; a batch whose reply is invalid is left unjudged."""

    def __init__(self, llm: LLMProvider, batch_size: int = 10) -> None:
        self.llm = llm
        self.batch_size = batch_size

    def judge(self, pairs: list[tuple[str, str, str, str]]) -> tuple[list[Judgement], int]:
        """``pairs`` are (a_id, b_id, a_text, b_text); returns (judgements, pairs left unjudged)."""
        out: list[Judgement] = []
        unjudged = 0
        for start in range(0, len(pairs), self.batch_size):
            batch = pairs[start : start + self.batch_size]
            listing = "\n".join(f"{i}. A: {a} | B: {b}" for i, (_, _, a, b) in enumerate(batch))
            try:
                reply = parse_json_reply(
                    self.llm.chat(
                        [
                            {"role": "system", "content": CONTRADICTION_JUDGE_PROMPT},
                            {"role": "user", "content": listing},
                        ],
                        json_mode=True,
                    )
                )
                verdicts = _Verdicts.model_validate(reply).verdicts
                if sorted(v.pair for v in verdicts) != list(range(len(batch))):
                    raise ValueError("verdicts do not cover each pair exactly once")
            except (LLMError, ValidationError, ValueError) as exc:
                log.warning("judge batch rejected (%s); %d pairs left unjudged", exc, len(batch))
                unjudged += len(batch)
                continue
            for v in verdicts:
                a_id, b_id, _, _ = batch[v.pair]
                out.append(Judgement(a_id, b_id, v.contradiction, v.confidence, v.explanation))
        return out, unjudged


def pair_cache_key(model: str, a: str, b: str) -> str:
    return hashlib.sha256(f"{model}\x00{a}\x00{b}".encode()).hexdigest()[:32]


__all__ = [
    "Candidate",
    "LLMJudge",
    "LexicalNegationNLI",
    "NLIModel",
    "NLIVerdict",
    "OnnxNLIModel",
    "build_nli",
    "candidate_pairs",
    "pair_cache_key",
    "polarity_clash",
    "verdicts",
]
