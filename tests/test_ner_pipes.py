"""The NER runs spaCy's ``ner`` pipe alone (issue 14, item 8: ingestion throughput): the package's
shared ``tok2vec`` feeds none of the pipes kept, so running it was a third of the NER time for
nothing. The entities must be those of the package's whole pipeline, as spaCy loads it."""

from __future__ import annotations

import importlib

import pytest

from agtos.tasks.ner import load_spacy_model, without_unheard_tok2vec

LINES = [
    "Ada Lovelace met Bob in Paris on Friday.",
    "Gina: My landlord finally fixed the heating, so I'm off to Lisbon with Jon next month.",
    "Caroline works at Google in Mountain View and visits the Louvre every May.",
    "Jon's grandma's shepherd's pie, nothing beats it",
]


def ents(nlp: object, text: str) -> list[tuple[str, str]]:
    return [(e.text, e.label_) for e in nlp(text).ents]  # type: ignore[operator]


@pytest.fixture(scope="module")
def loaded() -> tuple[str, object]:
    try:
        return load_spacy_model()
    except RuntimeError:
        pytest.fail("the spaCy NER model must be installed")


def test_only_the_ner_pipe_runs_and_finds_what_the_whole_pipeline_finds(loaded: tuple[str, object]) -> None:
    package, nlp = loaded
    assert nlp.pipe_names == ["ner"]  # type: ignore[attr-defined]
    whole = importlib.import_module(package).load()  # spaCy's own load: every pipe, tok2vec included
    assert "tok2vec" in whole.pipe_names
    assert ents(nlp, LINES[0]) == [("Ada Lovelace", "PERSON"), ("Bob", "PERSON"), ("Paris", "GPE"), ("Friday", "DATE")]
    for line in LINES:
        assert ents(nlp, line) == ents(whole, line), line


def test_a_tok2vec_that_pipes_listen_to_is_kept(loaded: tuple[str, object]) -> None:
    package, _ = loaded
    whole = importlib.import_module(package).load()  # its tagger and parser listen to tok2vec
    without_unheard_tok2vec(whole)
    assert "tok2vec" in whole.pipe_names
    assert ents(whole, LINES[0])[0] == ("Ada Lovelace", "PERSON")
