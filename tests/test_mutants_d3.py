"""What kills the survivors of the whole-core sample at 0137151 (seed 1207, 20 a module; issue 20, docs/testing.md):
``bm25._kept``'s upper length bound, which only :func:`agtos.tasks.bm25.legacy_terms` reaches since tokenizer
version 5 (``upgraded_term`` checks the length itself). Literals from the version-2 tokenizer's rule (terms of
2-64 characters, marks dropped: "が" = "か" + the combining voicing mark U+3099)."""

from __future__ import annotations

from agtos.tasks.bm25 import legacy_terms


def test_a_marked_query_term_of_64_letters_also_looks_up_its_v2_form_and_one_of_65_none() -> None:
    """Version 2 stored a word of 64 kana as its 64 unmarked letters (a term: 2-64 characters kept) and dropped
    one of 65: a query term of 64 "が" also looks up 64 "か", one of 65 looks up nothing."""
    assert legacy_terms(["\u304c" * 64]) == ["\u304b" * 64]
    assert legacy_terms(["\u304c" * 65]) == []
