"""NER rules for issue 16's entity typing: named events, holidays and exams, products, languages,
employers after a job title, meal venues, sports teams, and places by context - each on the real
spaCy model, where the model alone misses or mistypes them."""

from __future__ import annotations

import pytest

from agtos.schemas import EntityType
from agtos.tasks.ner import SpacyRecognizer, build_recognizer
from agtos.tasks.ner_rules import RuleRecognizer


@pytest.fixture(scope="module")
def model() -> SpacyRecognizer:
    recognizer = build_recognizer()
    assert isinstance(recognizer, SpacyRecognizer), "the spaCy NER model must be installed"
    return recognizer


def types(recognizer: SpacyRecognizer | RuleRecognizer, text: str) -> dict[str, EntityType]:
    return {m.text: m.type for m in recognizer.recognize(text)}


E, T, ORG, P, H = EntityType.event, EntityType.thing, EntityType.organization, EntityType.place, EntityType.person


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        # events: a name ending in an event word, a name before an event noun, holidays, exams
        ("I'm training for the Berlin Marathon.", {"Berlin Marathon": E}),
        ("I met Maria at the Web Summit in Lisbon.", {"Maria": H, "Web Summit": E, "Lisbon": P}),
        ("I am going to the ROSCon conference in Odense.", {"ROSCon": E, "Odense": P}),
        ("We're celebrating Mother's Day in Paris this year.", {"Mother's Day": E, "Paris": P}),
        ("We spent Christmas with my parents in Leeds.", {"Christmas": E, "Leeds": P}),
        ("I'm studying for the DELF B2 in December.", {"DELF B2": E}),
        # products: brand + name, camel case in a product context, a model code with a suffix
        ("I use Apple Music on the train to Lisbon.", {"Apple Music": T, "Lisbon": P}),
        (
            "I sketch everything in FigJam on my ThinkPad X1 Carbon with the M2 Max chip.",
            {"FigJam": T, "ThinkPad X1 Carbon": T, "M2 Max": T},
        ),
        ("I bought a new iPad 10 last week.", {"iPad 10": T}),
        ("I got a Sony A7 IV for my birthday.", {"Sony A7 IV": T}),
        # languages learnt or spoken (not "Japanese food")
        ("I'm learning Korean with a tutor.", {"Korean": T}),
        # organisations: employer after a job title, a meal venue, a sports team
        ("My sister is a consultant at Deloitte in Dublin.", {"Deloitte": ORG, "Dublin": P}),
        ("We had dinner at Zuma last night.", {"Zuma": ORG}),
        ("We watched the Lakers game at a bar on Friday night.", {"Lakers": ORG}),
        # places the model calls people, by the words before them
        ("I'm training for a half marathon in Valencia on March 3rd.", {"Valencia": P}),
        ("My cousin Nina went hiking in the Dolomites with Marco.", {"Nina": H, "Dolomites": P, "Marco": H}),
    ],
)
def test_context_rules_type_what_the_model_misses(
    model: SpacyRecognizer, text: str, expected: dict[str, EntityType]
) -> None:
    assert types(model, text) == expected


def test_context_rules_leave_people_and_attributes_alone(model: SpacyRecognizer) -> None:
    assert types(model, "We visited Grandma in Leeds.") == {"Grandma": H, "Leeds": P}  # kin: still a person
    assert "Korean" not in types(model, "We had Korean food with Omar.")  # an attribute, no language
    assert types(model, "I booked my Portuguese class for Thursday.") == {}  # a class, not a language learnt
    assert "March 3" not in types(model, "Chapter 3 is due in March.")
    venue = {m.text: m.label for m in model.recognize("We had dinner at Maria's place.")}
    assert venue.get("Maria") != "ORG_RULE"  # a possessive is no venue (whatever the model says)


def test_the_fallback_uses_the_same_rules() -> None:
    found = types(RuleRecognizer(), "Priya is a data engineer at Feedzai and runs the Lisbon Marathon.")
    assert found["Feedzai"] == ORG and found["Lisbon Marathon"] == E
