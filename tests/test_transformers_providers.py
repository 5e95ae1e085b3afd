"""The in-process transformers providers (issue 18) on tiny models built here, no downloads.

``benchmarks/transformers_cost.py`` builds them: a random one-layer Llama with a chat template whose
generation config suppresses the special tokens (a reply is exactly the token budget long), a BERT
token classifier whose embeddings tag alice/smith PER, paris LOC, acme/##corp ORG, olympics MISC,
and a BERT NLI classifier whose bias makes one label of its config win (exported once to ONNX,
or run through torch when no export can be written). Each is configured the way
an operator does it (environment -> ``Settings.from_env`` -> the app) and driven through the API.
Under CI (``CI=true``; ``.ci/run`` installs the extra) a missing extra fails them; elsewhere they skip.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import pytest
from fastapi.testclient import TestClient

from agtos.config import LLMSlot, Settings
from agtos.memory.coordinator import MemoryCoordinator
from agtos.memory.resource_guard import ACTIVE_SESSION, ActivityTracker, ResourceGuard
from agtos.serving.app import create_app
from benchmarks.transformers_cost import WORDS, build_causal_lm, build_nli_classifier, build_token_classifier
from tests.helpers import run_maintenance, talk, user
from tests.test_nli_model import seed_pair

ROOT = Path(__file__).resolve().parents[1]
NLI_ORDER = {0: "ENTAILMENT", 1: "Neutral", 2: "contradiction"}  # not the ONNX manifest's usual order
Serve = Callable[..., Any]


def needs_the_extra() -> None:
    """Skip without the transformers extra (``make install``'s default): under CI, fail instead."""
    if os.environ.get("CI", "").lower() in ("1", "true", "yes"):  # .ci/run installs the extra: never skip there
        import torch  # noqa: F401
        import transformers  # noqa: F401
    pytest.importorskip(
        "transformers", reason="the transformers extra is not installed (pip install -e '.[transformers]')"
    )


@pytest.fixture(scope="module")
def models(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    needs_the_extra()
    root = tmp_path_factory.mktemp("tiny-models")
    return {
        "llm": build_causal_lm(root / "lm"),
        "ner": build_token_classifier(root / "ner"),
        "nli": build_nli_classifier(root / "nli", NLI_ORDER, "contradiction"),
    }


@pytest.fixture
def serve(monkeypatch: pytest.MonkeyPatch, redis_url: str, key_prefix: str, tmp_path: Path) -> Serve:
    """``serve(**env)``: the app as ``agtos serve`` builds it from these variables (inline ingestion)."""
    for name in ("AGTOS_LLM_PROVIDER", "AGTOS_SUMMARIZE_PROVIDER", "AGTOS_MAINTENANCE_PROVIDER", "AGTOS_NLI_ENABLED"):
        monkeypatch.delenv(name, raising=False)

    @contextmanager
    def run(**env: str) -> Iterator[TestClient]:
        base = {
            "REDIS_URL": redis_url,
            "AGTOS_KEY_PREFIX": key_prefix,
            "AGTOS_DATA_DIR": str(tmp_path / "data"),
            "AGTOS_CONFIG_DIR": str(tmp_path / "config"),
            "AGTOS_BACKGROUND_WORK_POLICY": "always",
        }
        for name, value in (base | env).items():
            monkeypatch.setenv(name, value)
        coordinator = MemoryCoordinator(Settings.from_env())
        try:
            with TestClient(create_app(coordinator=coordinator)) as client:
                yield client
        finally:
            coordinator.close()

    return run


def providers(client: TestClient) -> dict[str, Any]:
    response = client.get("/health")
    assert response.status_code == 200, response.text
    return response.json()["providers"]


def episode_summaries(client: TestClient, user_id: str) -> list[str]:
    response = client.get("/api/memory/episodes", headers=user(user_id))
    assert response.status_code == 200, response.text
    return [e["summary"] for e in response.json()["episodes"]]


# -- LLM slot ---------------------------------------------------------------------------------------
def test_summaries_come_from_the_local_model_within_the_token_budget(serve: Serve, models: dict[str, Path]) -> None:
    env = {"AGTOS_SUMMARIZE_PROVIDER": "transformers", "AGTOS_SUMMARIZE_MODEL": str(models["llm"])}
    with serve(**env, AGTOS_SUMMARIZE_MAX_TOKENS="5") as client:
        talk(client, "ana", "s1", ("user", "Alice moved to Paris and works at Acme."), ("assistant", "Noted."))
        [summary] = episode_summaries(client, "ana")
        health = providers(client)
    # the suppressed special tokens make greedy decoding run to the budget: exactly 5 vocabulary words
    # (a prompt echoed back, or an unbounded budget, gives more; the extractive fallback other words)
    words = summary.split()
    assert len(words) == 5 and set(words) <= set(WORDS), summary
    assert health["llm"]["summarize"] == {
        "provider": "transformers",
        "model": str(models["llm"]),
        "loaded": True,
        "error": None,
    }
    assert health["llm"]["dialectic"] == {"provider": "builtin"}


def test_the_model_loads_once_per_process_and_answers_deterministically(models: dict[str, Path]) -> None:
    from agtos.providers.llm import build_llm
    from agtos.providers.transformers_llm import TransformersLLM

    slot = LLMSlot(provider="transformers", model=str(models["llm"]), max_tokens=3)
    first, second = build_llm(slot), build_llm(slot.with_overrides(max_tokens=7))
    assert isinstance(first, TransformersLLM) and isinstance(second, TransformersLLM)
    messages = [{"role": "system", "content": "be brief"}, {"role": "user", "content": "hello alice"}]
    short, long = first.chat(messages), second.chat(messages)
    assert first.load() is second.load()  # one model object for the directory, shared by both slots
    assert len(short.split()) == 3 and len(long.split()) == 7
    assert long.split()[:3] == short.split()  # greedy: the longer budget continues the same reply


@pytest.mark.parametrize("broken", ["missing", "corrupt"])
def test_an_unusable_llm_directory_falls_back_and_health_says_why(
    broken: str, serve: Serve, models: dict[str, Path], tmp_path: Path
) -> None:
    model_dir = tmp_path / "no-such-model"
    if broken == "corrupt":  # every file of the real model (config, tokenizer, chat template), weights cut short
        model_dir.mkdir()
        for source in models["llm"].iterdir():
            data = source.read_bytes()
            (model_dir / source.name).write_bytes(data[:200] if source.name == "model.safetensors" else data)
    env = {"AGTOS_SUMMARIZE_PROVIDER": "transformers", "AGTOS_SUMMARIZE_MODEL": str(model_dir)}
    with serve(**env) as client:
        talk(client, "ben", "s1", ("user", "Bob does not like coffee, he likes green tea."))
        [summary] = episode_summaries(client, "ben")
        slot = providers(client)["llm"]["summarize"]
    assert "coffee" in summary  # the extractive summary of the turn, not a model reply
    assert slot["provider"] == "transformers" and slot["loaded"] is False
    reason = "does not exist" if broken == "missing" else "could not be loaded"
    assert str(model_dir) in slot["error"] and reason in slot["error"]


def test_the_resource_guard_treats_the_provider_as_a_local_model() -> None:
    activity = ActivityTracker()
    activity.session_started("u", "s")
    guard = ResourceGuard(LLMSlot(provider="transformers", model="/models/llm"), activity=activity)
    decision = guard.check()  # a cloud provider would be "safe: cloud-provider" despite the session
    assert (decision.safe, decision.reason) == (False, ACTIVE_SESSION)


# -- NER ---------------------------------------------------------------------------------------------
def test_ner_from_a_model_directory_replaces_spacy(serve: Serve, models: dict[str, Path]) -> None:
    with serve(AGTOS_NER_MODEL_DIR=str(models["ner"])) as client:
        recognizer = client.app.state.coordinator.services.recognizer
        text = "Alice Smith moved to Paris and works at Acmecorp. She likes the Olympics."
        found = {(m.text, m.label, str(m.type)) for m in recognizer.recognize(text)}
        talk(client, "cai", "s1", ("user", text))
        entities = client.get("/api/entities", headers=user("cai")).json()["entities"]
        ner = providers(client)["ner"]
    # B-PER + I-PER become one span, acme + ##corp one word; labels mapped PER/LOC/ORG/MISC
    assert found >= {
        ("Alice Smith", "PER", "person"),
        ("Paris", "LOC", "place"),
        ("Acmecorp", "ORG", "organization"),
        ("Olympics", "MISC", "thing"),
    }
    assert {(e["name"], e["type"]) for e in entities} >= {("Alice Smith", "person"), ("Olympics", "thing")}
    assert ner == {"backend": "transformers-ner:ner+rules", "modelDir": str(models["ner"]), "error": None}


def test_ner_labels_outside_the_mapping_are_dropped(models: dict[str, Path], tmp_path: Path) -> None:
    from agtos.tasks.ner import build_recognizer

    # the same model with ORG renamed to a label the mapping does not know (e.g. a PII model's "ID")
    tags = ["O", "B-PER", "I-PER", "B-LOC", "I-LOC", "B-ID", "I-ID", "B-MISC", "I-MISC"]
    recognizer = build_recognizer(model_dir=str(build_token_classifier(tmp_path / "ner-id", tags)))
    labels = {m.label for m in recognizer.recognize("Alice Smith works at Acmecorp in Paris.")}
    assert {"PER", "LOC"} <= labels and not labels & {"ID", "ORG"}


def test_a_missing_ner_directory_falls_back_to_spacy_and_health_says_why(serve: Serve, tmp_path: Path) -> None:
    missing = tmp_path / "no-ner"
    with serve(AGTOS_NER_MODEL_DIR=str(missing)) as client:
        # a one-line "Alice Smith moved to Paris." is too little to keep as an episode: no NER runs on it
        talk(client, "dan", "s1", ("user", "Alice Smith moved to Paris and works at Acme. She likes the Olympics."))
        assert len(episode_summaries(client, "dan")) == 1
        entities = client.get("/api/entities", headers=user("dan")).json()["entities"]
        ner = providers(client)["ner"]
    assert ner["backend"].startswith("spacy:") and ner["modelDir"] == str(missing)
    assert "does not exist" in ner["error"] and "using spaCy" in ner["error"]
    assert ("Alice Smith", "person") in {(e["name"], e["type"]) for e in entities}  # spaCy found her


# -- NLI ---------------------------------------------------------------------------------------------
def test_nli_labels_come_from_the_config_and_drive_stage_two(
    serve: Serve, models: dict[str, Path], key_prefix: str
) -> None:
    from agtos.tasks.contradiction import build_nli

    verdict = build_nli(True, str(models["nli"])).predict([("User likes tea", "User also likes tea")])  # type: ignore[union-attr]
    assert verdict[0].label == "contradiction"  # index 2 of this config (the ONNX default order says neutral)
    assert set(verdict[0].scores) == {"entailment", "neutral", "contradiction"}
    with serve(AGTOS_NLI_MODEL_DIR=str(models["nli"])) as client:
        seed_pair(client.app.state.coordinator, "eve")
        pipeline = run_maintenance(client, "eve")["report"]["summary"]["contradictionPipeline"]
        nli = providers(client)["nli"]
    # the lexical fallback calls "owns a zebra" / "rides a bike" neutral: only the model confirms it
    assert pipeline["nli"] == "transformers-nli:nli" and "nliError" not in pipeline
    assert pipeline["counters"]["nliContradictions"] == 1 and pipeline["counters"]["confirmed"] == 1
    assert nli == {
        "backend": "transformers-nli:nli",
        "modelDir": str(models["nli"]),
        "error": None,
        "runtime": "onnxruntime",  # exported once, beside the pinned files
        "onnxExport": str(models["nli"] / ".agtos-onnx"),
    }


def test_health_says_when_the_nli_model_runs_through_torch_and_why(
    serve: Serve, models: dict[str, Path], tmp_path: Path
) -> None:
    model_dir = build_nli_classifier(tmp_path / "read-only-nli", NLI_ORDER, "contradiction")
    (model_dir / ".agtos-onnx").write_text("not a directory")  # no cache can be written: no export
    blocked = tmp_path / "xdg-cache"
    blocked.write_text("not a directory")
    with serve(AGTOS_NLI_MODEL_DIR=str(model_dir), XDG_CACHE_HOME=str(blocked)) as client:
        seed_pair(client.app.state.coordinator, "gus")
        pipeline = run_maintenance(client, "gus")["report"]["summary"]["contradictionPipeline"]
        nli = providers(client)["nli"]
    assert pipeline["nli"] == "transformers-nli:read-only-nli" and "nliError" not in pipeline
    assert pipeline["counters"]["confirmed"] == 1  # the model still decides, through torch
    assert (nli["backend"], nli["error"], nli["runtime"]) == ("transformers-nli:read-only-nli", None, "torch")
    assert nli["onnxError"].startswith("no cache directory can be written") and str(blocked) in nli["onnxError"]


def test_the_nli_model_is_read_only_when_its_files_match_the_pins(models: dict[str, Path], tmp_path: Path) -> None:
    from agtos.tasks.contradiction import LexicalNegationNLI, build_nli

    unpinned = build_nli_classifier(tmp_path / "unpinned", NLI_ORDER, "contradiction", pin=False)
    tampered = build_nli_classifier(tmp_path / "tampered", NLI_ORDER, "contradiction")
    (tampered / "config.json").write_text(
        json.dumps(json.loads((tampered / "config.json").read_text()) | {"hidden_size": 16}, indent=1)
    )
    extra = build_nli_classifier(tmp_path / "extra", NLI_ORDER, "contradiction")
    (extra / "pytorch_model.bin").write_bytes(b"not pinned")
    generic = build_nli_classifier(tmp_path / "generic", {0: "LABEL_0", 1: "LABEL_1", 2: "LABEL_2"}, "LABEL_2")
    expected = {
        unpinned: "has no manifest.json",
        tampered: "config.json does not match its pinned SHA-256",
        extra: "not pinned by manifest.json: ['pytorch_model.bin']",
        generic: "must be distinct NLI labels including 'contradiction'",
    }
    for model_dir, reason in expected.items():
        fallback = build_nli(True, str(model_dir))
        assert isinstance(fallback, LexicalNegationNLI), model_dir
        assert (
            fallback.load_error is not None and reason in fallback.load_error and str(model_dir) in fallback.load_error
        )


def test_a_corrupt_nli_directory_falls_back_and_health_says_why(serve: Serve, tmp_path: Path) -> None:
    needs_the_extra()  # the corrupt directory is built with torch
    from agtos.providers.transformers_nli import pin

    model_dir = build_nli_classifier(tmp_path / "corrupt-nli", NLI_ORDER, "contradiction", pin=False)
    (model_dir / "model.safetensors").write_bytes(b"\x00" * 64)  # pinned as it is: the pins pass, loading fails
    pin(model_dir)
    with serve(AGTOS_NLI_MODEL_DIR=str(model_dir)) as client:
        assert providers(client)["nli"] == {"backend": None, "modelDir": str(model_dir), "error": None}  # not loaded
        seed_pair(client.app.state.coordinator, "fay")
        pipeline = run_maintenance(client, "fay")["report"]["summary"]["contradictionPipeline"]
        nli = providers(client)["nli"]
    assert pipeline["nli"] == "lexical-negation-fallback" and pipeline["counters"]["confirmed"] == 0
    assert nli["backend"] == "lexical-negation-fallback"
    assert "could not be loaded" in nli["error"] and str(model_dir) in nli["error"]


# -- without the extra --------------------------------------------------------------------------------
def test_the_api_never_imports_torch_or_transformers_unless_a_slot_names_them() -> None:
    code = (
        "import sys, agtos.serving.app\n"
        "from agtos.config import Settings\n"
        "from agtos.memory.health_checks import providers\n"
        "print(sorted(m for m in ('torch', 'transformers') if m in sys.modules))"
    )
    out = subprocess.run([sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True, timeout=120)
    assert out.returncode == 0, out.stderr
    assert out.stdout.strip() == "[]"
