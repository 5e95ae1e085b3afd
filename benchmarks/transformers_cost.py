"""Memory and latency of the in-process transformers providers (issue 18), on tiny models built here.

Builds the same tiny models as ``tests/test_transformers_providers.py`` (a random-weight Llama causal
LM with a chat template, a BERT token classifier and a BERT NLI cross-encoder over a 40-word
vocabulary), or takes real directories, and prints per provider: load time, RSS growth of this
process, and the median latency of a call::

    .venv/bin/python -m benchmarks.transformers_cost
    .venv/bin/python -m benchmarks.transformers_cost --llm DIR --ner DIR --nli DIR   # real models

Figures for the tiny models measure the machinery (torch import, pipeline, chat template), not a
model's own cost: a real model's load time and RSS grow with its weights.

It then scores NER on the extraction label set (``benchmarks/eval/extraction_set.json``, the
entities of ``benchmarks.eval.extraction_scores``: (name, type) pairs, person/place/organization/
event/thing...) with the spaCy recognizer and with the transformers one (``--ner`` DIR, else the tiny
model, which knows 40 words: its row shows what the rules alone recover plus the machinery's speed,
not a real model's quality), printing entity P/R/F1 and episodes/s of the whole extraction path.
"""

from __future__ import annotations

import argparse
import json
import statistics
import tempfile
import time
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

#: the tiny models' whole vocabulary (BERT word pieces; lower case)
WORDS = [
    *["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]"],
    *"system user assistant : alice smith moved to paris and works at acme ##corp . she likes the".split(),
    *"olympics zebra bike owns rides a tea coffee bob does not like i hello green is was in on".split(),
]
SPECIAL = 5  # the first ids: [PAD] [UNK] [CLS] [SEP] [MASK]
CHAT_TEMPLATE = (
    "{% for m in messages %}{{ m['role'] }} : {{ m['content'] }} [SEP] {% endfor %}"
    "{% if add_generation_prompt %}assistant :{% endif %}"
)
NER_TAGS = ["O", "B-PER", "I-PER", "B-LOC", "I-LOC", "B-ORG", "I-ORG", "B-MISC", "I-MISC"]
#: the tag each word's embedding points at in the tiny NER model (every other word: O)
NER_WORD_TAGS = {"alice": "B-PER", "smith": "I-PER", "paris": "B-LOC", "acme": "B-ORG", "##corp": "I-ORG"}
NER_WORD_TAGS |= {"olympics": "B-MISC"}


def tokenizer() -> Any:
    """A BERT word-piece tokenizer over :data:`WORDS` (fast: it gives character offsets)."""
    from transformers import BertTokenizerFast  # type: ignore[attr-defined]  # lazily exported
    from transformers.utils import logging

    logging.disable_progress_bar()  # the builders call this first: no "Writing model shards" bars
    return BertTokenizerFast(vocab={w: i for i, w in enumerate(WORDS)}, do_lower_case=True)


def build_causal_lm(target: Path, *, seed: int = 0) -> Path:
    """A one-layer random Llama with a chat template whose generation config suppresses the special
    tokens, so greedy decoding never stops early: a reply is exactly the token budget long."""
    import torch
    from transformers import LlamaConfig, LlamaForCausalLM

    torch.manual_seed(seed)
    config = LlamaConfig(
        vocab_size=len(WORDS),
        hidden_size=16,
        intermediate_size=32,
        num_hidden_layers=1,
        num_attention_heads=2,
        num_key_value_heads=2,
        max_position_embeddings=256,
        bos_token_id=2,
        eos_token_id=3,
        pad_token_id=0,
    )
    tok, model = tokenizer(), LlamaForCausalLM(config)
    model.generation_config.suppress_tokens = list(range(SPECIAL))
    tok.chat_template = CHAT_TEMPLATE
    model.save_pretrained(target)
    tok.save_pretrained(target)
    return target


def build_token_classifier(target: Path, tags: Sequence[str] = NER_TAGS) -> Path:
    """A BERT token classifier with no encoder layer: each word's embedding is a one-hot of the tag
    :data:`NER_WORD_TAGS` gives it (position and segment embeddings zero), and the classifier reads
    the tag back, so the model tags every word as listed (``O`` otherwise). ``tags`` renames
    :data:`NER_TAGS` position by position (``B-ID`` in place of ``B-ORG`` tags acme ``B-ID``)."""
    if len(tags) != len(NER_TAGS):
        raise ValueError(f"tags must rename the {len(NER_TAGS)} tags of NER_TAGS one by one: {list(tags)}")
    import torch
    from transformers import BertConfig, BertForTokenClassification

    config = BertConfig(
        vocab_size=len(WORDS),
        hidden_size=16,
        num_hidden_layers=0,
        num_attention_heads=2,
        intermediate_size=16,
        max_position_embeddings=128,
        id2label=dict(enumerate(tags)),
        label2id={t: i for i, t in enumerate(tags)},
    )
    tok, model = tokenizer(), BertForTokenClassification(config)
    with torch.no_grad():
        emb = model.bert.embeddings
        emb.word_embeddings.weight.zero_()
        emb.position_embeddings.weight.zero_()
        emb.token_type_embeddings.weight.zero_()
        for i, word in enumerate(WORDS):
            emb.word_embeddings.weight[i, NER_TAGS.index(NER_WORD_TAGS.get(word, "O"))] = 10.0
        model.classifier.weight.zero_()
        model.classifier.bias.zero_()
        for t in range(len(tags)):
            model.classifier.weight[t, t] = 10.0
    model.save_pretrained(target)
    tok.save_pretrained(target)
    return target


def build_nli_classifier(
    target: Path, id2label: dict[int, str], winner: str | None, *, pin: bool = True, seed: int = 0
) -> Path:
    """A one-layer BERT sequence classifier whose bias makes ``winner`` win every pair, pinned by
    ``python -m agtos.providers.transformers_nli``'s manifest when ``pin``. With ``winner=None`` the
    model keeps its random weights (from ``seed``, drawn large), the classifier no bias: the label then
    depends on the pair (torch's and onnxruntime's runs can be compared label by label)."""
    import torch
    from transformers import BertConfig, BertForSequenceClassification

    from agtos.providers.transformers_nli import pin as pin_dir

    torch.manual_seed(seed)
    config = BertConfig(
        vocab_size=len(WORDS),
        hidden_size=16,
        num_hidden_layers=1,
        num_attention_heads=2,
        intermediate_size=32,
        max_position_embeddings=128,
        id2label=id2label,
        label2id={v: k for k, v in id2label.items()},
        initializer_range=1.0 if winner is None else 0.02,  # BERT's 0.02 gives every pair the same logits
    )
    tok, model = tokenizer(), BertForSequenceClassification(config)
    with torch.no_grad():
        model.classifier.bias.zero_()
        if winner is not None:
            model.classifier.weight.zero_()
            model.classifier.bias[next(k for k, v in id2label.items() if v == winner)] = 5.0
    model.save_pretrained(target)
    tok.save_pretrained(target)
    if pin:
        pin_dir(target)
    return target


def _rss_mb() -> float:
    with open("/proc/self/status") as fh:
        return next(int(line.split()[1]) for line in fh if line.startswith("VmRSS:")) / 1024


def measure(load: Callable[[], Any], call: Callable[[Any], Any], repeat: int) -> dict[str, float]:
    """Load time, RSS growth and the median latency of ``repeat`` calls (after one warm-up)."""
    rss, started = _rss_mb(), time.perf_counter()
    loaded = load()
    load_s = time.perf_counter() - started
    grown = _rss_mb() - rss
    call(loaded)
    times = []
    for _ in range(repeat):
        started = time.perf_counter()
        call(loaded)
        times.append(time.perf_counter() - started)
    return {
        "load_s": round(load_s, 3),
        "rss_mb": round(grown, 1),
        "median_ms": round(statistics.median(times) * 1000, 2),
    }


def ner_comparison(ner_dir: Path, split: str = "all") -> dict[str, dict[str, float]]:
    """Entity P/R/F1 and episodes/s on the extraction label set: spaCy vs the transformers model."""
    from agtos.tasks.ner import build_recognizer
    from agtos.tasks.ner_transformers import TransformersRecognizer
    from agtos.tasks.relations import build_relation_extractor
    from benchmarks.eval.extraction_scores import evaluate, load_set

    conversations = load_set(split=split)
    out: dict[str, dict[str, float]] = {}
    for recognizer in (build_recognizer(), TransformersRecognizer(str(ner_dir))):
        report = evaluate(conversations, recognizer, build_relation_extractor())
        c = report.counts["entities"]
        out[recognizer.name] = {
            "precision": round(c.precision, 3),
            "recall": round(c.recall, 3),
            "f1": round(c.f1, 3),
            "episodes_per_s": round(report.episodes / report.seconds, 1) if report.seconds else 0.0,
            "episodes": report.episodes,
        }
    return out


def main(argv: Sequence[str] | None = None) -> int:
    from agtos.providers.transformers_llm import TransformersLLM
    from agtos.providers.transformers_nli import TransformersNLIModel
    from agtos.tasks.ner_transformers import TransformersRecognizer

    ap = argparse.ArgumentParser(description=__doc__.split("\n", 1)[0])
    ap.add_argument("--llm", type=Path, help="a causal LM directory (default: a tiny one built here)")
    ap.add_argument("--ner", type=Path, help="a token-classification directory")
    ap.add_argument("--nli", type=Path, help="a pinned NLI sequence-classification directory")
    ap.add_argument("--max-tokens", type=int, default=32)
    ap.add_argument("--repeat", type=int, default=20)
    ap.add_argument("--split", choices=("dev", "test", "all"), default="all", help="of the extraction label set")
    ap.add_argument("--no-ner-scores", action="store_true", help="skip the spaCy vs transformers NER comparison")
    args = ap.parse_args(argv)
    rss0, started = _rss_mb(), time.perf_counter()
    import torch  # noqa: F401 - the import is part of the first provider's cost; measured apart
    import transformers  # noqa: F401

    results: dict[str, Any] = {
        "import": {"seconds": round(time.perf_counter() - started, 2), "rss_mb": round(_rss_mb() - rss0, 1)}
    }
    with tempfile.TemporaryDirectory() as tmp:
        root = Path(tmp)
        llm_dir = args.llm or build_causal_lm(root / "llm")
        ner_dir = args.ner or build_token_classifier(root / "ner")
        nli_dir = args.nli or build_nli_classifier(
            root / "nli", {0: "entailment", 1: "neutral", 2: "contradiction"}, "contradiction"
        )
        llm = TransformersLLM(str(llm_dir), max_new_tokens=args.max_tokens)
        question = [{"role": "user", "content": "Alice moved to Paris. Where does she live?"}]
        results["llm"] = measure(llm.load, lambda _: llm.chat(question), args.repeat) | {"new_tokens": args.max_tokens}
        ner = TransformersRecognizer(str(ner_dir))
        line = "Alice Smith moved to Paris and works at Acmecorp. She likes the Olympics."
        results["ner"] = measure(ner.load, lambda _: ner.recognize(line), args.repeat)
        nli = TransformersNLIModel(nli_dir, export_onnx=False)  # torch; benchmarks.nli_onnx compares ONNX
        pairs = [("User owns a zebra", "User rides a bike")] * 8
        results["nli"] = measure(nli.load, lambda _: nli.predict(pairs), args.repeat) | {"pairs_per_call": 8}
        if not args.no_ner_scores:
            results["ner_extraction_set"] = ner_comparison(ner_dir, args.split)
    print(json.dumps(results, indent=1))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
