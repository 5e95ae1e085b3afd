"""An entity rename and an ingestion between its writes: nothing lost, nothing doubled, no stale vector (issue 15, d4).

A rename (entity ``PUT``) embeds its new name before it takes the process's entity lock (so a slow embedder
holds up no other writer), and no rename takes the user's entity writers' lock. So an ingestion can write
between the rename's embedding and its write (same process), and a rename from another process can land
between an ingestion's new entity and that entity's vector. Two coordinators (two processes) over one Redis,
the bundled embedder and NER model, through HTTP (tests/test_entity_rename_race.py's pair and gates); the
vectors compared with the model's own embedding of the names.
"""

from __future__ import annotations

from concurrent.futures import ThreadPoolExecutor

import pytest

from tests import test_entity_rename_race
from tests.helpers import user
from tests.test_entity_rename_race import (
    BOUND_S,
    FIRST,
    GATE_S,
    OLD_NAME,
    SECOND,
    acme_of,
    cosine,
    gated_embedding,
    gated_vector_write,
    listed,
    only_the_stored_names_vector,
    rename,
    stored_vector,
    while_held,
)
from tests.test_entity_writers_race import Process

processes = test_entity_rename_race.processes  # two API processes over one Redis (module-scoped)


def remember(process: Process, who: str, text: str) -> int:
    return process.client.post("/api/memory/memories", json={"text": text}, headers=user(who)).status_code


def test_an_ingestion_during_a_renames_embedding_is_kept_once(processes: tuple[Process, Process]) -> None:
    """The rename of Acme Corp to Acme Corporation waits in its embedding; meanwhile a memory of the same
    process mentions Acme Corp again (its ingestion adds the memory to the entity). Then the rename writes:
    one entity, named Acme Corporation with Acme Corp an alias, naming both memories (none lost), no second
    Acme entity, and its vector Acme Corporation's own.
    Bug caught: a rename writing the entity as read before its embedding (the ingestion's mention lost)."""
    one, _ = processes
    who = "window-ann"
    acme = acme_of(one, who)
    with gated_embedding(one) as gated, ThreadPoolExecutor(2) as pool:
        renamed = pool.submit(rename, one, who, acme, FIRST)
        mentioned = pool.submit(lambda: gated.started.wait(BOUND_S) and remember(one, who, f"{OLD_NAME} paid us."))
        assert while_held(gated.started, gated.opened, renamed, mentioned) == 201
        assert renamed.result(GATE_S) == 200
    found = listed(one, who)
    assert [name for name in found if "Acme" in name] == [FIRST], found
    assert found[FIRST]["id"] == acme and OLD_NAME in found[FIRST]["aliases"], found[FIRST]
    memories = one.client.get("/api/memory/memories", headers=user(who)).json()["memories"]
    assert len(memories) == 2 and found[FIRST]["episodeCount"] == 2, (memories, found[FIRST])
    vector = stored_vector(one, who, acme)
    assert vector is not None and cosine(one, vector, FIRST) == pytest.approx(1.0, abs=1e-3)


def test_a_rename_between_an_ingestions_new_entity_and_its_vector_leaves_no_vector_of_the_old_name(
    processes: tuple[Process, Process],
) -> None:
    """Process 1's ingestion of a memory creates Acme Corp and waits before writing its name vector; process 2
    renames it to Acme Holdings (name and vector); then process 1's vector of Acme Corp lands. The stored name
    is Acme Holdings: no vector of Acme Corp may stay beside it (dedup would match Acme Corp's look-alikes to
    it), and after the repair sweep the vector is Acme Holdings' own.
    Bug caught: an ingestion's new entity's vector written unchecked (Acme Corp's, cosine 1.0, kept)."""
    one, two = processes
    who = "window-bea"
    with gated_vector_write(one, None) as gate, ThreadPoolExecutor(2) as pool:
        created = pool.submit(remember, one, who, f"We signed with {OLD_NAME}.")

        def rename_it() -> int:
            assert gate.started.wait(BOUND_S), "the ingestion never wrote an entity vector"
            return rename(two, who, listed(two, who)[OLD_NAME]["id"], SECOND)

        assert while_held(gate.started, gate.opened, created, pool.submit(rename_it)) == 200
        assert created.result(GATE_S) == 201
    found = listed(two, who)
    assert list(found) == [SECOND], found
    only_the_stored_names_vector(processes, who, found[SECOND]["id"], SECOND, lost=OLD_NAME)
