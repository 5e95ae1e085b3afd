"""The nightly lint flow (issue 20, p5): called with no user, as the deployment calls it, it sweeps every
known user, and a report write Redis drops once is retried (``persist-report`` has retries). Apart from
tests/test_planted_lint.py because a Prefect flow run costs ~40 s of ephemeral-server start."""

from __future__ import annotations

from typing import Any

import pytest
import redis
from fastapi.testclient import TestClient

from agtos.config import Settings
from agtos.serving.app import create_app
from tests.helpers import user
from tests.test_planted_lint import MEMORIES, U, build

V = "planted-lint-other"  # sorts before U


def test_nightly_flow_lints_every_known_user_and_retries_a_failed_persist(
    monkeypatch: pytest.MonkeyPatch, settings: Settings
) -> None:
    """The nightly deployment's call (no user): every user with stored memory gets a completed sweep,
    even when Redis drops the first report write (persist-report retries)."""
    from agtos.flows.lint_flow import lint_flow
    from agtos.flows.runtime import use_runtime

    coordinator = build(monkeypatch, settings)
    save = coordinator.services.maintenance.save
    calls: list[str] = []

    def flaky_save(report: Any) -> None:
        calls.append(report.user_id)
        if len(calls) == 1:
            raise redis.ConnectionError("connection reset by peer")
        save(report)

    monkeypatch.setattr(coordinator.services.maintenance, "save", flaky_save)
    try:
        with TestClient(create_app(coordinator=coordinator)) as client:
            for who in (U, V):
                posted = client.post(MEMORIES, json={"text": f"User keeps bees ({who})"}, headers=user(who))
                assert posted.status_code == 201, posted.text
        use_runtime(coordinator.services)
        try:
            reports = lint_flow()
        finally:
            use_runtime(None)
        assert [(r["user_id"], r["summary"]["status"]) for r in reports] == [(V, "completed"), (U, "completed")]
        assert calls == [V, V, U]
        assert [len(coordinator.maintenance.history(who)) for who in (U, V)] == [1, 1]
    finally:
        coordinator.close()
