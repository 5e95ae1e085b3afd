"""count_tokens memoises counts by a digest of the text: same answers as the tokenizer, bounded, no text kept."""

from __future__ import annotations

import pytest
from tokenizers import Tokenizer

from agtos.tasks import tokens

TEXTS = ("cat", "qzx", "- [4 Dec 2026] User: I prefer the QZ-4417 keyboard.", "antidisestablishmentarianism")


def reference(text: str) -> int:
    """An independent tokenizer instance from the shipped tokenizer.json (it pads to 128 by default)."""
    tokenizer = Tokenizer.from_file(str(tokens.TOKENIZER_PATH))
    tokenizer.no_padding()
    return len(tokenizer.encode(text, add_special_tokens=False).ids)


def test_memoised_counts_are_the_tokenizer_s_for_each_text_also_after_the_memo_restarts(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setattr(tokens, "COUNT_MEMO_SIZE", 3)
    monkeypatch.setattr(tokens, "_counts", {})
    expected = [reference(t) for t in TEXTS]
    assert expected[:2] == [1, 3]  # texts of one length, different counts: a memo keyed by length mixes them up
    for _ in range(3):  # first counted, then memoised, then counted again after a restart
        assert [tokens.count_tokens(t) for t in TEXTS] == expected
        assert len(tokens._counts) <= 3
    assert tokens.count_tokens("") == 0


def test_the_memo_keeps_digests_not_the_text(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(tokens, "_counts", {})
    secret = "my password is hunter2-zyxtrel"
    tokens.count_tokens(secret)
    assert [len(key) for key in tokens._counts] == [16]
    assert all(b"hunter2" not in key for key in tokens._counts)
