"""Every writer of a user's conclusions, and of the profile lines derived from them, against a Dreamer run
of the same user (issue 15: nothing acknowledged is lost, nothing forgotten comes back).

A Dreamer run reads the stored conclusions, merges its own into them and writes them back; an episode's
forget, a conclusion's delete, the lint, a profile rebuild and a profile PUT read, change and write the
same records. Each overlap is forced, not hoped for: a hook in one writer, at the moment it has read and
not written yet, sends the other writer's request through the API and waits for its answer (at most
``HOLD_S``: behind the user's conclusions lock it cannot answer before the first writer is done). The
Dreamer runs with a stub consolidation LLM (its own thread per session end, as in test_dreamer_race),
real Redis and the bundled embedder.
"""

from __future__ import annotations

import json
import threading
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Any

import pytest
from fastapi.testclient import TestClient

from agtos.config import MaintenanceConfig, Settings
from agtos.memory import lint_pipeline
from agtos.memory.coordinator import MemoryCoordinator
from agtos.schemas import Conclusion, ProfileUpdate
from agtos.storage.conclusions import ConclusionStore
from tests.helpers import run_maintenance, user
from tests.stub_servers import StubModelServer
from tests.test_dreamer import conclusions
from tests.test_dreamer_race import HOLD_S, TEXT, WAIT_S, _citing_newest, _end, _llm_app

App = tuple[StubModelServer, MemoryCoordinator, TestClient]
DOG = "User walks the dog every evening"  # a pattern line the user sets


def _dreamt(app: App, day: str) -> str:
    """End ``day``'s session of dora and wait for its Dreamer run; the episode's id."""
    _, coordinator, client = app
    episode_id = _end(client, "dora", day)
    assert coordinator.dreamer.wait(WAIT_S)
    return episode_id


def _stored(client: TestClient) -> dict[str, Any] | None:
    """dora's ``TEXT`` conclusion as listed (None: not listed)."""
    return next((c for c in conclusions(client, "dora") if c["text"] == TEXT), None)


def _profile(client: TestClient) -> dict[str, Any]:
    return dict(client.get("/api/memory/profile", headers=user("dora")).json()["profile"])


def _in_thread(action: Callable[[], Any]) -> Callable[[], list[Any]]:
    """Start ``action`` in a thread and wait for it at most ``HOLD_S``; a call of the result waits for it
    (``WAIT_S``) and returns what it returned, in a list."""
    done: list[Any] = []
    thread = threading.Thread(target=lambda: done.append(action()), daemon=True)
    thread.start()
    thread.join(HOLD_S)

    def joined() -> list[Any]:
        thread.join(WAIT_S)
        assert not thread.is_alive(), "the other writer never finished"
        return done

    return joined


class Hook:
    """Runs ``action`` (:func:`_in_thread`) at the first call from a thread named ``prefix``… for which
    ``when`` holds; :meth:`result` waits for the action and returns what it returned, in a list."""

    def __init__(self, prefix: str, when: Callable[..., bool], action: Callable[[], Any]) -> None:
        self.prefix, self.when, self.action = prefix, when, action
        self.joined: Callable[[], list[Any]] | None = None
        self.fired = False

    def __call__(self, *args: Any) -> None:
        if self.fired or not threading.current_thread().name.startswith(self.prefix) or not self.when(*args):
            return
        self.fired = True
        self.joined = _in_thread(self.action)

    def result(self) -> list[Any]:
        assert self.joined is not None, "the hook never ran"
        return self.joined()


@contextmanager
def _app(settings: Settings, *replies: Any) -> Iterator[App]:
    with _llm_app(settings) as app:
        app[0].queue_chat(*replies)
        yield app


def _after_the_merge_read(store: ConclusionStore, action: Callable[[], Any]) -> Hook:
    """Run ``action`` once a Dreamer run has read the stored ``TEXT`` conclusion to merge with it."""
    get_many = store.get_many
    hook = Hook("dreamer-", lambda found: any(c.text == TEXT for c in found.values()), action)

    def reading(user_id: str, ids: list[str]) -> dict[str, Conclusion]:
        found = get_many(user_id, ids)
        hook(found)
        return found

    store.get_many = reading  # type: ignore[method-assign]
    return hook


def test_an_episode_forgotten_during_a_merge_loses_neither_the_runs_source_nor_comes_back(settings: Settings) -> None:
    """mon's run stored the conclusion on [mon]; tue's run read it to add tue when mon was forgotten. Without
    the lock the forget deleted it (mon was its only source) and the run wrote it back as [mon, tue]."""
    with _app(settings, _citing_newest(), _citing_newest()) as app:
        _, coordinator, client = app
        mon = _dreamt(app, "mon")
        forget = {"kind": "episode", "id": mon}
        hook = _after_the_merge_read(
            coordinator.services.conclusions,
            lambda: client.post("/api/memory/forget", json=forget, headers=user("dora")).status_code,
        )
        tue = _dreamt(app, "tue")
        assert hook.result() == [200]
        stored = _stored(client)
    assert stored is not None, "the run's conclusion was lost"
    assert (stored["source_episode_ids"], stored["source_turn_ids"]) == ([tue], [f"{tue}.t0"]), stored


def test_a_conclusion_deleted_during_a_merge_stays_deleted(settings: Settings) -> None:
    """The delete was answered 200 after the run had read the conclusion: without the lock the run wrote
    it back (re-embedded: listed and found again)."""
    with _app(settings, _citing_newest(), _citing_newest()) as app:
        _, coordinator, client = app
        _dreamt(app, "mon")
        stored = _stored(client)
        assert stored is not None
        path = f"/api/memory/conclusions/{stored['id']}"
        hook = _after_the_merge_read(
            coordinator.services.conclusions, lambda: client.delete(path, headers=user("dora")).status_code
        )
        _dreamt(app, "tue")
        assert hook.result() == [200]
        assert _stored(client) is None


def _citing_all(before: Callable[[], None]) -> Callable[[dict[str, Any]], str]:
    """A consolidation reply citing every episode its request lists for ``TEXT``, after ``before`` ran."""

    def reply(body: dict[str, Any]) -> str:
        listing = body["messages"][-1]["content"]
        cited = [line[2:].split(" ")[0] for line in listing.splitlines() if line.startswith("- ")]
        before()
        found = {"text": TEXT, "type": "inductive", "confidence": 0.8, "source_episode_ids": cited}
        return json.dumps({"conclusions": [{**found, "source_turn_ids": [f"{e}.t0" for e in cited]}]})

    return reply


def test_an_episode_forgotten_while_a_run_consolidates_is_not_written_back(settings: Settings) -> None:
    """tue's run listed mon and tue to the LLM; mon was forgotten (its conclusion with it) before the
    answer came: the run stores its conclusion on tue alone (it wrote [mon, tue])."""
    forgotten: list[int] = []
    forget: dict[str, str] = {}
    with _app(settings, _citing_newest()) as app:
        stub, _, client = app
        mon = _dreamt(app, "mon")
        forget.update(kind="episode", id=mon)
        before = lambda: forgotten.append(  # noqa: E731
            client.post("/api/memory/forget", json=forget, headers=user("dora")).status_code
        )
        stub.queue_chat(_citing_all(before))
        tue = _dreamt(app, "tue")
        stored = _stored(client)
    assert forgotten == [200]
    assert stored is not None
    assert (stored["source_episode_ids"], stored["source_turn_ids"]) == ([tue], [f"{tue}.t0"]), stored


@pytest.fixture
def lint_settings(settings: Settings) -> Settings:
    """Every conclusion stale at once (the lint rewrites each), no waiting on the ResourceGuard."""
    cfg = MaintenanceConfig(staleThresholdDays=0, guard_retries=0, guard_delay_s=0.0)
    return settings.with_overrides(maintenance=cfg)


def test_a_lint_leaves_a_conclusion_a_run_changed_after_its_read(
    lint_settings: Settings, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The lint read the conclusion on [mon]; tue's run added tue while the lint looked for contradictions;
    the lint then wrote its stale copy on [mon] (tue lost). Now it leaves that one to its next sweep."""
    with _app(lint_settings, _citing_newest(), _citing_newest()) as app:
        _, _, client = app
        mon = _dreamt(app, "mon")
        detect = lint_pipeline.detect_contradictions
        ended: list[str] = []

        def detecting(*args: Any) -> Any:
            ended.append(_dreamt(app, "tue"))
            return detect(*args)

        monkeypatch.setattr(lint_pipeline, "detect_contradictions", detecting)
        run = run_maintenance(client, "dora")
        stored = _stored(client)
    assert run["status"] == "completed", run
    assert stored is not None and stored["source_episode_ids"] == [mon, *ended], stored
    assert run["report"]["summary"]["changedMeanwhile"] >= 1, run["report"]["summary"]


def test_a_run_waits_for_the_lints_write(lint_settings: Settings) -> None:
    """The lint had checked its copies were current and was writing when tue's run merged: without the
    lock the lint's stale copy on [mon] overwrote the run's [mon, tue]."""
    with _app(lint_settings, _citing_newest(), _citing_newest()) as app:
        _, coordinator, client = app
        mon = _dreamt(app, "mon")
        store = coordinator.services.conclusions
        save_records = store.save_records
        tue: list[str] = []
        hook = Hook(
            "",
            lambda found: any(c.stale for c in found),
            lambda: tue.append(_end(client, "dora", "tue")) or coordinator.dreamer.wait(HOLD_S),
        )

        def saving(found: list[Conclusion]) -> None:
            hook(found)
            save_records(found)

        store.save_records = saving  # type: ignore[method-assign]
        run = run_maintenance(client, "dora")
        assert coordinator.dreamer.wait(WAIT_S)
        stored = _stored(client)
    assert run["status"] == "completed", run
    assert stored is not None and stored["source_episode_ids"] == [mon, *tue], stored


def _during_the_profile_write(coordinator: MemoryCoordinator, action: Callable[[], Any]) -> Hook:
    """Run ``action`` once a Dreamer run's profile rebuild has read and is about to write."""
    profiles = coordinator.services.profiles
    merge = profiles.merge
    hook = Hook("dreamer-", lambda update: TEXT in (update.patterns or []), action)

    def merging(user_id: str, update: ProfileUpdate) -> Any:
        hook(update)
        return merge(user_id, update)

    profiles.merge = merging  # type: ignore[method-assign]
    return hook


def test_a_profile_put_during_a_rebuild_is_kept(settings: Settings) -> None:
    """The PUT was answered while mon's run rebuilt the profile from what it had read: without the lock
    the rebuild wrote its patterns over the ones the user had just set."""
    with _app(settings, _citing_newest()) as app:
        _, coordinator, client = app
        body = {"patterns": [DOG]}
        hook = _during_the_profile_write(
            coordinator, lambda: client.put("/api/memory/profile", json=body, headers=user("dora")).status_code
        )
        _dreamt(app, "mon")
        assert hook.result() == [200]
        assert _profile(client)["patterns"] == [DOG]


def test_a_forget_during_a_profile_rebuild_takes_the_line_with_it(settings: Settings) -> None:
    """mon was forgotten (its conclusion and that conclusion's line) while mon's run rebuilt the profile
    from what it had read: without the lock the rebuild wrote the forgotten line back."""
    with _app(settings, _citing_newest()) as app:
        _, coordinator, client = app
        forget: dict[str, str] = {}
        mon_ended = threading.Event()  # the episode's id is known once its end answered

        def forgetting() -> int:
            assert mon_ended.wait(WAIT_S)
            return client.post("/api/memory/forget", json=forget, headers=user("dora")).status_code

        hook = _during_the_profile_write(coordinator, forgetting)
        forget.update(kind="episode", id=_end(client, "dora", "mon"))
        mon_ended.set()
        assert coordinator.dreamer.wait(WAIT_S)
        assert hook.result() == [200]
        profile = _profile(client)
        assert _stored(client) is None
    assert TEXT not in profile["patterns"] and TEXT not in profile["sources"], profile
