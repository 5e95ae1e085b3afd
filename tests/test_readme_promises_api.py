"""README API-table promises no test checked at their literal values, through HTTP and real Redis:

* ``GET /api/memory/episodes?limit=``: "newest first, ``limit`` 1–100 (20)";
* ``GET /api/memory/search?q=&limit=``: "``limit`` 1–50 (10)";
* ``POST /api/memory/memories``: "``201`` stored, or ``200`` with ``mergedInto`` when a current memory
  has the same words (token-set Jaccard ≥ ``AGTOS_MAINTENANCE_JACCARD``, the lint's rule)", default 0.85.

Expected values are the README's numbers and Jaccard ratios counted by hand on plain words.
"""

from __future__ import annotations

from typing import Any

import pytest
from fastapi.testclient import TestClient

from tests import test_env_settings
from tests.helpers import user
from tests.test_env_settings import Serve

env = test_env_settings.env  # fixtures: a clean environment, and apps built from it
serve = test_env_settings.serve

PLACES = "Annecy Bled Como Garda Hallstatt Lucerne Ohrid Orta Sevan Tahoe Titicaca Toba".split()


def back_fill(client: TestClient, who: str, n: int) -> None:
    """``n`` sessions, each a kayak trip on another lake, one day apart."""
    sessions = [
        {
            "id": f"trip-{i:02d}",
            "started_at": f"2024-03-{i + 1:02d}T09:00:00Z",
            "turns": [
                {
                    "role": "user",
                    "content": f"I paddled my kayak across Lake {PLACES[i % 12]} on trip {i}, remember it.",
                },
                {"role": "assistant", "content": f"Noted: a kayak crossing of Lake {PLACES[i % 12]}."},
            ],
        }
        for i in range(n)
    ]
    stored = client.post("/api/memory/conversations", json={"sessions": sessions}, headers=user(who))
    assert stored.status_code == 200, stored.text
    assert [s["status"] for s in stored.json()["sessions"]] == ["stored"] * n


def get(client: TestClient, path: str, who: str, **params: Any) -> Any:
    return client.get(path, params=params, headers=user(who))


def test_episode_and_search_limits_default_and_bounds(serve: Serve) -> None:
    with serve() as client:
        back_fill(client, "paddler", 22)
        listed = get(client, "/api/memory/episodes", "paddler").json()["episodes"]
        assert len(listed) == 20  # the default
        every = get(client, "/api/memory/episodes", "paddler", limit=100)
        assert every.status_code == 200 and len(every.json()["episodes"]) == 22  # 100 is allowed
        assert get(client, "/api/memory/episodes", "paddler", limit=101).status_code == 422
        assert get(client, "/api/memory/episodes", "paddler", limit=0).status_code == 422
        one = get(client, "/api/memory/episodes", "paddler", limit=1).json()["episodes"]
        assert len(one) == 1 and one[0]["timestamp"] == max(e["timestamp"] for e in every.json()["episodes"])
        assert len(get(client, "/api/memory/search", "paddler", q="kayak").json()["results"]) == 10  # the default
        wide = get(client, "/api/memory/search", "paddler", q="kayak", limit=50)
        assert wide.status_code == 200 and len(wide.json()["results"]) == 22  # 50 is allowed; all 22 match
        assert get(client, "/api/memory/search", "paddler", q="kayak", limit=51).status_code == 422


ORDER = "Sofia orders jasmine tea lattes oat milk weekday mornings"  # 9 distinct words


def write(client: TestClient, who: str, text: str) -> Any:
    return client.post("/api/memory/memories", json={"text": text, "kind": "preference"}, headers=user(who))


@pytest.mark.parametrize(
    ("threshold", "one_more_word_merges"),
    [(None, True), ("0.9", True), ("0.95", False)],  # README default 0.85; one word more is 9/10 = 0.9
)
def test_a_memory_post_merges_by_the_lints_jaccard(
    serve: Serve, threshold: str | None, one_more_word_merges: bool
) -> None:
    variables = {"AGTOS_MAINTENANCE_JACCARD": threshold} if threshold else {}
    with serve(**variables) as client:
        first = write(client, "sofia", ORDER)
        assert first.status_code == 201, first.text
        stored = first.json()["memory"]["id"]
        close = write(client, "sofia", f"{ORDER} downtown")  # Jaccard 9/10
        if one_more_word_merges:
            assert close.status_code == 200 and close.json()["mergedInto"] == stored, close.text
        else:
            assert close.status_code == 201 and close.json()["mergedInto"] is None, close.text
        farther = write(client, "sofia", f"{ORDER} near Lisbon")  # Jaccard 9/11 = 0.82 < 0.85
        assert farther.status_code == 201 and farther.json()["mergedInto"] is None, farther.text
