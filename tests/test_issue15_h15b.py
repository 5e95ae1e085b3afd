"""Issue 15: an opt-out racing an import or a back-fill keeps every episode the user had as it was.

ff6ccdc dropped an episode the run *updated* (an imported session whose transcript grew since: same episode
id, new turns) when the user opted out while the run wrote: its earlier version, which the user had before
opting out and never asked to forget, was lost. Now each user's episode records are written in one atomic
step with the opt-out check (``EpisodeStore.save_unless_opted_out``, called by the index step first): an
opt-out that lands first means nothing of the run is written for that user (the earlier version stays, byte
for byte); one that lands after finds the update written while the user was still opted in, and it stays
(the episodes the run *added* are forgotten again, as before). The other API process is a second
coordinator (its own opt-out cache). Expected values are literals of the fixture files and the README.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import pytest
import redis
from fastapi.testclient import TestClient

import agtos.memory.ingestion_pipeline
from agtos.config import Settings
from agtos.memory.coordinator import MemoryCoordinator
from agtos.memory.episodic import session_episode_id
from agtos.schemas import Episode, IngestItem, Turn
from agtos.storage.episodes import EpisodeStore
from agtos.storage.keys import GlobalKeys
from agtos.storage.opt_outs import OptOutStore
from agtos.storage.redis_conn import RedisConnector
from tests.helpers import user
from tests.test_issue15_h15_opt_out_update import GROWN, episode_ids
from tests.test_privacy_import import import_client  # noqa: F401 (a fixture)

OPTED_OUT = "user opted out of persistence"  # the skip reason the README's privacy section names
ADDED = (  # a new session, worth an episode: two exchanges with a fact to remember
    "\n# aider chat started at 2024-06-03 08:00:00\n\n"
    "#### Remember that the quokkaflux cache warms up at 6am, so deploy after that.  \n\n"
    "Noted: deploys go out after the quokkaflux cache warms up at 6am.\n\n"
    "#### And the staging database is reset every Sunday night.  \n\n"
    "Understood, staging is reset on Sunday nights.\n"
)


def grow_and_add(home: Path) -> None:
    """The aider history's first session (imported before) grows by GROWN; a new session is appended."""
    history = home / "projects" / "webapp" / ".aider.chat.history.md"
    second = "# aider chat started at 2024-05-02"
    history.write_text(history.read_text().replace(second, GROWN + "\n" + second) + ADDED)


def user_values(raw: redis.Redis, prefix: str, who: str) -> dict[bytes, bytes]:
    """Every key of ``who`` with its contents (members, fields and values joined), read by its type."""
    out: dict[bytes, bytes] = {}
    for key in raw.scan_iter(match=f"{prefix}:u:{{{who}}}:*", count=1000):
        kind = raw.type(key)
        parts: list[Any] = (
            [raw.get(key)]
            if kind == b"string"
            else raw.lrange(key, 0, -1)
            if kind == b"list"
            else [p for pair in sorted(raw.hgetall(key).items()) for p in pair]
            if kind == b"hash"
            else sorted(raw.smembers(key))
            if kind == b"set"
            else [p for pair in raw.zrange(key, 0, -1, withscores=True) for p in (pair[0], repr(pair[1]).encode())]
        )
        out[key] = b"\x00".join(p or b"" for p in parts)
    return out


@contextmanager
def opting_out_before_the_writes(
    monkeypatch: pytest.MonkeyPatch, settings: Settings, who: str
) -> Iterator[MemoryCoordinator]:
    """The run summarised and embedded its batch; ``who`` opts out through another process before its
    index step writes anything."""
    original, other = agtos.memory.ingestion_pipeline.episode_rows_first, MemoryCoordinator(settings)

    def embedded_then_opt_out(*args: Any) -> Any:
        other.privacy.set_opt_out(who, True)
        return original(*args)

    monkeypatch.setattr(agtos.memory.ingestion_pipeline, "episode_rows_first", embedded_then_opt_out)
    try:
        yield other
    finally:
        monkeypatch.undo()
        other.close()


def test_an_opt_out_landing_before_the_import_writes_leaves_every_key_as_it_was(
    import_client: TestClient,  # noqa: F811 (the fixture imported above)
    settings: Settings,
    tmp_path: Path,
    raw_redis: redis.Redis,
    key_prefix: str,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Bugs caught: the index step overwriting the stored episode (ff6ccdc then deleted it: the earlier
    version lost), writing the refused user's memories, turns or index entries, or not answering the
    sessions skipped."""
    client = import_client
    first = client.post("/api/memory/import", json={}, headers=user("una")).json()
    before, kept = user_values(raw_redis, key_prefix, "una"), episode_ids(client, "una")
    grow_and_add(tmp_path / "home")
    with opting_out_before_the_writes(monkeypatch, settings, "una"):
        during = client.post("/api/memory/import", json={}, headers=user("una"))
    assert during.status_code == 200, during.text
    body = during.json()
    assert body["sessions"] == first["sessions"] + 1
    assert (body["episodesAdded"], body["episodesUpdated"], body["unchanged"]) == (0, 0, first["sessions"] - 1)
    assert [s["reason"] for s in body["skipped"]] == [OPTED_OUT, OPTED_OUT]  # the grown session and the new one
    after = user_values(raw_redis, key_prefix, "una")
    assert after == before  # every record, turn list, index and its change log exactly as before the import
    login = [v for k, v in after.items() if b":turns:" in k and b"Add a docstring to the login function" in v]
    assert len(login) == 1 and b"zebracorn" not in login[0]  # the earlier version's turns
    assert [k for k, v in after.items() if b"zebracorn" in v or b"quokkaflux" in v] == []
    assert episode_ids(client, "una") == kept
    found = client.get("/api/memory/search", params={"q": "zebracorn deploy script"}, headers=user("una")).json()
    assert all("zebracorn" not in str(hit) for hit in found["results"]), found


def test_an_opt_out_after_the_import_wrote_keeps_the_update_and_forgets_the_added_session(
    import_client: TestClient,  # noqa: F811 (the fixture imported above)
    settings: Settings,
    tmp_path: Path,
    raw_redis: redis.Redis,
    key_prefix: str,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """The opt-out lands after the ingestion's own check (``MemoryCoordinator._unstore_opted_out``), before
    the import's (``source_import.unstore_after_opt_out``): the grown session was written while the user
    was opted in and stays, the new one is forgotten and is the one answered skipped. Bugs caught: every
    ingested episode answered skipped (also the one left, p1's planted bug), the updated one dropped
    (ff6ccdc: its earlier version lost), the added one kept."""
    client = import_client
    first = client.post("/api/memory/import", json={}, headers=user("uma")).json()
    kept = episode_ids(client, "uma")
    grow_and_add(tmp_path / "home")
    body = import_opting_out_after_the_check(client, settings, monkeypatch, "uma")
    assert (body["episodesAdded"], body["episodesUpdated"], body["unchanged"]) == (0, 1, first["sessions"] - 1)
    assert [s["reason"] for s in body["skipped"]] == [OPTED_OUT]
    assert session_episode_id("uma", body["skipped"][0]["sessionId"]) not in kept  # the new session
    assert episode_ids(client, "uma") == kept
    values = user_values(raw_redis, key_prefix, "uma")
    login = [v for k, v in values.items() if b":turns:" in k and b"Add a docstring to the login function" in v]
    assert len(login) == 1 and b"zebracorn" in login[0]  # the version written before the opt-out landed
    assert [k for k, v in values.items() if b"quokkaflux" in v] == []


def dated(text: str, minute: int = 0) -> list[Turn]:
    """A user line and a reply on Mon 8 May 2023 from 10:00 UTC (dated: a re-ingest builds the same record)."""
    at = 1_683_540_000_000 + 60_000 * minute
    return [
        Turn(role="user", content=text, timestamp=at),  # type: ignore[arg-type]
        Turn(role="assistant", content="Noted.", timestamp=at + 60_000),  # type: ignore[arg-type]
    ]


def test_a_back_fill_refuses_only_the_user_who_opted_out_and_indexes_the_others_rows(
    client: TestClient, coordinator: MemoryCoordinator, settings: Settings, monkeypatch: pytest.MonkeyPatch
) -> None:
    """One batch: vic's grown session first, then wes's two new ones; vic opts out before the writes.
    Vic's episode stays as it was, wes's are stored, each found first by vector search for its own
    words. Bugs caught: the whole batch refused for one user, the refused user's vector rows left in
    (wes's episodes and turns indexed with vic's rows: the wrong one found first), vic overwritten."""
    said = "My sister Ines lives in Porto, remember that."
    assert len(coordinator.ingest([IngestItem(user_id="vic", session_id="s1", turns=dated(said))]).episode_ids) == 1
    earlier = client.get("/api/memory/episodes", headers=user("vic")).json()["episodes"]
    grown = dated(said) + dated("Also, the zebracorn bakery in Porto is her favourite.", 2)
    batch = [
        IngestItem(user_id="vic", session_id="s1", turns=grown),
        IngestItem(user_id="wes", session_id="w1", turns=dated("I am learning to play the cello every evening.")),
        IngestItem(user_id="wes", session_id="w2", turns=dated("My car needs new winter tyres before December.")),
    ]
    with opting_out_before_the_writes(monkeypatch, settings, "vic"):
        report = coordinator.ingest(batch)
    assert report.skipped == [{"sessionId": "s1", "reason": OPTED_OUT}]
    assert len(report.episode_ids) == 2
    assert client.get("/api/memory/episodes", headers=user("vic")).json()["episodes"] == earlier
    wes = {s: session_episode_id("wes", s) for s in ("w1", "w2")}
    assert episode_ids(client, "wes") == sorted(wes.values())
    for query, session in (("cello music practice", "w1"), ("car tyres for winter", "w2")):
        found = client.get("/api/memory/search", params={"q": query, "mode": "vector"}, headers=user("wes")).json()
        assert found["results"][0]["id"] == wes[session], (query, found["results"])


@pytest.mark.parametrize("cluster", [False, True], ids=["scripted", "cluster"])
def test_save_unless_opted_out_writes_as_save_does_or_nothing_at_all(
    settings: Settings, raw_redis: redis.Redis, key_prefix: str, monkeypatch: pytest.MonkeyPatch, cluster: bool
) -> None:
    """Two episodes of alice in one call: each record, its 30-day TTL, the timeline (scores, TTL) and the
    users set, as ``save`` writes them (carol, with none, is not added to the users set); bob, in the
    opt-out set, gets False and no key at all (the Lua script, and the check-then-write a Redis Cluster
    gets). Bugs caught: the script's argument offsets (the second episode stored under the first's id or
    time), the record or timeline TTL dropped, the users set not told, the check's answer ignored, the
    cluster's check-then-write taken where the script runs (not atomic) or the reverse."""
    if cluster:
        monkeypatch.setattr(RedisConnector, "mode", property(lambda self: "cluster"))
    other = "eval" if cluster else "sismember"  # a cluster refuses the script (cross-slot); else one command
    monkeypatch.setattr(redis.Redis, other, lambda *args, **kwargs: pytest.fail(f"{other} on this path"))
    connector = RedisConnector(settings.redis_url, settings.data_dir)
    keys = GlobalKeys(key_prefix)
    store, opt_outs = EpisodeStore(connector, keys, 2_592_000), OptOutStore(connector, keys)
    try:
        made = [
            Episode(id=f"ep-{i}", user_id=who, session_id=f"s{i}", summary=f"session {i}", timestamp=1_000 * i)
            for who, i in (("alice", 1), ("alice", 2), ("bob", 3))
        ]
        opt_outs.set("bob", True)
        assert store.save_unless_opted_out("alice", made[:2], opt_outs.key) is True
        assert store.save_unless_opted_out("bob", made[2:], opt_outs.key) is False
        assert store.save_unless_opted_out("carol", [], opt_outs.key) is True  # nothing to write
    finally:
        connector.close()
    timeline = f"{key_prefix}:u:{{alice}}:episodes:by_time"
    for ep in made[:2]:
        record = f"{key_prefix}:u:{{alice}}:episode:{ep.id}"
        assert Episode.model_validate_json(raw_redis.get(record) or b"") == ep
        assert 2_592_000 - 5 <= raw_redis.ttl(record) <= 2_592_000
    assert raw_redis.zrange(timeline, 0, -1, withscores=True) == [(b"ep-1", 1_000.0), (b"ep-2", 2_000.0)]
    assert 2_592_000 - 5 <= raw_redis.ttl(timeline) <= 2_592_000
    assert raw_redis.smembers(f"{key_prefix}:users") == {b"alice"}
    assert list(raw_redis.scan_iter(match=f"{key_prefix}:u:{{bob}}:*")) == []


def import_opting_out_after_the_check(
    client: TestClient, settings: Settings, monkeypatch: pytest.MonkeyPatch, who: str
) -> dict[str, Any]:
    """POST /import for ``who``, opting them out through another process right after the ingestion's own
    opt-out check (``MemoryCoordinator._unstore_opted_out``), before the import's: the import's answer."""
    checked, other = MemoryCoordinator._unstore_opted_out, MemoryCoordinator(settings)

    def check_then_opt_out(self: MemoryCoordinator, *args: Any) -> None:
        checked(self, *args)
        other.privacy.set_opt_out(who, True)

    monkeypatch.setattr(MemoryCoordinator, "_unstore_opted_out", check_then_opt_out)
    try:
        body: dict[str, Any] = client.post("/api/memory/import", json={}, headers=user(who)).json()
    finally:
        other.close()
    return body
