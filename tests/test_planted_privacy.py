"""Planted-bug audit of the privacy and derived-knowledge code mutmut does not cover (issue 20).

Each test here kills a realistic one-line bug that the rest of the suite let through (planted one
at a time in a copy, docs/testing.md "Planted bugs in the privacy and derived-knowledge code"):
forget-all fences kept too briefly or compared one millisecond off, an episode forget that does not
rebuild the profile, ... Real Redis and the bundled models, through HTTP where practical.
"""

from __future__ import annotations

import json
from dataclasses import replace
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import numpy as np
import pytest
import redis
from fastapi.testclient import TestClient

from agtos.memory.coordinator import MemoryCoordinator
from agtos.memory.export import export_snapshot
from agtos.memory.lint_pipeline import INLINE_STEPS, LintState, maintain, step_merge
from agtos.memory.lint_pipeline import load as lint_load
from agtos.memory.resource_guard import ActivityTracker, Policy
from agtos.memory.services import Services
from agtos.providers.llm import LLMError
from agtos.schemas import Conclusion, ConclusionType, EntityType, Episode, EpisodeType, Memory, MemoryKind, UserProfile
from agtos.tasks.mentions import EntityCandidate
from agtos.tasks.profile_builder import profile_update
from tests.helpers import end_session, talk, user, user_key_names
from tests.test_bitemporal import JAN_8_2024, MAR_15_2024, TURN_GAP_MS, session
from tests.test_forget_races import ALLERGY as ALLERGY_QUEUED
from tests.test_forget_races import (  # noqa: F401 - api: a fixture
    PIN,
    HookedEmbedder,
    api,
    forget_after_consolidation,
    forget_all,
    queue_end,
)
from tests.test_resource_guard import make_guard

DAY_MS = 86_400_000


def get(client: TestClient, who: str, path: str) -> Any:
    response = client.get(path, headers=user(who))
    assert response.status_code == 200, response.text
    return response.json()


# -- forget-all fences (agtos/storage/forget_fences.py) --------------------------------------


def test_a_forget_all_mark_is_kept_31_days_then_pruned(
    coordinator: MemoryCoordinator, raw_redis: redis.Redis, key_prefix: str
) -> None:
    """The module's spec: marks older than 31 days (longer than the 30-day episodic TTL) are pruned
    at each new mark, younger ones stay (a queued job up to 30 days old must still be fenced)."""
    fences, key = coordinator.services.fences, f"{key_prefix}:meta:forget_fences"
    fences.mark("olga")
    [member] = raw_redis.zrange(key, 0, -1)
    raw_redis.zincrby(key, -30 * DAY_MS, member)  # she forgot everything 30 days ago
    fences.mark("piet")  # someone else forgets: the prune runs
    assert set(fences.marks(["olga", "piet"])) == {"olga", "piet"}
    raw_redis.zincrby(key, -2 * DAY_MS, member)  # 32 days ago
    fences.mark("piet")
    assert set(fences.marks(["olga", "piet"])) == {"piet"}
    assert raw_redis.zcard(key) == 1


def test_work_that_took_its_data_in_the_forget_millisecond_is_fenced(coordinator: MemoryCoordinator) -> None:
    """ "At or after": data read in the very millisecond of the mark may predate the deletion."""
    fences = coordinator.services.fences
    at = fences.mark("olga")
    assert fences.forgotten_since({"olga": at}) == {"olga"}
    assert fences.forgotten_since({"olga": at - 1}) == {"olga"}
    assert fences.forgotten_since({"olga": at + 1}) == set()
    assert fences.forgotten_since({"piet": at - 1}) == set()  # no mark: never fenced


# -- forgetting an episode (agtos/memory/episode_cascade.py) ---------------------------------

ALLERGY = [
    {"role": "user", "content": "I am allergic to peanuts."},
    {"role": "assistant", "content": "Noted, no peanuts."},
]


def test_an_episode_forget_rebuilds_the_profile_when_only_conclusions_go(client: TestClient) -> None:
    """The user deleted the memory first; forgetting the episode then forgets only its conclusion,
    and the profile fact built on it must go too (the profile is rebuilt on a conclusion count)."""
    episode = end_session(client, "ines", "s1", ALLERGY)["episodeId"]
    assert [line for line in get(client, "ines", "/api/memory/profile")["profile"]["facts"] if "peanuts" in line]
    for memory in get(client, "ines", "/api/memory/memories?limit=100")["memories"]:
        deleted = client.delete(f"/api/memory/memories/{memory['id']}", headers=user("ines"))
        assert deleted.status_code == 200, deleted.text
    gone = client.post("/api/memory/forget", json={"kind": "episode", "id": episode}, headers=user("ines"))
    assert gone.status_code == 200, gone.text
    assert gone.json()["derived"]["memories"] == 0 and gone.json()["derived"]["conclusions"] >= 1
    profile = get(client, "ines", "/api/memory/profile")["profile"]
    assert not [line for line in profile["facts"] if "peanut" in line.lower()], profile
    assert not [s for s in profile["sources"] if "peanut" in s.lower()], profile


def test_an_episode_forget_finds_a_memory_no_keyword_index_holds(client: TestClient) -> None:
    """A memory citing the episode (``source``) in a script the keyword index has no terms for is
    still found by the episode's forget (the memory timeline, not only the BM25 ids)."""
    episode = end_session(client, "ines", "s1", ALLERGY)["episodeId"]
    body = {"text": "Пароль от почты: сова", "source": episode}
    stored = client.post("/api/memory/memories", json=body, headers=user("ines"))
    assert stored.status_code in (200, 201), stored.text
    texts = [m["text"] for m in get(client, "ines", "/api/memory/memories?limit=100")["memories"]]
    assert "Пароль от почты: сова" in texts
    gone = client.post("/api/memory/forget", json={"kind": "episode", "id": episode}, headers=user("ines"))
    assert gone.status_code == 200, gone.text
    assert get(client, "ines", "/api/memory/memories?limit=100")["memories"] == []


def asks_about_divorce(n: int) -> list[dict[str, str]]:
    """Session ``n``, said at 15:00 UTC ``2 - n`` days ago: an afternoon, so the Dreamer adds no morning habit
    (two sessions between 05:00 and 12:00 UTC make 'User is a morning person who checks divorce…': the test
    failed whenever the suite ran in those hours, as the CI of 05:00 UTC on 2026-12-06 did)."""
    said = [
        "I need advice on my divorce. My divorce lawyer wants more documents for the divorce filing.",
        "I need advice on my divorce hearing. My divorce lawyer says the divorce hearing is on Friday.",
    ][n]
    day = datetime.now(UTC).replace(hour=15, minute=0, second=0, microsecond=0) - timedelta(days=2 - n)
    return [
        {"role": "user", "content": said, "timestamp": day.isoformat()},
        {"role": "assistant", "content": "Sure: gather documents, list assets.", "timestamp": day.isoformat()},
    ]


def test_a_pattern_learnt_from_forgotten_episodes_leaves_the_profile(client: TestClient) -> None:
    """A recurring topic becomes the pattern 'User regularly asks about divorce' (an inductive
    conclusion on both sessions); forgetting both episodes forgets it, and its profile line must go
    too (it stayed, patterns were never rebuilt), while a pattern the user set stays."""
    put = client.put("/api/memory/profile", json={"patterns": ["User journals every night"]}, headers=user("ines"))
    assert put.status_code == 200, put.text
    episodes = [end_session(client, "ines", f"s{n}", asks_about_divorce(n))["episodeId"] for n in (0, 1)]
    profile = get(client, "ines", "/api/memory/profile")["profile"]
    assert profile["patterns"] == ["User journals every night", "User regularly asks about divorce"], profile
    for episode in episodes:
        gone = client.post("/api/memory/forget", json={"kind": "episode", "id": episode}, headers=user("ines"))
        assert gone.status_code == 200, gone.text
    assert get(client, "ines", "/api/memory/conclusions")["conclusions"] == []
    profile = get(client, "ines", "/api/memory/profile")["profile"]
    assert profile["patterns"] == ["User journals every night"], profile
    assert not [line for line in profile["sources"] if "divorce" in line], profile


# -- entities (agtos/memory/entity_memory.py, entity_graph.py) -------------------------------

WORK = (
    ("user", "Alice works at Acme Corp in Berlin; her project Falcon is due Friday."),
    ("assistant", "Got it."),
    ("user", "Thanks, please keep that in mind for next week."),
)


def keys_naming(raw: redis.Redis, prefix: str, who: str, needle: str) -> list[str]:
    """The user's keys whose name, members, fields or value contain ``needle`` (SCAN, then a read
    by type), so an index entry, an edge or a vector left behind shows."""
    found, blob = [], needle.encode()
    for key in sorted(user_key_names(raw, prefix, who)):
        if key.endswith(":changes"):  # an index's change log: ids changed (the deletion too), for mirrors
            continue
        kind = raw.type(key).decode()
        if kind == "string":
            parts = [raw.get(key) or b""]
        elif kind == "hash":
            parts = [b for kv in raw.hgetall(key).items() for b in kv]
        elif kind == "zset":
            parts = list(raw.zrange(key, 0, -1))
        elif kind == "set":
            parts = list(raw.smembers(key))
        elif kind == "list":
            parts = list(raw.lrange(key, 0, -1))
        else:
            parts = []
        if needle in key or any(blob in p for p in parts):
            found.append(key)
    return found


def test_forgetting_an_entity_deletes_the_edges_pointing_at_it(
    client: TestClient, raw_redis: redis.Redis, key_prefix: str
) -> None:
    """Privacy hard delete of Acme Corp: Alice's works-at edge (incoming to Acme) goes with it, and
    no key of the user names Acme's id any more (record, indexes, edges, name vector)."""
    assert talk(client, "ent", "s1", *WORK)["saved"]
    found = {e["name"]: e for e in get(client, "ent", "/api/entities?limit=100")["entities"]}
    alice, acme = found["Alice"]["id"], found["Acme Corp"]["id"]
    works = get(client, "ent", f"/api/entities/{alice}/relationships")["relationships"]
    assert [(r["type"], r["other"]["id"]) for r in works if r["type"] == "works-at"] == [("works-at", acme)]
    assert keys_naming(raw_redis, key_prefix, "ent", acme)
    gone = client.post("/api/memory/forget", json={"kind": "entity", "id": acme}, headers=user("ent"))
    assert gone.status_code == 200, gone.text
    assert [
        r
        for r in get(client, "ent", f"/api/entities/{alice}/relationships")["relationships"]
        if r["other"]["id"] == acme
    ] == []
    assert keys_naming(raw_redis, key_prefix, "ent", acme) == []
    assert alice in {e["id"] for e in get(client, "ent", "/api/entities?limit=100")["entities"]}


WORK_AGAIN = (
    ("user", "Alice works at Acme Corp; she is presenting project Falcon in Berlin."),
    ("assistant", "Got it."),
    ("user", "Thanks, please keep that in mind."),
)


def test_an_episode_forget_keeps_an_edge_another_episode_states_without_naming_it(
    client: TestClient, raw_redis: redis.Redis, key_prefix: str
) -> None:
    """Both sessions say Alice works at Acme Corp: forgetting the first keeps the works-at edge,
    which then names only the second (as memories, conclusions and entities do); no key of the user
    names the forgotten episode."""
    first = talk(client, "ent", "s1", *WORK)["episode"]["id"]
    second = talk(client, "ent", "s2", *WORK_AGAIN)["episode"]["id"]
    found = {e["name"]: e for e in get(client, "ent", "/api/entities?limit=100")["entities"]}
    alice, acme = found["Alice"]["id"], found["Acme Corp"]["id"]

    def works_at() -> list[tuple[str, list[str]]]:
        edges = get(client, "ent", f"/api/entities/{alice}/relationships")["relationships"]
        return [(r["other"]["id"], r["sourceEpisodeIds"]) for r in edges if r["type"] == "works-at"]

    assert works_at() == [(acme, [first, second])]
    gone = client.post("/api/memory/forget", json={"kind": "episode", "id": first}, headers=user("ent"))
    assert gone.status_code == 200, gone.text
    assert works_at() == [(acme, [second])]
    assert keys_naming(raw_redis, key_prefix, "ent", first) == []


def test_a_merge_keeps_the_earliest_first_seen_and_the_latest_last_seen(client: TestClient) -> None:
    """Folding the older Alice into the newer Alice Smith: the survivor was first seen when Alice
    was, last seen when Alice Smith was."""
    talk(client, "ent", "s1", *WORK)
    said = ("user", "Alice Smith works at Acme Corp and lives in Berlin.")
    talk(client, "ent", "s2", said, ("assistant", "Noted."), ("user", "Thanks, keep that in mind."))
    found = {e["name"]: e for e in get(client, "ent", "/api/entities?limit=100")["entities"]}
    alice, smith = found["Alice"], found["Alice Smith"]
    assert alice["firstSeen"] < smith["firstSeen"]
    body = {"duplicate_id": alice["id"]}
    merged = client.post(f"/api/entities/{smith['id']}/merge", json=body, headers=user("ent"))
    assert merged.status_code == 200, merged.text
    survivor = merged.json()["entity"]
    assert (survivor["firstSeen"], survivor["lastSeen"]) == (alice["firstSeen"], smith["lastSeen"])


def test_a_new_job_closes_the_old_works_at_edge(client: TestClient) -> None:
    """works-at is single-valued like lives-in: Maria's new employer closes the old edge."""
    session(client, "zed", "s-a", JAN_8_2024, "My sister Maria works at Acme Corp.")
    session(client, "zed", "s-b", MAR_15_2024, "My sister Maria works at Globex now.")
    [maria] = [e for e in get(client, "zed", "/api/entities?limit=100")["entities"] if e["name"] == "Maria"]
    edges = get(client, "zed", f"/api/entities/{maria['id']}/relationships")["relationships"]
    jobs = {e["other"]["name"]: e for e in edges if e["type"] == "works-at"}
    assert set(jobs) == {"Acme Corp", "Globex"}
    assert (jobs["Acme Corp"]["validUntil"], jobs["Acme Corp"]["supersededBy"]) == (
        MAR_15_2024 + TURN_GAP_MS,
        jobs["Globex"]["id"],
    )
    assert (jobs["Globex"]["validUntil"], jobs["Globex"]["supersededBy"]) == (None, None)


def test_an_edge_stated_again_keeps_its_first_valid_from(client: TestClient) -> None:
    """Maria lives in London, said in January and again in March: one edge, valid from January."""
    session(client, "zed", "s-a", JAN_8_2024, "My sister Maria lives in London.")
    session(client, "zed", "s-b", MAR_15_2024, "My sister Maria still lives in London.")
    [maria] = [e for e in get(client, "zed", "/api/entities?limit=100")["entities"] if e["name"] == "Maria"]
    edges = get(client, "zed", f"/api/entities/{maria['id']}/relationships")["relationships"]
    homes = [(e["other"]["name"], e["validFrom"], e["validUntil"]) for e in edges if e["type"] == "lives-in"]
    assert homes == [("London", JAN_8_2024 + TURN_GAP_MS, None)]


# -- the Dreamer's scheduling (agtos/memory/dreamer.py) --------------------------------------


class RejectingLLM:
    """A consolidation LLM whose answers are always rejected (the rules' conclusions are used)."""

    name = "rejecting"

    def chat(self, *args: Any, **kwargs: Any) -> str:
        raise LLMError("no answer")


def test_a_forget_during_a_deferred_llm_dreamer_run_leaves_nothing(
    api: tuple[TestClient, MemoryCoordinator, HookedEmbedder],  # noqa: F811
    raw_redis: redis.Redis,
    key_prefix: str,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """With a consolidation LLM the Dreamer runs in a thread behind the ResourceGuard; a forget-all
    landing after its consolidation must still take what it writes next (profile, marker; the
    conclusions on the forgotten episodes it no longer stores), as on the inline rules path (test_forget_races)."""
    client, coordinator, _ = api
    stored = forget_after_consolidation(client, monkeypatch)
    monkeypatch.setattr(coordinator.services, "consolidation_llm", RejectingLLM())  # the guarded thread path
    queue_end(client, "alice", "s1", ALLERGY_QUEUED)
    assert coordinator.ingest_worker().drain() == 1
    assert coordinator.dreamer.wait(30.0)
    assert stored == [0]  # the Dreamer ran its store step after the forget
    assert user_key_names(raw_redis, key_prefix, "alice") == set()


# -- the lint sweep (agtos/memory/lint_pipeline.py) ------------------------------------------


def test_a_forget_during_a_sweep_outside_a_run_record_leaves_nothing(
    api: tuple[TestClient, MemoryCoordinator, HookedEmbedder],  # noqa: F811
    raw_redis: redis.Redis,
    key_prefix: str,
) -> None:
    """``maintain`` (what ``agtos memory maintain`` and the Prefect flow run, with no run record whose
    end would clean up): a forget-all after the sweep loaded the user leaves no report or other key."""
    client, coordinator, _ = api
    queue_end(client, "alice", "s1", PIN)
    assert coordinator.ingest_worker().drain() == 1

    def load_then_forget(rt: Services, user_id: str) -> LintState:
        state = INLINE_STEPS.load(rt, user_id)
        forget_all(client, user_id)
        return state

    report = maintain(coordinator.services, "alice", replace(INLINE_STEPS, load=load_then_forget))
    assert report.summary["status"] == "completed"
    assert user_key_names(raw_redis, key_prefix, "alice") == set()


# -- explicit statements (agtos/tasks/explicit.py) -------------------------------------------


def test_a_fourteen_word_preference_is_one_profile_line(client: TestClient) -> None:
    """A profile line holds up to 14 words (``MAX_WORDS``): this preference is exactly 14."""
    said = "I prefer green tea with a little honey in the late afternoon on weekdays."
    end_session(client, "ines", "s1", [{"role": "user", "content": said}, {"role": "assistant", "content": "Noted."}])
    line = "User prefers green tea with a little honey in the late afternoon on weekdays"
    assert get(client, "ines", "/api/memory/profile")["profile"]["preferences"] == [line]


def test_the_profile_keeps_the_latest_home(client: TestClient) -> None:
    """Home is single-valued in the profile: after a move, the newer home only."""
    session(client, "rui", "s-a", JAN_8_2024, "I live in London.")
    session(client, "rui", "s-b", MAR_15_2024, "I moved to Berlin.")
    facts = get(client, "rui", "/api/memory/profile")["profile"]["facts"]
    assert [line for line in facts if line.startswith("User lives in")] == ["User lives in Berlin"], facts


# -- export (agtos/memory/export.py) ---------------------------------------------------------


def test_an_export_of_no_users_holds_no_one(client: TestClient, coordinator: MemoryCoordinator, tmp_path: Path) -> None:
    """``users=[]`` (a caller's filtered list that came out empty) exports nobody, not every user."""
    stored = client.post("/api/memory/memories", json={"text": "User takes their coffee black"}, headers=user("ines"))
    assert stored.status_code in (200, 201), stored.text
    assert export_snapshot(coordinator.services, tmp_path / "one", users=["ines"])["memories"] == 1
    counts = export_snapshot(coordinator.services, tmp_path / "none", users=[])
    assert sum(counts.values()) == 0, counts
    manifest = json.loads((tmp_path / "none" / "manifest.json").read_text())
    assert manifest["users"] == 0 and set(manifest["counts"].values()) == {0}


def test_an_export_replaces_a_previous_snapshot_and_nothing_else(
    client: TestClient, coordinator: MemoryCoordinator, tmp_path: Path
) -> None:
    """The module's rule: an existing ``out_dir`` is replaced only when empty or a previous snapshot."""
    services, out = coordinator.services, tmp_path / "snap"
    out.mkdir()
    assert export_snapshot(services, out, users=["ines"])["memories"] == 0  # an empty directory: used
    stored = client.post("/api/memory/memories", json={"text": "User takes their coffee black"}, headers=user("ines"))
    assert stored.status_code in (200, 201), stored.text
    assert export_snapshot(services, out, users=["ines"])["memories"] == 1  # the previous snapshot: replaced
    assert json.loads((out / "manifest.json").read_text())["counts"]["memories"] == 1
    other = tmp_path / "notes"
    other.mkdir()
    (other / "diary.txt").write_text("mine")
    with pytest.raises(FileExistsError):
        export_snapshot(services, other, users=["ines"])
    assert [p.name for p in other.iterdir()] == ["diary.txt"]


# -- the resource guard (agtos/memory/resource_guard.py) -------------------------------------


def test_a_load_exactly_at_the_limit_does_not_defer() -> None:
    """The module's rule: defer when the 1-minute load is *above* cpus x 0.8 (x 0.3 idle-only)."""
    for policy, cpus, at_limit, above in ((Policy.auto, 4, 3.2, 3.25), (Policy.idle_only, 10, 3.0, 3.05)):
        for load, reason in ((at_limit, "idle"), (above, "cpu-load")):
            guard, _ = make_guard(policy=policy, load=load, cpus=cpus)
            assert guard.check().reason == reason, (policy, load)


def test_a_session_idle_exactly_the_timeout_is_still_active() -> None:
    """'A session idle longer than idle_timeout_s is inactive': at exactly 600 s it still counts."""
    now = [1_000.0]
    tracker = ActivityTracker(idle_timeout_s=600.0, clock=lambda: now[0])
    tracker.session_started("ines", "s1")
    now[0] = 1_600.0
    assert tracker.active_session_count() == 1
    now[0] = 1_600.5
    assert tracker.active_session_count() == 0


# -- issue 20, second pass: the plants the first pass left ------------------------------------


def entity_vector(coordinator: MemoryCoordinator, name: str) -> np.ndarray:
    vectors = coordinator.services.entities.embed_names([name], None)
    return vectors[name]


def test_a_similar_name_of_another_type_is_another_entity(coordinator: MemoryCoordinator) -> None:
    """Planted: ``_similar`` without its type check. The module's rule: a name joins the most
    similar entity *of the same type* (cosine ≥ 0.85). Paris the city, given the very vector of
    Paris Hilton the person, is a new entity; a person of that vector joins her."""
    entities = coordinator.services.entities
    vector = entity_vector(coordinator, "Paris Hilton")
    episode = Episode(id="ep-1", user_id="ent", summary="Paris Hilton flew to Paris.", timestamp=JAN_8_2024)
    person = EntityCandidate("Paris Hilton", EntityType.person, "paris hilton", confidence=0.9)
    city = EntityCandidate("Paris", EntityType.place, "paris", confidence=0.9)
    hilton = EntityCandidate("Ms Hilton", EntityType.person, "ms hilton", confidence=0.9)
    first, created = entities.observe(episode, person, vector)
    assert created and first is not None
    other, created = entities.observe(episode, city, vector)
    assert created and other not in (None, first)
    assert entities.observe(episode, hilton, vector) == (first, False)


def test_a_weaker_mention_keeps_the_entitys_confidence(coordinator: MemoryCoordinator) -> None:
    """Planted: ``observe`` taking the new mention's confidence instead of the larger of the two
    (the module's rule for merges, as for edges: max confidence)."""
    entities = coordinator.services.entities
    sure = EntityCandidate("Omar Haddad", EntityType.person, "omar haddad", confidence=0.9)
    unsure = EntityCandidate("Omar Haddad", EntityType.person, "omar haddad", confidence=0.4)
    first = Episode(id="ep-1", user_id="ent", summary="Omar Haddad called.", timestamp=JAN_8_2024)
    later = Episode(id="ep-2", user_id="ent", summary="Omar Haddad wrote.", timestamp=MAR_15_2024)
    entity_id, _ = entities.observe(first, sure, None)
    assert entity_id is not None and entities.observe(later, unsure, None) == (entity_id, False)
    loaded = entities.load("ent", entity_id)
    assert loaded is not None and loaded[0].confidence == 0.9 and loaded[0].episode_ids == ["ep-1", "ep-2"]


def test_an_edge_restated_in_the_ms_it_was_replaced_is_current_again(coordinator: MemoryCoordinator) -> None:
    """Planted: ``absorb_rel`` reopening a closed edge only when restated *after* its end (``>``
    for ``>=``). As for ``_supersede_edges`` (an edge stated in the same ms as the current one
    closes it), a tie goes to the statement processed last: Maria back at Acme Corp in the very ms
    she was said to join Globex is at Acme Corp, and the Globex edge is closed."""
    graph = coordinator.services.entities
    acme = graph.relate("zed", "ent-maria", "ent-acme", "works-at", 0.9, "ep-1", 1_000)
    globex = graph.relate("zed", "ent-maria", "ent-globex", "works-at", 0.9, "ep-2", 2_000)
    assert graph.relate("zed", "ent-maria", "ent-acme", "works-at", 0.9, "ep-3", 2_000) == acme
    outgoing, _ = graph.store.edge_ids("zed", "ent-maria")
    edges = graph.store.rels("zed", outgoing)
    assert acme is not None and globex is not None
    assert (edges[acme].valid_from, edges[acme].valid_until, edges[acme].superseded_by) == (2_000, None, None)
    assert (edges[globex].valid_until, edges[globex].superseded_by) == (2_000, acme)


def test_a_forget_while_the_dreamer_defers_to_a_later_event_leaves_no_marker(
    client: TestClient,
    coordinator: MemoryCoordinator,
    raw_redis: redis.Redis,
    key_prefix: str,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Planted: the ``more_for_user`` branch (a later event of the same batch dreams for the user)
    returning without ``late_writes_removed``: a forget-all that lands after the event was taken
    and before its marker is claimed left that marker, a key of the forgotten user, behind."""
    markers = coordinator.services.dream_markers
    claim = markers.claim

    def forget_then_claim(user_id: str, ended: str) -> bool:
        forget_all(client, user_id)
        return claim(user_id, ended)

    monkeypatch.setattr(markers, "claim", forget_then_claim)
    event = {"user_id": "alice", "session_id": "s1", "episode_id": "ep-1", "more_for_user": True}
    coordinator.dreamer.on_session_ended(event)
    assert user_key_names(raw_redis, key_prefix, "alice") == set()


def test_lint_merges_only_current_memories_of_one_kind(coordinator: MemoryCoordinator) -> None:
    """Planted: the lint's memory merge reading replaced memories too (``if m.current`` dropped),
    or pairing memories of different kinds (``a.kind != b.kind`` dropped). README: the merge rule
    folds *current* memories *of one kind*; the one stored first survives."""
    rt, who = coordinator.services, "lint"
    text = "User is allergic to peanuts and tree nuts since early childhood"
    older_replaced = Memory(user_id=who, text=text, created_at=1_000, valid_until=1_500, superseded_by="mem-x")
    fact = Memory(user_id=who, text=text, created_at=2_000)
    liked = Memory(user_id=who, text=text, kind=MemoryKind.preference, created_at=3_000)
    store = rt.semantic.store("memory")
    for memory in (older_replaced, fact, liked):
        store.upsert(who, memory.id, memory.text, None, memory.model_dump_json())
    assert step_merge(lint_load(rt, who), rt.settings.maintenance).memory_merges == []
    again = Memory(user_id=who, text=text, created_at=4_000)
    store.upsert(who, again.id, again.text, None, again.model_dump_json())
    assert step_merge(lint_load(rt, who), rt.settings.maintenance).memory_merges == [(fact.id, again.id)]


def test_an_ingested_responses_importance_is_its_points_over_twelve(client: TestClient) -> None:
    """Planted: the response episode's importance on another scale than ``score / 12`` (README:
    the points over the table's maximum, 4 + 3 + 2 + 2 + 1 = 12): 4 + 3 for a tool call is 7/12."""
    body = {"session_id": "s1", "response": "The 9:40 train to Porto has seats left.", "tool_calls": 1}
    sent = client.post("/api/memory/responses", json=body, headers=user("rita"))
    assert sent.status_code == 200, sent.text
    assert (sent.json()["ingest"], sent.json()["score"]) == (True, 7)
    assert sent.json()["episode"]["importance"] == pytest.approx(0.5833, abs=1e-4)


def corrected(n: int, plain: int) -> list[Episode]:
    """``n`` sessions of the correction type and ``plain`` conversations with one fact each."""
    kinds = [EpisodeType.correction] * n + [EpisodeType.conversation] * plain
    return [Episode(user_id="sty", summary="A session.", type=t, facts=["User lives in Porto"]) for t in kinds]


def test_the_style_is_precise_from_two_corrected_sessions() -> None:
    """Planted: the style's bound moved (``corrections >= 2``): two sessions that corrected the
    agent make the user "precise"; one does not (then: one fact a session, "brief")."""
    precise = "precise; corrects mistakes, so double-check details"
    assert profile_update(UserProfile(user_id="sty"), [], corrected(2, 3)).communication_style == precise
    assert profile_update(UserProfile(user_id="sty"), [], corrected(1, 3)).communication_style == (
        "brief and task-focused"
    )


def test_a_stale_conclusion_leaves_the_profile() -> None:
    """Planted: stale explicit conclusions kept in the profile (``and not c.stale`` dropped): the
    lint marks a conclusion not confirmed for 30 days stale, and the next rebuild drops its line."""
    home = Conclusion(
        user_id="st",
        text="User lives in London",
        type=ConclusionType.explicit,
        confidence=0.9,
        category="home",
        stale=True,
    )
    nuts = Conclusion(
        user_id="st",
        text="User is allergic to peanuts",
        type=ConclusionType.explicit,
        confidence=0.9,
        category="allergy",
    )
    before = UserProfile(
        user_id="st", facts=[home.text, nuts.text], sources={home.text: [home.id], nuts.text: [nuts.id]}
    )
    update = profile_update(before, [home, nuts], [])
    assert (update.facts, update.sources) == (["User is allergic to peanuts"], {nuts.text: [nuts.id]})
