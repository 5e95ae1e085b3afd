"""A write request whose user's writers' lock another holder keeps (issue 15, c5): what the API answers.

Every writer of a user's memories, entities, conclusions or profile holds a per-user lock in Redis (the
README's keys ``<prefix>:u:{<user>}:writers:memories``, ``…:writers:entities``,
``…:dreaming:conclusions``: ``SET NX PX`` with a random token, 60 s expiry). Here the test is that other
holder: it sets the key itself, as another process would, and sends the request through the API. Before
the fix the request waited out the lock's whole 60 s (twice the client's 30 s timeout) and then wrote
beside the holder that still had it. Now a request waits at most ``REQUEST_LOCK_WAIT_S`` for its first
lock and answers 503 with a JSON message and ``Retry-After`` (the seconds left on the holder's lock),
having written nothing; the holder's key is untouched, and the same request sent again once the holder is
done goes through. A lock taken after the request began writing is waited for in full (never a 503 with
half the work done); a dead holder's lock is taken when it expires, also across a Redis restart.
Real Redis (the test's DB; a private server for the restart), the bundled embedder and NER model.
"""

from __future__ import annotations

import json
import time
import uuid
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
import redis
from fastapi.testclient import TestClient

from agtos.memory.coordinator import MemoryCoordinator
from agtos.serving import lock_waits
from agtos.serving.app import create_app
from tests.helpers import end_session, isolated_app, isolation_settings, user
from tests.redis_process import RedisProcess
from tests.test_lock_starvation import HoldersInTurn

WAIT_S = 0.5  # the requests' bound on their first lock here (10 s in the app)
HOLD_MS = 6_000  # the test's holder's lock: longer than WAIT_S
HOLDER = "another-process-token"
MEMORIES = "/api/memory/memories"
Client = tuple[TestClient, str, MemoryCoordinator]  # the client, the key prefix and the app's coordinator


def lock_key(prefix: str, user_id: str, kind: str, name: str) -> str:
    """The README's key of a user's lock."""
    return f"{prefix}:u:{{{user_id}}}:{kind}:{name}"


@pytest.fixture(scope="module")
def api(redis_url: str, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Client]:
    """One app for the module (the models load once), each test its own users; requests wait ``WAIT_S``."""
    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(lock_waits, "REQUEST_LOCK_WAIT_S", WAIT_S)
        with isolated_app(redis_url, tmp_path_factory.mktemp("locks")) as (client, coordinator, prefix):
            yield client, prefix, coordinator


def _new_user() -> str:
    return f"lock-{uuid.uuid4().hex[:8]}"


def _memory(client: TestClient, user_id: str, text: str) -> dict[str, Any]:
    created = client.post(MEMORIES, json={"text": text}, headers=user(user_id))
    assert created.status_code == 201, created.text
    return dict(created.json()["memory"])


def _state(client: TestClient, user_id: str) -> dict[str, Any]:
    """What the user has stored, as the API lists it (compared before and after a refused request)."""
    h = user(user_id)
    memories = client.get(MEMORIES, params={"limit": 100}, headers=h).json()["memories"]
    return {
        "memories": sorted((m["id"], m["text"], m["current"]) for m in memories),
        "histories": {m["id"]: client.get(f"{MEMORIES}/{m['id']}/history", headers=h).json() for m in memories},
        "entities": sorted(
            (e["id"], e["name"], tuple(e["aliases"]))
            for e in client.get("/api/entities", params={"limit": 100}, headers=h).json()["entities"]
        ),
        "conclusions": sorted(
            json.dumps(c, sort_keys=True)
            for c in client.get("/api/memory/conclusions", params={"limit": 200}, headers=h).json()["conclusions"]
        ),
        "profile": client.get("/api/memory/profile", headers=h).json()["profile"],
    }


# each case: (lock kind, lock name, set-up of a fresh user returning the request to send: (method, url, json))
Request = tuple[str, str, dict[str, Any] | None]
SetUp = Callable[[TestClient, MemoryCoordinator, str], Request]


def _edit_memory(client: TestClient, coordinator: MemoryCoordinator, u: str) -> Request:
    mid = _memory(client, u, "User drinks green tea every morning")["id"]
    return "PUT", f"{MEMORIES}/{mid}", {"text": "User drinks black coffee every morning"}


def _delete_memory(client: TestClient, coordinator: MemoryCoordinator, u: str) -> Request:
    return "DELETE", f"{MEMORIES}/{_memory(client, u, 'User keeps bees on the roof')['id']}", None


def _new_memory(client: TestClient, coordinator: MemoryCoordinator, u: str) -> Request:
    _memory(client, u, "User plays the oboe in an orchestra")
    return "POST", MEMORIES, {"text": "User grows tomatoes on the balcony"}


def _forget_memory(client: TestClient, coordinator: MemoryCoordinator, u: str) -> Request:
    mid = _memory(client, u, "User swims in the lake on Sundays")["id"]
    return "POST", "/api/memory/forget", {"kind": "memory", "id": mid}


def _entities(client: TestClient, u: str) -> list[dict[str, Any]]:
    _memory(client, u, "User works with Maria Lopez at Acme Corp in Berlin")
    found = client.get("/api/entities", params={"limit": 100}, headers=user(u)).json()["entities"]
    assert len(found) >= 2, found
    return list(found)


def _merge_entities(client: TestClient, coordinator: MemoryCoordinator, u: str) -> Request:
    survivor, duplicate = _entities(client, u)[:2]
    return "POST", f"/api/entities/{survivor['id']}/merge", {"duplicate_id": duplicate["id"]}


def _forget_entity(client: TestClient, coordinator: MemoryCoordinator, u: str) -> Request:
    return "POST", "/api/memory/forget", {"kind": "entity", "id": _entities(client, u)[0]["id"]}


def _ended(client: TestClient, coordinator: MemoryCoordinator, u: str, session_id: str, said: str) -> None:
    """End a session of ``u`` in which the user said ``said``; wait for its Dreamer run."""
    ended = end_session(client, u, session_id, [{"role": "user", "content": said}])
    assert ended["saved"] is True, ended
    assert coordinator.dreamer.wait(30.0)


def _dreamt(client: TestClient, coordinator: MemoryCoordinator, u: str) -> list[dict[str, Any]]:
    """A session end saying an allergy and its Dreamer run: the user's conclusions (the rules' explicit one)."""
    _ended(client, coordinator, u, "s1", "I am allergic to peanuts.")
    found = client.get("/api/memory/conclusions", headers=user(u)).json()["conclusions"]
    assert found, "the Dreamer stored no conclusion"
    return list(found)


def _delete_conclusion(client: TestClient, coordinator: MemoryCoordinator, u: str) -> Request:
    return "DELETE", f"/api/memory/conclusions/{_dreamt(client, coordinator, u)[0]['id']}", None


def _forget_conclusion(client: TestClient, coordinator: MemoryCoordinator, u: str) -> Request:
    return "POST", "/api/memory/forget", {"kind": "conclusion", "id": _dreamt(client, coordinator, u)[0]["id"]}


def _put_profile(client: TestClient, coordinator: MemoryCoordinator, u: str) -> Request:
    _dreamt(client, coordinator, u)
    return "PUT", "/api/memory/profile", {"patterns": ["User walks the dog every evening"]}


def _dream_again(client: TestClient, coordinator: MemoryCoordinator, u: str) -> Request:
    _dreamt(client, coordinator, u)
    return "POST", "/api/memory/dream", None


CASES: dict[str, tuple[str, str, SetUp]] = {
    "PUT memory": ("writers", "memories", _edit_memory),
    "DELETE memory": ("writers", "memories", _delete_memory),
    "POST memory": ("writers", "memories", _new_memory),
    "forget memory": ("writers", "memories", _forget_memory),
    "merge entities": ("writers", "entities", _merge_entities),
    "forget entity": ("writers", "entities", _forget_entity),
    "DELETE conclusion": ("dreaming", "conclusions", _delete_conclusion),
    "forget conclusion": ("dreaming", "conclusions", _forget_conclusion),
    "PUT profile": ("dreaming", "conclusions", _put_profile),
    "dream": ("dreaming", "conclusions", _dream_again),
}


def _send(client: TestClient, u: str, request: Request) -> tuple[Any, float]:
    method, url, body = request
    started = time.monotonic()
    response = client.request(method, url, json=body, headers=user(u))
    return response, time.monotonic() - started


@pytest.mark.parametrize("case", list(CASES))
def test_a_held_lock_answers_503_with_retry_after_writes_nothing_and_a_retry_goes_through(
    api: Client, raw_redis: redis.Redis, case: str
) -> None:
    """Before the fix: no answer for the holder's 6 s, then 200 with the write made beside its lock."""
    client, prefix, coordinator = api
    kind, name, set_up = CASES[case]
    u = _new_user()
    request = set_up(client, coordinator, u)
    before = _state(client, u)
    key = lock_key(prefix, u, kind, name)
    assert raw_redis.set(key, HOLDER, nx=True, px=HOLD_MS)

    refused, took = _send(client, u, request)

    assert refused.status_code == 503, (refused.status_code, refused.text)
    assert WAIT_S <= took < WAIT_S + 4, took  # its bound, not the holder's 6 s nor the lock's 60 s
    message = refused.json()["message"]
    assert f"another writer of this user's {name} holds their lock; try again in" in message, message
    left_s = raw_redis.pttl(key) / 1000
    assert left_s > 0 and raw_redis.get(key) == HOLDER.encode()  # the holder keeps its lock
    retry_after = refused.headers["retry-after"]
    assert retry_after.isdigit() and left_s <= int(retry_after) <= HOLD_MS / 1000, (retry_after, left_s)
    assert _state(client, u) == before  # nothing written

    raw_redis.delete(key)  # the holder is done
    retried, _ = _send(client, u, request)
    assert retried.status_code in (200, 201), retried.text
    if case == "dream":  # a run over the same episodes restates what is stored
        assert "User is allergic to peanuts" in [c["text"] for c in retried.json()["conclusions"]]
    else:
        assert _state(client, u) != before


def test_a_lock_taken_after_the_request_began_writing_is_waited_for_not_refused_half_done(
    api: Client, raw_redis: redis.Redis
) -> None:
    """A new text drops the entities the old text alone named (the entity lock), after the memory's own write
    (the memory lock): a 503 there would leave the memory edited and its entities not. The request waits for
    the entity lock's holder (2 s, more than its bound for a first lock) and answers 200 with both done."""
    client, prefix, _ = api
    u = _new_user()
    mid = _memory(client, u, "User works with Maria Lopez at Acme Corp")["id"]
    names = {e["name"] for e in client.get("/api/entities", headers=user(u)).json()["entities"]}
    assert "Maria Lopez" in names, names
    assert raw_redis.set(lock_key(prefix, u, "writers", "entities"), HOLDER, nx=True, px=2_000)

    edited, took = _send(client, u, ("PUT", f"{MEMORIES}/{mid}", {"text": "User cooks pasta on Fridays"}))

    assert edited.status_code == 200, edited.text
    assert took >= 1.5, took  # it waited for the holder
    assert client.get(f"{MEMORIES}/{mid}", headers=user(u)).json()["text"] == "User cooks pasta on Fridays"
    names = {e["name"] for e in client.get("/api/entities", headers=user(u)).json()["entities"]}
    assert "Maria Lopez" not in names, names


def test_a_later_lock_handed_on_by_holders_in_turn_is_waited_for_until_the_last_released(
    api: Client, raw_redis: redis.Redis
) -> None:
    """The entity lock of a ``PUT`` that changes the text (taken after the memory's write, so waited for in
    full) held by other processes in turn: eight holders of 0.25 s, each shorter than the lock's ``lock_ms``
    (0.5 s here), 2 s in all. The request answers 200 only after the last released it,
    with both halves done. Before the fix it overtook after ``lock_ms`` and wrote beside the third holder."""
    client, prefix, coordinator = api
    u = _new_user()
    mid = _memory(client, u, "User works with Maria Lopez at Acme Corp")["id"]
    key = lock_key(prefix, u, "writers", "entities")
    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(coordinator.services.entities.writers, "lock_ms", 500)
        with HoldersInTurn(raw_redis, key, count=8, hold_s=0.25, px_ms=500) as holders:
            edited, _ = _send(client, u, ("PUT", f"{MEMORIES}/{mid}", {"text": "User cooks pasta on Fridays"}))
            answered = time.monotonic()

    assert edited.status_code == 200, edited.text
    assert answered >= holders.releasing_at, holders.releasing_at - answered  # not beside any of them
    assert client.get(f"{MEMORIES}/{mid}", headers=user(u)).json()["text"] == "User cooks pasta on Fridays"
    names = {e["name"] for e in client.get("/api/entities", headers=user(u)).json()["entities"]}
    assert "Maria Lopez" not in names, names


def test_an_episodes_forget_waits_for_a_held_lock_not_stop_half_done(api: Client, raw_redis: redis.Redis) -> None:
    """An episode's record goes before its first lock (then its memories, conclusions, entities): a 503 at that
    lock would leave what was learnt from it. The forget waits for the holder (2 s) and forgets it all."""
    client, prefix, coordinator = api
    u = _new_user()
    _ended(client, coordinator, u, "s1", "I am allergic to peanuts.")
    episode = client.get("/api/memory/episodes", headers=user(u)).json()["episodes"][0]["id"]
    assert raw_redis.set(lock_key(prefix, u, "writers", "memories"), HOLDER, nx=True, px=2_000)

    forgotten, took = _send(client, u, ("POST", "/api/memory/forget", {"kind": "episode", "id": episode}))

    assert forgotten.status_code == 200, forgotten.text
    assert took >= 1.5, took  # it waited for the holder
    assert client.get("/api/memory/episodes", headers=user(u)).json()["episodes"] == []
    assert client.get("/api/memory/conclusions", headers=user(u)).json()["conclusions"] == []


def test_a_dead_holders_lock_is_taken_when_it_expires_within_the_wait(api: Client, raw_redis: redis.Redis) -> None:
    """A holder that died keeps nobody out past its expiry: a request arriving 0.25 s before it waits and writes."""
    client, prefix, _ = api
    u = _new_user()
    mid = _memory(client, u, "User drinks green tea every morning")["id"]
    key = lock_key(prefix, u, "writers", "memories")
    setting = time.monotonic()  # the key expires 0.25 s after Redis set it, so not before setting + 0.25
    assert raw_redis.set(key, HOLDER, nx=True, px=250)

    edited, _ = _send(client, u, ("PUT", f"{MEMORIES}/{mid}", {"text": "User drinks black tea every morning"}))

    assert edited.status_code == 200, edited.text
    assert time.monotonic() >= setting + 0.25  # it waited for the expiry
    assert edited.json()["text"] == "User drinks black tea every morning"
    assert raw_redis.exists(key) == 0  # released: the holder's key expired, the request's own was deleted


def foreign_key_without_expiry(client: TestClient, prefix: str, raw: redis.Redis) -> tuple[str, str, str]:
    """A new user with one memory, and another process's key at their memories lock without expiry (a plain
    ``SET``: legacy or foreign, never a UserLock's): the user, the memory's id and the key."""
    u = _new_user()
    mid = _memory(client, u, "User drinks green tea every morning")["id"]
    key = lock_key(prefix, u, "writers", "memories")
    assert raw.set(key, HOLDER, nx=True) and raw.pttl(key) == -1
    return u, str(mid), key


def test_a_held_key_without_expiry_answers_retry_after_60(api: Client, raw_redis: redis.Redis) -> None:
    """A lock key without expiry (not set by agtos) is given the lock's 60 s by the request that meets it (issue 15,
    e1: it then goes by itself), so the 503 says ``Retry-After: 60`` (the time it now has left, whole seconds up),
    in its message too. Bug caught: ``Retry-After`` from such a key's PTTL (-1) alone: 1 s, a client retrying each
    second. ``test_lock_without_expiry.py`` has the rest (the key's expiry, the write once it went)."""
    client, prefix, _ = api
    u, mid, key = foreign_key_without_expiry(client, prefix, raw_redis)
    try:
        refused, _ = _send(client, u, ("PUT", f"{MEMORIES}/{mid}", {"text": "User drinks black tea every morning"}))
        assert raw_redis.get(key) == HOLDER.encode() and 59_000 - WAIT_S * 1000 < raw_redis.pttl(key) <= 60_000
    finally:
        raw_redis.delete(key)
    assert refused.status_code == 503, refused.text
    assert refused.headers["retry-after"] == "60"
    assert refused.json()["message"].endswith("try again in 60 s"), refused.json()


def test_a_lock_held_when_redis_died_expires_after_the_restart_and_the_next_writer_proceeds(tmp_path: Path) -> None:
    """Redis (append-only) is killed while another process holds the user's memory lock: a write then answers
    503 (storage, ``Retry-After: 2``), never 500. After the restart the lock is back with its expiry; a client
    that sends the write again on each 503 gets 503s with ``Retry-After`` until the lock expires, then 200.
    The server fsyncs each write before answering (``appendfsync always``): with the default ``everysec`` a
    write that arrives while the previous second's fsync is still running is written up to 2 s later, after
    its reply, so a kill can lose the lock's ``SET`` (the one failure seen, on a busy disk)."""
    server = RedisProcess(tmp_path / "redis", appendonly=True, extra_args=("--appendfsync", "always")).start()
    prefix = f"agtos-test-{uuid.uuid4().hex[:10]}"
    coordinator = MemoryCoordinator(isolation_settings(server.url, prefix, tmp_path))
    raw = redis.Redis.from_url(server.url)
    u = "rita"
    try:
        with pytest.MonkeyPatch.context() as patch, TestClient(create_app(coordinator=coordinator)) as client:
            patch.setattr(lock_waits, "REQUEST_LOCK_WAIT_S", WAIT_S)
            mid = _memory(client, u, "User drinks green tea every morning")["id"]
            key = lock_key(prefix, u, "writers", "memories")
            assert raw.set(key, HOLDER, nx=True, px=4_000)
            server.kill()
            edit = ("PUT", f"{MEMORIES}/{mid}", {"text": "User drinks black tea every morning"})

            down, _ = _send(client, u, edit)
            assert down.status_code == 503, down.text
            assert down.headers["retry-after"] == "2" and "unavailable" in down.json()["message"]

            server.start()
            asked = time.monotonic()  # before PTTL is read: asked + PTTL is not after the expiry
            expires = asked + raw.pttl(key) / 1000
            assert raw.get(key) == HOLDER.encode()  # the lock came back with the data
            answers = []
            while True:
                response, _ = _send(client, u, edit)
                answers.append(response.status_code)
                if response.status_code != 503:
                    break
                assert response.headers["retry-after"].isdigit(), response.headers
                assert time.monotonic() < expires + 10, answers
                time.sleep(0.05)  # a storage 503 answers at once (a held lock's after WAIT_S)
            assert answers[-1] == 200, response.text
            assert time.monotonic() >= expires - 0.2  # not before the dead holder's lock expired
            assert client.get(f"{MEMORIES}/{mid}", headers=user(u)).json()["text"] == edit[2]["text"]
    finally:
        coordinator.close()
        server.stop()


def test_openapi_documents_the_503_of_a_held_lock_on_every_such_route(api: Client) -> None:
    """Each route that can answer it lists 503 with its required Retry-After header and says why."""
    client, _, _ = api
    paths = client.get("/openapi.json").json()["paths"]
    routes = [
        ("put", "/api/memory/memories/{memory_id}"),
        ("delete", "/api/memory/memories/{memory_id}"),
        ("post", "/api/memory/memories"),
        ("post", "/api/memory/forget"),
        ("post", "/api/entities/{entity_id}/merge"),
        ("delete", "/api/memory/conclusions/{conclusion_id}"),
        ("put", "/api/memory/profile"),
        ("post", "/api/memory/dream"),
    ]
    for method, path in routes:
        documented = paths[path][method]["responses"]["503"]
        assert "another writer of this user's records kept their lock" in documented["description"], path
        assert documented["headers"]["Retry-After"]["required"] is True, path
