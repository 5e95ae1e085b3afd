"""Privacy (README "Privacy", ``PUT /api/memory/privacy``, ``POST /api/memory/forget``): fast
checks of what forget and opt-out answer, delete and keep, with literal expectations.

The slow end-to-end traces (every key family, prefix-related users) are in test_forget_trace.py;
these are the cheap ones ``make mutation`` runs for every mutant of ``agtos/memory/privacy_controls.py``.
"""

from __future__ import annotations

import time
from pathlib import Path

import numpy as np
import pytest
import redis
from fastapi.testclient import TestClient

from agtos.config import Settings
from agtos.memory.coordinator import MemoryCoordinator
from agtos.memory.privacy_controls import NotFoundError, OptedOutError
from agtos.schemas import Episode, IngestItem
from agtos.schemas.records import now_ms
from agtos.storage.keys import InvalidIdentifier
from agtos.tasks.contradiction import NLIVerdict
from tests.helpers import inductive_conclusion, user, user_key_names
from tests.redis_process import RedisProcess

OPT_OUT_LIST = "{prefix}:meta:privacy:opt-out"  # stored state: an opt-out written earlier must stay honoured


def put_episode(coordinator: MemoryCoordinator, user_id: str, episode_id: str, summary: str) -> None:
    episode = Episode(id=episode_id, user_id=user_id, summary=summary, keywords=summary.lower().split()[:3])
    coordinator.ingest([IngestItem(user_id=user_id, episode=episode)])


def test_opt_out_is_stored_in_redis_for_every_process(
    client: TestClient, settings: Settings, raw_redis: redis.Redis, key_prefix: str
) -> None:
    opt_out_list = OPT_OUT_LIST.format(prefix=key_prefix)
    body = client.put("/api/memory/privacy", json={"opt_out": True}, headers=user("olga")).json()
    assert body == {"userId": "olga", "optOut": True, "keysDeleted": 0}
    assert raw_redis.smembers(opt_out_list) == {b"olga"}
    other = MemoryCoordinator(settings)  # another API worker: it knows only what Redis holds
    try:
        assert other.privacy.is_opted_out("olga") is True and other.privacy.is_opted_out("olgb") is False
        with pytest.raises(OptedOutError, match=r"^user 'olga' opted out of persistence"):
            other.privacy.require_persistence("olga")
    finally:
        other.close()
    back = client.put("/api/memory/privacy", json={"opt_out": False}, headers=user("olga")).json()
    assert back == {"userId": "olga", "optOut": False, "keysDeleted": 0}
    assert raw_redis.smembers(opt_out_list) == set()
    third = MemoryCoordinator(settings)
    try:
        assert third.privacy.is_opted_out("olga") is False
    finally:
        third.close()
    raw_redis.sadd(opt_out_list, "omar")  # written by an earlier process (or version)
    assert client.get("/api/memory/privacy", headers=user("omar")).json() == {"userId": "omar", "optOut": True}
    assert client.put("/api/memory/profile", json={"name": "Omar"}, headers=user("omar")).status_code == 403


def test_opt_out_keeps_data_unless_asked_and_opting_in_never_forgets(
    client: TestClient, coordinator: MemoryCoordinator, raw_redis: redis.Redis, key_prefix: str
) -> None:
    put_episode(coordinator, "pam", "ep-pam", "Pam booked the night train to Vienna")
    kept = user_key_names(raw_redis, key_prefix, "pam")
    assert kept
    assert coordinator.privacy.set_opt_out("pam", True)["keysDeleted"] == 0  # the default: keep
    assert client.put("/api/memory/privacy", json={"opt_out": True}, headers=user("pam")).json()["keysDeleted"] == 0
    assert user_key_names(raw_redis, key_prefix, "pam") == kept
    back = client.put("/api/memory/privacy", json={"opt_out": False, "forget_existing": True}, headers=user("pam"))
    assert back.json() == {"userId": "pam", "optOut": False, "keysDeleted": 0}  # forget_existing only with opt-out
    assert user_key_names(raw_redis, key_prefix, "pam") == kept
    gone = client.put("/api/memory/privacy", json={"opt_out": True, "forget_existing": True}, headers=user("pam"))
    assert gone.json() == {"userId": "pam", "optOut": True, "keysDeleted": len(kept)}
    assert user_key_names(raw_redis, key_prefix, "pam") == set()


def test_forget_all_counts_every_key_and_drops_the_live_session(
    client: TestClient, coordinator: MemoryCoordinator, raw_redis: redis.Redis, key_prefix: str
) -> None:
    put_episode(coordinator, "bea", "ep-bea", "Bea plays the cello in a string quartet")
    turns = {"turns": [{"role": "user", "content": "Still choosing a bow for the cello."}]}
    assert client.post("/api/memory/sessions/live/turns", json=turns, headers=user("bea")).status_code == 200
    assert client.post("/api/memory/sessions/live/turns", json=turns, headers=user("be")).status_code == 200
    assert coordinator.working.active_sessions("bea") == [("bea", "live")]  # held in this process
    # more keys than one UNLINK batch (500): the count must add up over batches
    raw_redis.mset({f"{key_prefix}:u:{{bea}}:scratch:{i}": i for i in range(1_234)})
    raw_redis.set(f"{key_prefix}:u:{{be}}:scratch:0", 0)  # a prefix neighbour, untouched
    expected = len(user_key_names(raw_redis, key_prefix, "bea"))
    neighbour = user_key_names(raw_redis, key_prefix, "be")
    assert f"{key_prefix}:u:{{be}}:scratch:0" in neighbour and len(neighbour) > 1  # its live session too
    assert expected > 1_234
    body = client.post("/api/memory/forget", json={"kind": "all"}, headers=user("bea")).json()
    assert body == {"forgotten": "all", "userId": "bea", "keysDeleted": expected}
    # bea's working memory is gone from this process at once (not only once a read finds no journal)
    assert coordinator.working.active_sessions() == [("be", "live")]
    assert user_key_names(raw_redis, key_prefix, "bea") == set()
    assert user_key_names(raw_redis, key_prefix, "be") == neighbour
    assert client.get("/api/memory/sessions/live", headers=user("bea")).status_code == 404
    assert "bea" not in coordinator.known_users()


def test_forget_one_record_answers_and_refuses_precisely(client: TestClient, coordinator: MemoryCoordinator) -> None:
    put_episode(coordinator, "hugo", "ep-hugo", "Hugo repairs vintage typewriters")
    query = "vintage typewriters"
    assert [h.episode.id for h in coordinator.search_episodes("hugo", query, 5, "vector")] == ["ep-hugo"]
    assert coordinator.semantic.embedder.cache.get(query) is not None
    gone = client.post("/api/memory/forget", json={"kind": "episode", "id": "ep-hugo"}, headers=user("hugo"))
    derived = {"memories": 0, "conclusions": 0, "entities": 1}  # learnt from it alone: the person "Hugo"
    assert gone.status_code == 200
    assert gone.json() == {"forgotten": {"kind": "episode", "id": "ep-hugo"}, "derived": derived}
    assert coordinator.semantic.embedder.cache.get(query) is None  # no forgotten text lingers in memory
    again = client.post("/api/memory/forget", json={"kind": "episode", "id": "ep-hugo"}, headers=user("hugo"))
    assert again.status_code == 404 and again.json() == {"message": "no episode 'ep-hugo' for this user"}
    with pytest.raises(ValueError, match=r"kind must be one of \('episode', 'memory', 'conclusion', 'entity'\)"):
        coordinator.privacy.forget_item("hugo", "profile", "ep-hugo")
    with pytest.raises(InvalidIdentifier, match=r"^memory id must be"):
        coordinator.privacy.forget_item("hugo", "memory", "not an id!")


def test_forget_episode_drops_its_dreamer_marker(
    coordinator: MemoryCoordinator, raw_redis: redis.Redis, key_prefix: str
) -> None:
    put_episode(coordinator, "dina", "ep-dina", "Dina adopted a greyhound")
    put_episode(coordinator, "dina", "ep-dina-2", "Dina runs every morning")
    for episode_id in ("ep-dina", "ep-dina-2"):  # what a session end leaves: the Dreamer's run-once marker
        coordinator.dreamer.on_session_ended({"user_id": "dina", "session_id": "s", "episode_id": episode_id})
    assert {k for k in user_key_names(raw_redis, key_prefix, "dina") if k.endswith(":ep-dina")}
    coordinator.privacy.forget_item("dina", "episode", "ep-dina")
    assert not {k for k in user_key_names(raw_redis, key_prefix, "dina") if k.endswith(":ep-dina")}
    assert {k for k in user_key_names(raw_redis, key_prefix, "dina") if k.endswith(":dreamed:ep-dina-2")}
    # the record gone already (deleted by the store, as a prune or an expiry would): what was learnt
    # from it alone still goes (the entity "Dina", no longer named by ep-dina), then 404; no marker left
    assert coordinator.semantic.delete("episode", "dina", "ep-dina-2")
    assert coordinator.privacy.forget_item("dina", "episode", "ep-dina-2")["derived"]["entities"] == 1
    with pytest.raises(NotFoundError, match=r"^no episode 'ep-dina-2' for this user$"):
        coordinator.privacy.forget_item("dina", "episode", "ep-dina-2")
    assert not {k for k in user_key_names(raw_redis, key_prefix, "dina") if k.endswith(":ep-dina-2")}


def test_forget_conclusion_clears_that_users_verdict_cache(client: TestClient, coordinator: MemoryCoordinator) -> None:
    stamp = now_ms()
    verdict = {"k1": NLIVerdict("contradiction", {"contradiction": 0.8})}
    for uid in ("cora", "cole"):
        conclusions = [
            inductive_conclusion(uid, f"{uid}-{i}", text, stamp)
            for i, text in enumerate(("User is vegetarian", "User eats steak every day"))
        ]
        dim = coordinator.semantic.embedder.dim
        coordinator.conclusions.upsert_many(conclusions, np.eye(2, dim, dtype=np.float32))
        coordinator.nli_cache.put_many(uid, verdict)
    gone = client.post("/api/memory/forget", json={"kind": "conclusion", "id": "cora-0"}, headers=user("cora"))
    assert gone.json() == {"forgotten": {"kind": "conclusion", "id": "cora-0"}, "derived": None}
    assert [c.id for c in coordinator.list_conclusions("cora")] == ["cora-1"]
    assert coordinator.nli_cache.get_many("cora", ["k1"]) == {}
    assert coordinator.nli_cache.get_many("cole", ["k1"])["k1"].label == "contradiction"  # another user's stays
    again = client.post("/api/memory/forget", json={"kind": "conclusion", "id": "cora-0"}, headers=user("cora"))
    assert again.status_code == 404 and again.json() == {"message": "no conclusion 'cora-0' for this user"}


def test_forget_all_in_a_fresh_process_and_the_opt_out_check_when_redis_is_away(tmp_path: Path) -> None:
    """The opt-out check is cached for 2 s per process (one SISMEMBER for a burst of writes) and,
    with Redis unreachable, answers the last value seen (False for a user never seen)."""
    server = RedisProcess(tmp_path / "redis").start()
    settings = Settings(
        redis_url=server.url, key_prefix="p", data_dir=tmp_path / "d", config_dir=tmp_path / "c", redis_timeout_s=0.3
    )
    first, second = MemoryCoordinator(settings), MemoryCoordinator(settings)
    try:
        raw = redis.Redis.from_url(server.url)
        raw.set("p:u:{ina}:scratch", 1)
        # nothing embedded yet in this process (no query cache): forget-all still works
        assert first.privacy.forget_all("ina") == {"forgotten": "all", "userId": "ina", "keysDeleted": 1}
        first.privacy.set_opt_out("ola", True)
        raw.config_resetstat()
        read_at = time.monotonic()
        assert [second.privacy.is_opted_out("ola") for _ in range(3)] == [True, True, True]
        assert raw.info("commandstats")["cmdstat_sismember"]["calls"] == 1
        server.stop()
        time.sleep(max(0.0, read_at + 2.05 - time.monotonic()))  # past the 2 s cache: Redis is asked, and away
        assert second.privacy.is_opted_out("ola") is True  # what it read from Redis
        assert first.privacy.is_opted_out("ola") is True  # what it wrote itself
        assert second.privacy.is_opted_out("nia") is False
    finally:
        first.close()
        second.close()
        server.stop()
