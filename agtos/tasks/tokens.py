"""Token counting with the embedding model's real WordPiece tokenizer."""

from __future__ import annotations

import hashlib
from functools import lru_cache
from pathlib import Path

from tokenizers import Tokenizer

TOKENIZER_PATH = Path(__file__).resolve().parent.parent / "models" / "minilm" / "tokenizer.json"
#: counts remembered (by a digest of the text) before the memo starts afresh
COUNT_MEMO_SIZE = 16_384
_counts: dict[bytes, int] = {}


@lru_cache(maxsize=1)
def load_tokenizer() -> Tokenizer:
    """The all-MiniLM-L6-v2 tokenizer shipped inside this package, for counting (no truncation).

    Embedders load their own instance, since they configure truncation and padding.
    """
    tokenizer = Tokenizer.from_file(str(TOKENIZER_PATH))
    tokenizer.no_truncation()
    tokenizer.no_padding()
    return tokenizer


def count_tokens(text: str) -> int:
    """Number of tokens ``text`` takes, without special tokens and without truncation. Counts are
    memoised by a 16-byte digest of the text (a context counts the same dated lines again on every
    call; tokenizing one costs ~100 µs), so the text itself is not kept."""
    if not text:
        return 0
    key = hashlib.blake2b(text.encode(), digest_size=16).digest()
    count = _counts.get(key)
    if count is None:
        count = len(load_tokenizer().encode(text, add_special_tokens=False).ids)
        if len(_counts) >= COUNT_MEMO_SIZE:
            _counts.clear()
        _counts[key] = count
    return count
