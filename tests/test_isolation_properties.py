"""Isolation, forgetting and key safety, as properties.

A hypothesis state machine lets three users whose ids are prefixes of each other (``iso3x``,
``iso3x.b``, ``iso3x.b-b``: the closest valid ids can be in a key) make random sequences of API
calls: turns carrying marker tokens, session ends (session ids reused after their end), every
search mode, episodes, context, ask, profile, conclusions, entities, attempts on another user's
record ids, forgetting one episode or everything, opting out (with or without forgetting) and
back in, and episodes expiring (their real key given a 1 ms TTL). After every call:

* no response to one user holds another user's marker token or record id;
* every marker of an ended, saved, not forgotten, not expired segment is found by keyword and
  hybrid search and listed among the episodes; a forgotten or expired one never is again, and
  after forget-all nothing of the user's shows anywhere;
* an opted-out user who forgot everything has no Redis key; one who kept their data gains none;
* forgetting one user changes no key of the others.

The number of runs comes from the Hypothesis profile (tests/hypothesis_profiles.py).

Then key injection: ids with glob, separator, whitespace, dot-only, over-long or non-ASCII
characters are refused with 400 and a message, and a SCAN over the test prefix shows every
key either belongs to ``{prefix}:u:{valid user}:`` or is a global meta key.
"""

from __future__ import annotations

import itertools
import json
import re
import string
import time
from collections.abc import Iterator
from typing import Any

import pytest
import redis
from fastapi.testclient import TestClient
from hypothesis import Phase, settings
from hypothesis import strategies as st
from hypothesis.stateful import RuleBasedStateMachine, initialize, invariant, rule, run_state_machine_as_test

from agtos.memory.coordinator import MemoryCoordinator
from agtos.storage.keys import InvalidIdentifier, check_user_id
from tests.helpers import isolated_app, user, user_key_names

MARKER = re.compile(r"zq([a-z]+)k\d+")  # zq<owner code>k<n>: whose marker a token is
RECORD_ID = re.compile(r"\b(?:ep|con|ent|mem|rel)-[0-9a-f]{8,}\b")
ECHOED = ("query", "question")  # request text the API repeats back (it may name the other user's markers)
SESSIONS = ("s1", "shared")  # the same session ids for every user on purpose, reused after their end
MODES = ("hybrid", "vector", "bm25")
SUFFIXES = (".b", "-b", "@b", "_b", "0", "b")
WHO = st.integers(0, 2)
STEPS = 12

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


@pytest.fixture(scope="module")
def iso_env(redis_url: str, tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[TestClient, str]]:
    """One app and key prefix for every state-machine run (each run has its own users)."""
    with isolated_app(redis_url, tmp_path_factory.mktemp("iso")) as (client, _, prefix):
        yield client, prefix


class Users(RuleBasedStateMachine):
    client: TestClient
    prefix: str
    raw: redis.Redis
    valid_users: set[str]

    def __init__(self) -> None:
        super().__init__()
        n = next(_run_numbers)
        self.codes = [_code(3 * n + i) for i in range(3)]
        self.ids = [f"iso{n}x"] * 3  # suffixed in setup; the "x" keeps "iso1x" + "0" apart from "iso10x"
        self.markers: list[list[str]] = [[], [], []]
        self.seen_ids: list[set[str]] = [set(), set(), set()]
        self.live: dict[tuple[int, str], list[str]] = {}  # journalled markers of the open segment
        self.episodes: list[dict[str, set[str]]] = [{}, {}, {}]  # saved, not forgotten or expired
        self.gone: list[set[str]] = [set(), set(), set()]  # forgotten or expired: never found again
        self.wiped: list[set[str]] = [set(), set(), set()]  # forget-all: never shown anywhere again
        self.opted_out: list[set[str] | None] = [None, None, None]  # the keys an opted-out user may keep

    @initialize(first=st.sampled_from(SUFFIXES), second=st.sampled_from(SUFFIXES))
    def setup(self, first: str, second: str) -> None:
        self.ids = [self.ids[0], self.ids[0] + first, self.ids[0] + first + second]
        for uid in self.ids:
            check_user_id(uid)
            Users.valid_users.add(uid)

    def teardown(self) -> None:
        for who in range(3):  # keeps the keyspace (and every SCAN) small over hundreds of runs
            self.client.post("/api/memory/forget", json={"kind": "all"}, headers=user(self.ids[who]))
            self.client.put("/api/memory/privacy", json={"opt_out": False}, headers=user(self.ids[who]))

    # -- helpers ------------------------------------------------------------------------
    def marker(self, who: int) -> str:
        token = f"zq{self.codes[who]}k{len(self.markers[who])}"
        self.markers[who].append(token)
        return token

    def some_marker(self, who: int, pick: int) -> str:
        """One of ``who``'s markers so far (or a fresh-looking one when there is none yet)."""
        found = self.markers[who]
        return found[pick % len(found)] if found else f"zq{self.codes[who]}k0"

    def stored(self, who: int) -> set[str]:
        return set().union(*self.episodes[who].values()) if self.episodes[who] else set()

    def call(self, who: int, method: str, url: str, echo: str = "", **kwargs: Any) -> Any:
        """Send as ``who`` and check isolation on the answer (``echo``: an id sent, repeated in errors)."""
        response = self.client.request(method, url, headers=user(self.ids[who]), **kwargs)
        assert response.status_code < 500, (method, url, response.text)
        if response.status_code >= 400:
            assert response.json()["message"], response.text
        text = _scan_text(response).replace(echo, "") if echo else _scan_text(response)
        owners = {m.group(1) for m in MARKER.finditer(text)}
        assert owners <= {self.codes[who]}, f"{self.ids[who]} saw markers of {owners}: {method} {url}"
        found = set(RECORD_ID.findall(text))
        leaked = found & set().union(*(self.seen_ids[o] for o in range(3) if o != who))
        assert not leaked, f"{self.ids[who]} saw another user's ids {leaked}: {method} {url}"
        shown = {m.group(0) for m in MARKER.finditer(text)}
        assert not (shown & self.wiped[who]), f"{self.ids[who]} still sees forgotten {shown & self.wiped[who]}"
        self.seen_ids[who] |= found
        return response

    def others_keys(self, who: int) -> dict[str, set[str]]:
        return {self.ids[o]: user_key_names(self.raw, self.prefix, self.ids[o]) for o in range(3) if o != who}

    def wipe_model(self, who: int) -> None:
        self.wiped[who] |= set(self.markers[who])
        self.episodes[who] = {}
        for key in [k for k in self.live if k[0] == who]:
            del self.live[key]

    # -- rules ----------------------------------------------------------------------------
    @rule(who=WHO, session=st.sampled_from(SESSIONS), n=st.integers(1, 2), end=st.booleans())
    def append_turns(self, who: int, session: str, n: int, end: bool) -> None:
        turns = []
        for _ in range(n):
            m = self.marker(who)
            turns.append(
                {"role": "user", "content": f"Remember that I prefer {m} tea. Quentin {m.capitalize()} is my friend."}
            )
            if self.opted_out[who] is None:
                self.live.setdefault((who, session), []).append(m)
        response = self.call(who, "POST", f"/api/memory/sessions/{session}/turns", json={"turns": turns})
        assert response.status_code == 200  # working memory works, opted out or not
        if end:
            self.end_session(who, session)

    @rule(who=WHO, session=st.sampled_from(SESSIONS))
    def get_session(self, who: int, session: str) -> None:
        assert self.call(who, "GET", f"/api/memory/sessions/{session}").status_code in (200, 404)

    @rule(who=WHO, session=st.sampled_from(SESSIONS))
    def end_session(self, who: int, session: str) -> None:
        response = self.call(who, "POST", f"/api/memory/sessions/{session}/end")
        assert response.status_code == 200
        expected = self.live.pop((who, session), [])
        body = response.json()
        if self.opted_out[who] is not None:
            assert body["saved"] is False, body
            return
        if not body["saved"]:
            assert not expected, body  # every segment states a preference: always saved
            return
        episode = body["episode"]
        held = {m.group(0) for m in MARKER.finditer(json.dumps(episode).lower())}
        assert set(expected) <= held, f"acknowledged turns lost: {set(expected) - held}"
        assert episode["id"] not in self.episodes[who], "a continued session overwrote its earlier episode"
        self.episodes[who][episode["id"]] = held

    @rule(who=WHO, session=st.sampled_from(SESSIONS))
    def reuse_session(self, who: int, session: str) -> None:
        """Two segments under one session id, then a second end of the last: two episodes, no third."""
        self.append_turns(who, session, 1, end=True)
        self.append_turns(who, session, 1, end=True)
        before = dict(self.episodes[who])
        self.end_session(who, session)
        assert self.episodes[who] == before

    @rule(who=WHO, mode=st.sampled_from(MODES), pick=st.integers(0, 50), whose=WHO)
    def search(self, who: int, mode: str, pick: int, whose: int) -> None:
        m = self.some_marker(whose, pick)  # searching for another user's markers is the attack
        response = self.call(who, "GET", "/api/memory/search", params={"q": f"{m} tea", "mode": mode, "limit": 50})
        assert response.status_code == 200
        text = _scan_text(response)
        if whose == who and m in self.stored(who) and mode != "vector":
            assert m in text, f"{self.ids[who]}: {m} (saved, not forgotten) not found by {mode}"
        if m in self.gone[who]:
            assert m not in text, f"{self.ids[who]}: forgotten or expired {m} found by {mode}"

    @rule(who=WHO)
    def list_episodes(self, who: int) -> None:
        response = self.call(who, "GET", "/api/memory/episodes", params={"limit": 100})
        shown = {m.group(0) for m in MARKER.finditer(_scan_text(response))}
        assert self.stored(who) <= shown, f"missing from the episodes: {self.stored(who) - shown}"
        assert not (shown & self.gone[who]), f"forgotten or expired episodes listed: {shown & self.gone[who]}"

    @rule(who=WHO, pick=st.integers(0, 50), whose=WHO)
    def ask(self, who: int, pick: int, whose: int) -> None:
        question = f"What tea does {self.some_marker(whose, pick)} like? What do I prefer?"
        assert self.call(who, "POST", "/api/memory/ask", json={"question": question}).status_code == 200

    @rule(who=WHO, pick=st.integers(0, 50), session=st.sampled_from(SESSIONS), whose=WHO)
    def context(self, who: int, pick: int, session: str, whose: int) -> None:
        body = {"query": f"{self.some_marker(whose, pick)} tea", "session_id": session}
        assert self.call(who, "POST", "/api/memory/context", json=body).status_code == 200

    @rule(who=WHO)
    def put_profile(self, who: int) -> None:
        m = self.marker(who)
        body = {"name": f"Name {m}", "preferences": [f"likes {m}"], "facts": [f"fact {m}"]}
        expected = 403 if self.opted_out[who] is not None else 200
        assert self.call(who, "PUT", "/api/memory/profile", json=body).status_code == expected

    @rule(who=WHO)
    def dream_and_read(self, who: int) -> None:
        assert self.call(who, "POST", "/api/memory/dream").status_code in (200, 403)
        assert self.call(who, "GET", "/api/memory/profile").status_code == 200
        assert self.call(who, "GET", "/api/memory/conclusions", params={"limit": 200}).status_code == 200

    @rule(who=WHO, pick=st.integers(0, 50), whose=WHO)
    def entities(self, who: int, pick: int, whose: int) -> None:
        params = {"q": self.some_marker(whose, pick), "limit": 100}
        assert self.call(who, "GET", "/api/entities", params=params).status_code == 200
        assert self.call(who, "GET", "/api/entities", params={"limit": 100}).status_code == 200

    @rule(who=WHO, kind=st.sampled_from(["ent", "con", "ep"]), pick=st.integers(0, 1_000))
    def touch_foreign_record(self, who: int, kind: str, pick: int) -> None:
        """Read, edit, merge or delete another user's record id: always 404, nothing changes."""
        foreign = sorted(i for o in range(3) if o != who for i in self.seen_ids[o] if i.startswith(f"{kind}-"))
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
            if own_entities:  # folding another user's entity into one's own would steal it
                attempts.append(("POST", f"/api/entities/{own_entities[0]}/merge", {"json": {"duplicate_id": record}}))
        elif kind == "con":
            attempts = [
                ("DELETE", f"/api/memory/conclusions/{record}", {}),
                ("POST", "/api/memory/forget", {"json": {"kind": "conclusion", "id": record}}),
            ]
        else:
            attempts = [("POST", "/api/memory/forget", {"json": {"kind": "episode", "id": record}})]
        for method, url, kwargs in attempts:
            response = self.call(who, method, url, echo=record, **kwargs)
            assert response.status_code in (403, 404), (method, url, response.status_code, response.text)

    @rule(who=WHO, pick=st.integers(0, 50))
    def forget_episode(self, who: int, pick: int) -> None:
        if not self.episodes[who]:
            return
        episode = sorted(self.episodes[who])[pick % len(self.episodes[who])]
        body = {"kind": "episode", "id": episode}
        assert self.call(who, "POST", "/api/memory/forget", json=body).status_code == 200
        self.gone[who] |= self.episodes[who].pop(episode)

    @rule(who=WHO, pick=st.integers(0, 50))
    def expire_episode(self, who: int, pick: int) -> None:
        """The episode's real key gets a 1 ms TTL (what AGTOS_EPISODE_TTL_DAYS sets, run short)."""
        if not self.episodes[who]:
            return
        episode = sorted(self.episodes[who])[pick % len(self.episodes[who])]
        key = f"{self.prefix}:u:{{{self.ids[who]}}}:episode:{episode}"
        assert self.raw.pexpire(key, 1), f"no key {key}"
        deadline = time.monotonic() + 2
        while self.raw.exists(key) and time.monotonic() < deadline:
            time.sleep(0.002)
        self.gone[who] |= self.episodes[who].pop(episode)

    @rule(who=WHO)
    def forget_all(self, who: int) -> None:
        before = self.others_keys(who)
        assert self.call(who, "POST", "/api/memory/forget", json={"kind": "all"}).status_code == 200
        assert self.others_keys(who) == before, "forgetting one user changed another user's keys"
        assert not user_key_names(self.raw, self.prefix, self.ids[who])
        self.wipe_model(who)

    @rule(who=WHO, forget=st.booleans())
    def opt_out(self, who: int, forget: bool) -> None:
        before = self.others_keys(who)
        body = {"opt_out": True, "forget_existing": forget}
        assert self.call(who, "PUT", "/api/memory/privacy", json=body).status_code == 200
        assert self.others_keys(who) == before, "opting one user out changed another user's keys"
        if forget:
            self.wipe_model(who)
        self.opted_out[who] = user_key_names(self.raw, self.prefix, self.ids[who])
        assert not (forget and self.opted_out[who])

    @rule(who=WHO)
    def opt_in(self, who: int) -> None:
        body = {"opt_out": False}
        assert self.call(who, "PUT", "/api/memory/privacy", json=body).status_code == 200
        self.opted_out[who] = None

    @invariant()
    def opted_out_users_gain_no_keys(self) -> None:
        for who, kept in enumerate(self.opted_out):
            if kept is not None:
                now = user_key_names(self.raw, self.prefix, self.ids[who])
                assert now <= kept, f"opted-out {self.ids[who]} got keys {sorted(now - kept)[:5]}"

    @invariant()
    def ids_never_shared(self) -> None:
        for a, b in itertools.combinations(range(3), 2):
            assert not (self.seen_ids[a] & self.seen_ids[b])


def test_no_call_sequence_leaks_loses_or_keeps_what_it_should_not(
    iso_env: tuple[TestClient, str], redis_url: str
) -> None:
    Users.client, Users.prefix = iso_env
    Users.raw = redis.Redis.from_url(redis_url)
    Users.valid_users = set()
    run_state_machine_as_test(
        Users,
        # runs from the profile; no shrinking: a failing run prints its steps as found
        settings=settings(stateful_step_count=STEPS, phases=[Phase.explicit, Phase.reuse, Phase.generate]),
    )
    _assert_every_key_is_owned(Users.raw, Users.prefix, Users.valid_users)


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
