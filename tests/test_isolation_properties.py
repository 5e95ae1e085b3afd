"""Isolation and key safety, as properties.

A hypothesis state machine lets two users A and B make random sequences of API calls
(turns carrying marker tokens, session ends, every search mode, episodes, ask, context,
profile, conclusions, entities, and attempts on the other user's record ids). After every
call the invariant is checked: no response to one user contains a marker token or a record
id that belongs to anyone else. User ids are drawn so that one is a prefix of the other
(``iso3x`` and ``iso3x.b``), the closest two valid ids can be in a key.

Then key injection: ids with glob, separator, whitespace, dot-only, over-long or non-ASCII
characters are refused with 400 and a message, and a SCAN over the test prefix shows every
key either belongs to ``{prefix}:u:{valid user}:`` or is a global meta key.
"""

from __future__ import annotations

import itertools
import json
import re
import string
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import redis
from fastapi.testclient import TestClient
from hypothesis import HealthCheck, Phase, settings
from hypothesis import strategies as st
from hypothesis.stateful import RuleBasedStateMachine, initialize, invariant, rule, run_state_machine_as_test

from agtos.config import MaintenanceConfig, Settings
from agtos.memory.coordinator import MemoryCoordinator
from agtos.serving.app import create_app
from agtos.storage.keys import InvalidIdentifier, check_user_id
from tests.helpers import delete_prefix, user

MARKER = re.compile(r"zq([a-z]+)k\d+")  # zq<owner code>k<n>: whose marker a token is
RECORD_ID = re.compile(r"\b(?:ep|con|ent|mem|rel)-[0-9a-f]{8,}\b")
ECHOED = ("query", "question")  # request text the API repeats back (it may name the other user's markers)
SESSIONS = ("s1", "shared")  # the same session ids for both users on purpose
MODES = ("hybrid", "vector", "bm25")
SUFFIXES = (".b", "-b", "@b", "_b", "0", "b")

_run_numbers = itertools.count()


def _code(n: int) -> str:
    """Letters only (a, b, ..., z, ba, bb, ...): a marker owner code no other run shares."""
    digits = string.ascii_lowercase
    out = ""
    while True:
        n, r = divmod(n, 26)
        out = digits[r] + out
        if n == 0:
            return out


def _scan_text(response: Any) -> str:
    """The response body without the fields that only echo the request, lowercased."""
    try:
        body = response.json()
    except ValueError:
        return str(response.text).lower()
    if isinstance(body, dict):
        body = {k: v for k, v in body.items() if k not in ECHOED}
    return json.dumps(body).lower()


def _isolation_settings(redis_url: str, prefix: str, tmp: Path) -> Settings:
    return Settings(
        redis_url=redis_url,
        key_prefix=prefix,
        data_dir=tmp / "data",
        config_dir=tmp / "config",
        maintenance=MaintenanceConfig(guard_retries=0, guard_delay_s=0.0, nli_enabled=False),
    )


@pytest.fixture(scope="module")
def iso_env(redis_url: str, tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[TestClient, str]]:
    """One app and key prefix for every state-machine run (each run has its own two users)."""
    prefix = f"agtos-test-{uuid.uuid4().hex[:10]}"
    coordinator = MemoryCoordinator(_isolation_settings(redis_url, prefix, tmp_path_factory.mktemp("iso")))
    try:
        with TestClient(create_app(coordinator=coordinator)) as client:
            yield client, prefix
    finally:
        coordinator.close()
        delete_prefix(redis_url, prefix)


class TwoUsers(RuleBasedStateMachine):
    client: TestClient
    prefix: str
    valid_users: set[str]

    def __init__(self) -> None:
        super().__init__()
        n = next(_run_numbers)
        self.codes = {"a": _code(2 * n), "b": _code(2 * n + 1)}
        # one of the two gets a suffix in setup; the "x" keeps "iso1x" + "0" apart from run 10's "iso10x"
        self.ids = {"a": f"iso{n}x", "b": f"iso{n}x"}
        self.markers: dict[str, list[str]] = {"a": [], "b": []}
        self.seen_ids: dict[str, set[str]] = {"a": set(), "b": set()}

    @initialize(suffix=st.sampled_from(SUFFIXES), b_first=st.booleans())
    def setup(self, suffix: str, b_first: bool) -> None:
        # one id is a prefix of the other; which one is drawn
        if b_first:
            self.ids["a"] += suffix
        else:
            self.ids["b"] += suffix
        for who in self.ids:
            check_user_id(self.ids[who])
            TwoUsers.valid_users.add(self.ids[who])
        for who in self.ids:  # both start with an episode, its conclusions and entities: something to leak
            self.append_turns(who, "shared", 1, end=True)

    # -- helpers ------------------------------------------------------------------------
    def marker(self, who: str) -> str:
        token = f"zq{self.codes[who]}k{len(self.markers[who])}"
        self.markers[who].append(token)
        return token

    def other(self, who: str) -> str:
        return "b" if who == "a" else "a"

    def some_marker(self, who: str, pick: int) -> str:
        """One of ``who``'s markers so far (or a fresh-looking one when there is none yet)."""
        found = self.markers[who]
        return found[pick % len(found)] if found else f"zq{self.codes[who]}k0"

    def call(self, who: str, method: str, url: str, echo: str = "", **kwargs: Any) -> Any:
        """Send as ``who`` and check the invariant on the answer (``echo``: an id sent, repeated in errors)."""
        response = self.client.request(method, url, headers=user(self.ids[who]), **kwargs)
        assert response.status_code < 500, (method, url, response.text)
        if response.status_code >= 400:
            assert response.json()["message"], response.text
        text = _scan_text(response).replace(echo, "") if echo else _scan_text(response)
        owners = {m.group(1) for m in MARKER.finditer(text)}
        assert owners <= {self.codes[who]}, f"{who} ({self.ids[who]}) saw markers of {owners}: {method} {url}"
        found = set(RECORD_ID.findall(text))
        leaked = found & self.seen_ids[self.other(who)]
        assert not leaked, f"{who} ({self.ids[who]}) saw the other user's ids {leaked}: {method} {url}"
        self.seen_ids[who] |= found
        return response

    # -- rules ----------------------------------------------------------------------------
    @rule(who=st.sampled_from("ab"), session=st.sampled_from(SESSIONS), n=st.integers(1, 3), end=st.booleans())
    def append_turns(self, who: str, session: str, n: int, end: bool) -> None:
        turns = []
        for _ in range(n):
            m = self.marker(who)
            turns.append(
                {
                    "role": "user",
                    "content": f"Remember that I prefer {m} tea. My friend Quentin {m.capitalize()} "
                    f"works at Globex {m.capitalize()} in Lisbon.",
                }
            )
            turns.append({"role": "assistant", "content": f"Noted: {m} tea and Quentin {m.capitalize()}."})
        response = self.call(who, "POST", f"/api/memory/sessions/{session}/turns", json={"turns": turns})
        assert response.status_code == 200
        if end:
            self.end_session(who, session)

    @rule(who=st.sampled_from("ab"), session=st.sampled_from(SESSIONS))
    def get_session(self, who: str, session: str) -> None:
        assert self.call(who, "GET", f"/api/memory/sessions/{session}").status_code in (200, 404)

    @rule(who=st.sampled_from("ab"), session=st.sampled_from(SESSIONS))
    def end_session(self, who: str, session: str) -> None:
        assert self.call(who, "POST", f"/api/memory/sessions/{session}/end").status_code == 200

    @rule(who=st.sampled_from("ab"), mode=st.sampled_from(MODES), pick=st.integers(0, 50), own=st.booleans())
    def search(self, who: str, mode: str, pick: int, own: bool) -> None:
        target = who if own else self.other(who)  # searching for the other user's markers is the attack
        q = f"{self.some_marker(target, pick)} tea Quentin Globex"
        assert self.call(who, "GET", "/api/memory/search", params={"q": q, "mode": mode}).status_code == 200

    @rule(who=st.sampled_from("ab"))
    def list_episodes(self, who: str) -> None:
        assert self.call(who, "GET", "/api/memory/episodes", params={"limit": 100}).status_code == 200

    @rule(who=st.sampled_from("ab"), pick=st.integers(0, 50))
    def ask(self, who: str, pick: int) -> None:
        question = f"What tea does {self.some_marker(self.other(who), pick)} like? What do I prefer?"
        assert self.call(who, "POST", "/api/memory/ask", json={"question": question}).status_code == 200

    @rule(who=st.sampled_from("ab"), pick=st.integers(0, 50), session=st.sampled_from(SESSIONS))
    def context(self, who: str, pick: int, session: str) -> None:
        body = {"query": f"{self.some_marker(self.other(who), pick)} tea", "session_id": session}
        assert self.call(who, "POST", "/api/memory/context", json=body).status_code == 200

    @rule(who=st.sampled_from("ab"))
    def put_profile(self, who: str) -> None:
        m = self.marker(who)
        body = {"name": f"Name {m}", "preferences": [f"likes {m}"], "facts": [f"fact {m}"]}
        assert self.call(who, "PUT", "/api/memory/profile", json=body).status_code == 200

    @rule(who=st.sampled_from("ab"))
    def get_profile(self, who: str) -> None:
        assert self.call(who, "GET", "/api/memory/profile").status_code == 200

    @rule(who=st.sampled_from("ab"))
    def dream(self, who: str) -> None:
        assert self.call(who, "POST", "/api/memory/dream").status_code == 200

    @rule(who=st.sampled_from("ab"))
    def conclusions(self, who: str) -> None:
        assert self.call(who, "GET", "/api/memory/conclusions", params={"limit": 200}).status_code == 200

    @rule(who=st.sampled_from("ab"), pick=st.integers(0, 50), own=st.booleans())
    def entities(self, who: str, pick: int, own: bool) -> None:
        params = {"q": self.some_marker(who if own else self.other(who), pick), "limit": 100}
        assert self.call(who, "GET", "/api/entities", params=params).status_code == 200
        assert self.call(who, "GET", "/api/entities", params={"limit": 100}).status_code == 200
        assert self.call(who, "GET", "/api/entities/stats").status_code == 200

    @rule(who=st.sampled_from("ab"), kind=st.sampled_from(["ent", "con", "ep"]), pick=st.integers(0, 1_000))
    def touch_foreign_record(self, who: str, kind: str, pick: int) -> None:
        """Read, edit, merge or delete one of the other user's record ids: always 404, nothing changes."""
        foreign = sorted(i for i in self.seen_ids[self.other(who)] if i.startswith(f"{kind}-"))
        if not foreign:
            return
        record = foreign[pick % len(foreign)]
        own_entities = sorted(i for i in self.seen_ids[who] if i.startswith("ent-"))
        attempts: list[tuple[str, str, dict[str, Any]]] = []
        if kind == "ent":
            attempts = [
                ("GET", f"/api/entities/{record}", {}),
                ("GET", f"/api/entities/{record}/episodes", {}),
                ("GET", f"/api/entities/{record}/relationships", {}),
                ("PUT", f"/api/entities/{record}", {"json": {"name": "hijacked"}}),
                ("POST", f"/api/entities/{record}/merge", {"json": {"duplicate_id": "ent-000000000000"}}),
                ("DELETE", f"/api/entities/{record}", {}),
                ("POST", "/api/memory/forget", {"json": {"kind": "entity", "id": record}}),
            ]
            if own_entities:  # folding the other user's entity into one's own would steal it
                merge = {"json": {"duplicate_id": record}}
                attempts.append(("POST", f"/api/entities/{own_entities[0]}/merge", merge))
        elif kind == "con":
            attempts = [
                ("DELETE", f"/api/memory/conclusions/{record}", {}),
                ("POST", "/api/memory/forget", {"json": {"kind": "conclusion", "id": record}}),
            ]
        else:
            attempts = [("POST", "/api/memory/forget", {"json": {"kind": "episode", "id": record}})]
        for method, url, kwargs in attempts:
            response = self.call(who, method, url, echo=record, **kwargs)
            assert response.status_code == 404, (method, url, response.status_code, response.text)
        if kind == "ent":  # still there for its owner, unchanged
            owner_view = self.call(self.other(who), "GET", f"/api/entities/{record}")
            assert owner_view.status_code == 200 and owner_view.json()["entity"]["name"] != "hijacked"

    @invariant()
    def ids_never_shared(self) -> None:
        assert not (self.seen_ids["a"] & self.seen_ids["b"])


def test_no_call_sequence_shows_one_user_the_others_data(iso_env: tuple[TestClient, str], redis_url: str) -> None:
    TwoUsers.client, TwoUsers.prefix = iso_env
    TwoUsers.valid_users = set()
    run_state_machine_as_test(
        TwoUsers,
        settings=settings(
            max_examples=25,
            stateful_step_count=15,
            deadline=None,
            derandomize=True,
            database=None,
            # no shrinking: a failing run prints its (at most 15) steps as found, within the test timeout
            phases=[Phase.explicit, Phase.reuse, Phase.generate],
            suppress_health_check=list(HealthCheck),
        ),
    )
    _assert_every_key_is_owned(redis.Redis.from_url(redis_url), TwoUsers.prefix, TwoUsers.valid_users)


# -- key injection ------------------------------------------------------------------------

BAD_USER_IDS = [
    "*",
    "a*",
    "a:b",
    "a b",
    " a",
    "a ",
    "a\tb",
    ".",
    "..",
    "a/b",
    "a?b",
    "[a]",
    "a\\b",
    "{a}",
    "a,b",
    "%2A",
    "x" * 129,
    "",
]
UNSENDABLE_USER_IDS = ["\n", "a\nb", "a\r\nX-Other: 1", "a\x00b"]
LOOKALIKES = [
    "\u0430dmin",
    "adm\u0131n",
    "a\u200bb",
    "\uff41",
    "caf\u00e9",
    "a\u2215b",
    "a\uff1ab",
]  # Cyrillic а, dotless ı, ZWSP, fullwidth


def _assert_message_400(response: Any) -> None:
    assert response.status_code == 400, response.text
    body = response.json()
    assert isinstance(body["message"], str) and "user id" in body["message"]


@pytest.mark.parametrize("bad", BAD_USER_IDS)
def test_bad_user_ids_are_400(client: TestClient, bad: str) -> None:
    for method, url, kwargs in (
        ("GET", "/api/memory/episodes", {}),
        ("GET", "/api/memory/search", {"params": {"q": "tea"}}),
        ("PUT", "/api/memory/profile", {"json": {"name": "x"}}),
        ("POST", "/api/memory/sessions/s1/turns", {"json": {"turns": [{"role": "user", "content": "hi"}]}}),
        ("GET", "/api/entities", {}),
    ):
        _assert_message_400(client.request(method, url, headers={"X-User-Id": bad}, **kwargs))


@pytest.mark.parametrize("bad", LOOKALIKES)
def test_non_ascii_lookalike_user_ids_are_400(client: TestClient, bad: str) -> None:
    """Sent as UTF-8 bytes (what a client would put on the wire); the server sees non-ASCII and refuses."""
    response = client.get("/api/memory/episodes", headers={"X-User-Id": bad.encode()})
    _assert_message_400(response)
    with pytest.raises(InvalidIdentifier):
        check_user_id(bad)


@pytest.mark.parametrize("bad", [*BAD_USER_IDS, *UNSENDABLE_USER_IDS, *LOOKALIKES])
def test_check_user_id_refuses_unsafe_ids(bad: str) -> None:
    """The library gate itself (ids with CR/LF/NUL cannot even be sent as a header)."""
    with pytest.raises(InvalidIdentifier, match="user id"):
        check_user_id(bad)


def test_prefix_user_ids_never_collide(client: TestClient, coordinator: MemoryCoordinator) -> None:
    """``a`` and ``a:b`` cannot collide (the second is refused); ``a`` and ``a.b`` are separate users."""
    prefix = coordinator.settings.key_prefix
    turns = {"turns": [{"role": "user", "content": "Remember that I prefer zqak1 tea."}]}
    assert client.post("/api/memory/sessions/s1/turns", json=turns, headers=user("a")).status_code == 200
    assert client.post("/api/memory/sessions/s1/end", headers=user("a")).status_code == 200
    assert client.put("/api/memory/profile", json={"name": "zqak2"}, headers=user("a")).status_code == 200
    for colliding in ("a:b", "a:*", "a:episode", "a:profile", "*"):
        _assert_message_400(client.get("/api/memory/profile", headers={"X-User-Id": colliding}))
        _assert_message_400(client.get("/api/memory/episodes", headers={"X-User-Id": colliding}))
    for neighbour in ("a.b", "a-b", "a@b", "a_b", "aa", "A"):
        profile = client.get("/api/memory/profile", headers=user(neighbour)).json()["profile"]
        assert profile["name"] is None and profile["user_id"] == neighbour
        assert client.get("/api/memory/episodes", headers=user(neighbour)).json()["episodes"] == []
        found = client.get("/api/memory/search", params={"q": "zqak1 tea"}, headers=user(neighbour)).json()
        assert found["results"] == []
    assert client.get("/api/memory/episodes", headers=user("a")).json()["count"] == 1
    raw = redis.Redis.from_url(coordinator.settings.redis_url)
    _assert_every_key_is_owned(raw, prefix, {"a", "a.b", "a-b", "a@b", "a_b", "aa", "A"})
    assert any(k.startswith(f"{prefix}:u:{{a}}:") for k in _keys(raw, prefix))


def _keys(raw: redis.Redis, prefix: str) -> list[str]:
    return [k.decode() for k in raw.scan_iter(match=f"{prefix}:*", count=1000)]


def _assert_every_key_is_owned(raw: redis.Redis, prefix: str, users: set[str]) -> None:
    """Every key under ``prefix`` is ``{prefix}:u:{one valid user}:...`` or a global one."""
    for key in _keys(raw, prefix):
        rest = key[len(prefix) + 1 :]
        if rest == "users" or rest.startswith("meta:"):
            continue
        assert rest.startswith("u:"), key
        assert rest.startswith("u:{"), key
        owner = rest[3:].split("}:", 1)[0]
        assert owner in users, key
        check_user_id(owner)
