"""A per-user, per-namespace BM25 index kept in Redis, shared by every API process.

Layout (see :mod:`agtos.storage.index_keys`), under ``…:{namespace}:_idx:bm25:``:

* ``t:{term}``  sorted set ``doc_id -> tf`` (the postings of one term)
* ``len``       hash ``doc_id -> document length`` (HLEN is the document count)
* ``terms``     hash ``doc_id -> "term:tf term:tf …"`` (for removal and for mirrors)
* ``stats``     hash ``total -> sum of document lengths``
* ``meta``, ``changes``  the versioned change log of :mod:`agtos.storage.mirror_sync`; ``meta``'s
  ``tok`` is the :data:`~agtos.tasks.bm25.TOKENIZER_VERSION` that made the terms (absent: 1)
* ``upgrade``   a lock held while one process upgrades the terms to the current tokenizer
* ``upgraded``  set of the documents whose terms are current while ``tok`` is still older

An index whose terms an older tokenizer made (1: plurals folded only, before Snowball stems; 2: before
possessives were folded and the marks of non-Latin scripts kept; 3: before irregular forms were related to
their lemma, "bought" to "buy") is upgraded once, from its stored terms
(``bm25.upgraded_term`` of an old term is the new term of its word):
by the first write, search or mirror load of a process that finds ``tok`` older, under the lock,
one HSCAN page and one script per batch. Each batch is a compare-and-set: a document is rewritten
only while the index has the epoch it was read in, its stored terms are still those read and it is
not in ``upgraded`` (which every rewritten document, and every document written meanwhile, joins);
so a document deleted or written again meanwhile (or the whole user forgotten) is never restored or
reverted, and one rewritten is never stemmed twice, by this or another upgrader (the lock is renewed
per batch, but correctness does not rest on it). Writes and deletes do not wait for an upgrade.
Marks that versions 1-2 dropped ("がぎ" stored as "かき") cannot be restored from terms: an upgrade that
read terms of such scripts sets ``meta``'s ``marks``, and searches of that index also look up the older
forms of their terms (``bm25.legacy_terms``), so its older documents are still found.

Writes run as one Lua script per batch of documents, so a re-add replaces a document
atomically even with concurrent writers. Searches are served by an in-process
:class:`BM25Mirror` per user, rebuilt from ``terms`` and kept fresh through the change
log (a write by any process is seen by the next search of every process); with
``mirror=False`` they read the postings from Redis instead (the highest-tf
``max_postings`` per term), which costs no process memory.
"""

from __future__ import annotations

import uuid
from collections import Counter
from collections.abc import Iterator, Mapping, Sequence
from typing import Any

import redis
from redis.commands.core import Script

from agtos.storage.bm25_mirror import BM25Mirror, decode_terms, encode_terms
from agtos.storage.index_keys import check_namespace, index_key
from agtos.storage.keys import GlobalKeys, check_record_id
from agtos.storage.mirror_sync import (
    LOG_BEGIN_LUA,
    LOG_END_LUA,
    MirrorRegistry,
    SyncCheck,
    SyncPlan,
    advance_after_own_write,
    plan_sync,
)
from agtos.storage.redis_conn import RedisConnector
from agtos.storage.user_lock import try_held
from agtos.tasks import bm25

DEFAULT_MAX_POSTINGS = 5_000
WRITE_BATCH = 500
UPGRADE_LOCK_MS = 60_000  # one process's upgrade of one user's index to the current tokenizer at most
CURRENT_KEPT = 100_000  # users whose index this process knows current (a set, cleared when full)
_RENEW_LUA = "if redis.call('GET', KEYS[1]) == ARGV[1] then return redis.call('PEXPIRE', KEYS[1], ARGV[2]) end return 0"
# KEYS: meta, len. ARGV: epoch candidate. The epoch and tokenizer of an index holding documents.
_UPGRADE_BEGIN_LUA = """
if redis.call('HLEN', KEYS[2]) > 0 then
  redis.call('HSETNX', KEYS[1], 'epoch', ARGV[1])
end
return redis.call('HMGET', KEYS[1], 'epoch', 'tok')
"""
# KEYS: meta, upgraded. ARGV: the epoch the upgrade read, the tokenizer version, '1' if it read terms
# that may have lost their marks. Records it done.
_UPGRADE_END_LUA = """
if redis.call('HGET', KEYS[1], 'epoch') ~= ARGV[1] then
  return 0
end
redis.call('HSET', KEYS[1], 'tok', ARGV[2])
if ARGV[3] == '1' then
  redis.call('HSET', KEYS[1], 'marks', '1')
end
redis.call('DEL', KEYS[2])
return 1
"""

# KEYS: meta, changes, terms, len, stats, upgraded. ARGV: op ("set"|"del"|"cas"), epoch candidate
# ("cas": the epoch the terms were read in), max log size, postings key prefix, the tokenizer version
# of the terms written ("set"; '' none), then (id, "term:tf …") pairs for "set", ids for "del",
# (id, terms read, new terms) triples for "cas" (the tokenizer upgrade: a document is rewritten only
# while the index has that epoch, its terms are still those read and it is not in ``upgraded``).
# "set" into an index of an older tokenizer that holds documents adds them to ``upgraded`` (their
# terms are current already); into a current or empty one it records its version.
# Returns {version, documents that were indexed before (del) or are now (set, cas), epoch}.
_WRITE_LUA = (
    """
local op, entries, i = ARGV[1], {}, 6
if op == 'cas' then
  if redis.call('HGET', KEYS[1], 'epoch') ~= ARGV[2] then
    return {0, 0, ''}
  end
  while i <= #ARGV do
    if redis.call('SISMEMBER', KEYS[6], ARGV[i]) == 0 and redis.call('HGET', KEYS[3], ARGV[i]) == ARGV[i + 1] then
      entries[#entries + 1] = {ARGV[i], ARGV[i + 2]}
    end
    i = i + 3
  end
  if #entries == 0 then
    return {0, 0, ''}
  end
else
  while i <= #ARGV do
    if op == 'set' then
      entries[#entries + 1] = {ARGV[i], ARGV[i + 1]}
      i = i + 2
    else
      entries[#entries + 1] = {ARGV[i], false}
      i = i + 1
    end
  end
end
local mark = op == 'cas'
if op == 'set' and ARGV[5] ~= '' then
  local was = tonumber(redis.call('HGET', KEYS[1], 'tok') or '1')
  if was < tonumber(ARGV[5]) then
    if redis.call('HLEN', KEYS[4]) > 0 then
      mark = true
    else
      redis.call('HSET', KEYS[1], 'tok', ARGV[5])
      redis.call('DEL', KEYS[6])
    end
  end
end
"""
    + LOG_BEGIN_LUA
    + """
local prefix = ARGV[4]
local changed, delta = 0, 0
for _, entry in ipairs(entries) do
  local id, new = entry[1], entry[2]
  local keep, new_len = {}, 0
  if new then
    for term, tf in string.gmatch(new, '([^%s:]+):(%d+)') do
      keep[term] = tonumber(tf)
      new_len = new_len + tonumber(tf)
    end
  end
  local old = redis.call('HGET', KEYS[3], id)
  local old_len = tonumber(redis.call('HGET', KEYS[4], id) or '0')
  if old then
    for token in string.gmatch(old, '%S+') do
      local term = string.match(token, '^[^:]+')
      if keep[term] == nil then
        redis.call('ZREM', prefix .. term, id)
      end
    end
  end
  if new_len > 0 then
    for term, tf in pairs(keep) do
      redis.call('ZADD', prefix .. term, tf, id)
    end
    redis.call('HSET', KEYS[4], id, new_len)
    redis.call('HSET', KEYS[3], id, new)
    if mark then
      redis.call('SADD', KEYS[6], id)
    end
    changed = changed + 1
  else
    redis.call('HDEL', KEYS[4], id)
    redis.call('HDEL', KEYS[3], id)
    if old or old_len > 0 then
      changed = changed + 1
    end
  end
  delta = delta + new_len - old_len
  redis.call('ZADD', KEYS[2], v, id)
end
if delta ~= 0 then
  redis.call('HINCRBY', KEYS[5], 'total', delta)
end
"""
    + LOG_END_LUA
    + """
return {v, changed, redis.call('HGET', KEYS[1], 'epoch')}
"""
)


class BM25Index:
    """BM25 over one namespace of records; scores follow :mod:`agtos.tasks.bm25`."""

    def __init__(
        self,
        connector: RedisConnector,
        keys: GlobalKeys,
        namespace: str,
        max_postings: int = DEFAULT_MAX_POSTINGS,
        *,
        mirror: bool = True,
        max_change_log: int = 10_000,
        max_loaded_users: int = 512,
    ) -> None:
        """``mirror``: search an in-process copy (exact, fast) rather than Redis postings, of
        which only the highest-tf ``max_postings`` per query term are read. ``max_loaded_users``:
        least recently used mirrors beyond it are dropped (reloaded from Redis on next use)."""
        self.connector = connector
        self.keys = keys
        self.namespace = check_namespace(namespace)
        self.max_postings = max_postings
        self.use_mirror = mirror
        self.max_change_log = max_change_log
        self._mirrors: MirrorRegistry[BM25Mirror] = MirrorRegistry(BM25Mirror, max_loaded_users)
        self._script: Script | None = None
        self._current: set[str] = set()  # users whose index holds the current tokenizer's terms
        self._lost_marks: set[str] = set()  # those of them whose older documents may have lost marks

    def _key(self, user_id: str, part: str) -> str:
        return index_key(self.keys, user_id, self.namespace, f"bm25:{part}")

    # -- writes -----------------------------------------------------------------------
    def add(self, user_id: str, doc_id: str, text: str) -> int:
        """Index (or re-index) a document; returns its length in terms (0: not indexed)."""
        return self.add_many(user_id, [(doc_id, text)])[0]

    def add_many(self, user_id: str, docs: Sequence[tuple[str, str]]) -> list[int]:
        """Index (or re-index) ``(doc_id, text)`` pairs, one script call per batch; their lengths."""
        for doc_id, _ in docs:
            check_record_id(doc_id, f"{self.namespace} id")
        freqs = [(doc_id, bm25.term_frequencies(bm25.tokenize(text))) for doc_id, text in docs]
        if freqs:
            self.upgrade(user_id)
        for start in range(0, len(freqs), WRITE_BATCH):
            chunk = dict(freqs[start : start + WRITE_BATCH])
            self._write(user_id, "set", chunk, str(bm25.TOKENIZER_VERSION))
        return [sum(tf.values()) for _, tf in freqs]

    def remove(self, user_id: str, doc_id: str) -> bool:
        """Drop a document's postings; True if it was indexed."""
        return self.remove_many(user_id, [doc_id]) > 0

    def remove_many(self, user_id: str, doc_ids: Sequence[str]) -> int:
        """Drop documents' postings; how many were indexed."""
        removed = 0
        for start in range(0, len(doc_ids), WRITE_BATCH):
            removed += self._write(user_id, "del", dict.fromkeys(doc_ids[start : start + WRITE_BATCH]))
        return removed

    def _write(self, user_id: str, op: str, docs: Mapping[str, dict[str, int] | None], tokenizer: str = "") -> int:
        """Run the write script and mirror it locally; how many documents it changed. ``tokenizer``:
        the version of the tokenizer that made the terms written ('' leaves the index's as it is)."""
        if not docs:
            return 0
        args: list[Any] = [op, uuid.uuid4().hex, self.max_change_log, self._key(user_id, "t:"), tokenizer]
        for doc_id, tf in docs.items():
            args += [doc_id] if tf is None else [doc_id, encode_terms(tf)]
        version, changed, epoch = self._run_write(user_id, args)
        mirror = self._mirrors.peek(user_id)
        if mirror is not None:
            with mirror.lock:
                if mirror.loaded:
                    for doc_id, tf in docs.items():
                        mirror.put(doc_id, tf or {})
                    advance_after_own_write(mirror, int(version), bytes(epoch))
        return int(changed)

    def _run_write(self, user_id: str, args: list[Any]) -> list[Any]:
        keys = [self._key(user_id, p) for p in ("meta", "changes", "terms", "len", "stats", "upgraded")]

        def run(r: redis.Redis) -> list[Any]:
            if self._script is None:
                self._script = r.register_script(_WRITE_LUA)
            return self._script(keys=keys, args=args, client=r)

        return self.connector.run(run)

    # -- tokenizer upgrade --------------------------------------------------------------
    def upgrade(self, user_id: str) -> bool:
        """Make sure the user's index holds the terms of the current tokenizer (one round trip the
        first time per user and process, none after); True if this call rewrote them. An index an
        older tokenizer made is upgraded here, from its stored terms, under a lock; while another
        process holds it searches read the index as it is and writes go on (what they write is
        current, and the upgrade leaves it alone), and this process tries again on its next call."""
        if user_id in self._current:
            return False
        meta, lengths = self._key(user_id, "meta"), self._key(user_id, "len")

        def read(r: redis.Redis) -> list[Any]:
            pipe = r.pipeline(transaction=False)
            pipe.hget(meta, "tok")
            pipe.hlen(lengths)
            pipe.hget(meta, "marks")
            return pipe.execute()

        tok, n_docs, marks = self.connector.run(read)
        if n_docs and int(tok or 1) < bm25.TOKENIZER_VERSION:  # else empty (its first write records it) or current
            upgraded = self._upgrade_locked(user_id)
            if upgraded is None:
                return False  # another process upgrades it (or this one lost the lock)
            self._mark_current(user_id, self.connector.run(lambda r: r.hget(meta, "marks")) is not None)
            return upgraded
        self._mark_current(user_id, marks is not None)
        return False

    def _mark_current(self, user_id: str, lost_marks: bool) -> None:
        if len(self._current) >= CURRENT_KEPT:
            self._current.clear()
            self._lost_marks.clear()
        self._current.add(user_id)
        if lost_marks:
            self._lost_marks.add(user_id)

    def query_terms(self, user_id: str, query: str) -> list[str]:
        """``query``'s terms, with their older forms (:func:`bm25.legacy_terms`) where the user's index
        was upgraded from terms that may have lost their marks or is being upgraded by another process."""
        terms = bm25.query_terms(query)
        if user_id in self._lost_marks or user_id not in self._current:
            terms += bm25.legacy_terms(terms)
        return terms

    def _upgrade_locked(self, user_id: str) -> bool | None:
        """Rewrite every document's terms as the current tokenizer makes them, one HSCAN page at a
        time, each batch a compare-and-set (see the module docstring). None: another process holds
        the lock (or took it over from this one); False: it was done meanwhile (or the index deleted)."""
        lock = self._key(user_id, "upgrade")
        with try_held(self.connector, lock, UPGRADE_LOCK_MS) as token:
            return None if token is None else self._upgrade_held(user_id, lock, token)

    def _upgrade_held(self, user_id: str, lock: str, token: str) -> bool | None:
        """:meth:`_upgrade_locked`'s work, with its lock held as ``token``."""
        meta = self._key(user_id, "meta")
        begin = [meta, self._key(user_id, "len"), uuid.uuid4().hex]
        epoch, tok = self.connector.run(lambda r: r.eval(_UPGRADE_BEGIN_LUA, 2, *begin))
        if epoch is None or int(tok or 1) >= bm25.TOKENIZER_VERSION:
            return False
        batch: list[Any] = []
        lost = False
        for doc_id, raw in self._scan(user_id, "terms", WRITE_BATCH):
            old = decode_terms(raw)
            lost = lost or any(bm25.lost_marks(term) for term in old)
            batch += [doc_id, raw, encode_terms(upgraded_terms(old, int(tok or 1)))]
            if len(batch) == 3 * WRITE_BATCH:
                if not self._upgrade_batch(user_id, lock, token, epoch, batch):
                    return None
                batch = []
        if batch and not self._upgrade_batch(user_id, lock, token, epoch, batch):
            return None
        end = [meta, self._key(user_id, "upgraded"), epoch, bm25.TOKENIZER_VERSION, int(lost)]
        return bool(self.connector.run(lambda r: r.eval(_UPGRADE_END_LUA, 2, *end)))

    def _upgrade_batch(self, user_id: str, lock: str, token: str, epoch: bytes, batch: list[Any]) -> bool:
        """Renew the lock and compare-and-set one batch of ``(id, terms read, new terms)``; False
        if the lock is no longer this process's."""
        if not self.connector.run(lambda r: r.eval(_RENEW_LUA, 1, lock, token, UPGRADE_LOCK_MS)):
            return False
        self._run_write(user_id, ["cas", epoch, self.max_change_log, self._key(user_id, "t:"), "", *batch])
        return True

    # -- reads ------------------------------------------------------------------------
    def search(self, user_id: str, query: str, limit: int, synced: BM25Mirror | None = None) -> list[tuple[str, float]]:
        """Best-first ``(doc_id, bm25 score)``; only documents matching a query term. ``synced``:
        this user's mirror from :meth:`synced` (its version check already done)."""
        if limit <= 0:
            return []
        self.upgrade(user_id)
        terms = self.query_terms(user_id, query)
        if not terms:
            return []
        if self.use_mirror:
            mirror = synced or self.synced(user_id)
            with mirror.lock:
                return mirror.search(terms, limit)
        return self._search_redis(user_id, terms, limit)

    def _search_redis(self, user_id: str, terms: list[str], limit: int) -> list[tuple[str, float]]:
        """Score from the postings in Redis (two round trips, no process memory)."""
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

    def sync_check(self, user_id: str) -> SyncCheck | None:
        """What :func:`~agtos.storage.mirror_sync.plan_many` compares for this user (None without a mirror)."""
        if not self.use_mirror:
            return None
        return SyncCheck(self._key(user_id, "meta"), self._key(user_id, "changes"), self._mirrors.get(user_id))

    def synced(self, user_id: str, plan: SyncPlan | None = None) -> BM25Mirror:
        """The user's mirror, brought up to date with Redis (one round trip when fresh); ``plan``:
        from a version check already made, used while the mirror is still as it was then."""
        if self.upgrade(user_id):
            plan = None  # made before the terms were rewritten
        mirror = self._mirrors.get(user_id)
        with mirror.lock:
            if plan is None or not plan.fits(mirror):
                plan = plan_sync(self.connector, self._key(user_id, "meta"), self._key(user_id, "changes"), mirror)
            if plan.action == "apply":
                ids = plan.changed_ids
                raws = self.connector.run(lambda r: r.hmget(self._key(user_id, "terms"), ids)) if ids else []
                for doc_id, raw in zip(ids, raws, strict=True):
                    mirror.put(doc_id, decode_terms(raw))
                mirror.version = plan.version
            elif plan.action == "reload":
                mirror.reset()
                for doc_id, raw in self._scan(user_id, "terms"):
                    mirror.put(doc_id, decode_terms(raw))
                mirror.loaded, mirror.epoch, mirror.version = True, plan.epoch, plan.version
            return mirror

    def stats(self) -> dict[str, Any]:
        """This process's loaded mirrors: users, documents, terms and memory."""
        mirrors = self._mirrors.values()
        docs = terms = memory = 0
        for mirror in mirrors:
            with mirror.lock:
                docs, terms, memory = docs + mirror.size, terms + len(mirror.postings), memory + mirror.memory_bytes
        return {
            "namespace": self.namespace,
            "backend": "mirror" if self.use_mirror else "redis",
            "loadedUsers": len(mirrors),
            "docs": docs,
            "terms": terms,
            "memoryBytes": memory,
        }

    def count(self, user_id: str) -> int:
        return int(self.connector.run(lambda r: r.hlen(self._key(user_id, "len"))))

    def ids(self, user_id: str, batch_size: int = 1_000) -> Iterator[str]:
        """Every indexed document id (HSCAN; order unspecified)."""
        for doc_id, _ in self._scan(user_id, "len", batch_size):
            yield doc_id

    def _scan(self, user_id: str, part: str, batch_size: int = 1_000) -> Iterator[tuple[str, bytes]]:
        return self.connector.scan_hash(self._key(user_id, part), batch_size)


def upgraded_terms(terms: Mapping[str, int], version: int) -> dict[str, int]:
    """A document's terms as the ``version`` tokenizer stored them, as the current one makes them
    (version 1: ``{"cooking": 1, "cook": 2}`` → ``{"cook": 3}``; 2: ``{"kate's": 1}`` → ``{"kate": 1}``)."""
    out: Counter[str] = Counter()
    for term, tf in terms.items():
        new = bm25.upgraded_term(term, version)
        if new is not None:
            out[new] += tf
    return dict(out)
