"""A long matched turn's line (issue 14, 5b6bf7e): a matched sentence that introduces what follows (ends
with a colon) brings the sentences under it, in order, while the line's token allowance lasts, each
sentence costing its tokens and one for what joins it; nothing before the heading comes with it.

Token counts come from the `tokenizers` library reading the MiniLM vocabulary directly (the line's unit),
not from the code under test; query terms from the BM25 tokenizer the context uses for its queries.
"""

from __future__ import annotations

from tokenizers import Tokenizer

from agtos.tasks.bm25 import query_terms
from agtos.tasks.context import focus
from agtos.tasks.tokens import TOKENIZER_PATH

TERMS = frozenset(query_terms("Which hotels in Porto did you suggest?"))
HEADING = "Here are some hotels in Porto:"
ITEMS = [
    "- Casa Mirador has a rooftop terrace over the old town.",
    "- Pension Adler includes a generous breakfast buffet.",
    "- Saltworks lends bicycles to guests for free.",
    "- Inn.",
    "- Villa Serena has a small spa with a sauna and a plunge pool, and prices go up during festivals.",
    "- Granary Suites has family rooms with two separate bedrooms and a garden for the children.",
]


COUNTER = Tokenizer.from_file(str(TOKENIZER_PATH))
COUNTER.no_truncation()
COUNTER.no_padding()


def tokens(text: str) -> int:
    return len(COUNTER.encode(text, add_special_tokens=False).ids)


def shown(line: str) -> list[str]:
    return [item for item in ITEMS if item in line]


def test_the_heading_brings_the_items_under_it_in_order_and_nothing_before_it() -> None:
    """ "Porto is lovely in May." also shares a query term (a matched sentence before the heading, that
    does not introduce a list); the long thanks just before the heading matches nothing; the second item
    names a hotel (matched itself). The allowance holds those and every item, not the thanks."""
    items = [ITEMS[0], "- Hotel Adler includes a generous breakfast buffet.", *ITEMS[2:]]
    thanks = "Thanks for asking, it is always a pleasure to help plan a trip like this one with you."
    text = f"Porto is lovely in May. {thanks}\n{HEADING}\n" + "\n".join(items) + "\n"
    allowance = sum(tokens(s) + 1 for s in ["Porto is lovely in May.", HEADING, *items])
    assert tokens(text) > allowance
    line = focus(text, TERMS, allowance, fill=True)
    assert line.startswith("Porto is lovely in May. … Here are some hotels in Porto:")
    assert "Thanks for asking" not in line
    assert [item for item in items if item in line] == items  # from the first, past the matched one


def test_the_items_fill_the_allowance_to_the_token() -> None:
    """The line holds the heading and then items while each one's tokens + 1 still fit: an allowance of
    exactly heading + three items takes three (the short fourth, 3 tokens, does not fit in what is
    left: nothing); one token less takes two; the whole allowance is never passed."""
    text = HEADING + "\n" + "\n".join(ITEMS) + "\n"
    cost = [tokens(s) + 1 for s in [HEADING, *ITEMS]]
    assert tokens(ITEMS[3]) == 3 and sum(cost) > tokens(text)  # the short item; the text needs cutting
    exact = sum(cost[:4])
    assert shown(focus(text, TERMS, exact, fill=True)) == ITEMS[:3]
    assert shown(focus(text, TERMS, exact - 1, fill=True)) == ITEMS[:2]
    assert shown(focus(text, TERMS, exact + cost[4], fill=True)) == ITEMS[:4]
    assert shown(focus(text, TERMS, exact)) == []  # a neighbour's line (no fill): the heading alone
    for allowance in range(cost[0], sum(cost) - 1):
        line = focus(text, TERMS, allowance, fill=True)
        assert tokens(line.removesuffix(" …")) <= allowance, allowance
