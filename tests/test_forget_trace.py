"""Forget and opt-out leave no trace, and touch nothing of anyone else (README "Privacy").

A family of users whose ids are prefixes of each other or differ by a separator (``al`` /
``alice``, ``a`` / ``a.b`` / ``a@b`` / ``a_b`` / ``a-b``, ``bob`` / ``bob-2``) is filled through
the HTTP API with everything a user can leave behind: episodes (a session id reused after its
end), memories, conclusions, entities and relationships, a live session journal, a profile, a
Query-as-Ingest episode and its gate, a lint report with NLI-cached verdicts, search mirrors and
query embeddings. Then one of them forgets everything or opts out, and:

* a SCAN of the test prefix finds no key of theirs, and no global key names them or holds
  their text (the opt-out list excepted, which must name them);
* every key of every other user is byte-for-byte unchanged (``DUMP``), and their searches
  return what they returned before;
* the BM25 and vector mirrors of the API process, the query-embedding cache and an export
  (``export_snapshot``, what ``agtos memory export`` runs) hold nothing of theirs.
"""

from __future__ import annotations

import json
import string
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pyarrow.parquet as pq
import pytest
import redis
from fastapi.testclient import TestClient

from agtos.memory.coordinator import MemoryCoordinator
from agtos.memory.export import export_snapshot
from agtos.tasks.polarity import polarity
from agtos.tasks.text import normalise
from tests.helpers import isolated_app, key_owner, run_maintenance, talk, user

FAMILY = ("al", "alice", "a", "a.b", "a@b", "a_b", "a-b", "bob", "bob-2")
NAMESPACES = ("episode", "memory", "conclusion", "turn")
MODES = ("hybrid", "vector", "bm25")
FORGOTTEN = ("al", "bob", "a.b")  # the shorter of two prefix-related ids, and the longer
OPTED_OUT = ("a", "alice")
WIPED = FORGOTTEN + OPTED_OUT


def token(user_id: str, n: int) -> str:
    """A distinctive word of one user (letters only, so no tokenizer splits it)."""
    return f"zq{string.ascii_lowercase[FAMILY.index(user_id)]}x{'k' * n}"


class Env:
    def __init__(self, client: TestClient, coordinator: MemoryCoordinator, raw: redis.Redis, prefix: str) -> None:
        self.client, self.coordinator, self.raw, self.prefix = client, coordinator, raw, prefix
        self.queries: dict[str, list[str]] = {}

    def keys_by_owner(self) -> dict[str | None, set[str]]:
        """Every key under the prefix, grouped by owning user (None: global keys)."""
        out: dict[str | None, set[str]] = {}
        for raw_key in self.raw.scan_iter(match=f"{self.prefix}:*", count=1_000):
            key = raw_key.decode()
            out.setdefault(key_owner(self.prefix, key), set()).add(key)
        return out

    def dumps(self, keys: set[str]) -> dict[str, bytes | None]:
        return {k: self.raw.dump(k) for k in keys}

    def content(self, key: str) -> list[str]:
        """Members, fields and values of a key, whatever its type."""
        kind = self.raw.type(key).decode()
        if kind == "string":
            items = [self.raw.get(key)]
        elif kind == "hash":
            items = [x for kv in self.raw.hgetall(key).items() for x in kv]
        elif kind == "set":
            items = list(self.raw.smembers(key))
        elif kind == "zset":
            items = list(self.raw.zrange(key, 0, -1))
        elif kind == "list":
            items = list(self.raw.lrange(key, 0, -1))
        else:
            items = [self.raw.dump(key)]
        return [i.decode(errors="replace") if isinstance(i, bytes) else str(i) for i in items if i is not None]

    def found(self, user_id: str, query: str, mode: str = "bm25") -> list[str]:
        response = self.client.get("/api/memory/search", params={"q": query, "mode": mode}, headers=user(user_id))
        assert response.status_code == 200, response.text
        return [r["id"] for r in response.json()["results"]]

    def ask_everything(self, user_id: str, expect: bool = True) -> None:
        """The reads that fill mirrors and the query cache (recorded as this user's queries);
        ``expect``: each search mode finds the user's first token."""
        t = token(user_id, 1)
        queries = [f"{t} tea", f"what does {t} prefer?", f"Which tea does the user like {t}?"]
        self.queries[user_id] = queries
        for mode in MODES:
            assert self.found(user_id, queries[0], mode) or not expect, (user_id, mode)
        context = self.client.post("/api/memory/context", json={"query": queries[1]}, headers=user(user_id))
        assert context.status_code == 200 and (t in context.text or not expect)
        assert self.client.post("/api/memory/ask", json={"question": queries[2]}, headers=user(user_id)).is_success


def populate(env: Env, user_id: str, full: bool) -> None:
    """Everything one user can leave in the store, through the HTTP API (``full``: with a
    Query-as-Ingest episode and a lint sweep, whose NLI verdicts are cached)."""
    client, headers = env.client, user(user_id)
    for n in (1, 2):  # one session id, ended, continued and ended again: two episodes
        t = token(user_id, n)
        ended = talk(
            client,
            user_id,
            "s1",
            ("user", f"Remember that I prefer {t} tea. My friend Quentin {t.capitalize()} works at Globex in Lisbon."),
            ("user", f"I do not like {t} coffee."),
            ("assistant", f"Noted: {t} tea."),
        )
        assert ended["saved"], ended
    live = {"turns": [{"role": "user", "content": f"Still talking about {token(user_id, 3)} biscuits."}]}
    assert client.post("/api/memory/sessions/live/turns", json=live, headers=headers).status_code == 200
    assert client.put("/api/memory/profile", json={"name": f"Name {token(user_id, 1)}"}, headers=headers).is_success
    env.ask_everything(user_id)
    if not full:
        return
    answer = f"First I searched, then I compared, and in summary {token(user_id, 4)} wins. " * 30
    body = {"session_id": "qa", "query": "which?", "response": answer, "tool_calls": 2}
    response = client.post("/api/memory/responses", json=body, headers=headers)
    assert response.status_code == 200 and response.json()["ingest"], response.text
    report = run_maintenance(client, user_id)["report"]
    assert report["steps"], report
    assert report["summary"]["contradictionPipeline"]["counters"]["nliChecked"] > 0, report


@pytest.fixture(scope="module")
def env(redis_url: str, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Env]:
    """One app and prefix holding the whole family (filled once: each test wipes a different user)."""
    with isolated_app(redis_url, tmp_path_factory.mktemp("trace")) as (client, coordinator, prefix):
        state = Env(client, coordinator, redis.Redis.from_url(redis_url), prefix)
        for user_id in FAMILY:
            populate(state, user_id, full=user_id in WIPED)
        yield state


def snapshot(env: Env, gone: str) -> dict[str, Any]:
    """What must not change when ``gone`` is wiped: every other key's bytes and search results."""
    owners = env.keys_by_owner()
    assert owners.get(gone), f"{gone} has no keys to forget"
    assert [k for k in owners[gone] if ":turns:" in k], f"{gone} has no stored turns to forget"
    assert list(env.coordinator.semantic.turns.bm25.ids(gone)), f"{gone} has no indexed turns to forget"
    others = {k for owner, keys in owners.items() if owner not in (gone, None) for k in keys}
    alive = [u for u in FAMILY if u != gone and owners.get(u)]
    searches = {(u, mode): env.found(u, f"{token(u, 1)} tea", mode) for u in alive for mode in MODES}
    return {"dumps": env.dumps(others), "searches": searches}


def assert_no_trace(env: Env, gone: str, before: dict[str, Any], tmp_path: Path, opted_out: bool) -> None:
    semantic = env.coordinator.semantic
    # the contradiction heuristics' process-wide text caches (filled by the lint) are emptied
    assert polarity.cache_info().currsize == 0 and normalise.cache_info().currsize == 0
    for query in env.queries[gone]:  # first: the checks below embed queries themselves
        assert semantic.embedder.cache.get(query) is None, query
    owners = env.keys_by_owner()
    assert gone not in owners, sorted(owners[gone])[:10]
    tokens = [token(gone, n) for n in (1, 2, 3, 4)]
    # global keys are the user set, the opt-out list, sweep counters, the index of live journals
    # (``user:session``) and the forget marks (a digest of the id, not the id): nothing derived from a
    # user's text (the NLI verdict cache, keyed by digests of their conclusions, lives in their key space)
    allowed = {f"{env.prefix}:users", f"{env.prefix}:meta:privacy:opt-out", f"{env.prefix}:meta:maintenance"}
    allowed |= {f"{env.prefix}:meta:journals:live", f"{env.prefix}:meta:forget_fences"}
    allowed |= {f"{env.prefix}:meta:vector_legacy_embedder"}  # provider:model|dim (agtos.storage.vector_spaces)
    assert owners.get(None, set()) <= allowed, sorted(owners.get(None, set()) - allowed)[:5]
    for key in owners.get(None, set()):  # no member, field or value of theirs
        content = env.content(key)
        named = gone in content
        assert named == (opted_out and key == f"{env.prefix}:meta:privacy:opt-out"), (key, content[:5])
        assert not [c for c in content for t in tokens if t in c.lower()], key
        assert not [c for c in content if c.startswith(f"{gone}:")], key  # no session of theirs
    # everyone else untouched, byte for byte, and finding what they found
    others = {k for owner, keys in owners.items() if owner not in (gone, None) for k in keys}
    assert others == set(before["dumps"]), sorted(others ^ set(before["dumps"]))[:10]
    assert env.dumps(others) == before["dumps"]
    for (u, mode), ids in before["searches"].items():
        assert env.found(u, f"{token(u, 1)} tea", mode) == ids, (u, mode)
    # in-process state: the index mirrors
    for namespace in NAMESPACES:
        store = semantic.store(namespace)
        for t in tokens:
            assert store.bm25.search(gone, f"{t} tea", 50) == [], (namespace, t)
        assert store.vectors.search(gone, semantic.embedder.embed_one(f"{tokens[0]} tea"), 50) == [], namespace
    # the public reads are empty, the export holds no row of theirs
    headers = user(gone)
    assert env.found(gone, f"{tokens[0]} tea", "hybrid") == []
    assert env.client.get("/api/memory/episodes", headers=headers).json()["episodes"] == []
    assert env.client.get("/api/memory/conclusions", headers=headers).json()["conclusions"] == []
    assert env.client.get("/api/entities", headers=headers).json()["entities"] == []
    assert env.client.get("/api/memory/sessions/live", headers=headers).status_code == 404
    context = env.client.post("/api/memory/context", json={"query": f"{tokens[0]} tea"}, headers=headers)
    assert not any(t in context.text for t in tokens)
    out = tmp_path / "export"
    counts = export_snapshot(env.coordinator.services, out, users=list(FAMILY))
    rows = [row for f in sorted(out.glob("*.parquet")) for row in pq.read_table(f).to_pylist()]
    assert counts.get("episodes", 0) > 0 and rows
    assert not [r for r in rows if r.get("user_id") == gone]
    text = json.dumps(rows, default=str).lower()
    assert not [t for t in tokens if t in text]


@pytest.mark.parametrize("gone", FORGOTTEN)
def test_forget_all_leaves_no_trace_and_spares_prefix_neighbours(env: Env, gone: str, tmp_path: Path) -> None:
    before = snapshot(env, gone)
    response = env.client.post("/api/memory/forget", json={"kind": "all"}, headers=user(gone))
    assert response.status_code == 200 and response.json()["keysDeleted"] > 0, response.text
    assert_no_trace(env, gone, before, tmp_path, opted_out=False)


@pytest.mark.parametrize("gone", OPTED_OUT)
def test_opt_out_with_forget_leaves_no_trace_and_writes_go_nowhere(env: Env, gone: str, tmp_path: Path) -> None:
    before = snapshot(env, gone)
    headers = user(gone)
    response = env.client.put("/api/memory/privacy", json={"opt_out": True, "forget_existing": True}, headers=headers)
    assert response.status_code == 200 and response.json()["keysDeleted"] > 0, response.text
    assert_no_trace(env, gone, before, tmp_path, opted_out=True)
    # opted out: working memory works, nothing reaches Redis
    turns = {"turns": [{"role": "user", "content": f"Remember that I prefer {token(gone, 5)} tea."}]}
    assert env.client.post("/api/memory/sessions/w/turns", json=turns, headers=headers).status_code == 200
    live = env.client.get("/api/memory/sessions/w", headers=headers)
    assert live.status_code == 200 and token(gone, 5) in live.text
    assert env.client.post("/api/memory/sessions/w/end", headers=headers).json()["saved"] is False
    assert env.client.put("/api/memory/profile", json={"name": "x"}, headers=headers).status_code == 403
    body = {"session_id": "qa", "query": "q", "response": "In summary, first then. " * 100, "tool_calls": 3}
    assert env.client.post("/api/memory/responses", json=body, headers=headers).status_code == 403
    assert gone not in env.keys_by_owner()
    assert env.client.get("/api/memory/privacy", headers=headers).json()["optOut"] is True


def test_forget_one_item_removes_it_from_redis_indexes_and_caches(
    client: TestClient, coordinator: MemoryCoordinator, raw_redis: redis.Redis, key_prefix: str
) -> None:
    """Each kind forgotten by id: its key, index entries and cached queries go; the rest stays."""
    env = Env(client, coordinator, raw_redis, key_prefix)
    for someone in ("al", "alice"):  # "alice" shares nothing with "al" but a prefix
        t = token(someone, 1)
        talk(client, someone, "s1", ("user", f"Remember that I prefer {t} tea. Quentin {t.capitalize()} is my friend."))
    env.ask_everything("al")
    kept = {k: v for k, v in env.dumps(env.keys_by_owner()["alice"]).items() if ":_idx:" not in k}
    episode = env.found("al", f"{token('al', 1)} tea")[0]
    conclusion = client.get("/api/memory/conclusions", headers=user("al")).json()["conclusions"][0]["id"]
    entity = client.get("/api/entities", params={"q": "Quentin"}, headers=user("al")).json()["entities"][0]["id"]
    ids = {"conclusion": conclusion, "entity": entity}
    ids["memory"] = next(iter(coordinator.semantic.store("memory").bm25.ids("al")))
    ids["episode"] = episode  # last: it takes with it what was learnt from it alone (test_forget_episode)
    for kind, item in ids.items():
        env.ask_everything("al", expect=False)
        forgot = client.post("/api/memory/forget", json={"kind": kind, "id": item}, headers=user("al"))
        assert forgot.status_code == 200, forgot.text
        for query in env.queries["al"]:
            assert coordinator.semantic.embedder.cache.get(query) is None, (kind, query)
        keys = env.keys_by_owner()["al"]
        assert not [k for k in keys if k.endswith(f":{item}")], kind
        namespace = kind if kind != "entity" else None
        if namespace:
            store = coordinator.semantic.store(namespace)
            assert item not in set(store.bm25.ids("al")) and item not in set(store.vectors.ids("al")), kind
            assert item not in [d for d, _ in store.bm25.search("al", f"{token('al', 1)} tea", 50)], kind
        if kind == "episode":  # its verbatim turns leave the turn indexes with it
            turns = coordinator.semantic.turns
            assert not [d for d in [*turns.bm25.ids("al"), *turns.vectors.ids("al")] if d.startswith(f"{item}.t")]
        again = client.post("/api/memory/forget", json={"kind": kind, "id": item}, headers=user("al"))
        assert again.status_code == 404, (kind, again.text)
    assert item not in json.dumps(client.get("/api/entities", headers=user("al")).json())
    assert episode not in [e["id"] for e in client.get("/api/memory/episodes", headers=user("al")).json()["episodes"]]
    assert episode not in env.found("al", f"{token('al', 1)} tea", "hybrid")
    assert {k: v for k, v in env.dumps(env.keys_by_owner()["alice"]).items() if ":_idx:" not in k} == kept
