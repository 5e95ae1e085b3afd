"""Every documented environment variable changes what the service does, on the production path.

Each test sets variables with ``monkeypatch.setenv`` and builds the app the way ``agtos serve``
does (``create_app()`` with no arguments reads ``Settings.from_env()``), then watches the effect
through HTTP (or Redis, for TTLs). Expected values are the README's literals, never the settings'
own properties. Invalid values must stop the app from starting, with the variable named.
"""

from __future__ import annotations

import json
import os
import time
import uuid
from collections.abc import Callable, Iterator
from concurrent.futures import ThreadPoolExecutor
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import numpy as np
import pytest
import redis
from fastapi.testclient import TestClient
from typer.testing import CliRunner

from agtos.memory.coordinator import MemoryCoordinator
from agtos.serving.app import create_app
from tests.helpers import delete_prefix, run_maintenance, talk, user
from tests.stub_servers import StubModelServer
from tests.test_lint import U as LINT_USER
from tests.test_lint import crafted

Serve = Callable[..., Any]
HIKE = (
    ("user", "Last summer we hiked across the Swiss Alps, sleeping in mountain huts."),
    ("assistant", "That sounds like a wonderful trip through the mountains."),
    ("user", "I prefer walking in the hills to lying on a beach, please remember that."),
    ("assistant", "Noted: hills over beaches."),
)
NO_SHARED_WORDS = "trekking holiday among high peaks"  # close in meaning to HIKE, no word in common


@pytest.fixture
def env(monkeypatch: pytest.MonkeyPatch, redis_url: str, key_prefix: str, tmp_path: Path) -> pytest.MonkeyPatch:
    """A clean environment: no AGTOS_* variable but the test Redis, namespace and directories."""
    for name in list(os.environ):
        if name.startswith("AGTOS_") or name == "REDIS_URL":
            monkeypatch.delenv(name)
    monkeypatch.setenv("REDIS_URL", redis_url)
    monkeypatch.setenv("AGTOS_KEY_PREFIX", key_prefix)
    monkeypatch.setenv("AGTOS_DATA_DIR", str(tmp_path / "data"))
    monkeypatch.setenv("AGTOS_CONFIG_DIR", str(tmp_path / "config"))
    return monkeypatch


@pytest.fixture
def serve(env: pytest.MonkeyPatch) -> Serve:
    """``serve(AGTOS_X="1")``: a client of the app built from the environment (variables of earlier calls unset)."""

    earlier: set[str] = set()

    @contextmanager
    def running(**variables: str) -> Iterator[TestClient]:
        for name in earlier - set(variables):  # each app sees only its own variables
            env.delenv(name, raising=False)
        for name, value in variables.items():
            env.setenv(name, value)
        earlier.update(variables)
        with TestClient(create_app()) as client:
            yield client

    return running


def coordinator_of(client: TestClient) -> MemoryCoordinator:
    return client.app.state.coordinator  # type: ignore[attr-defined]


def post_turns(client: TestClient, session: str, contents: list[str], user_id: str = "wm") -> dict[str, Any]:
    turns = [{"role": "user" if i % 2 == 0 else "assistant", "content": c} for i, c in enumerate(contents)]
    response = client.post(f"/api/memory/sessions/{session}/turns", json={"turns": turns}, headers=user(user_id))
    assert response.status_code == 200, response.text
    # issue 15: the append answers a compact acknowledgement; the session's GET has the messages
    shown = client.get(f"/api/memory/sessions/{session}", headers=user(user_id))
    assert shown.status_code == 200 and shown.json()["messageCount"] == response.json()["messageCount"]
    return shown.json()


def numbered(n: int, start: int = 0) -> list[str]:
    return [f"message {i} about subject{i}" for i in range(start, start + n)]


def search(client: TestClient, query: str, mode: str | None = None, user_id: str = "hiker") -> list[dict[str, Any]]:
    params = {"q": query} | ({"mode": mode} if mode else {})
    response = client.get("/api/memory/search", params=params, headers=user(user_id))
    assert response.status_code == 200, response.text
    return response.json()["results"]


def within(seconds: float, call: Callable[[], Any]) -> Any:
    """``call()``'s result, failing (not hanging) when it takes longer than ``seconds``."""
    pool = ThreadPoolExecutor(max_workers=1)
    try:
        return pool.submit(call).result(timeout=seconds)
    finally:
        pool.shutdown(wait=False)


# -- identity and retention -------------------------------------------------------------
def test_key_prefix_namespaces_every_key_and_default_user_names_anonymous_calls(
    serve: Serve, raw_redis: redis.Redis, key_prefix: str, redis_url: str
) -> None:
    with serve(AGTOS_DEFAULT_USER="carol") as client:
        turns = [{"role": role, "content": content} for role, content in HIKE]
        assert client.post("/api/memory/sessions/s1/turns", json={"turns": turns}).status_code == 200
        ended = client.post("/api/memory/sessions/s1/end").json()
        assert ended["saved"] is True
        assert raw_redis.exists(f"{key_prefix}:u:{{carol}}:episode:{ended['episode']['id']}")
        assert client.get("/api/memory/episodes", headers=user("carol")).json()["count"] == 1
        assert client.get("/api/memory/episodes", headers=user("default")).json()["count"] == 0
    other = f"{key_prefix}-other"
    try:
        with serve(AGTOS_KEY_PREFIX=other, AGTOS_DEFAULT_USER="carol") as client:
            assert client.get("/api/memory/episodes").json()["count"] == 0  # another namespace
            talk(client, "carol", "s2", *HIKE)
        assert list(raw_redis.scan_iter(match=f"{other}:u:{{carol}}:episode:*"))
    finally:
        delete_prefix(redis_url, other)


@pytest.mark.parametrize(("days", "seconds"), [("2", 172_800), ("0.5", 43_200)])
def test_episode_ttl_days(serve: Serve, raw_redis: redis.Redis, key_prefix: str, days: str, seconds: int) -> None:
    with serve(AGTOS_EPISODE_TTL_DAYS=days) as client:
        ended = talk(client, "dave", "ttl", ("user", "Actually, my name is Dave, not David."), ("assistant", "Sorry!"))
    ttl = raw_redis.ttl(f"{key_prefix}:u:{{dave}}:episode:{ended['episode']['id']}")
    assert seconds - 60 < ttl <= seconds


def test_session_journal_ttl_hours(serve: Serve, raw_redis: redis.Redis, key_prefix: str) -> None:
    with serve() as client:
        post_turns(client, "j1", ["hello there"])
    assert 172_800 - 60 < raw_redis.ttl(f"{key_prefix}:u:{{wm}}:session:j1:turns") <= 172_800  # 48 h default
    with serve(AGTOS_SESSION_JOURNAL_TTL_HOURS="1") as client:
        post_turns(client, "j2", ["hello there"])
    assert 3_600 - 60 < raw_redis.ttl(f"{key_prefix}:u:{{wm}}:session:j2:turns") <= 3_600


# -- working memory ---------------------------------------------------------------------
def test_wm_max_messages_folds_at_the_ninth_turn(serve: Serve) -> None:
    with serve(AGTOS_WM_MAX_MESSAGES="8") as client:
        state = post_turns(client, "s", numbered(8))
        assert state["messageCount"] == 8 and state["compactions"] == 0
        state = post_turns(client, "s", numbered(1, start=8))
        assert state["compactions"] == 1 and state["messageCount"] == 1 + 6  # summary + the default 6 kept
        shown = client.get("/api/memory/sessions/s", headers=user("wm")).json()
        assert shown["messages"][0]["is_summary"] is True
        assert [m["content"] for m in shown["messages"][1:]] == numbered(6, start=3)


def test_wm_preserve_recent(serve: Serve) -> None:
    with serve(AGTOS_WM_PRESERVE_RECENT="2") as client:
        assert post_turns(client, "s", numbered(30))["compactions"] == 0  # the default 30 messages
        state = post_turns(client, "s", numbered(1, start=30))
        assert state["messageCount"] == 1 + 2 and state["compactions"] == 1
        assert [m["content"] for m in state["messages"][1:]] == numbered(2, start=29)


def test_wm_max_history_tokens(serve: Serve) -> None:
    fifteen_tokens = "apple " * 15  # one WordPiece token per "apple"
    with serve(AGTOS_WM_MAX_HISTORY_TOKENS="100") as client:
        state = post_turns(client, "s", [fifteen_tokens] * 6)
        assert state["tokenCount"] == 90 and state["compactions"] == 0
        state = post_turns(client, "s", [fifteen_tokens])  # 105 tokens > 100
        assert state["compactions"] == 1 and state["messageCount"] == 1 + 6


def test_wm_documented_defaults_fold_through_the_api(serve: Serve) -> None:
    """30 messages / 4,000 tokens / keep 6, with no variable set."""
    with serve() as client:
        assert post_turns(client, "count", numbered(30))["compactions"] == 0
        state = post_turns(client, "count", numbered(1, start=30))
        assert state["compactions"] == 1 and state["messageCount"] == 7
        assert [m["content"] for m in state["messages"][1:]] == numbered(6, start=25)

        five_hundred = "apple " * 500
        state = post_turns(client, "tokens", [five_hundred] * 8)
        assert state["tokenCount"] == 4_000 and state["compactions"] == 0  # at the limit, not past it
        state = post_turns(client, "tokens", [five_hundred])
        assert state["compactions"] == 1 and state["messageCount"] == 7


EARLY = [
    "My sister Marguerite moved to Lisbon to teach violin at the conservatory.",
    "Lovely, Lisbon has a great music scene.",
    "She wants me to visit Lisbon in October for her first concert.",
    "October is a good month to travel there.",
]


def test_a_long_session_survives_an_api_restart_folded(serve: Serve) -> None:
    """31 journalled turns: a new app on the same Redis prefix replays them into the folded state."""
    turns = EARLY + numbered(27, start=4)
    with serve() as client:
        before = post_turns(client, "long", turns)
    assert before["compactions"] == 1 and before["messageCount"] == 7
    with serve() as client:  # the restart: a new coordinator, nothing in process memory
        shown = client.get("/api/memory/sessions/long", headers=user("wm"))
        assert shown.status_code == 200, shown.text
        replayed = shown.json()
        assert replayed["messageCount"] == 7 and replayed["compactions"] == 1
        assert replayed["messages"][0]["is_summary"] is True
        assert [m["content"] for m in replayed["messages"][1:]] == turns[-6:]
        assert replayed["messages"] == before["messages"]
        assert client.get("/api/memory/sessions/never-started", headers=user("wm")).status_code == 404

        after = post_turns(client, "long", ["One more thing about the trip."])
        assert after["messageCount"] == 8  # appended to the replayed state, not to an empty one
        ended = client.post("/api/memory/sessions/long/end", headers=user("wm")).json()
        assert ended["saved"] is True
        episode = ended["episode"]
        assert "lisbon" in (episode["summary"] + " ".join(episode["keywords"])).lower()
        assert [h["id"] for h in search(client, "Marguerite violin Lisbon", "bm25", "wm")] == [episode["id"]]


@pytest.mark.parametrize(
    ("name", "value", "message"),
    [
        ("AGTOS_WM_MAX_MESSAGES", "thirty", "AGTOS_WM_MAX_MESSAGES"),
        ("AGTOS_WM_MAX_MESSAGES", "0", "AGTOS_WM_MAX_MESSAGES"),
        ("AGTOS_WM_MAX_HISTORY_TOKENS", "-5", "AGTOS_WM_MAX_HISTORY_TOKENS"),
        ("AGTOS_WM_PRESERVE_RECENT", "30", "AGTOS_WM_PRESERVE_RECENT"),
        ("AGTOS_EPISODE_TTL_DAYS", "0", "AGTOS_EPISODE_TTL_DAYS"),
        ("AGTOS_EPISODE_TTL_DAYS", "a month", "AGTOS_EPISODE_TTL_DAYS"),
        ("AGTOS_MEMORY_SEARCH_MODE", "fuzzy", "AGTOS_MEMORY_SEARCH_MODE"),
        ("AGTOS_MEMORY_SIMILARITY_THRESHOLD", "1.5", "AGTOS_MEMORY_SIMILARITY_THRESHOLD"),
        ("AGTOS_HNSW_EF_SEARCH", "5", "AGTOS_HNSW_EF_SEARCH"),
        ("AGTOS_BACKGROUND_WORK_POLICY", "sometimes", "AGTOS_BACKGROUND_WORK_POLICY"),
        ("AGTOS_BACKGROUND_RECENT_SESSION_S", "-1", "AGTOS_BACKGROUND_RECENT_SESSION_S"),
        ("AGTOS_NLI_ENABLED", "flase", "AGTOS_NLI_ENABLED"),
        ("AGTOS_MAINTENANCE_ENABLED", "maybe", "AGTOS_MAINTENANCE_ENABLED"),
        ("AGTOS_MAINTENANCE_JACCARD", "1.2", "AGTOS_MAINTENANCE_JACCARD"),
        ("AGTOS_MAINTENANCE_TIMEZONE", "Mars/Olympus_Mons", "AGTOS_MAINTENANCE_TIMEZONE"),
        ("AGTOS_SESSION_IDLE_MINUTES", "-1", "AGTOS_SESSION_IDLE_MINUTES"),
        ("AGTOS_MAX_BODY_BYTES", "0", "AGTOS_MAX_BODY_BYTES"),
        ("AGTOS_DREAMER_RETRIES", "-2", "AGTOS_DREAMER_RETRIES"),
        ("AGTOS_QUERY_INGEST_MAX_PER_SESSION", "2.5", "AGTOS_QUERY_INGEST_MAX_PER_SESSION"),
    ],
)
def test_invalid_values_stop_the_app_with_the_variable_named(
    env: pytest.MonkeyPatch, name: str, value: str, message: str
) -> None:
    env.setenv(name, value)
    with pytest.raises(ValueError, match=message):
        create_app()


# -- search -----------------------------------------------------------------------------
@pytest.mark.parametrize(("mode", "match_type"), [("hybrid", "hybrid"), ("vector", "semantic"), ("bm25", "keyword")])
def test_search_mode(serve: Serve, mode: str, match_type: str) -> None:
    with serve(AGTOS_MEMORY_SEARCH_MODE=mode) as client:
        talk(client, "hiker", "hike", *HIKE)
        hits = search(client, "Swiss Alps mountain huts")
        assert [h["matchType"] for h in hits] == [match_type]
        assert client.get("/health").json()["tiers"]["semantic"]["searchMode"] == mode


def cosines(client: TestClient, query: str, texts: list[str]) -> list[float]:
    """The query's cosine with each text, from the embedder's raw vectors (norms taken here)."""
    vectors = coordinator_of(client).semantic.embedder.embed([query, *texts])
    return [float(np.dot(vectors[0], v) / np.linalg.norm(vectors[0]) / np.linalg.norm(v)) for v in vectors[1:]]


HIKE_AT = 1_683_547_200_000  # 8 May 2023, 12:00 UTC: each turn is indexed as "(8 May 2023) User: ..."
THRESHOLD = 0.15  # the documented AGTOS_MEMORY_SIMILARITY_THRESHOLD default


def test_similarity_threshold_filters_vector_hits_in_every_mode_and_in_context(serve: Serve) -> None:
    context = {"query": NO_SHARED_WORDS, "token_budget": 400}
    evidence_tiers = {"turn", "episodic", "semantic", "conclusion"}
    with serve() as client:  # the default threshold keeps the paraphrase
        turns = [{"role": r, "content": c, "timestamp": HIKE_AT + i * 60_000} for i, (r, c) in enumerate(HIKE)]
        assert client.post("/api/memory/sessions/hike/turns", json={"turns": turns}, headers=user("hiker")).is_success
        episode = client.post("/api/memory/sessions/hike/end", headers=user("hiker")).json()["episode"]
        lines = [f"(8 May 2023) {role.capitalize()}: {content}" for role, content in HIKE]
        assert [h["matchType"] for h in search(client, NO_SHARED_WORDS, "vector")] == ["semantic"]
        # the documented 0.15, on the summary and on each turn, in every mode: probes whose cosines
        # (computed here) sit on both sides of it, none within 0.005 (stored vectors are rounded)
        weak, unrelated = "favourite sports", "music"  # no word in common with the hike
        weak_turns = cosines(client, weak, lines)
        kept = [HIKE[i][1] for i in sorted(range(4), key=lambda i: -weak_turns[i]) if weak_turns[i] >= THRESHOLD]
        # a hit scores by its best evidence: here a turn (the episode's own vector is the mean of its
        # turns' and facts' vectors, weaker than its best turn on a probe that only one turn matches)
        best = max(weak_turns)
        assert kept and THRESHOLD + 0.005 < min(c for c in weak_turns if c >= THRESHOLD) <= best < 0.25
        assert 0.08 < max(c for c in weak_turns if c < THRESHOLD) < THRESHOLD - 0.005  # a weak turn left out
        assert 0.1 < max(cosines(client, unrelated, [episode["summary"], *lines])) < THRESHOLD - 0.005
        for mode in ("vector", "hybrid", None):
            hits = search(client, weak, mode)
            assert [[h["text"] for h in hit["highlights"]] for hit in hits] == [kept], mode
            assert search(client, unrelated, mode) == [], mode
        assert search(client, weak, "vector")[0]["score"] == pytest.approx(best, abs=0.003)  # a cosine
        said = client.post("/api/memory/context", json={"query": weak}, headers=user("hiker")).json()["items"]
        assert {f"{episode['id']}.t{HIKE.index(t)}" for t in HIKE if t[1] in kept} <= {i["id"] for i in said}
        nothing = client.post("/api/memory/context", json={"query": unrelated}, headers=user("hiker")).json()
        assert [i for i in nothing["items"] if i["tier"] in evidence_tiers] == []
        assert [h["matchType"] for h in search(client, NO_SHARED_WORDS, "hybrid")] == ["semantic"]
        items = client.post("/api/memory/context", json=context, headers=user("hiker")).json()["items"]
        # the paraphrase's evidence: the hike's turns (its summary, which they say already, is not repeated)
        assert "turn" in {i["tier"] for i in items}
        assert {i["episodeId"] for i in items if i["tier"] in evidence_tiers} == {episode["id"]}
    with serve(AGTOS_MEMORY_SIMILARITY_THRESHOLD="0.95") as client:
        assert search(client, NO_SHARED_WORDS, "vector") == []
        assert search(client, NO_SHARED_WORDS, "hybrid") == []
        assert search(client, NO_SHARED_WORDS) == []  # the default mode
        items = client.post("/api/memory/context", json=context, headers=user("hiker")).json()["items"]
        assert [i for i in items if i["tier"] in evidence_tiers] == []
        assert [h["matchType"] for h in search(client, "Swiss Alps mountain huts", "hybrid")] == ["keyword"]


def test_hnsw_ef_search_and_build_threads_reach_the_vector_index(serve: Serve) -> None:
    with serve(AGTOS_HNSW_EF_SEARCH="64", AGTOS_HNSW_BUILD_THREADS="3") as client:
        params = coordinator_of(client).semantic.store("episode").vectors.stats()["params"]
    assert params["expansionSearch"] == 64 and params["buildThreads"] == 3


def test_embedding_provider_and_query_expansion(serve: Serve) -> None:
    with StubModelServer() as stub:
        stub.queue_chat('{"queries": ["alpine trekking", "mountain hut trip"]}')
        with serve(
            AGTOS_EMBEDDING_PROVIDER="ollama",
            AGTOS_EMBEDDING_BASE_URL=stub.url,
            AGTOS_EMBEDDING_MODEL="stub-embed",
            AGTOS_MEMORY_QUERY_EXPANSION="true",
            AGTOS_EXPANSION_PROVIDER="ollama",
            AGTOS_EXPANSION_BASE_URL=stub.url,
            AGTOS_EXPANSION_MODEL="stub-chat",
        ) as client:
            talk(client, "hiker", "hike", *HIKE)
            assert search(client, "Swiss Alps")[0]["matchType"] == "hybrid"
            assert "ollama" in client.get("/health").json()["tiers"]["semantic"]["embedder"]
        embeds = stub.requests_to("/api/embed")
        assert embeds and {r.body["model"] for r in embeds} == {"stub-embed"}
        chats = stub.requests_to("/api/chat")
        assert len(chats) == 1 and chats[0].body["model"] == "stub-chat"  # one expansion, for the search


def test_llm_slots_from_env_and_config_file(serve: Serve, env: pytest.MonkeyPatch, tmp_path: Path) -> None:
    with StubModelServer() as stub:
        stub.chat_responder = lambda body: "From the stub: you enjoy hiking in the Alps."
        with serve(AGTOS_DIALECTIC_PROVIDER="ollama", AGTOS_DIALECTIC_BASE_URL=stub.url) as client:
            talk(client, "hiker", "hike", *HIKE)
            answer = client.post("/api/memory/ask", json={"question": "What trips do I like?"}, headers=user("hiker"))
            assert answer.json()["source"].startswith("llm:") and "From the stub" in answer.json()["answer"]
        (tmp_path / "config").mkdir(exist_ok=True)
        slot = {"provider": "ollama", "model": "judge", "base_url": stub.url}
        (tmp_path / "config" / "config.json").write_text(json.dumps({"slots": {"dialectic": slot}}))
        with serve() as client:
            answer = client.post("/api/memory/ask", json={"question": "What trips do I like?"}, headers=user("hiker"))
            assert answer.json()["source"].startswith("llm:")
        assert stub.requests_to("/api/chat")[-1].body["model"] == "judge"
        (tmp_path / "config" / "config.json").unlink()
        with serve() as client:  # no slot anywhere: the extractive answer
            answer = client.post("/api/memory/ask", json={"question": "What trips do I like?"}, headers=user("hiker"))
            assert answer.json()["source"] == "extractive"


# -- requests, sessions, imports ----------------------------------------------------------
def test_max_body_bytes(serve: Serve) -> None:
    body = {"turns": [{"role": "user", "content": "x" * 3_000}]}
    with serve(AGTOS_MAX_BODY_BYTES="2048") as client:
        assert client.post("/api/memory/sessions/s/turns", json=body, headers=user("big")).status_code == 413
        small = {"turns": [{"role": "user", "content": "x" * 1_000}]}
        assert client.post("/api/memory/sessions/s/turns", json=small, headers=user("big")).status_code == 200
    with serve() as client:  # 1 MiB by default
        assert client.post("/api/memory/sessions/s/turns", json=body, headers=user("big")).status_code == 200


def test_session_idle_minutes_ends_silent_sessions(serve: Serve) -> None:
    with serve(AGTOS_SESSION_IDLE_MINUTES="0.005") as client:  # 0.3 s
        post_turns(client, "quiet", [content for _, content in HIKE], user_id="hiker")

        def state() -> tuple[int, int]:  # (episodes saved, status of the live session)
            saved = client.get("/api/memory/episodes", headers=user("hiker")).json()["count"]
            return saved, client.get("/api/memory/sessions/quiet", headers=user("hiker")).status_code

        # the sweeper saves the episode, then clears the session: poll for both (the episode is
        # listed a moment before the session is gone)
        deadline = time.monotonic() + 15
        while state() != (1, 404) and time.monotonic() < deadline:
            time.sleep(0.2)
        assert state() == (1, 404)


def test_import_home(serve: Serve, tmp_path: Path) -> None:
    home = tmp_path / "elsewhere"
    (home / ".claude").mkdir(parents=True)
    (home / ".claude" / "CLAUDE.md").write_text("# Notes\n\n- I prefer tabs over spaces.\n- My editor is Helix.\n")
    with serve(AGTOS_IMPORT_HOME=str(home), AGTOS_IMPORT_ENABLED="true") as client:
        from agtos.cli import app as cli_app  # issue 15: imports over HTTP need a service key and the opt-in

        key = CliRunner().invoke(cli_app, ["keys", "create", "--service", "ops"]).stdout.strip()
        client.headers["Authorization"] = f"Bearer {key}"
        sources = client.get("/api/memory/sources").json()["sources"]
        assert [(s["source"], s["path"]) for s in sources] == [("claude_code", ".claude/CLAUDE.md")]  # relative
        imported = client.post("/api/memory/import", json={"sources": ["claude_code"]}, headers=user("dev")).json()
        assert imported["memoriesAdded"] == 2


def test_port_reaches_uvicorn(env: pytest.MonkeyPatch) -> None:
    """``agtos serve`` hands AGTOS_PORT to uvicorn (uvicorn.run replaced: no server is started)."""
    import uvicorn

    from agtos.cli import app

    calls: list[dict[str, Any]] = []
    env.setattr(uvicorn, "run", lambda target, **kwargs: calls.append({"target": target, **kwargs}))
    env.setenv("AGTOS_PORT", "5123")
    assert CliRunner().invoke(app, ["serve"]).exit_code == 0
    env.delenv("AGTOS_PORT")
    assert CliRunner().invoke(app, ["serve"]).exit_code == 0
    assert [(c["target"], c["port"]) for c in calls] == [
        ("agtos.serving.main:app", 5123),
        ("agtos.serving.main:app", 4102),
    ]


# -- query-as-ingest ----------------------------------------------------------------------
def respond(client: TestClient, session: str, text: str) -> dict[str, Any]:
    body = {"session_id": session, "response": text}
    response = client.post("/api/memory/responses", json=body, headers=user("agent"))
    assert response.status_code == 200, response.text
    return response.json()


def test_query_ingest_threshold(serve: Serve) -> None:
    scored_five = "In summary, use Redis."  # baseline 4 + synthesis 1
    with serve() as client:  # default threshold 6
        decision = respond(client, "q1", scored_five)
        assert (decision["score"], decision["ingest"], decision["reason"]) == (5, False, "below-threshold")
    with serve(AGTOS_QUERY_INGEST_THRESHOLD="5") as client:
        decision = respond(client, "q2", scored_five)
        assert decision["ingest"] is True and decision["reason"] == "ingest"


def test_query_ingest_max_per_session(serve: Serve) -> None:
    valuable = "First, restart the worker. Then clear the queue."  # scores 6
    with serve(AGTOS_QUERY_INGEST_MAX_PER_SESSION="1") as client:
        assert respond(client, "cap", valuable)["ingest"] is True
        assert respond(client, "cap", valuable + " Done.")["reason"] == "session-cap"
    with serve() as client:  # 5 per session: the next refusal is the 5 s dedup window instead
        assert respond(client, "nocap", valuable)["ingest"] is True
        assert respond(client, "nocap", valuable + " Done.")["reason"] == "dedup-window"


# -- maintenance and the resource guard ---------------------------------------------------
def maintain(client: TestClient, user_id: str = LINT_USER) -> dict[str, Any]:
    return run_maintenance(client, user_id)["report"]


def step_ids(report: dict[str, Any]) -> dict[str, list[str]]:
    return {s["step"]: s["ids"] for s in report["steps"]}


def test_maintenance_thresholds(serve: Serve) -> None:
    """One sweep of the crafted set with every lint threshold moved; tests/test_lint.py checks the
    defaults on the same set (stale ["c-stale"], merge ["c-dup1"], orphans ["ep-orphan"], prune ["c-weak"])."""
    with serve(
        AGTOS_BACKGROUND_WORK_POLICY="always",
        AGTOS_MAINTENANCE_STALE_DAYS="50",  # c-stale is 40 days old
        AGTOS_MAINTENANCE_JACCARD="0.95",  # the two duplicates have Jaccard 0.92
        AGTOS_MAINTENANCE_ORPHAN_IMPORTANCE="6",  # 0-10 scale: episodes below 0.6 without conclusions
        AGTOS_MAINTENANCE_PRUNE_CONFIDENCE="0.1",  # c-weak has 0.2
    ) as client:
        crafted(coordinator_of(client))
        ids = step_ids(maintain(client))
    assert ids["stale"] == [] and ids["merge"] == [] and ids["prune"] == []
    assert sorted(ids["orphans"]) == ["ep-kept", "ep-orphan"]


def test_maintenance_kill_switch_and_nli(serve: Serve) -> None:
    with serve(AGTOS_BACKGROUND_WORK_POLICY="always", AGTOS_NLI_ENABLED="false") as client:
        crafted(coordinator_of(client))
        report = maintain(client)
        assert report["summary"]["contradictionPipeline"]["nli"] == "disabled"
        assert report["summary"]["contradictionPipeline"]["counters"]["nliChecked"] == 0
    with serve(AGTOS_BACKGROUND_WORK_POLICY="always", AGTOS_MAINTENANCE_ENABLED="false") as client:
        response = client.post("/api/memory/maintain", headers=user(LINT_USER))
        assert response.status_code == 409 and "disabled" in response.json()["message"]
        assert client.get("/health").json()["checks"]["memory-maintenance"]["enabled"] is False


def test_maintenance_timezone_schedules_the_nightly_lint(env: pytest.MonkeyPatch) -> None:
    from agtos.flows.deployments import build_deployments

    env.setenv("AGTOS_MAINTENANCE_TIMEZONE", "Europe/Paris")
    nightly = {d.name: d for d in build_deployments()}["nightly-lint"]
    assert [(s.schedule.cron, s.schedule.timezone) for s in nightly.schedules] == [("0 3 * * *", "Europe/Paris")]


def test_guard_retries_and_delay_bound_the_wait(serve: Serve) -> None:
    with serve(AGTOS_MAINTENANCE_GUARD_RETRIES="2", AGTOS_MAINTENANCE_GUARD_DELAY_S="0.2") as client:
        post_turns(client, "live", ["I am still talking"], user_id=LINT_USER)  # an active session: defer
        started = time.monotonic()
        report = within(20, lambda: maintain(client))
        elapsed = time.monotonic() - started
    assert report["summary"]["status"] == "deferred" and report["summary"]["attempts"] == 3
    assert report["summary"]["reasons"] == ["active-session"] * 3
    assert 0.4 <= elapsed < 20


def test_background_work_policy_always_runs_during_a_session(serve: Serve) -> None:
    for policy, status in (("always", "completed"), ("auto", "deferred")):
        with serve(AGTOS_BACKGROUND_WORK_POLICY=policy, AGTOS_MAINTENANCE_GUARD_RETRIES="0") as client:
            post_turns(client, "live", ["I am still talking"], user_id=LINT_USER)
            assert maintain(client)["summary"]["status"] == status
            assert client.get("/health").json()["checks"]["resource-guard"]["policy"] == policy


def test_background_local_hosts_make_a_remote_llm_local(serve: Serve) -> None:
    """An Ollama on gpu-box.lan is remote (work runs during a session) until listed as local."""
    slot = {
        "AGTOS_MAINTENANCE_PROVIDER": "ollama",
        "AGTOS_MAINTENANCE_BASE_URL": "http://gpu-box.lan:11434",
        "AGTOS_MAINTENANCE_GUARD_RETRIES": "0",
    }
    with serve(**slot) as client:
        post_turns(client, "live", ["I am still talking"], user_id="empty-user")
        assert maintain(client, "empty-user")["summary"]["status"] == "completed"  # remote-ollama: safe
    with serve(AGTOS_BACKGROUND_LOCAL_HOSTS="printer.lan, GPU-box.lan", **slot) as client:
        post_turns(client, "live", ["I am still talking"], user_id="empty-user")
        summary = maintain(client, "empty-user")["summary"]
        assert summary["status"] == "deferred" and summary["reasons"] == ["active-session"]


def test_background_recent_session_s(serve: Serve) -> None:
    for value, deferred in (("", True), ("0", False)):  # unset: 30 s after a session ends
        with serve(AGTOS_BACKGROUND_RECENT_SESSION_S=value, AGTOS_MAINTENANCE_GUARD_RETRIES="0") as client:
            post_turns(client, "short", ["hi"], user_id="empty-user")
            client.post("/api/memory/sessions/short/end", headers=user("empty-user"))
            reasons = maintain(client, "empty-user")["summary"].get("reasons", [])
            assert ("recent-session-end" in reasons) is deferred, reasons


def test_dreamer_retries_and_delay(serve: Serve) -> None:
    """LLM consolidation deferred by an active session gives up after retries × delay (1 × 1 s)."""
    with StubModelServer() as stub:
        with serve(
            AGTOS_CONSOLIDATION_PROVIDER="ollama",
            AGTOS_CONSOLIDATION_BASE_URL=stub.url,
            AGTOS_DREAMER_RETRIES="1",
            AGTOS_DREAMER_RETRY_DELAY_S="1.0",
        ) as client:
            post_turns(client, "other", ["still here"], user_id="hiker")  # keeps the guard deferring
            talk(client, "hiker", "hike", *HIKE)  # the Dreamer's first check defers at the session end
            started = time.monotonic()
            assert coordinator_of(client).dreamer.wait(timeout_s=4)  # the defaults (5 × 60 s) would not
            assert 0.8 <= time.monotonic() - started < 3  # one wait of 1 s, not five
        assert stub.requests_to("/api/chat") == []  # it never ran


# -- variables the tests above leave out -----------------------------------------------------
def folded_summary(serve: Serve, **variables: str) -> str:
    """The summary a nine-turn session folds into (AGTOS_WM_MAX_MESSAGES=8) in an app built from ``variables``."""
    with serve(AGTOS_WM_MAX_MESSAGES="8", **variables) as client:
        state = post_turns(client, f"fold-{uuid.uuid4().hex[:8]}", numbered(9))  # a new session: none replayed
    assert state["compactions"] == 1 and state["messages"][0]["is_summary"] is True
    return state["messages"][0]["content"]


SUMMARISED = "Summary of earlier conversation: The user listed numbered subjects."


def test_default_llm_slot_and_summarize_slot(serve: Serve) -> None:
    """AGTOS_LLM_* is the slot every task falls back to (here the fold's summary); AGTOS_SUMMARIZE_* overrides it."""
    with StubModelServer() as stub:
        stub.api_key = "sk-default"
        stub.chat_responder = lambda body: "The user listed numbered subjects."
        default = {
            "AGTOS_LLM_PROVIDER": "openai",
            "AGTOS_LLM_BASE_URL": f"{stub.url}/v1",
            "AGTOS_LLM_MODEL": "chat-default",
            "AGTOS_LLM_API_KEY": "sk-default",
        }
        assert folded_summary(serve, **default) == SUMMARISED
        chats = stub.requests_to("/v1/chat/completions")
        assert [(r.body["model"], r.headers["authorization"]) for r in chats] == [("chat-default", "Bearer sk-default")]
        extractive = folded_summary(serve)  # no LLM anywhere
        assert extractive != SUMMARISED
        assert folded_summary(serve, **default | {"AGTOS_LLM_API_KEY": "sk-wrong"}) == extractive  # 401: fallback
        stub.delay_s = 1.5
        assert folded_summary(serve, AGTOS_LLM_TIMEOUT_S="0.3", **default) == extractive  # gave up before the reply
        stub.delay_s = 0.0
        own = {"AGTOS_SUMMARIZE_PROVIDER": "ollama", "AGTOS_SUMMARIZE_BASE_URL": stub.url}
        own["AGTOS_SUMMARIZE_MODEL"] = "sum"
        assert folded_summary(serve, **default, **own) == SUMMARISED
        assert [r.body["model"] for r in stub.requests_to("/api/chat")] == ["sum"]
        assert len(stub.requests_to("/v1/chat/completions")) == 3  # the default slot was not asked again


def test_embedding_api_key_and_timeout(serve: Serve) -> None:
    with StubModelServer() as stub:
        stub.api_key = "sk-embed"
        remote = {
            "AGTOS_EMBEDDING_PROVIDER": "openai",
            "AGTOS_EMBEDDING_BASE_URL": f"{stub.url}/v1",
            "AGTOS_EMBEDDING_MODEL": "stub-embed",
            "AGTOS_EMBEDDING_API_KEY": "sk-embed",
        }
        with serve(**remote) as client:
            talk(client, "hiker", "hike", *HIKE)
            assert [h["matchType"] for h in search(client, "Swiss Alps mountain huts")] == ["hybrid"]
        assert {r.headers["authorization"] for r in stub.requests_to("/v1/embeddings")} == {"Bearer sk-embed"}
        with serve(**remote | {"AGTOS_EMBEDDING_API_KEY": "sk-wrong"}) as client:  # 401: keyword search only
            assert [h["matchType"] for h in search(client, "Swiss Alps mountain huts")] == ["keyword"]
        stub.delay_s = 1.0
        with serve(**remote) as client:  # the default 30 s waits for the slow server
            assert [h["matchType"] for h in search(client, "Swiss Alps mountain huts")] == ["hybrid"]
        with serve(AGTOS_EMBEDDING_TIMEOUT_S="0.3", **remote) as client:
            assert [h["matchType"] for h in search(client, "Swiss Alps mountain huts")] == ["keyword"]


def test_embedding_quantize_derives_its_model_under_the_data_dir(serve: Serve, tmp_path: Path) -> None:
    elsewhere = tmp_path / "elsewhere"
    with serve(AGTOS_DATA_DIR=str(elsewhere), AGTOS_EMBEDDING_QUANTIZE="int8", AGTOS_EMBEDDING_THREADS="1") as client:
        talk(client, "hiker", "hike", *HIKE)
        assert [h["matchType"] for h in search(client, NO_SHARED_WORDS, "vector")] == ["semantic"]
        assert coordinator_of(client).semantic.embedder.intra_op_threads == 1
    assert [p.name.endswith("-dynint8-perchannel-constb-v1.onnx") for p in (elsewhere / "models").iterdir()] == [True]
    assert not (tmp_path / "data" / "models").exists()


@pytest.mark.parametrize(
    ("name", "value"),
    [
        ("AGTOS_REDIS_TIMEOUT_S", "0"),
        ("AGTOS_REDIS_TIMEOUT_S", "soon"),
        ("AGTOS_PORT", "70000"),
        ("AGTOS_SESSION_JOURNAL_TTL_HOURS", "0"),
        ("AGTOS_EMBEDDING_PROVIDER", "word2vec"),
        ("AGTOS_EMBEDDING_QUANTIZE", "int4"),
        ("AGTOS_EMBEDDING_THREADS", "0"),
        ("AGTOS_EMBEDDING_TIMEOUT_S", "-1"),
        ("AGTOS_LLM_TIMEOUT_S", "a minute"),
        ("AGTOS_SUMMARIZE_TIMEOUT_S", "0"),
        ("AGTOS_MEMORY_QUERY_EXPANSION", "sometimes"),
        ("AGTOS_HNSW_BUILD_THREADS", "-1"),
        ("AGTOS_MAINTENANCE_STALE_DAYS", "-1"),
        ("AGTOS_MAINTENANCE_PRUNE_CONFIDENCE", "2"),
        ("AGTOS_MAINTENANCE_GUARD_DELAY_S", "later"),
        ("AGTOS_QUERY_INGEST_THRESHOLD", "-1"),
        ("AGTOS_DREAMER_RETRY_DELAY_S", "-5"),
    ],
)
def test_more_invalid_values_stop_the_app(env: pytest.MonkeyPatch, name: str, value: str) -> None:
    env.setenv(name, value)
    if name in ("AGTOS_LLM_TIMEOUT_S", "AGTOS_SUMMARIZE_TIMEOUT_S"):  # a slot is read when it names a provider
        env.setenv(name.replace("TIMEOUT_S", "PROVIDER"), "ollama")
    with pytest.raises(ValueError, match=f"^{name}"):
        create_app()


def test_nli_model_dir_loads_the_model_it_names(serve: Serve, tmp_path: Path) -> None:
    from tests.test_nli_model import build_model_dir

    model_dir = build_model_dir(tmp_path / "tiny-nli")
    for model, nli in (("", "lexical-negation-fallback"), (str(model_dir), "onnx-nli:tiny-nli")):
        with serve(AGTOS_BACKGROUND_WORK_POLICY="always", AGTOS_NLI_MODEL_DIR=model) as client:  # "": unset
            crafted(coordinator_of(client))
            assert maintain(client)["summary"]["contradictionPipeline"]["nli"] == nli
