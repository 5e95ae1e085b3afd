"""NER (real spaCy model + rules, and the regex fallback) and relation extraction (patterns, LLM)."""

from __future__ import annotations

import json
import logging
import threading

import pytest

from agtos.providers.llm import LLMError
from agtos.schemas import EntityType
from agtos.tasks.mentions import Mention, collect_entities, normalise_entity_name
from agtos.tasks.ner import SpacyRecognizer, build_recognizer
from agtos.tasks.ner_rules import RuleRecognizer
from agtos.tasks.relation_patterns import PatternRelationExtractor
from agtos.tasks.relation_types import RELATION_TYPES, ExtractedRelation, sentence_spans
from agtos.tasks.relations import LLMRelationExtractor, build_relation_extractor, parse_llm_relations

SENTENCE = "Alice works at Acme Corp in Berlin; her project Falcon is due Friday."


@pytest.fixture(scope="module")
def model() -> SpacyRecognizer:
    recognizer = build_recognizer()
    assert isinstance(recognizer, SpacyRecognizer), "the spaCy NER model must be installed"
    return recognizer


def by_text(mentions: list[Mention]) -> dict[str, Mention]:
    return {m.text: m for m in mentions}


def triples(relations: list[ExtractedRelation]) -> set[tuple[str, str, str]]:
    return {(r.type, r.source, r.target) for r in relations}


# --------------------------------------------------------------------------- NER


def test_model_recognizer_finds_every_entity(model: SpacyRecognizer) -> None:
    found = by_text(model.recognize(SENTENCE))
    assert model.name.startswith("spacy:en_core_web_sm")
    assert found["Alice"].type == EntityType.person and found["Alice"].label == "PERSON"
    assert found["Acme Corp"].type == EntityType.organization and found["Acme Corp"].label == "ORG"
    assert found["Berlin"].type == EntityType.place
    assert found["Falcon"].type == EntityType.thing and found["Falcon"].label == "PROJECT"
    assert found["Friday"].type == EntityType.event and found["Friday"].label == "DEADLINE"
    for m in found.values():
        assert SENTENCE[m.start : m.end] == m.text
        assert 0.0 < m.confidence <= 1.0


def test_rules_fix_model_mistakes(model: SpacyRecognizer) -> None:
    tools = by_text(model.recognize("We deploy with Docker and Kubernetes for the launch on March 3."))
    assert tools["Docker"].type == EntityType.thing and tools["Docker"].label == "TOOL"  # model: PERSON
    assert tools["Kubernetes"].label == "TOOL"
    assert tools["launch"].type == EntityType.event and tools["March 3"].label == "DEADLINE"
    friend = by_text(model.recognize("Bob lives in Paris and is a friend of Carol."))
    assert friend["Carol"].type == EntityType.person  # model: ORG
    owner = by_text(model.recognize("Alice's project Falcon ships next Friday. She lives in Kreuzberg."))
    assert owner["Alice"].type == EntityType.person  # model: ORG; the "She" agrees
    assert owner["next Friday"].label == "DEADLINE"
    stack = by_text(model.recognize("John Smith is the CTO of Initech; we build it in React Native and Postgres."))
    assert "CTO" not in stack  # the model's ORG for a job title is dropped
    assert stack["React Native"].label == "TOOL" and stack["Postgres"].label == "TOOL"  # model: one ORG


def test_the_falcon_project_and_plain_dates(model: SpacyRecognizer) -> None:
    found = by_text(model.recognize("The deadline for the Falcon project is March 3. We met last year."))
    assert found["Falcon"].label == "PROJECT"
    assert found["March 3"].label == "DEADLINE"
    assert "last year" not in found  # a DATE not bound to a deadline is no entity


def test_recognize_many_and_threads(model: SpacyRecognizer) -> None:
    texts = [SENTENCE, "Dana joined Google last year.", ""]
    batched = model.recognize_many(texts)
    assert batched[0] == model.recognize(SENTENCE)
    assert [m.text for m in batched[1]] == ["Dana", "Google"]
    assert batched[2] == []
    results: list[list[Mention]] = []
    workers = [threading.Thread(target=lambda: results.append(model.recognize(SENTENCE))) for _ in range(4)]
    for w in workers:
        w.start()
    for w in workers:
        w.join()
    assert all(r == batched[0] for r in results)


def test_normalise_entity_name() -> None:
    assert normalise_entity_name("Acme Corp") == normalise_entity_name("Acme") == "acme"
    assert normalise_entity_name("ACME Corp.") == normalise_entity_name("the Acme, Inc.") == "acme"
    assert normalise_entity_name("Siemens AG") == normalise_entity_name("siemens gmbh")
    assert normalise_entity_name("München") == "munchen"
    assert normalise_entity_name("Alice's") == "alice"
    assert normalise_entity_name("Corp") == "corp"  # never normalised to nothing
    assert normalise_entity_name("C++") != normalise_entity_name("C")


def test_collect_entities_merges_aliases() -> None:
    mentions = [
        Mention("Acme Corp", EntityType.organization, 0, 9, 0.8, "ORG"),
        Mention("Acme", EntityType.organization, 20, 24, 0.8, "ORG"),
        Mention("Alice", EntityType.person, 30, 35, 0.85, "PERSON"),
    ]
    entities = {e.key: e for e in collect_entities(mentions)}
    assert entities["acme"].name == "Acme Corp" and entities["acme"].aliases == ["Acme"]
    assert entities["alice"].type == EntityType.person


def test_fallback_recognizer_on_the_same_sentence() -> None:
    fallback = RuleRecognizer()
    found = by_text(fallback.recognize(SENTENCE))
    assert fallback.name == "rules-fallback"
    assert found["Alice"].type == EntityType.person
    assert found["Acme Corp"].type == EntityType.organization
    assert found["Berlin"].type == EntityType.place
    assert found["Falcon"].label == "PROJECT"
    assert found["Friday"].label == "DEADLINE"
    relations = PatternRelationExtractor().extract(SENTENCE, list(found.values()))
    assert {
        ("works-at", "Alice", "Acme Corp"),
        ("located-in", "Acme Corp", "Berlin"),
        ("belongs-to", "Falcon", "Alice"),
        ("due", "Falcon", "Friday"),
    } <= triples(relations)


def test_missing_model_falls_back_with_a_warning(caplog: pytest.LogCaptureFixture) -> None:
    with caplog.at_level(logging.WARNING, logger="agtos.tasks.ner"):
        lazy = SpacyRecognizer(packages=("no_such_spacy_model_pkg",))
        mentions = lazy.recognize(SENTENCE)
    assert lazy.name == "rules-fallback"
    assert "regex fallback" in caplog.text
    assert {"Alice", "Acme Corp", "Falcon"} <= {m.text for m in mentions}


# --------------------------------------------------------------------------- relations


def test_relations_on_the_reference_sentence(model: SpacyRecognizer) -> None:
    relations = PatternRelationExtractor().extract(SENTENCE, model.recognize(SENTENCE))
    assert triples(relations) == {
        ("works-at", "Alice", "Acme Corp"),
        ("located-in", "Acme Corp", "Berlin"),
        ("belongs-to", "Falcon", "Alice"),
        ("due", "Falcon", "Friday"),
    }
    assert all(r.sentence == SENTENCE and 0.0 < r.confidence <= 1.0 for r in relations)
    assert all(r.type in RELATION_TYPES for r in relations)


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        (
            "Bob lives in Paris and is a friend of Carol.",
            {("lives-in", "Bob", "Paris"), ("knows", "Bob", "Carol")},
        ),
        (
            "Dana joined Google last year. She lives in Zurich.",
            {("works-at", "Dana", "Google"), ("lives-in", "Dana", "Zurich")},
        ),
        ("Alice is friends with Bob.", {("knows", "Alice", "Bob")}),
        ("Sarah and Mike are colleagues.", {("knows", "Sarah", "Mike")}),
        ("Tom's wife Anna works at Siemens.", {("spouse", "Tom", "Anna"), ("works-at", "Anna", "Siemens")}),
        (
            "Acme Corp. is headquartered in Munich, Germany.",
            {("located-in", "Acme Corp", "Munich"), ("located-in", "Munich", "Germany")},
        ),
        ("The deadline for the Falcon project is March 3.", {("has-deadline", "Falcon", "March 3")}),
        (
            "Mark leads project Orion, which is due on March 15.",
            {("belongs-to", "Orion", "Mark"), ("due", "Orion", "March 15")},
        ),
        ("Alice met Bob and lives in Paris.", {("knows", "Alice", "Bob"), ("lives-in", "Alice", "Paris")}),
    ],
)
def test_relation_patterns(model: SpacyRecognizer, text: str, expected: set[tuple[str, str, str]]) -> None:
    assert triples(PatternRelationExtractor().extract(text, model.recognize(text))) == expected


def test_sentence_spans_keep_abbreviations_together() -> None:
    text = "Acme Corp. is in Berlin. Mr. Smith met Alice!\nNew line"
    assert [text[s:e].strip() for s, e in sentence_spans(text)] == [
        "Acme Corp. is in Berlin.",
        "Mr. Smith met Alice!",
        "New line",
    ]


# --------------------------------------------------------------------------- LLM extraction


class FakeLLM:
    """A chat provider that answers a fixed reply (or raises) and records the request."""

    name = "fake"
    model = "fake-1"

    def __init__(self, reply: str | Exception) -> None:
        self.reply = reply
        self.calls: list[tuple[list[dict[str, str]], bool]] = []

    def chat(self, messages: list[dict[str, str]], *, json_mode: bool = False) -> str:
        self.calls.append((messages, json_mode))
        if isinstance(self.reply, Exception):
            raise self.reply
        return self.reply


def _mentions() -> list[Mention]:
    return RuleRecognizer().recognize(SENTENCE)


def test_llm_extractor_keeps_valid_items() -> None:
    reply = json.dumps(
        {
            "relationships": [
                {"source": "Alice", "target": "Acme Corp", "type": "works-at", "confidence": 0.9},
                {"source": "Acme", "target": "Berlin", "type": "located_in", "confidence": 1},
                {"source": "Falcon", "target": "Alice", "type": "belongs-to"},
            ]
        }
    )
    llm = FakeLLM(reply)
    extractor = build_relation_extractor(llm)
    assert isinstance(extractor, LLMRelationExtractor)
    relations = extractor.extract(SENTENCE, _mentions())
    assert triples(relations) == {
        ("works-at", "Alice", "Acme Corp"),
        ("located-in", "Acme Corp", "Berlin"),  # alias resolved, underscore type normalised
        ("belongs-to", "Falcon", "Alice"),
    }
    assert {r.confidence for r in relations} == {0.9, 1.0, 0.5}  # missing confidence -> default
    assert all(r.sentence == SENTENCE for r in relations)
    messages, json_mode = llm.calls[0]
    assert json_mode and "works-at" in messages[0]["content"] and "- Falcon (thing)" in messages[1]["content"]


def test_llm_extractor_drops_invalid_items() -> None:
    reply = json.dumps(
        {
            "relationships": [
                {"source": "Alice", "target": "Acme Corp", "type": "works-at", "confidence": 0.8},
                {"source": "Alice", "target": "Globex", "type": "works-at", "confidence": 0.8},  # unknown
                {"source": "Alice", "target": "Berlin", "type": "visited", "confidence": 0.8},  # bad type
                {"source": "Alice", "target": "Falcon", "type": "works-at", "confidence": 0.8},  # bad types
                {"source": "Alice", "target": "Berlin", "type": "lives-in", "confidence": 1.5},  # range
                {"source": "Alice", "target": "Berlin", "type": "lives-in", "confidence": "high"},
                {"source": "Alice", "target": "Berlin", "type": "lives-in", "confidence": True},
                {"source": "Alice", "target": "Alice", "type": "knows", "confidence": 0.5},  # self
                {"source": ["Alice"], "target": "Berlin", "type": "lives-in"},
                "Alice works at Acme",
            ]
        }
    )
    relations = LLMRelationExtractor(FakeLLM(reply)).extract(SENTENCE, _mentions())
    assert triples(relations) == {("works-at", "Alice", "Acme Corp")}


@pytest.mark.parametrize(
    "reply",
    ["this is not json", '{"relations": "nope"}', '```json\n{"relationships": 3}\n```', LLMError("down")],
)
def test_llm_extractor_falls_back_to_patterns(reply: str | Exception, caplog: pytest.LogCaptureFixture) -> None:
    mentions = _mentions()
    with caplog.at_level(logging.WARNING, logger="agtos.tasks.relations"):
        relations = LLMRelationExtractor(FakeLLM(reply)).extract(SENTENCE, mentions)
    assert triples(relations) == triples(PatternRelationExtractor().extract(SENTENCE, mentions))
    assert ("due", "Falcon", "Friday") in triples(relations)
    assert "LLM relation extraction failed" in caplog.text


def test_llm_reply_in_a_fence_and_empty_list() -> None:
    fenced = '```json\n{"relationships": [{"source": "Falcon", "target": "Friday", "type": "due"}]}\n```'
    assert triples(parse_llm_relations(fenced, SENTENCE, _mentions())) == {("due", "Falcon", "Friday")}
    assert parse_llm_relations('{"relationships": []}', SENTENCE, _mentions()) == []
    llm = FakeLLM("{}")
    assert LLMRelationExtractor(llm).extract("Alice.", [Mention("Alice", EntityType.person, 0, 5, 0.8, "PERSON")]) == []
    assert llm.calls == []  # fewer than two entities: no request
