"""A mention whose alias already belongs to another entity is merged into that entity, not dropped.

The bug (task H3): ``EntityMemory.observe`` looked up only the candidate's own name key. A candidate
"Omar Haddad" (its mentions "Omar Haddad" and "Omar", joined by first name) whose "omar" key an
existing entity owns was created as a new entity, the strict write answered ``taken``, the retry
re-read the same unowned key and failed the same way eight times, and the mention was logged as
"too many concurrent writes" and lost: Omar's page never got the episode.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from typing import Any

import pytest
from fastapi.testclient import TestClient

from agtos.memory.coordinator import MemoryCoordinator
from agtos.schemas import Entity, EntityType, Episode
from agtos.storage.entity_store import WriteResult
from agtos.tasks.entity_records import name_keys
from agtos.tasks.mentions import EntityCandidate
from tests.helpers import talk, user

U = "alias-user"
THANKS = (("assistant", "Noted."), ("user", "Thanks, keep that in mind."))
LOGGER = "agtos.memory.entity_memory"


def people(client: TestClient, called: str) -> list[dict[str, Any]]:
    """The persons with ``called`` in their name or an alias (the speaker "User" is a person too)."""
    response = client.get("/api/entities", params={"type": "person", "limit": 100}, headers=user(U))
    assert response.status_code == 200, response.text
    found = response.json()["entities"]
    return [p for p in found if any(called in n.lower() for n in [p["name"], *p["aliases"]])]


def episode_ids(client: TestClient, entity_id: str) -> list[str]:
    response = client.get(f"/api/entities/{entity_id}/episodes", headers=user(U))
    assert response.status_code == 200, response.text
    return sorted(e["id"] for e in response.json()["episodes"])


def test_full_name_after_first_name_lands_on_the_first_names_page(
    client: TestClient, caplog: pytest.LogCaptureFixture
) -> None:
    first = talk(client, U, "s-omar1", ("user", "Omar and I went hiking near Zermatt on Monday."), *THANKS)
    assert first["saved"], first
    [omar] = people(client, "omar")
    assert omar["name"] == "Omar"
    with caplog.at_level(logging.WARNING, logger=LOGGER):
        second = talk(
            client, U, "s-omar2", ("user", "Omar Haddad helped me paint the kitchen. Omar is very patient."), *THANKS
        )
    assert second["saved"], second
    assert not [r for r in caplog.records if "not stored" in r.getMessage()]
    found = people(client, "omar")
    assert [p["id"] for p in found] == [omar["id"]], found  # one Omar, not a second entity
    assert found[0]["name"] == "Omar" and "Omar Haddad" in found[0]["aliases"]
    assert episode_ids(client, omar["id"]) == sorted([first["episode"]["id"], second["episode"]["id"]])
    # the full name is a lookup key of Omar's page now
    hits = client.get("/api/entities", params={"q": "omar haddad"}, headers=user(U)).json()["entities"]
    assert [e["id"] for e in hits] == [omar["id"]]


def test_the_benchmark_corpus_sentence_keeps_lenas_mention(
    client: TestClient, caplog: pytest.LogCaptureFixture
) -> None:
    """benchmarks/corpus.py episode 1702 (seed 7): its lower-cased "lena brought homemade croissants" is
    one PERSON span to the spaCy model, joined with "Lena" by first name; "lena" belongs to Lena."""
    first = talk(client, U, "s-lena1", ("user", "Lena and I went hiking near Zermatt on Monday."), *THANKS)
    [lena] = people(client, "lena")
    assert lena["name"] == "Lena"
    with caplog.at_level(logging.WARNING, logger=LOGGER):
        text = "On Thursday 15 July I booked cheap flights with Lena in Hallstatt; lena brought homemade croissants."
        second = talk(client, U, "s-lena2", ("user", text), *THANKS)
    assert second["saved"], second
    assert not [r for r in caplog.records if "not stored" in r.getMessage()]
    named_lena = people(client, "lena")
    assert [p["id"] for p in named_lena] == [lena["id"]], named_lena
    assert episode_ids(client, lena["id"]) == sorted([first["episode"]["id"], second["episode"]["id"]])


def _episode(text: str = "x") -> Episode:
    return Episode(user_id=U, summary=text, timestamp=1_767_225_600_000)


def _cand(name: str, *aliases: str) -> EntityCandidate:
    from agtos.tasks.mentions import normalise_entity_name

    return EntityCandidate(name, EntityType.person, normalise_entity_name(name), list(aliases), 0.85)


def _create(coordinator: MemoryCoordinator, name: str, *aliases: str, save: Any = None) -> Entity:
    """A person stored directly (``save``: the store's unpatched write, when a test patched it)."""
    entity = Entity(user_id=U, name=name, type=EntityType.person, aliases=list(aliases), first_seen=1, last_seen=1)
    assert (save or coordinator.entities.store.save_entity)(entity, name_keys(entity), expect="").status == "ok"
    return entity


def _stored(coordinator: MemoryCoordinator, entity_id: str) -> Entity:
    loaded = coordinator.entities.load(U, entity_id)
    assert loaded is not None
    return loaded[0]


def test_an_alias_owned_by_a_third_entity_stays_with_its_owner(coordinator: MemoryCoordinator) -> None:
    omar = _create(coordinator, "Omar")
    haddad = _create(coordinator, "Haddad")
    episode = _episode()
    entity_id, created = coordinator.entities.observe(episode, _cand("Omar Haddad", "Omar", "Haddad"), None)
    assert (entity_id, created) == (omar.id, False)
    assert _stored(coordinator, omar.id).aliases == ["Omar Haddad"]
    assert _stored(coordinator, omar.id).episode_ids == [episode.id]
    assert _stored(coordinator, haddad.id) == haddad  # untouched: "haddad" still resolves to it
    owners = coordinator.entities.store.owners(U, ["omar", "omar haddad", "haddad"])
    assert owners == {"omar": omar.id, "omar haddad": omar.id, "haddad": haddad.id}


def _before_first_save(
    coordinator: MemoryCoordinator, monkeypatch: pytest.MonkeyPatch, action: Callable[[Any], None]
) -> list[str]:
    """Run ``action(unpatched save)`` (another writer) right before the first write of ``observe``;
    returns the statuses of ``observe``'s writes."""
    store = coordinator.entities.store
    save = store.save_entity
    statuses: list[str] = []

    def racing(*args: Any, **kwargs: Any) -> WriteResult:
        if not statuses:
            action(save)
        result = save(*args, **kwargs)
        statuses.append(result.status)
        return result

    monkeypatch.setattr(store, "save_entity", racing)
    return statuses


def test_a_real_race_for_the_name_is_retried_into_the_winner(
    coordinator: MemoryCoordinator, monkeypatch: pytest.MonkeyPatch
) -> None:
    winner: list[Entity] = []
    statuses = _before_first_save(
        coordinator, monkeypatch, lambda save: winner.append(_create(coordinator, "Lena", save=save))
    )
    episode = _episode()
    entity_id, created = coordinator.entities.observe(episode, _cand("Lena"), None)
    assert statuses == ["taken", "ok"] and (entity_id, created) == (winner[0].id, False)
    assert _stored(coordinator, winner[0].id).episode_ids == [episode.id]


def test_exhausted_retries_warn_accurately(
    coordinator: MemoryCoordinator, caplog: pytest.LogCaptureFixture, monkeypatch: pytest.MonkeyPatch
) -> None:
    lena = _create(coordinator, "Lena")
    store = coordinator.entities.store
    save = store.save_entity

    def always_beaten(entity: Entity, keys: Any, **kwargs: Any) -> WriteResult:
        current = _stored(coordinator, lena.id)  # another writer updates Lena first, every time
        touched = current.model_copy(update={"last_seen": current.last_seen + 1})
        assert save(touched, name_keys(touched), expect=store.get_raw(U, lena.id) or "").status == "ok"
        return save(entity, keys, **kwargs)

    monkeypatch.setattr(store, "save_entity", always_beaten)
    episode = _episode()
    with caplog.at_level(logging.WARNING, logger=LOGGER):
        assert coordinator.entities.observe(episode, _cand("Lena"), None) == (None, False)
    assert episode.id not in _stored(coordinator, lena.id).episode_ids
    [record] = [r for r in caplog.records if "not stored" in r.getMessage()]
    assert "changed by other writers 8 times in a row" in record.getMessage()
