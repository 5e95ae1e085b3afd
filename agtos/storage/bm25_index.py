"""A per-user, per-namespace BM25 index kept in Redis, shared by every API process.

Layout (see :mod:`agtos.storage.index_keys`), under ``…:{namespace}:_idx:bm25:``:

* ``t:{term}``  sorted set ``doc_id -> tf`` (the postings of one term)
* ``len``       hash ``doc_id -> document length`` (HLEN is the document count)
* ``terms``     hash ``doc_id -> its distinct terms, space separated`` (for removal)
* ``stats``     hash ``total -> sum of document lengths``

Writes are optimistic transactions (WATCH on ``terms``), so a re-add replaces a
document atomically even with concurrent writers.
"""

from __future__ import annotations

from collections.abc import Iterator

import redis

from agtos.storage.index_keys import check_namespace, index_key
from agtos.storage.keys import GlobalKeys, check_record_id
from agtos.storage.redis_conn import RedisConnector
from agtos.tasks import bm25

DEFAULT_MAX_POSTINGS = 5_000


class BM25Index:
    """BM25 over one namespace of records; scores follow :mod:`agtos.tasks.bm25`."""

    def __init__(
        self,
        connector: RedisConnector,
        keys: GlobalKeys,
        namespace: str,
        max_postings: int = DEFAULT_MAX_POSTINGS,
    ) -> None:
        """``max_postings``: per query term, only the highest-tf postings are read."""
        self.connector = connector
        self.keys = keys
        self.namespace = check_namespace(namespace)
        self.max_postings = max_postings

    def _key(self, user_id: str, part: str) -> str:
        return index_key(self.keys, user_id, self.namespace, f"bm25:{part}")

    def add(self, user_id: str, doc_id: str, text: str) -> int:
        """Index (or re-index) a document; returns its length in terms (0: not indexed)."""
        check_record_id(doc_id, f"{self.namespace} id")
        tf = bm25.term_frequencies(bm25.tokenize(text))
        doc_len = sum(tf.values())
        terms_key, len_key, stats_key = (self._key(user_id, p) for p in ("terms", "len", "stats"))

        def txn(pipe: redis.client.Pipeline) -> None:
            old_terms = (pipe.hget(terms_key, doc_id) or b"").decode().split()
            old_len = int(pipe.hget(len_key, doc_id) or 0)
            pipe.multi()
            for term in old_terms:
                if term not in tf:
                    pipe.zrem(self._key(user_id, f"t:{term}"), doc_id)
            if doc_len:
                for term, count in tf.items():
                    pipe.zadd(self._key(user_id, f"t:{term}"), {doc_id: count})
                pipe.hset(len_key, doc_id, doc_len)
                pipe.hset(terms_key, doc_id, " ".join(tf))
            else:
                pipe.hdel(len_key, doc_id)
                pipe.hdel(terms_key, doc_id)
            if doc_len != old_len:
                pipe.hincrby(stats_key, "total", doc_len - old_len)

        self.connector.run(lambda r: r.transaction(txn, terms_key))
        return doc_len

    def remove(self, user_id: str, doc_id: str) -> bool:
        """Drop a document's postings; True if it was indexed."""
        terms_key, len_key, stats_key = (self._key(user_id, p) for p in ("terms", "len", "stats"))

        def txn(pipe: redis.client.Pipeline) -> bool:
            raw_terms = pipe.hget(terms_key, doc_id)
            old_len = int(pipe.hget(len_key, doc_id) or 0)
            if raw_terms is None and not old_len:
                return False
            pipe.multi()
            for term in (raw_terms or b"").decode().split():
                pipe.zrem(self._key(user_id, f"t:{term}"), doc_id)
            pipe.hdel(terms_key, doc_id)
            pipe.hdel(len_key, doc_id)
            if old_len:
                pipe.hincrby(stats_key, "total", -old_len)
            return True

        return bool(self.connector.run(lambda r: r.transaction(txn, terms_key, value_from_callable=True)))

    def search(self, user_id: str, query: str, limit: int) -> list[tuple[str, float]]:
        """Best-first ``(doc_id, bm25 score)``; only documents matching a query term."""
        terms = bm25.query_terms(query)
        if not terms or limit <= 0:
            return []
        len_key, stats_key = self._key(user_id, "len"), self._key(user_id, "stats")

        def fetch_postings(r: redis.Redis) -> list:
            pipe = r.pipeline(transaction=True)  # one consistent snapshot, one round trip
            pipe.hlen(len_key)
            pipe.hget(stats_key, "total")
            for term in terms:
                key = self._key(user_id, f"t:{term}")
                pipe.zcard(key)
                pipe.zrevrange(key, 0, self.max_postings - 1, withscores=True)
            return pipe.execute()

        n_docs_raw, total_raw, *term_rows = self.connector.run(fetch_postings)
        n_docs = int(n_docs_raw)
        if not n_docs:
            return []
        postings: dict[str, tuple[int, dict[str, float]]] = {}
        for i, term in enumerate(terms):
            df, rows = int(term_rows[2 * i]), term_rows[2 * i + 1]
            if df:
                postings[term] = (df, {doc.decode(): float(tf) for doc, tf in rows})
        candidates = sorted({doc for _, tfs in postings.values() for doc in tfs})
        if not candidates:
            return []
        raw_lengths = self.connector.run(lambda r: r.hmget(len_key, candidates))
        lengths = {doc: float(raw) for doc, raw in zip(candidates, raw_lengths, strict=True) if raw is not None}
        avg_len = int(total_raw or 0) / n_docs
        return bm25.top(bm25.score_documents(postings, lengths, n_docs, avg_len), limit)

    def count(self, user_id: str) -> int:
        return int(self.connector.run(lambda r: r.hlen(self._key(user_id, "len"))))

    def ids(self, user_id: str, batch_size: int = 1_000) -> Iterator[str]:
        """Every indexed document id (HSCAN; order unspecified)."""
        key = self._key(user_id, "len")
        cursor = 0
        while True:
            cursor, page = self.connector.run(lambda r, c=cursor: r.hscan(key, c, count=batch_size))
            yield from (doc.decode() for doc in page)
            if not cursor:
                return
