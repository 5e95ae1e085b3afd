"""Pair-selection timing: prefix-filtered DuckDB/Polars join vs the naive double loop.

Run: ``.venv/bin/python benchmarks/pair_selection_bench.py [sizes...]`` (default 5000 10000 100000;
the naive baseline runs only up to ``--naive-max``, default 5000).
"""

from __future__ import annotations

import argparse
import random
import time

from agtos.tasks.pair_selection import naive_pairs, pairs_as_tuples, redundant_pairs

SUBJECTS = ["User", "The user", "They", "Alex", "She", "He"]
VERBS = ["prefers", "likes", "uses", "works on", "lives near", "avoids", "is learning", "often mentions"]
FILLERS = ["the", "a", "for", "with", "at", "in", "on", "and", "during", "every", "when", "because"]


def corpus(n: int, seed: int = 7, dup_rate: float = 0.05, vocab_size: int = 50_000) -> list[str]:
    """Sentence-like texts over a Zipf-ish vocabulary, with ``dup_rate`` planted near-duplicates."""
    rng = random.Random(seed)
    vocab = [f"term{i}" for i in range(vocab_size)]
    weights = [1.0 / (i + 1) for i in range(vocab_size)]
    texts: list[str] = []
    for _ in range(n):
        if texts and rng.random() < dup_rate:
            tokens = rng.choice(texts).split()
            edit = rng.random()
            if edit < 0.4:
                tokens.append(rng.choice(vocab))  # one extra word: J = k/(k+1)
            elif edit < 0.7:
                rng.shuffle(tokens)  # same set: J = 1
            else:
                tokens[rng.randrange(len(tokens))] = rng.choice(vocab)  # substitution: usually < t
            texts.append(" ".join(tokens))
            continue
        words = [rng.choice(SUBJECTS), rng.choice(VERBS)]
        body = rng.choices(vocab, weights=weights, k=rng.randint(4, 14))
        for w in body:
            words.append(w)
            if rng.random() < 0.3:
                words.append(rng.choice(FILLERS))
        texts.append(" ".join(words) + ".")
    return texts


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("sizes", nargs="*", type=int, default=[5_000, 10_000, 100_000])
    parser.add_argument("--naive-max", type=int, default=5_000)
    parser.add_argument("--threshold", type=float, default=0.85)
    args = parser.parse_args()
    for n in args.sizes:
        texts = corpus(n)
        ids = [f"con-{i:06d}" for i in range(n)]
        redundant_pairs(ids[:100], texts[:100], args.threshold)  # warm imports / DuckDB
        t0 = time.perf_counter()
        fast = redundant_pairs(ids, texts, args.threshold)
        fast_s = time.perf_counter() - t0
        line = f"n={n:>7}  batch={fast_s:7.3f}s  pairs={fast.height}"
        if n <= args.naive_max:
            t0 = time.perf_counter()
            slow = naive_pairs(ids, texts, args.threshold)
            slow_s = time.perf_counter() - t0
            line += f"  naive={slow_s:7.2f}s  same={pairs_as_tuples(fast) == slow}"
        print(line, flush=True)


if __name__ == "__main__":
    main()
