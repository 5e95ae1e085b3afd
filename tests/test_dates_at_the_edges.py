"""Relative dates said at the edges of the time a record may hold (issue 14/15): no crash, no lost turn.

A turn may carry any time from 1970-01-01 to 9999-12-31T23:59:59.999Z (the API's bounds). "next Friday"
said on 31 December 9999 falls in year 10000, which Python's dates cannot hold: the expression is left
undated, as one with no date to show, and the turn is stored, searchable and in the context like any other.
"""

from __future__ import annotations

import pytest
from fastapi.testclient import TestClient

from agtos.tasks.dates import resolve_dates
from tests.test_probe_fidelity import context, end

LAST = 253_402_300_799_999  # 9999-12-31T23:59:59.999Z, a Friday: the last time a record may hold


@pytest.mark.parametrize("text", ["Let's meet next Friday.", "See you this weekend!", "Next summer I move."])
def test_a_date_past_year_9999_is_left_undated(text: str) -> None:
    """Bug caught: dateparser/date arithmetic past 9999-12-31 raised OverflowError/ValueError out of the
    resolver (every turn of the session then failed to store)."""
    assert resolve_dates(text, LAST) == []


def test_the_day_before_the_last_is_still_dated() -> None:
    """The guard must not drop dates that exist: 'yesterday' said on 31 Dec 9999 is 30 Dec 9999."""
    assert [(d.text, d.date) for d in resolve_dates("I saw Ada yesterday.", LAST)] == [("yesterday", "9999-12-30")]


def test_a_turn_said_on_the_last_day_is_stored_and_shown(client: TestClient) -> None:
    """Through the API: the session ends saved and the turn is in the context, its 'yesterday' dated."""
    said = "I saw my sister Ada at the oboe recital yesterday, and we meet again next Friday by the lake."
    end(client, "edge-day", "s1", [{"role": "user", "name": "Jon", "content": said, "timestamp": LAST}])
    shown = context(client, "edge-day", "When did Jon see Ada at the oboe recital?")
    assert "oboe recital yesterday [= 30 December 9999]" in shown, shown
    assert "next Friday by the lake" in shown, shown
