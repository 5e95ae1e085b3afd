"""Extraction quality against a labelled set: precision / recall / F1 per kind and per extractor.

Each conversation of ``extraction_set.json`` goes through the steps ingestion runs on a session
(``build_episode``: facts, preferences and the summary; NER on the episode's entity text; relation
extraction on the same text) and what comes out is compared with the gold labels:

- facts and preferences: one-to-one greedy matching by content-token overlap (Dice >= 0.5 on
  six-letter stems, stop words and the speaker's name left out); a gold item naming its speaker
  only matches a prediction naming the same speaker;
- entities: (normalised name, type), a prediction's aliases count as its names;
- relationships: (source, type, target) by normalised names, either order for symmetric types.

Extractors: ``builtin`` (rules + the spaCy model, the default with no LLM) and, with ``--llm-url``,
``llm`` (the same, with the relations from the LLM slot through :class:`LLMRelationExtractor`;
facts and entities have no LLM path yet, so they score as the built-in ones)::

    .venv/bin/python -m benchmarks.eval.extraction_scores                 # dev and test, built-in
    .venv/bin/python -m benchmarks.eval.extraction_scores --split test --details
    .venv/bin/python -m benchmarks.eval.extraction_scores --llm-url http://localhost:11434 --llm-model llama3.1
    .venv/bin/python -m benchmarks.eval.extraction_scores --min-f1 entities=0.8   # exit 1 below a floor
"""

from __future__ import annotations

import argparse
import json
import re
import sys
import time
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from agtos.memory.episodic import build_episode
from agtos.providers.llm import OllamaProvider, OpenAICompatibleProvider
from agtos.schemas import Turn
from agtos.tasks.entity_records import entity_text
from agtos.tasks.extract import extract
from agtos.tasks.mentions import EntityRecognizer, collect_entities, normalise_entity_name
from agtos.tasks.ner import build_recognizer
from agtos.tasks.relation_types import SYMMETRIC_TYPES, RelationExtractor
from agtos.tasks.relations import LLMRelationExtractor, build_relation_extractor
from agtos.tasks.summarize import ExtractiveSummariser
from agtos.tasks.text import STOPWORDS

SET_PATH = Path(__file__).with_name("extraction_set.json")
KINDS = ("facts", "preferences", "entities", "relationships")
MATCH_DICE = 0.5
_WORD = re.compile(r"[a-z0-9]+")


@dataclass
class Counts:
    """True positives, predictions and gold items of one kind."""

    tp: int = 0
    predicted: int = 0
    gold: int = 0

    def add(self, tp: int, predicted: int, gold: int) -> None:
        self.tp, self.predicted, self.gold = self.tp + tp, self.predicted + predicted, self.gold + gold

    @property
    def precision(self) -> float:
        return self.tp / self.predicted if self.predicted else 1.0

    @property
    def recall(self) -> float:
        return self.tp / self.gold if self.gold else 1.0

    @property
    def f1(self) -> float:
        p, r = self.precision, self.recall
        return 2 * p * r / (p + r) if p + r else 0.0


@dataclass
class Prediction:
    """What the extraction path produced for one conversation."""

    facts: list[str]
    preferences: list[str]
    entities: list[tuple[set[str], str, str]]  # (name keys, type, display name)
    relationships: list[tuple[str, str, str]]


@dataclass
class Report:
    """Counts per kind, the misses and false positives per conversation, and timing."""

    counts: dict[str, Counts] = field(default_factory=lambda: {k: Counts() for k in KINDS})
    details: list[dict[str, Any]] = field(default_factory=list)
    seconds: float = 0.0
    episodes: int = 0


def _stems(text: str, drop: frozenset[str]) -> set[str]:
    tokens = (t for t in _WORD.findall(text.lower().replace("'s", "")) if t not in STOPWORDS and t not in drop)
    return {t[:6] for t in tokens if t not in drop}


def _dice(a: set[str], b: set[str]) -> float:
    return 2 * len(a & b) / (len(a) + len(b)) if a and b else 0.0


def match_statements(gold: Sequence[dict[str, str]], predicted: Sequence[str]) -> tuple[int, list[int], list[int]]:
    """One-to-one greedy matches: (matched, unmatched gold indexes, unmatched prediction indexes)."""
    pairs: list[tuple[float, int, int]] = []
    for gi, item in enumerate(gold):
        speaker = item["speaker"].lower()
        drop = frozenset({*_WORD.findall(speaker), "user"})
        names_speaker = re.search(rf"\b{re.escape(speaker)}\b", item["text"].lower()) is not None
        g = _stems(item["text"], drop)
        for pi, text in enumerate(predicted):
            if names_speaker and re.search(rf"\b{re.escape(speaker)}\b", text.lower()) is None:
                continue
            score = _dice(g, _stems(text, drop))
            if score >= MATCH_DICE:
                pairs.append((score, gi, pi))
    used_g: set[int] = set()
    used_p: set[int] = set()
    for _, gi, pi in sorted(pairs, reverse=True):
        if gi not in used_g and pi not in used_p:
            used_g.add(gi)
            used_p.add(pi)
    return (
        len(used_g),
        [i for i in range(len(gold)) if i not in used_g],
        [i for i in range(len(predicted)) if i not in used_p],
    )


def _triple(source: str, rtype: str, target: str) -> tuple[str, str, str]:
    """The comparable form of an edge: normalised names; a thing that belongs-to a person is
    that person's (owns is its inverse); either order for symmetric types."""
    s, t = normalise_entity_name(source), normalise_entity_name(target)
    if rtype == "belongs-to":
        rtype, s, t = "owns", t, s
    if rtype in SYMMETRIC_TYPES:
        s, t = sorted((s, t))
    return s, rtype, t


def turns_of(conversation: dict[str, Any]) -> list[Turn]:
    """The conversation's turns, a minute apart from noon (UTC) of its date."""
    start = datetime.fromisoformat(conversation["date"]).replace(hour=12, tzinfo=UTC)
    base = int(start.timestamp() * 1000)
    return [
        Turn(role=t["role"], content=t["content"], name=t.get("name"), timestamp=base + i * 60_000)
        for i, t in enumerate(conversation["turns"])
    ]


def predict(turns: list[Turn], recognizer: EntityRecognizer, relations: RelationExtractor) -> Prediction:
    """Facts, preferences, entities and relationships as the ingestion path derives them."""
    found = extract(turns)
    episode = build_episode("eval", "eval", turns, ExtractiveSummariser()).episode
    text = entity_text(episode)
    mentions = recognizer.recognize_many([text])[0]
    entities = [
        ({c.key, *(normalise_entity_name(a) for a in c.aliases)}, str(c.type), c.name)
        for c in collect_entities(mentions)
    ]
    edges = [(r.source, r.type, r.target) for r in relations.extract(text, mentions)]
    return Prediction(found.facts, found.preferences, entities, edges)


def score_one(conversation: dict[str, Any], pred: Prediction, report: Report) -> None:
    """Add one conversation's matches to ``report``."""
    gold = conversation["gold"]
    detail: dict[str, Any] = {"id": conversation["id"]}
    for kind in ("facts", "preferences"):
        got: list[str] = getattr(pred, kind)
        tp, missed, wrong = match_statements(gold[kind], got)
        report.counts[kind].add(tp, len(got), len(gold[kind]))
        detail[kind] = {"missed": [gold[kind][i]["text"] for i in missed], "extra": [got[i] for i in wrong]}
    gold_entities = {(normalise_entity_name(e["name"]), e["type"]): e["name"] for e in gold["entities"]}
    hits = {g for g in gold_entities for keys, etype, _ in pred.entities if g[0] in keys and g[1] == etype}
    extra = [
        f"{name} ({etype})"
        for keys, etype, name in pred.entities
        if not any(k in keys and t == etype for k, t in gold_entities)
    ]
    report.counts["entities"].add(len(hits), len(pred.entities), len(gold_entities))
    detail["entities"] = {
        "missed": [f"{n} ({t})" for (k, t), n in gold_entities.items() if (k, t) not in hits],
        "extra": extra,
    }
    gold_edges = {_triple(r["source"], r["type"], r["target"]) for r in gold["relationships"]}
    got_edges = {_triple(*e) for e in pred.relationships}
    report.counts["relationships"].add(len(gold_edges & got_edges), len(got_edges), len(gold_edges))
    detail["relationships"] = {
        "missed": [" ".join(e) for e in sorted(gold_edges - got_edges)],
        "extra": [" ".join(e) for e in sorted(got_edges - gold_edges)],
    }
    report.details.append(detail)


def evaluate(
    conversations: Iterable[dict[str, Any]],
    recognizer: EntityRecognizer,
    relations: RelationExtractor,
) -> Report:
    """Scores of one extractor over ``conversations`` (the model loads before the clock starts)."""
    report = Report()
    recognizer.recognize_many(["warm up"])
    for conversation in conversations:
        started = time.perf_counter()
        pred = predict(turns_of(conversation), recognizer, relations)
        report.seconds += time.perf_counter() - started
        report.episodes += 1
        score_one(conversation, pred, report)
    return report


def load_set(path: Path = SET_PATH, split: str = "all", limit: int | None = None) -> list[dict[str, Any]]:
    """The labelled conversations of ``split`` (``dev``, ``test`` or ``all``), the first ``limit``."""
    conversations = json.loads(path.read_text(encoding="utf-8"))["conversations"]
    chosen = [c for c in conversations if split == "all" or c["split"] == split]
    return chosen[:limit] if limit else chosen


def table(reports: dict[str, Report]) -> str:
    """A markdown table: one row per kind, P / R / F1 per extractor."""
    names = list(reports)
    head = "| kind | " + " | ".join(f"{n} P | {n} R | {n} F1" for n in names) + " |"
    rule = "|---|" + "---:|" * (3 * len(names))
    rows = [head, rule]
    for kind in KINDS:
        cells = []
        for name in names:
            c = reports[name].counts[kind]
            cells += [f"{c.precision:.2f}", f"{c.recall:.2f}", f"{c.f1:.2f}"]
        rows.append(f"| {kind} | " + " | ".join(cells) + " |")
    speed = [f"{r.episodes / r.seconds:.1f}" if r.seconds else "-" for r in reports.values()]
    rows.append("| episodes/s | " + " | ".join(f"{s} | | " for s in speed) + " |")
    return "\n".join(rows)


def _llm_relations(args: argparse.Namespace) -> RelationExtractor:
    if args.llm_provider == "ollama":
        return LLMRelationExtractor(OllamaProvider("ollama", args.llm_model, args.llm_url, "", args.llm_timeout))
    provider = OpenAICompatibleProvider("openai", args.llm_model, args.llm_url, args.llm_api_key, args.llm_timeout)
    return LLMRelationExtractor(provider)


def _floors(specs: Sequence[str]) -> dict[str, float]:
    out: dict[str, float] = {}
    for spec in specs:
        kind, _, value = spec.partition("=")
        if kind not in KINDS:
            raise SystemExit(f"--min-f1: unknown kind {kind!r} (use {', '.join(KINDS)})")
        out[kind] = float(value)
    return out


def main(argv: Sequence[str] | None = None, out: Callable[[str], None] = print) -> int:
    """Print the tables; 1 when a built-in F1 is below a ``--min-f1`` floor."""
    ap = argparse.ArgumentParser(description=__doc__.split("\n", 1)[0])
    ap.add_argument("--dataset", type=Path, default=SET_PATH)
    ap.add_argument("--split", choices=("dev", "test", "all", "both"), default="both")
    ap.add_argument("--limit", type=int, default=None, help="first N conversations of each split")
    ap.add_argument("--details", action="store_true", help="print the misses and extras per conversation")
    ap.add_argument("--llm-url", default="", help="LLM slot base URL (Ollama, or OpenAI-compatible .../v1)")
    ap.add_argument("--llm-provider", choices=("ollama", "openai"), default="ollama")
    ap.add_argument("--llm-model", default="llama3.1")
    ap.add_argument("--llm-api-key", default="")
    ap.add_argument("--llm-timeout", type=float, default=120.0)
    ap.add_argument("--min-f1", action="append", default=[], metavar="KIND=F1", help="fail below this F1")
    args = ap.parse_args(argv)
    floors = _floors(args.min_f1)
    recognizer = build_recognizer()
    extractors: dict[str, RelationExtractor] = {"builtin": build_relation_extractor()}
    if args.llm_url:
        extractors["llm"] = _llm_relations(args)
    out(f"NER: {recognizer.name}")
    splits = ("dev", "test") if args.split == "both" else (args.split,)
    failed = False
    for split in splits:
        conversations = load_set(args.dataset, split, args.limit)
        reports = {name: evaluate(conversations, recognizer, rel) for name, rel in extractors.items()}
        out(f"\n### {split} ({len(conversations)} conversations)\n")
        out(table(reports))
        if args.details:
            out(json.dumps(reports["builtin"].details, indent=1, ensure_ascii=False))
        for kind, floor in floors.items():
            f1 = reports["builtin"].counts[kind].f1
            if f1 < floor:
                out(f"FAIL {split}: {kind} F1 {f1:.2f} < {floor:.2f}")
                failed = True
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
