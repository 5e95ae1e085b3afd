"""The one-time ONNX export of a transformers NLI directory (issue 18, item 3), on a tiny model built here.

The model (``build_nli_classifier(..., winner=None)``) keeps large random weights, so its label
depends on the pair. The oracle is torch run directly through transformers (tokenizer, model,
softmax), not the code under test. Under CI (``.ci/run`` installs the extra) a missing extra fails
these tests; elsewhere they skip.
"""

from __future__ import annotations

import hashlib
import json
import logging
import os
import subprocess
import sys
from pathlib import Path

import pytest

from agtos.providers.transformers_nli import TransformersNLIModel
from benchmarks.transformers_cost import build_nli_classifier

ROOT = Path(__file__).resolve().parents[1]
ORDER = {0: "Contradiction", 1: "ENTAILMENT", 2: "neutral"}  # neither the ONNX default order nor MNLI's
PAIRS = [
    ("alice likes tea", "bob does not like tea"),
    ("she owns a zebra", "she rides a bike"),
    ("hello", "i was in paris"),
    ("the olympics", "acme"),
    ("bob is green", "alice smith moved to paris and works at acmecorp"),
    ("coffee", "tea"),
]


@pytest.fixture(autouse=True)
def _extra() -> None:
    if os.environ.get("CI", "").lower() in ("1", "true", "yes"):  # .ci/run installs the extra: never skip there
        import torch  # noqa: F401
        import transformers  # noqa: F401
    pytest.importorskip("transformers", reason="the transformers extra is not installed")


@pytest.fixture
def model_dir(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "user-cache"))  # never the real ~/.cache
    return build_nli_classifier(tmp_path / "nli", ORDER, None)


def oracle(model_dir: Path) -> list[dict[str, float]]:
    """Probabilities by label for :data:`PAIRS`, computed by transformers and torch directly."""
    import torch
    from transformers import AutoModelForSequenceClassification, AutoTokenizer

    tokenizer = AutoTokenizer.from_pretrained(model_dir)
    model = AutoModelForSequenceClassification.from_pretrained(model_dir).eval()
    encoded = tokenizer([a for a, _ in PAIRS], [b for _, b in PAIRS], padding=True, return_tensors="pt")
    with torch.no_grad():
        probs = torch.softmax(model(**encoded).logits, dim=-1).tolist()
    return [{ORDER[i].lower(): p for i, p in enumerate(row)} for row in probs]


def assert_agrees_with_torch(model: TransformersNLIModel, model_dir: Path) -> None:
    want = oracle(model_dir)
    got = model.predict(PAIRS)
    assert len({max(w, key=w.__getitem__) for w in want}) >= 2  # the labels depend on the pair
    assert [v.label for v in got] == [max(w, key=w.__getitem__) for w in want]
    for verdict, scores in zip(got, want, strict=True):
        assert verdict.scores == pytest.approx(scores, abs=1e-4)


def export_files(directory: Path) -> dict[str, tuple[int, str]]:
    """Each file of an export directory: (mtime in ns, SHA-256)."""
    return {p.name: (p.stat().st_mtime_ns, hashlib.sha256(p.read_bytes()).hexdigest()) for p in directory.iterdir()}


def test_the_first_load_exports_once_and_onnxruntime_agrees_with_torch(model_dir: Path) -> None:
    model = TransformersNLIModel(model_dir)
    model.load()
    cache = model_dir / ".agtos-onnx"
    assert model.runtime_status() == {"runtime": "onnxruntime", "onnxExport": str(cache)}
    manifest = json.loads((cache / "manifest.json").read_text())
    assert manifest["labels"] == ["contradiction", "entailment", "neutral"]  # the config's order
    graph = cache / manifest["model"]
    assert manifest["sha256"][graph.name] == hashlib.sha256(graph.read_bytes()).hexdigest()
    assert manifest["source"] == hashlib.sha256((model_dir / "manifest.json").read_bytes()).hexdigest()
    assert sorted(p.name for p in cache.iterdir()) == sorted([graph.name, "tokenizer.json", "manifest.json"])
    assert_agrees_with_torch(model, model_dir)


def test_a_later_load_reuses_the_export_without_torch(model_dir: Path) -> None:
    TransformersNLIModel(model_dir).load()
    cache = model_dir / ".agtos-onnx"
    before = export_files(cache)
    code = (
        "import json, sys\nfrom pathlib import Path\n"
        "from agtos.providers.transformers_nli import TransformersNLIModel\n"
        "model = TransformersNLIModel(Path(sys.argv[1]))\n"
        "verdicts = model.predict([('alice likes tea', 'bob does not like tea')])\n"
        "print(json.dumps([model.runtime_status(), verdicts[0].label, 'torch' in sys.modules]))"
    )
    out = subprocess.run(
        [sys.executable, "-c", code, str(model_dir)], cwd=ROOT, capture_output=True, text=True, timeout=120
    )
    assert out.returncode == 0, out.stderr
    status, label, imported_torch = json.loads(out.stdout)
    assert status == {"runtime": "onnxruntime", "onnxExport": str(cache)}
    assert label == max(oracle(model_dir)[0].items(), key=lambda kv: kv[1])[0]
    assert imported_torch is False  # an export needs torch: none was made, none was loaded
    assert export_files(cache) == before  # not rewritten: same files, same mtimes


def test_a_corrupt_cached_export_is_caught_by_its_sha256_and_exported_again(
    model_dir: Path, caplog: pytest.LogCaptureFixture
) -> None:
    TransformersNLIModel(model_dir).load()
    cache = model_dir / ".agtos-onnx"
    graph = cache / json.loads((cache / "manifest.json").read_text())["model"]
    data = bytearray(graph.read_bytes())
    data[len(data) // 2] ^= 0xFF  # one flipped byte in the weights: onnxruntime would still load it
    graph.write_bytes(bytes(data))
    model = TransformersNLIModel(model_dir)
    with caplog.at_level(logging.WARNING, logger="agtos.providers.transformers_nli_onnx"):
        model.load()
    assert f"NLI model file {graph.name} does not match its pinned SHA-256" in caplog.text
    manifest = json.loads((cache / "manifest.json").read_text())
    exported = cache / manifest["model"]
    assert manifest["sha256"][exported.name] == hashlib.sha256(exported.read_bytes()).hexdigest()
    assert model.runtime_status()["runtime"] == "onnxruntime"
    assert_agrees_with_torch(model, model_dir)


def test_a_re_pinned_directory_is_exported_again(model_dir: Path) -> None:
    TransformersNLIModel(model_dir).load()
    old = oracle(model_dir)
    build_nli_classifier(model_dir, ORDER, None, seed=1)  # new weights in place, pinned anew
    new = oracle(model_dir)
    assert max(abs(o[label] - n[label]) for o, n in zip(old, new, strict=True) for label in o) > 0.1
    model = TransformersNLIModel(model_dir)
    model.load()
    assert_agrees_with_torch(model, model_dir)  # the stale export would give the old probabilities
    assert len(list((model_dir / ".agtos-onnx").glob("model-*.onnx"))) == 1  # the stale graph removed


def test_an_unwritable_model_directory_exports_to_the_user_cache(model_dir: Path, tmp_path: Path) -> None:
    (model_dir / ".agtos-onnx").write_text("a file where the cache directory would go")
    model = TransformersNLIModel(model_dir)
    model.load()
    export = Path(model.runtime_status()["onnxExport"])
    assert export.parent == tmp_path / "user-cache" / "agtos" / "nli-onnx"
    assert_agrees_with_torch(model, model_dir)
    again = TransformersNLIModel(model_dir)
    again.load()
    assert again.runtime_status()["onnxExport"] == str(export)


@pytest.mark.parametrize("obstacle", ["no-onnx-package", "no-writable-cache"])
def test_when_no_export_can_be_made_the_model_runs_through_torch(
    obstacle: str, model_dir: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    if obstacle == "no-onnx-package":
        monkeypatch.setitem(sys.modules, "onnx", None)  # `import onnx` raises ImportError, as uninstalled
        reason = "the onnx package is not installed"
    else:
        (model_dir / ".agtos-onnx").write_text("not a directory")
        (tmp_path / "user-cache").write_text("not a directory either")
        reason = "no cache directory can be written"
    model = TransformersNLIModel(model_dir)
    model.load()
    status = model.runtime_status()
    assert status["runtime"] == "torch" and reason in status["onnxError"], status
    assert not list(model_dir.glob(".agtos-onnx/*")) and not (tmp_path / "user-cache").is_dir()
    assert_agrees_with_torch(model, model_dir)
