"""Token counting with the embedding model's real WordPiece tokenizer."""

from __future__ import annotations

from functools import lru_cache
from pathlib import Path

from tokenizers import Tokenizer

TOKENIZER_PATH = Path(__file__).resolve().parent.parent / "models" / "minilm" / "tokenizer.json"


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
    """Number of tokens ``text`` takes, without special tokens and without truncation."""
    if not text:
        return 0
    return len(load_tokenizer().encode(text, add_special_tokens=False).ids)
