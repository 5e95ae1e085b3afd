"""Every writer of a user's memories and entities against another writer of the same user (issue 15:
nothing acknowledged is lost, nothing forgotten comes back).

A session end merges its facts into the stored memories (sources unioned) and adds its episode to the
entities it names; an episode's forget, a ``PUT`` of a memory and the lint's merge of near-duplicate
memories read, change and write the same records, from another API process or the queue worker. Each
overlap is forced as in test_conclusion_writers_race: a hook in one writer, once it has read and not yet
written, sends the other writer's request through the API and waits for its answer (at most ``HOLD_S``:
behind the user's memory or entity writers' lock it cannot answer before the first writer is done).
Real Redis, the bundled embedder and NER model, inline session ends.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from typing import Any

import pytest
from fastapi.testclient import TestClient

from agtos.config import MaintenanceConfig, Settings
from agtos.memory import lint_pipeline, memory_crud
from agtos.memory.coordinator import MemoryCoordinator
from agtos.serving.app import create_app
from tests.helpers import end_session, run_maintenance, user
from tests.test_conclusion_writers_race import Hook

U = "wren"
MEMORIES = "/api/memory/memories"
WORK = [
    {"role": "user", "content": "I work at St Mary's Hospital as a nurse."},
    {"role": "assistant", "content": "Still there, good."},
]
HOSPITAL = "St Mary's Hospital"
FIRST = "User is allergic to peanuts and tree nuts since early childhood"
SECOND = "User is seriously allergic to peanuts and tree nuts since early childhood"  # Jaccard 9/10 with FIRST
EDITED = "User is allergic to peanuts and tree nuts and carries an EpiPen"


@pytest.fixture
def app(settings: Settings) -> Iterator[tuple[MemoryCoordinator, TestClient]]:
    """The API over one coordinator; every memory stale-free, the ResourceGuard never defers the lint."""
    cfg = MaintenanceConfig(guard_retries=0, guard_delay_s=0.0)
    coordinator = MemoryCoordinator(settings.with_overrides(background_work_policy="always", maintenance=cfg))
    try:
        with TestClient(create_app(coordinator=coordinator)) as client:
            yield coordinator, client
    finally:
        coordinator.close()


def _ended(client: TestClient, session_id: str, turns: list[dict[str, Any]]) -> str:
    """End ``session_id`` of wren with ``turns``; its episode's id."""
    ended = end_session(client, U, session_id, turns)
    assert ended["saved"] is True, ended
    return str(ended["episodeId"])


def _said(text: str) -> list[dict[str, str]]:
    return [{"role": "user", "content": text}, {"role": "assistant", "content": "Noted."}]


def _memory(client: TestClient, words: str) -> dict[str, Any]:
    """wren's one memory whose text holds ``words``."""
    found = [m for m in client.get(f"{MEMORIES}?limit=100", headers=user(U)).json()["memories"] if words in m["text"]]
    assert len(found) == 1, found
    return dict(found[0])


def _forget(client: TestClient, episode_id: str) -> Callable[[], int]:
    body = {"kind": "episode", "id": episode_id}
    return lambda: client.post("/api/memory/forget", json=body, headers=user(U)).status_code


def _hospital(client: TestClient) -> list[list[str]]:
    """The episodes of each of wren's entities named ``HOSPITAL``."""
    listed = client.get("/api/entities?limit=100", headers=user(U)).json()["entities"]
    return [e["episodeIds"] for e in listed if e["name"] == HOSPITAL]


def test_an_episode_forgotten_during_a_session_ends_merge_is_not_written_back(
    app: tuple[MemoryCoordinator, TestClient],
) -> None:
    """tue's end had read the work memory (on [mon]) to add tue when mon was forgotten: without the lock
    the forget deleted it (mon was its only source) and the end wrote it back on [mon, tue]."""
    coordinator, client = app
    mon = _ended(client, "mon", WORK)
    versions = coordinator.semantic.versions
    merge = versions._merge_existing
    said_on_mon = lambda out: any(mon in m.source_episode_ids and "St Mary" in m.text for m in out[0])  # noqa: E731
    hook = Hook("", said_on_mon, _forget(client, mon))

    def merging(*args: Any) -> Any:
        merged = merge(*args)
        hook(merged)
        return merged

    versions._merge_existing = merging  # type: ignore[method-assign]
    tue = _ended(client, "tue", WORK)
    assert hook.result() == [200]
    assert _memory(client, "St Mary")["sourceEpisodeIds"] == [tue]


def test_an_episode_forgotten_during_an_edit_stays_forgotten(app: tuple[MemoryCoordinator, TestClient]) -> None:
    """The PUT had read the work memory on [mon, tue] and was embedding its new words when mon was
    forgotten: without the lock and the edit applied to the stored memory, the PUT wrote mon back."""
    coordinator, client = app
    mon, tue = _ended(client, "mon", WORK), _ended(client, "tue", WORK)
    work = _memory(client, "St Mary")
    assert work["sourceEpisodeIds"] == [mon, tue]
    edited = "User works at St Mary's Hospital as a night nurse"
    semantic = coordinator.semantic
    embed = semantic.embed_or_none
    hook = Hook("", lambda texts: texts == [edited], _forget(client, mon))

    def embedding(texts: list[str], wait_s: float | None = None) -> Any:
        hook(texts)
        return embed(texts, wait_s)

    semantic.embed_or_none = embedding  # type: ignore[method-assign]
    put = client.put(f"{MEMORIES}/{work['id']}", json={"text": edited}, headers=user(U))
    assert put.status_code == 200, put.text
    assert hook.result() == [200]
    after = client.get(f"{MEMORIES}/{work['id']}", headers=user(U)).json()
    assert (after["text"], after["sourceEpisodeIds"]) == (edited, [tue])


def _duplicates(client: TestClient) -> tuple[str, str]:
    """Two sessions' near-duplicate memories (the lint merges SECOND into FIRST); their ids."""
    _ended(client, "s1", _said("I am allergic to peanuts and tree nuts since early childhood."))
    _ended(client, "s2", _said("I am seriously allergic to peanuts and tree nuts since early childhood."))
    return _memory(client, FIRST)["id"], _memory(client, SECOND)["id"]


def _put(client: TestClient, memory_id: str) -> int:
    return client.put(f"{MEMORIES}/{memory_id}", json={"text": EDITED}, headers=user(U)).status_code


def test_an_edit_made_while_the_lint_runs_is_kept(
    app: tuple[MemoryCoordinator, TestClient], monkeypatch: pytest.MonkeyPatch
) -> None:
    """The lint read both memories, FIRST was edited while it looked for contradictions, then the lint
    merged its copy of FIRST (the old words) over the edit. Now it leaves that pair to its next sweep."""
    _, client = app
    first, second = _duplicates(client)
    detect = lint_pipeline.detect_contradictions
    edits: list[int] = []

    def detecting(*args: Any) -> Any:
        edits.append(_put(client, first))
        return detect(*args)

    monkeypatch.setattr(lint_pipeline, "detect_contradictions", detecting)
    run = run_maintenance(client, U)
    assert edits == [200] and run["status"] == "completed", run
    assert client.get(f"{MEMORIES}/{first}", headers=user(U)).json()["text"] == EDITED
    assert client.get(f"{MEMORIES}/{second}", headers=user(U)).json()["text"] == SECOND
    summary = run["report"]["summary"]
    assert (summary["memoriesMerged"], summary["memoriesChangedMeanwhile"]) == (0, 1), summary


def test_an_edit_sent_while_the_lint_writes_its_merge_is_applied_to_the_merge(
    app: tuple[MemoryCoordinator, TestClient],
) -> None:
    """The PUT came while the lint was writing FIRST with SECOND's source added: without the lock the
    lint's write went over the edit; without the edit applied to the stored memory the PUT wrote FIRST
    back on its one source (the merged one lost)."""
    coordinator, client = app
    first, second = _duplicates(client)
    store = coordinator.semantic.store("memory")
    put_records = store.put_records
    hook = Hook("maintenance-run", lambda records: first in records, lambda: _put(client, first))

    def putting(user_id: str, records: dict[str, str]) -> None:
        hook(records)
        put_records(user_id, records)

    store.put_records = putting  # type: ignore[method-assign]
    run = run_maintenance(client, U)
    assert hook.result() == [200]
    assert run["status"] == "completed" and run["report"]["summary"]["memoriesMerged"] == 1, run
    after = client.get(f"{MEMORIES}/{first}", headers=user(U)).json()
    assert (after["text"], len(after["sourceEpisodeIds"])) == (EDITED, 2), after
    assert client.get(f"{MEMORIES}/{second}", headers=user(U)).status_code == 404


def test_an_episode_forgotten_while_an_ingestion_adds_to_its_entity_keeps_the_entity(
    app: tuple[MemoryCoordinator, TestClient],
) -> None:
    """tue's ingestion had read the hospital (named by mon alone) to add tue when mon was forgotten: the
    forget, which had read the hospital on [mon], deleted it with tue's mention."""
    coordinator, client = app
    mon = _ended(client, "mon", WORK)
    assert _hospital(client) == [[mon]]
    store = coordinator.entities.store
    get_raw = store.get_raw
    hook = Hook("", lambda raw: raw is not None and HOSPITAL in raw and mon in raw, _forget(client, mon))

    def reading(user_id: str, entity_id: str) -> str | None:
        raw = get_raw(user_id, entity_id)
        hook(raw)
        return raw

    store.get_raw = reading  # type: ignore[method-assign]
    tue = _ended(client, "tue", WORK)
    assert hook.result() == [200]
    assert _hospital(client) == [[tue]]


def test_a_memory_posted_again_while_its_episode_is_forgotten_does_not_bring_the_episode_back(
    app: tuple[MemoryCoordinator, TestClient], monkeypatch: pytest.MonkeyPatch
) -> None:
    """The POST had found the work memory (on [mon]) as its near-duplicate when mon was forgotten (the
    memory with it): without the lock and the re-read it wrote the memory back on [mon]. Now the words
    are stored as a memory of their own (201), naming no episode."""
    _, client = app
    mon = _ended(client, "mon", WORK)
    text = _memory(client, "St Mary")["text"]
    near = memory_crud._near_duplicate
    forgotten: list[int] = []

    def found(*args: Any) -> Any:
        duplicate = near(*args)
        forgotten.append(_forget(client, mon)())
        return duplicate

    monkeypatch.setattr(memory_crud, "_near_duplicate", found)
    posted = client.post(MEMORIES, json={"text": text, "kind": "fact"}, headers=user(U))
    assert forgotten == [200]
    assert posted.status_code == 201, posted.text
    assert _memory(client, "St Mary")["sourceEpisodeIds"] == []


def test_an_episode_forgotten_while_a_post_folds_into_its_memory_is_not_written_back(
    app: tuple[MemoryCoordinator, TestClient],
) -> None:
    """The POST had re-read the work memory (on [mon]) and was writing its fold when mon was forgotten:
    without the lock the forget deleted it and the POST wrote it back on [mon]. With it the forget comes
    after the fold and takes the memory (mon was its only source) with it."""
    coordinator, client = app
    mon = _ended(client, "mon", WORK)
    work = _memory(client, "St Mary")
    store = coordinator.semantic.store("memory")
    put_records = store.put_records
    hook = Hook("", lambda records: work["id"] in records, _forget(client, mon))

    def putting(user_id: str, records: dict[str, str]) -> None:
        hook(records)
        put_records(user_id, records)

    store.put_records = putting  # type: ignore[method-assign]
    posted = client.post(MEMORIES, json={"text": work["text"], "kind": "fact"}, headers=user(U))
    assert hook.result() == [200]
    assert posted.status_code == 200 and posted.json()["mergedInto"] == work["id"], posted.text
    gone = client.get(f"{MEMORIES}/{work['id']}", headers=user(U))
    assert gone.status_code == 404, gone.text  # not listed either way: the forget took it off the timeline


def test_a_memory_deleted_during_an_edit_stays_deleted(app: tuple[MemoryCoordinator, TestClient]) -> None:
    """The DELETE was answered 200 while the PUT embedded the new words: without the re-read under the
    lock the PUT wrote the memory back (and answered 200). Now the PUT answers 404, as after the DELETE."""
    coordinator, client = app
    _ended(client, "mon", WORK)
    path = f"{MEMORIES}/{_memory(client, 'St Mary')['id']}"
    edited = "User works at St Mary's Hospital as a night nurse"
    semantic = coordinator.semantic
    embed = semantic.embed_or_none
    hook = Hook("", lambda texts: texts == [edited], lambda: client.delete(path, headers=user(U)).status_code)

    def embedding(texts: list[str], wait_s: float | None = None) -> Any:
        hook(texts)
        return embed(texts, wait_s)

    semantic.embed_or_none = embedding  # type: ignore[method-assign]
    put = client.put(path, json={"text": edited}, headers=user(U))
    assert hook.result() == [200]
    assert put.status_code == 404, put.text
    assert client.get(path, headers=user(U)).status_code == 404
