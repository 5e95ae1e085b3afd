"""A long unpunctuated turn cut to the budget where its query terms are closest (issue 20, helper m2's survivor).

``focus`` keeps a long sentence's densest run of query terms when no sentence fits: it looks for the most
distinct terms within a window of 3 × the token budget in characters (``context.py``: ``3 * max_tokens``), a
little more than the ~4 characters a token the budget then shows. With a budget of 50 tokens that window is
150 characters: two terms 170 characters apart are not one run, two 140 apart are, so the later pair is shown.
A wider window (``4 * max_tokens``, mutmut's ``focus`` 66) would join the earlier pair and show it instead.
"""

from __future__ import annotations

from agtos.tasks.context import focus

FILLER = "walked along the old river road "  # 32 characters, none of them a query term


def laid_out(words: dict[int, str], length: int) -> str:
    """Filler words with each of ``words`` placed at (about) its character position, no sentence break."""
    text = ""
    for position, word in sorted(words.items()):
        while len(text) + len(FILLER) <= position:
            text += FILLER
        text += " " * (position - len(text)) + word + " "
    while len(text) < length:
        text += FILLER
    return text.strip()


def test_a_long_sentence_shows_the_terms_within_three_times_the_budget_in_characters() -> None:
    text = laid_out({300: "zebra", 470: "quokka", 1000: "narwhal", 1140: "axolotl"}, 1400)
    assert (text.index("quokka") - text.index("zebra"), text.index("axolotl") - text.index("narwhal")) == (170, 140)
    shown = focus(text, frozenset({"zebra", "quokka", "narwhal", "axolotl"}), 50)
    assert "narwhal" in shown and "axolotl" in shown
    assert "zebra" not in shown and "quokka" not in shown
    assert shown.startswith("…") and shown.endswith("…")  # cut inside the text at both ends
