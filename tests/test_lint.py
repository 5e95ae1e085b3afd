"""The six-step lint on a crafted set, its contradiction pipeline, history, health and kill switch."""

from __future__ import annotations

import pytest
from fastapi.testclient import TestClient

from agtos.config import MaintenanceConfig, Settings
from agtos.memory.coordinator import MemoryCoordinator
from agtos.memory.lint_pipeline import LintState, MaintenanceDisabledError, persist, run_lint
from agtos.schemas import Conclusion, Episode
from agtos.schemas.records import now_ms
from agtos.serving.app import create_app
from agtos.tasks.data_checks import DataCheckFailed
from tests.helpers import end_session, run_maintenance, user

DAY = 86_400_000
U = "lint-user"


def crafted(coordinator: MemoryCoordinator) -> dict[str, Conclusion]:
    now = now_ms()

    def con(cid: str, text: str, confidence: float, age_days: float = 0, sources: list[str] | None = None):
        stamp = now - int(age_days * DAY)
        return Conclusion(
            id=cid,
            user_id=U,
            text=text,
            type="inductive",
            confidence=confidence,
            source_episode_ids=sources or ["ep-a"],
            created_at=stamp,
            updated_at=stamp,
        )

    items = {
        c.id: c
        for c in [
            con("c-stale", "User used to play chess on Sundays", 0.8, age_days=40),
            con("c-dup1", "User likes hiking in the Swiss Alps every summer with friends", 0.7, sources=["ep-a"]),
            con("c-dup2", "User likes hiking in the Swiss Alps every summer with his friends", 0.9, sources=["ep-b"]),
            con("c-veg", "User is vegetarian", 0.9, sources=["ep-b"]),
            con("c-steak", "User eats steak every day", 0.6, sources=["ep-b"]),
            con("c-weak", "User might own a sailing boat", 0.2),
        ]
    }
    conclusions = list(items.values())
    coordinator.conclusions.upsert_many(conclusions, coordinator.semantic.embedder.embed([c.text for c in conclusions]))
    for eid, importance in (("ep-a", 0.6), ("ep-b", 0.7), ("ep-orphan", 0.2), ("ep-kept", 0.5)):
        coordinator.episodes.save(Episode(id=eid, user_id=U, summary=f"episode {eid}", importance=importance))
    return items


@pytest.fixture
def lint_settings(settings: Settings) -> Settings:
    return settings.with_overrides(background_work_policy="always")


@pytest.fixture
def lint_coordinator(lint_settings: Settings):
    coordinator = MemoryCoordinator(lint_settings)
    yield coordinator
    coordinator.close()


def test_each_step_on_a_crafted_set(lint_coordinator: MemoryCoordinator) -> None:
    crafted(lint_coordinator)
    events: list[dict] = []
    lint_coordinator.events.subscribe("memory.contradiction.detected", events.append)
    report = lint_coordinator.maintain(U)
    steps = {s["step"]: s for s in report.steps}
    assert [s["step"] for s in report.steps] == ["stale", "decay", "merge", "orphans", "contradictions", "prune"]
    assert steps["stale"]["ids"] == ["c-stale"] and steps["decay"]["ids"] == ["c-stale"]
    assert steps["merge"]["ids"] == ["c-dup1"]  # the lower-confidence duplicate is merged away
    assert steps["orphans"]["ids"] == ["ep-orphan"]
    assert steps["contradictions"]["ids"] == ["c-steak|c-veg"]
    assert steps["prune"]["ids"] == ["c-weak"]

    stored = {c.id: c for c in lint_coordinator.conclusions.all(U)}
    assert set(stored) == {"c-stale", "c-dup2", "c-veg", "c-steak"}
    assert stored["c-stale"].stale and stored["c-stale"].confidence == pytest.approx(0.72)
    assert stored["c-dup2"].source_episode_ids == ["ep-b", "ep-a"] and stored["c-dup2"].confidence == 0.9
    assert report.summary["conclusionsBefore"] == 6 and report.summary["conclusionsAfter"] == 4
    assert [(e["a"], e["b"]) for e in events] == [("c-steak", "c-veg")]


def test_pipeline_counters_add_up_and_cache_hits_on_rerun(lint_coordinator: MemoryCoordinator) -> None:
    crafted(lint_coordinator)
    events: list[dict] = []
    lint_coordinator.events.subscribe("memory.contradiction.detected", events.append)
    first = lint_coordinator.maintain(U).summary["contradictionPipeline"]
    c = first["counters"]
    assert set(c) == {"candidates", "nliChecked", "nliContradictions", "cacheHits", "judged", "confirmed"}
    assert c["nliChecked"] + c["cacheHits"] == c["candidates"] > 0
    assert c["confirmed"] <= c["nliContradictions"] <= c["candidates"] and c["confirmed"] == 1
    assert set(first["latencies"]) == {"stage1Ms", "stage2Ms", "stage3Ms"}
    assert first["nli"] == "lexical-negation-fallback"

    second = lint_coordinator.maintain(U).summary["contradictionPipeline"]["counters"]
    assert second["cacheHits"] == second["candidates"] and second["nliChecked"] == 0
    assert second["confirmed"] == 1
    assert len(events) == 1  # the event fires once per confirmed pair, not once per sweep


def test_nli_switched_off_skips_stage_two(lint_settings: Settings) -> None:
    cfg = MaintenanceConfig(nli_enabled=False)
    coordinator = MemoryCoordinator(lint_settings.with_overrides(maintenance=cfg))
    try:
        crafted(coordinator)
        pipeline = coordinator.maintain(U).summary["contradictionPipeline"]
        assert pipeline["nli"] == "disabled"
        assert pipeline["counters"]["nliChecked"] == 0 and pipeline["counters"]["confirmed"] == 0
    finally:
        coordinator.close()


def test_kill_switch_disables_every_path(lint_settings: Settings) -> None:
    coordinator = MemoryCoordinator(lint_settings.with_overrides(maintenance=MaintenanceConfig(enabled=False)))
    try:
        crafted(coordinator)
        with pytest.raises(MaintenanceDisabledError):
            run_lint(coordinator.services, U)
        with TestClient(create_app(coordinator=coordinator)) as client:
            response = client.post("/api/memory/maintain", headers=user(U))
            assert response.status_code == 409 and "disabled" in response.json()["message"]
        assert coordinator.maintenance.history(U) == []
        assert len(coordinator.conclusions.all(U)) == 6  # nothing touched
    finally:
        coordinator.close()


def test_guard_deferral_skips_the_sweep(settings: Settings) -> None:
    cfg = MaintenanceConfig(guard_retries=1, guard_delay_s=0.0)
    coordinator = MemoryCoordinator(settings.with_overrides(maintenance=cfg))  # policy auto
    try:
        crafted(coordinator)
        coordinator.activity.turn(U, "live")  # the user is talking right now
        report = coordinator.maintain(U)
        assert report.summary["status"] == "deferred"
        assert set(report.summary["reasons"]) == {"active-session"}
        assert coordinator.maintenance.history(U) == []
    finally:
        coordinator.close()


def test_failed_data_check_writes_nothing(lint_coordinator: MemoryCoordinator) -> None:
    crafted(lint_coordinator)
    bad = Conclusion.model_construct(
        id="c-bad",
        user_id=U,
        text="x",
        type="hunch",
        confidence=1.7,
        source_episode_ids=[],
        stale=False,
        created_at=0,
        updated_at=0,
    )
    state = LintState(U, now_ms(), {"c-bad": bad}, [], changed={"c-bad"})
    with pytest.raises(DataCheckFailed, match="confidence"):
        persist(lint_coordinator.services, state, now_ms())
    assert lint_coordinator.maintenance.history(U) == []
    assert lint_coordinator.conclusions.get(U, "c-bad") is None


def test_history_api_and_health(lint_settings: Settings, lint_coordinator: MemoryCoordinator) -> None:
    crafted(lint_coordinator)
    with TestClient(create_app(coordinator=lint_coordinator)) as client:
        before = client.get("/health").json()["checks"]["memory-maintenance"]
        assert before["healthy"] is False and before["totalSweeps"] == 0
        report = run_maintenance(client, U)["report"]
        assert report["summary"]["status"] == "completed"
        history = client.get("/api/memory/maintain/history", headers=user(U)).json()
        assert history["count"] == 1 and history["reports"][0]["timestamp"] == report["timestamp"]
        one = client.get(f"/api/memory/maintain/history/{report['timestamp']}", headers=user(U))
        assert one.status_code == 200 and one.json()["steps"] == report["steps"]
        assert client.get("/api/memory/maintain/history/12345", headers=user(U)).status_code == 404
        assert (
            client.get(f"/api/memory/maintain/history/{report['timestamp']}", headers=user("other")).status_code == 404
        )
        health = client.get("/health").json()["checks"]
        assert health["memory-maintenance"]["healthy"] is True
        assert health["memory-semantic"]["healthy"] is True and health["memory-semantic"]["backend"] == "usearch"
        assert health["resource-guard"]["informational"] is True
    restarted = MemoryCoordinator(lint_settings)  # counters live in Redis, not in the process
    try:
        assert restarted.maintenance.status()["totalSweeps"] == 1
    finally:
        restarted.close()


def test_lint_flow_runs_under_prefect(lint_coordinator: MemoryCoordinator) -> None:
    from agtos.flows.lint_flow import lint_flow
    from agtos.flows.runtime import use_runtime

    crafted(lint_coordinator)
    use_runtime(lint_coordinator.services)
    try:
        reports = lint_flow(U)
    finally:
        use_runtime(None)
    assert reports[0]["summary"]["status"] == "completed" and reports[0]["summary"]["prune"] == 1


def test_a_conclusion_the_lint_marks_stale_leaves_the_profile_at_once(lint_settings: Settings) -> None:
    """The profile leaves out stale explicit conclusions, so the lint that marks one stale must rebuild it
    (as an episode's forget does), not leave its line until the user's next Dreamer run. With
    AGTOS_MAINTENANCE_STALE_DAYS=0 every conclusion is stale; the line the user set stays."""
    cfg = MaintenanceConfig(staleThresholdDays=0, guard_retries=0, guard_delay_s=0.0)
    coordinator = MemoryCoordinator(lint_settings.with_overrides(maintenance=cfg))
    said = [{"role": "user", "content": "I am allergic to peanuts."}, {"role": "assistant", "content": "Noted."}]
    try:
        with TestClient(create_app(coordinator=coordinator)) as client:
            put = client.put("/api/memory/profile", json={"facts": ["User keeps bees"]}, headers=user("ines"))
            assert put.status_code == 200, put.text
            end_session(client, "ines", "s1", said)
            before = client.get("/api/memory/profile", headers=user("ines")).json()["profile"]
            assert before["facts"] == ["User keeps bees", "User is allergic to peanuts"], before
            run = run_maintenance(client, "ines")
            assert run["status"] == "completed" and run["report"]["summary"]["stale"] >= 1, run
            after = client.get("/api/memory/profile", headers=user("ines")).json()["profile"]
        assert after["facts"] == ["User keeps bees"], after
        assert "User is allergic to peanuts" not in after["sources"], after
    finally:
        coordinator.close()


def test_the_nightly_lint_over_every_user_leaves_an_opted_out_users_kept_memory_alone(
    lint_coordinator: MemoryCoordinator,
) -> None:
    """Opted out with their memory kept: nothing may be written for them. The HTTP route and the CLI
    refuse to lint them; the nightly flow over every user skipped no one and pruned and merged theirs."""
    from agtos.flows.lint_flow import lint_flow
    from agtos.flows.runtime import use_runtime

    made = crafted(lint_coordinator)
    assert U in lint_coordinator.known_users()
    lint_coordinator.services.privacy.set_opt_out(U, True, forget_existing=False)
    use_runtime(lint_coordinator.services)
    try:
        reports = lint_flow()
    finally:
        use_runtime(None)
    assert U not in [r["user_id"] for r in reports]
    kept = {c.id for c in lint_coordinator.conclusions.all(U)}
    assert kept == set(made)  # the weak one not pruned, the duplicates not merged
