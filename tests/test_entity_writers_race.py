"""An entity's merge, ``PUT``, ``DELETE`` and ``/forget`` against an episode's ingestion adding to the
same entity, or an episode's forget, from another API process (issue 15: nothing acknowledged is lost,
nothing forgotten comes back).

Two coordinators (two API processes: each has its own in-process lock) share one Redis. As in
test_memory_writers_race, a hook in one process's writer, once it has read and not yet written, sends
the other writer's request to the other process and waits for its answer (at most ``HOLD_S``: behind
the user's entity writers' lock it cannot answer before the first writer is done). The merge and an
entity's forget hold that lock; ``PUT`` and ``DELETE`` rely on the entity store's compare-and-set,
which the last tests guard. Real Redis, the bundled embedder and NER model, inline session ends.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from contextlib import ExitStack
from typing import Any, NamedTuple

import pytest
from fastapi.testclient import TestClient

from agtos.config import Settings
from agtos.memory.coordinator import MemoryCoordinator
from agtos.schemas import Entity
from agtos.serving.app import create_app
from tests.helpers import end_session, user
from tests.test_conclusion_writers_race import Hook

U = "wren"
ACME, INITECH = "Acme Corp", "Initech"
SIGNED = "We signed the contract with Acme Corp."  # names Acme Corp alone
VENDOR = "Initech is our new vendor."
ALICE = "Alice works at Acme Corp."  # Alice -works-at-> Acme Corp


class Process(NamedTuple):
    """One API process: its coordinator and a client of its app."""

    coordinator: MemoryCoordinator
    client: TestClient


@pytest.fixture
def processes(settings: Settings) -> Iterator[tuple[Process, Process]]:
    """Two API processes over the same Redis and key prefix."""
    with ExitStack() as stack:
        pair = []
        for _ in range(2):
            coordinator = MemoryCoordinator(settings.with_overrides(background_work_policy="always"))
            stack.callback(coordinator.close)
            pair.append(Process(coordinator, stack.enter_context(TestClient(create_app(coordinator=coordinator)))))
        yield pair[0], pair[1]


def _ended(client: TestClient, session_id: str, text: str) -> str:
    """End wren's ``session_id`` in which she said ``text``; its episode's id."""
    turns = [{"role": "user", "content": text}, {"role": "assistant", "content": "Noted."}]
    ended = end_session(client, U, session_id, turns)
    assert ended["saved"] is True, ended
    return str(ended["episodeId"])


def _entities(client: TestClient) -> dict[str, dict[str, Any]]:
    """wren's listed entities by name."""
    listed = client.get("/api/entities?limit=100", headers=user(U)).json()["entities"]
    return {e["name"]: e for e in listed}


def _edges(client: TestClient, entity_id: str) -> list[tuple[str, str, str, list[str]]]:
    """The entity's listed edges: (type, direction, other's name, source episodes)."""
    found = client.get(f"/api/entities/{entity_id}/relationships", headers=user(U)).json()["relationships"]
    return [(r["type"], r["direction"], r["other"]["name"], r["sourceEpisodeIds"]) for r in found]


def _merge(client: TestClient, survivor_id: str, duplicate_id: str) -> Callable[[], int]:
    path, body = f"/api/entities/{survivor_id}/merge", {"duplicate_id": duplicate_id}
    return lambda: client.post(path, json=body, headers=user(U)).status_code


def _forget(client: TestClient, kind: str, item_id: str) -> Callable[[], int]:
    body = {"kind": kind, "id": item_id}
    return lambda: client.post("/api/memory/forget", json=body, headers=user(U)).status_code


def _when_relating_to(process: Process, entity_id: str, action: Callable[[], Any]) -> Hook:
    """Run ``action`` once ``process``'s ingestion has stored its entities and looks up an edge to
    ``entity_id`` (its ``relate``, before the edge's write)."""
    store = process.coordinator.entities.store
    triple_owner = store.triple_owner
    hook = Hook("", lambda triple: entity_id in triple, action)

    def looking(user_id: str, triple: str) -> str | None:
        hook(triple)
        return triple_owner(user_id, triple)

    store.triple_owner = looking  # type: ignore[method-assign]
    return hook


def _when_read(process: Process, entity_id: str, action: Callable[[], Any]) -> Hook:
    """Run ``action`` once ``process`` has read ``entity_id``'s record (an ingestion's read before its
    compare-and-set write)."""
    store = process.coordinator.entities.store
    get_raw = store.get_raw
    hook = Hook("", lambda read_id, raw: read_id == entity_id and raw is not None, action)

    def reading(user_id: str, entity_id: str) -> str | None:
        raw = get_raw(user_id, entity_id)
        hook(entity_id, raw)
        return raw

    store.get_raw = reading  # type: ignore[method-assign]
    return hook


def test_an_edge_an_ingestion_adds_to_an_entity_merged_meanwhile_moves_to_the_survivor(
    processes: tuple[Process, Process],
) -> None:
    """tue's ingestion (process a) had added tue to Acme Corp and was adding Alice's works-at edge to it
    when Acme Corp was merged into Initech (process b): without the lock the merge moved Acme's edges
    (none yet) and deleted it, and the edge was written to the deleted Acme, lost to Initech."""
    a, b = processes
    mon, vendor = _ended(a.client, "mon", SIGNED), _ended(a.client, "vendor", VENDOR)
    found = _entities(a.client)
    acme, initech = found[ACME]["id"], found[INITECH]["id"]
    hook = _when_relating_to(a, acme, _merge(b.client, initech, acme))
    tue = _ended(a.client, "tue", ALICE)
    assert hook.result() == [200]
    found = _entities(a.client)
    assert ACME not in found and sorted(found[INITECH]["episodeIds"]) == sorted([vendor, mon, tue])
    assert _edges(a.client, initech) == [("works-at", "in", "Alice", [tue])]


def test_an_edge_an_ingestion_adds_to_an_entity_forgotten_meanwhile_is_forgotten_too(
    processes: tuple[Process, Process],
) -> None:
    """tue's ingestion had added tue to Acme Corp and was adding Alice's works-at edge to it when Acme
    was forgotten: without the lock the edge was written after the forget, a record and a triple
    naming the forgotten entity (Alice's edge set pointing at it)."""
    a, b = processes
    _ended(a.client, "mon", SIGNED)
    acme = _entities(a.client)[ACME]["id"]
    hook = _when_relating_to(a, acme, _forget(b.client, "entity", acme))
    tue = _ended(a.client, "tue", ALICE)
    assert hook.result() == [200]
    found = _entities(a.client)
    assert ACME not in found and found["Alice"]["episodeIds"] == [tue]
    store = a.coordinator.entities.store
    out_ids, in_ids = store.edge_ids(U, found["Alice"]["id"])
    assert (out_ids, in_ids) == ([], []), store.rels(U, [*out_ids, *in_ids])
    triples = store.connector.run(lambda r: r.hkeys(store.index(U, "triples")))
    assert not [t for t in triples if acme in (t.decode() if isinstance(t, bytes) else t)], triples


def test_an_episode_forgotten_while_its_entity_is_merged_is_not_kept_by_the_survivor(
    processes: tuple[Process, Process],
) -> None:
    """mon's forget (process a) had read Acme Corp (on [mon]) and Initech (on [vendor]) when Acme was
    merged into Initech (process b): without the lock Initech took mon (and Alice's edge) and the forget,
    finding Acme gone and Initech without mon as read, left mon on Initech. Now the merge comes after
    the forget, whose Acme it no longer finds (404)."""
    a, b = processes
    mon, vendor = _ended(a.client, "mon", ALICE), _ended(a.client, "vendor", VENDOR)
    found = _entities(a.client)
    acme, initech = found[ACME]["id"], found[INITECH]["id"]
    store = a.coordinator.entities.store
    get_many = store.get_many
    hook = Hook("", lambda got: acme in got, _merge(b.client, initech, acme))

    def reading(user_id: str, ids: Any) -> dict[str, Entity]:
        got = get_many(user_id, ids)
        hook(got)
        return got

    store.get_many = reading  # type: ignore[method-assign]
    assert _forget(a.client, "episode", mon)() == 200
    assert hook.result() == [404]
    found = _entities(a.client)
    assert set(found) == {"User", INITECH} and found[INITECH]["episodeIds"] == [vendor], found
    assert _edges(a.client, initech) == []


def test_an_episode_forgotten_while_a_merge_moves_its_entity_leaves_the_survivor(
    processes: tuple[Process, Process],
) -> None:
    """The merge of Acme Corp (on [mon]) into Initech (process a) had read Acme and was moving its edges
    when mon was forgotten (process b): without the lock the forget deleted Acme and Alice, and the merge
    wrote Initech on [vendor, mon] (mon back). Now the forget comes after the merge and drops mon."""
    a, b = processes
    mon, vendor = _ended(a.client, "mon", ALICE), _ended(a.client, "vendor", VENDOR)
    found = _entities(a.client)
    acme, initech = found[ACME]["id"], found[INITECH]["id"]
    store = a.coordinator.entities.store
    edge_ids = store.edge_ids
    hook = Hook("", lambda entity_id: entity_id == acme, _forget(b.client, "episode", mon))

    def reading(user_id: str, entity_id: str) -> tuple[list[str], list[str]]:
        hook(entity_id)
        return edge_ids(user_id, entity_id)

    store.edge_ids = reading  # type: ignore[method-assign]
    assert _merge(a.client, initech, acme)() == 200
    assert hook.result() == [200]
    found = _entities(a.client)
    assert set(found) == {"User", INITECH} and found[INITECH]["episodeIds"] == [vendor], found
    assert _edges(a.client, initech) == []


def test_an_ingestion_adding_to_an_entity_merged_meanwhile_adds_to_the_survivor(
    processes: tuple[Process, Process],
) -> None:
    """tue's ingestion had read Acme Corp to add tue when Acme was merged into Initech: its
    compare-and-set write failed on the deleted record and its retry found Initech by Acme's name."""
    a, b = processes
    mon, vendor = _ended(a.client, "mon", SIGNED), _ended(a.client, "vendor", VENDOR)
    found = _entities(a.client)
    acme, initech = found[ACME]["id"], found[INITECH]["id"]
    hook = _when_read(a, acme, _merge(b.client, initech, acme))
    tue = _ended(a.client, "tue", ALICE)
    assert hook.result() == [200]
    found = _entities(a.client)
    assert ACME not in found and sorted(found[INITECH]["episodeIds"]) == sorted([vendor, mon, tue])
    assert _edges(a.client, initech) == [("works-at", "in", "Alice", [tue])]


def test_an_entity_deleted_while_an_ingestion_adds_to_it_stays_deleted(processes: tuple[Process, Process]) -> None:
    """tue's ingestion had read Acme Corp to add tue when Acme was deleted: its compare-and-set write
    failed, so the deleted entity was not written back live; tue's mention is a new Acme Corp."""
    a, b = processes
    _ended(a.client, "mon", SIGNED)
    acme = _entities(a.client)[ACME]["id"]
    hook = _when_read(a, acme, lambda: b.client.delete(f"/api/entities/{acme}", headers=user(U)).status_code)
    tue = _ended(a.client, "tue", ALICE)
    assert hook.result() == [200]
    assert a.client.get(f"/api/entities/{acme}", headers=user(U)).status_code == 404
    again = _entities(a.client)[ACME]
    assert again["id"] != acme and again["episodeIds"] == [tue]


def test_an_entity_renamed_while_an_ingestion_adds_to_it_keeps_both(processes: tuple[Process, Process]) -> None:
    """tue's ingestion had read Acme Corp to add tue when it was renamed: its compare-and-set write
    failed and its retry added tue to the renamed entity (the old name is its alias), keeping the name."""
    a, b = processes
    mon = _ended(a.client, "mon", SIGNED)
    acme = _entities(a.client)[ACME]["id"]
    path, body = f"/api/entities/{acme}", {"name": "Acme Corporation"}
    hook = _when_read(a, acme, lambda: b.client.put(path, json=body, headers=user(U)).status_code)
    tue = _ended(a.client, "tue", ALICE)
    assert hook.result() == [200]
    got = a.client.get(path, headers=user(U)).json()["entity"]
    assert (got["name"], got["aliases"], got["episodeIds"]) == ("Acme Corporation", [ACME], [mon, tue])
