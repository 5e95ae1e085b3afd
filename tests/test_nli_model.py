"""The ONNX NLI loader on a tiny cross-encoder the test builds itself: an ONNX graph that sums one
3-logit row per (unmasked) token, a word-level tokenizer and a manifest pinning both by SHA-256.

Tokens vote: "zebra" for contradiction, "also" for entailment, any other word a little for neutral;
the padding row votes heavily for neutral, so a loader that ignored the attention mask would fail.
"""

from __future__ import annotations

import hashlib
import json
import logging
import shutil
from collections.abc import Iterator
from pathlib import Path

import numpy as np
import onnx
import pytest
from fastapi.testclient import TestClient
from onnx import TensorProto, helper
from tokenizers import Tokenizer, models, normalizers, pre_tokenizers

from agtos.config import Settings
from agtos.memory.coordinator import MemoryCoordinator
from agtos.schemas.records import now_ms
from agtos.serving.app import create_app
from agtos.tasks.contradiction import LexicalNegationNLI, NLIVerdict, OnnxNLIModel, build_nli
from tests.helpers import inductive_conclusion, run_maintenance

WORDS = ["user", "owns", "a", "zebra", "also", "rides", "bike", "likes", "tea", "the", "green"]
LABELS = ["CONTRADICTION", "ENTAILMENT", "NEUTRAL"]  # the manifest's order; the loader lower-cases
PAIRS = [
    ("User owns a zebra", "User rides a bike"),  # contradiction (the zebra votes 10)
    ("User likes tea", "User also likes tea"),  # entailment
    ("User likes green tea", "User rides the bike"),  # neutral
]


def sha256(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


def tiny_onnx(weights: np.ndarray, segments: np.ndarray | None = None) -> onnx.ModelProto:
    """logits[n] = sum over unmasked tokens t of weights[input_ids[n, t]], plus
    segments[token_type_ids[n, t]] when given (a BERT-style graph that declares and reads the type ids)."""
    inputs = ["input_ids", "attention_mask"]
    initializers = [
        helper.make_tensor("W", TensorProto.FLOAT, list(weights.shape), weights.flatten().tolist()),
        helper.make_tensor("axis1", TensorProto.INT64, [1], [1]),
        helper.make_tensor("axis2", TensorProto.INT64, [1], [2]),
    ]
    nodes = [helper.make_node("Gather", ["W", "input_ids"], ["emb"])]
    if segments is not None:
        inputs.append("token_type_ids")
        segment_table = helper.make_tensor("S", TensorProto.FLOAT, list(segments.shape), segments.flatten().tolist())
        initializers.append(segment_table)
        nodes = [
            helper.make_node("Gather", ["W", "input_ids"], ["words"]),
            helper.make_node("Gather", ["S", "token_type_ids"], ["segment"]),
            helper.make_node("Add", ["words", "segment"], ["emb"]),
        ]
    nodes += [
        helper.make_node("Cast", ["attention_mask"], ["mask_f"], to=TensorProto.FLOAT),
        helper.make_node("Unsqueeze", ["mask_f", "axis2"], ["mask3"]),
        helper.make_node("Mul", ["emb", "mask3"], ["masked"]),
        helper.make_node("ReduceSum", ["masked", "axis1"], ["logits"], keepdims=0),
    ]
    graph = helper.make_graph(
        nodes,
        "tiny-nli",
        [helper.make_tensor_value_info(name, TensorProto.INT64, ["batch", "seq"]) for name in inputs],
        [helper.make_tensor_value_info("logits", TensorProto.FLOAT, ["batch", weights.shape[1]])],
        initializer=initializers,
    )
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 13)])
    model.ir_version = 8
    onnx.checker.check_model(model)
    return model


def build_model_dir(
    path: Path,
    labels: list[str] = LABELS,
    cue: tuple[str, str] = ("zebra", "also"),
    n_logits: int = 3,
    vote: float = 10.0,
    segments: np.ndarray | None = None,
) -> Path:
    """model.onnx + tokenizer.json + manifest.json (real SHA-256 of both) in ``path``; each cue word
    votes ``vote``."""
    path.mkdir(parents=True)
    vocab = {"[PAD]": 0, "[UNK]": 1, **{w: i + 2 for i, w in enumerate(WORDS)}}
    weights = np.zeros((len(vocab), n_logits), dtype=np.float32)
    weights[:, n_logits - 1] = 1.0  # every word: a little neutral
    weights[0] = 0.0
    weights[0, n_logits - 1] = 100.0  # padding: very neutral, unless masked out
    weights[vocab[cue[0]]] = [vote] + [0.0] * (n_logits - 1)
    weights[vocab[cue[1]]] = [0.0, vote] + [0.0] * (n_logits - 2)
    onnx.save(tiny_onnx(weights, segments), str(path / "model.onnx"))
    tokenizer = Tokenizer(models.WordLevel(vocab, unk_token="[UNK]"))
    tokenizer.normalizer = normalizers.Lowercase()
    tokenizer.pre_tokenizer = pre_tokenizers.Whitespace()
    tokenizer.save(str(path / "tokenizer.json"))
    write_manifest(path, labels)
    return path


def write_manifest(path: Path, labels: list[str], sha: dict[str, str] | None = None) -> None:
    pinned = sha or {name: sha256(path / name) for name in ("model.onnx", "tokenizer.json")}
    manifest = {"model": "model.onnx", "tokenizer": "tokenizer.json", "sha256": pinned, "labels": labels}
    (path / "manifest.json").write_text(json.dumps(manifest))


@pytest.fixture
def model_dir(tmp_path: Path) -> Path:
    return build_model_dir(tmp_path / "tiny-nli")


def labels_of(model: OnnxNLIModel, pairs: list[tuple[str, str]] = PAIRS) -> list[str]:
    return [v.label for v in model.predict(pairs)]


def test_tiny_model_loads_and_speaks_the_manifest_labels(model_dir: Path, tmp_path: Path) -> None:
    model = build_nli(True, str(model_dir))
    assert isinstance(model, OnnxNLIModel) and model.name == "onnx-nli:tiny-nli"
    verdicts = model.predict(PAIRS)  # one batch: the short rows are padded, the mask keeps pads out
    assert [v.label for v in verdicts] == ["contradiction", "entailment", "neutral"]
    for v in verdicts:
        assert set(v.scores) == {"contradiction", "entailment", "neutral"}
        assert sum(v.scores.values()) == pytest.approx(1.0, abs=1e-5)
    # "User owns a zebra" + "User rides a bike": 10 for contradiction, 7 words x 1 for neutral
    expected = np.exp([10.0, 0.0, 7.0]) / np.exp([10.0, 0.0, 7.0]).sum()
    assert [verdicts[0].scores[k] for k in ("contradiction", "entailment", "neutral")] == pytest.approx(expected)

    permuted = build_model_dir(tmp_path / "permuted", labels=["neutral", "contradiction", "entailment"])
    assert labels_of(OnnxNLIModel(permuted)) == ["neutral", "contradiction", "entailment"]  # order from the manifest


def softmax(logits: list[float]) -> np.ndarray:
    """The reference softmax, in float64 (the oracle for the model's scores)."""
    e = np.exp(np.array(logits, dtype=np.float64) - max(logits))
    return e / e.sum()


def scores_of(verdict: NLIVerdict) -> list[float]:
    return [verdict.scores[label] for label in ("contradiction", "entailment", "neutral")]


def test_a_confident_model_with_logits_in_the_hundreds_still_gives_probabilities(tmp_path: Path) -> None:
    """Softmax per row, shifted by each row's own maximum: exp(200) overflows float32, and a shift
    by the batch's maximum would underflow the quiet third pair (logits 0, 0, 8) to 0 / 0."""
    model = OnnxNLIModel(build_model_dir(tmp_path / "confident", vote=200.0))
    verdicts = model.predict(PAIRS)  # one batch of three rows
    assert [v.label for v in verdicts] == ["contradiction", "entailment", "neutral"]
    assert scores_of(verdicts[0]) == pytest.approx(softmax([200.0, 0.0, 7.0]), abs=1e-6)  # ~ [1, 0, 0]
    assert scores_of(verdicts[1]) == pytest.approx(softmax([0.0, 200.0, 6.0]), abs=1e-6)  # "also" + 6 other words
    assert scores_of(verdicts[2]) == pytest.approx(softmax([0.0, 0.0, 8.0]), rel=1e-5)  # 8 words x 1 neutral


def test_a_model_that_reads_token_type_ids_gets_the_second_statement_as_segment_1(tmp_path: Path) -> None:
    """A BERT-style cross-encoder declares token_type_ids: here each token of the second statement
    adds 1 to neutral, so "User owns a zebra" / "User rides a bike" scores 10, 0, 7 + 4."""
    segments = np.array([[0.0, 0.0, 0.0], [0.0, 0.0, 1.0]], dtype=np.float32)
    model = OnnxNLIModel(build_model_dir(tmp_path / "bert-style", segments=segments))
    model.load()
    verdicts = model.predict([PAIRS[0], ("User likes tea", "User")])
    assert scores_of(verdicts[0]) == pytest.approx(softmax([10.0, 0.0, 11.0]), rel=1e-5)
    assert verdicts[0].label == "neutral"
    assert scores_of(verdicts[1]) == pytest.approx(softmax([0.0, 0.0, 5.0]), rel=1e-5)  # 4 words + 1 in segment 1


def test_a_pair_is_cut_to_256_tokens_from_the_longer_statement(tmp_path: Path) -> None:
    """The tokenizer truncates each pair to 256 tokens (longest first): a cue in the 257th token is
    not seen. With the cue voting 300, the 256 neutral votes of "tea" lose only while it is kept."""
    model = OnnxNLIModel(build_model_dir(tmp_path / "long", vote=300.0))
    fits = ("tea " * 100, "tea " * 155 + "zebra")  # 256 tokens
    too_long = ("tea " * 100, "tea " * 156 + "zebra")  # 257: the last token of the longer text goes
    assert labels_of(model, [fits, too_long]) == ["contradiction", "neutral"]


@pytest.mark.parametrize(
    "damage",
    ["wrong-sha", "tampered-model", "missing-dir", "no-manifest", "manifest-without-labels", "corrupt-manifest"],
)
def test_a_model_that_cannot_be_trusted_falls_back_to_the_lexical_nli(
    damage: str, model_dir: Path, caplog: pytest.LogCaptureFixture
) -> None:
    target = model_dir
    if damage == "wrong-sha":
        pins = {"model.onnx": "0" * 64, "tokenizer.json": sha256(model_dir / "tokenizer.json")}
        write_manifest(model_dir, LABELS, pins)
    elif damage == "tampered-model":  # the file changed after it was pinned
        (model_dir / "model.onnx").write_bytes((model_dir / "model.onnx").read_bytes() + b"\0")
    elif damage == "missing-dir":
        target = model_dir.parent / "nowhere"
    elif damage == "no-manifest":
        (model_dir / "manifest.json").unlink()
    elif damage == "manifest-without-labels":
        manifest = json.loads((model_dir / "manifest.json").read_text())
        del manifest["labels"]
        (model_dir / "manifest.json").write_text(json.dumps(manifest))
    else:
        (model_dir / "manifest.json").write_text("{not json")
    if damage in ("wrong-sha", "tampered-model"):
        with pytest.raises(ValueError, match=r"model\.onnx does not match its pinned SHA-256"):
            OnnxNLIModel(target).load()
    with caplog.at_level(logging.WARNING, logger="agtos.tasks.contradiction"):
        fallback = build_nli(True, str(target))
    assert fallback is not None and fallback.name == "lexical-negation-fallback"
    assert fallback.predict([("User drinks coffee", "User no longer drinks coffee")])[0].label == "contradiction"
    assert any(str(target) in r.getMessage() and "fallback" in r.getMessage() for r in caplog.records)


def squeeze_batch(path: Path) -> None:
    """Rewrite the model so its output drops the batch axis (logits of shape (3,)), pins renewed."""
    model = onnx.load(str(path / "model.onnx"))
    model.graph.node[-1].output[0] = "rows"
    model.graph.node.append(helper.make_node("ReduceSum", ["rows", "axis0"], ["logits"], keepdims=0))
    model.graph.initializer.append(helper.make_tensor("axis0", TensorProto.INT64, [1], [0]))
    del model.graph.output[:]
    model.graph.output.append(helper.make_tensor_value_info("logits", TensorProto.FLOAT, [3]))
    onnx.save(model, str(path / "model.onnx"))
    write_manifest(path, LABELS)


@pytest.mark.parametrize(
    ("damage", "message"),
    [
        ("corrupt-model-pinned", r"NLI model or tokenizer could not be read: \S"),
        ("corrupt-tokenizer-pinned", r"NLI model or tokenizer could not be read: \S"),
        ("labels-for-2-logits", r"NLI model gives logits of shape \(1, 3\) for one pair, not \(1, 2\)$"),
        ("squeezed-output", r"NLI model gives logits of shape \(3,\) for one pair, not \(1, 3\)$"),
        (
            "duplicate-labels",
            r"NLI manifest labels \['contradiction', 'neutral', 'contradiction'\] must be distinct and include"
            r" 'contradiction'$",
        ),
    ],
)
def test_a_broken_model_with_valid_pins_is_refused_at_load(damage: str, message: str, model_dir: Path) -> None:
    """Files that match their pins but cannot serve: refused at load (→ fallback), never at lint time,
    with the reason the lint report shows (contradictionPipeline.nliError)."""
    if damage == "corrupt-model-pinned":
        (model_dir / "model.onnx").write_bytes(b"not an onnx graph")
        write_manifest(model_dir, LABELS)
    elif damage == "corrupt-tokenizer-pinned":
        (model_dir / "tokenizer.json").write_text('{"version": "1.0", "model": 42}')
        write_manifest(model_dir, LABELS)
    elif damage == "duplicate-labels":  # 3 labels for 3 logits, but one of them twice
        write_manifest(model_dir, ["contradiction", "neutral", "Contradiction"])
    elif damage == "squeezed-output":  # an export without the batch axis
        squeeze_batch(model_dir)
    else:
        write_manifest(model_dir, ["contradiction", "entailment"])  # 2 labels, 3 logits
    with pytest.raises(ValueError, match=f"^{message}") as refused:
        OnnxNLIModel(model_dir).load()
    fallback = build_nli(True, str(model_dir))
    assert isinstance(fallback, LexicalNegationNLI)
    assert fallback.load_error == (
        f"NLI model at {model_dir} could not be loaded ({refused.value}); using the lexical-negation fallback"
    )


def test_a_failed_reload_keeps_the_model_in_service(model_dir: Path, tmp_path: Path) -> None:
    model = OnnxNLIModel(model_dir)
    model.load()
    assert labels_of(model) == ["contradiction", "entailment", "neutral"]
    # the directory is replaced by a model with other cues whose manifest still pins the old files
    manifest = (model_dir / "manifest.json").read_text()
    shutil.rmtree(model_dir)
    build_model_dir(model_dir, cue=("tea", "bike"))
    (model_dir / "manifest.json").write_text(manifest)
    with pytest.raises(ValueError, match="SHA-256"):
        model.load()
    assert labels_of(model) == ["contradiction", "entailment", "neutral"]  # still the first model
    write_manifest(model_dir, ["neutral", "contradiction", "entailment"])  # pins now right, labels permuted
    (model_dir / "tokenizer.json").write_text("{broken")  # ... but the tokenizer is broken
    write_manifest(model_dir, ["neutral", "contradiction", "entailment"])
    with pytest.raises(ValueError):
        model.load()  # the new session was built, the tokenizer failed: nothing swapped
    assert labels_of(model) == ["contradiction", "entailment", "neutral"]


def seed_pair(coordinator: MemoryCoordinator, user_id: str) -> None:
    """Two conclusions the tiny model calls a contradiction and the lexical fallback calls neutral."""
    stamp = now_ms()
    texts = ["User owns a zebra", "User rides a bike"]
    conclusions = [inductive_conclusion(user_id, f"z{i}", t, stamp) for i, t in enumerate(texts)]
    coordinator.conclusions.upsert_many(conclusions, coordinator.semantic.embedder.embed(texts))


@pytest.fixture
def env_client(
    monkeypatch: pytest.MonkeyPatch, redis_url: str, key_prefix: str, tmp_path: Path
) -> Iterator[tuple[MemoryCoordinator, TestClient]]:
    """Coordinator and API from the environment, ``AGTOS_NLI_MODEL_DIR`` pointing at ``tmp/env-nli``."""
    for name in ("AGTOS_LLM_PROVIDER", "AGTOS_MAINTENANCE_PROVIDER", "AGTOS_NLI_ENABLED"):
        monkeypatch.delenv(name, raising=False)
    env = {
        "REDIS_URL": redis_url,
        "AGTOS_KEY_PREFIX": key_prefix,
        "AGTOS_DATA_DIR": str(tmp_path / "data"),
        "AGTOS_CONFIG_DIR": str(tmp_path / "config"),
        "AGTOS_BACKGROUND_WORK_POLICY": "always",
        "AGTOS_NLI_MODEL_DIR": str(tmp_path / "env-nli"),
    }
    for name, value in env.items():
        monkeypatch.setenv(name, value)
    coordinator = MemoryCoordinator(Settings.from_env())
    with TestClient(create_app(coordinator=coordinator)) as client:
        yield coordinator, client
    coordinator.close()


@pytest.mark.parametrize("pinned", [True, False])
def test_the_lint_uses_the_model_from_agtos_nli_model_dir(
    pinned: bool, env_client: tuple[MemoryCoordinator, TestClient], tmp_path: Path
) -> None:
    coordinator, client = env_client
    path = build_model_dir(tmp_path / "env-nli")
    if not pinned:
        write_manifest(path, LABELS, {"model.onnx": "f" * 64, "tokenizer.json": "f" * 64})
    seed_pair(coordinator, "zoe")
    report = run_maintenance(client, "zoe")["report"]
    pipeline = report["summary"]["contradictionPipeline"]
    assert pipeline["counters"]["candidates"] == 1 and pipeline["counters"]["nliChecked"] == 1
    if pinned:
        assert pipeline["nli"] == "onnx-nli:env-nli" and pipeline["counters"]["confirmed"] == 1
        assert "nliError" not in pipeline
    else:  # labelled as the fallback, with the reason, in the report the user gets back
        assert pipeline["nli"] == "lexical-negation-fallback" and pipeline["counters"]["confirmed"] == 0
        assert "SHA-256" in pipeline["nliError"] and str(path) in pipeline["nliError"]
