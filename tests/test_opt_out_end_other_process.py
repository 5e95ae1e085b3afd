"""An end while opted out, asked of another API process than the one that took the turns (two workers, or a restart):
the session's turns are only in Redis's journal there, not in that process's working memory. The end still says the
session had turns ("user opted out of persistence", not "session has no turns") and keeps nothing of it: neither
process brings the session back, nor stores it, once the user opts in again."""

from __future__ import annotations

from agtos.config import Settings
from tests.helpers import user
from tests.test_durability import api  # one API process of its own (its own working memory) on the shared Redis

DAVE = user("dave")
TURNS = {"turns": [{"role": "user", "content": "I prefer tea over coffee."}]}


def test_an_end_while_opted_out_on_another_process_says_the_session_had_turns(settings: Settings) -> None:
    with api(settings) as first, api(settings) as second:
        appended = first.post("/api/memory/sessions/w1/turns", json=TURNS, headers=DAVE)
        assert appended.status_code == 200 and appended.json()["journalLength"] == 1
        assert second.put("/api/memory/privacy", json={"opt_out": True}, headers=DAVE).status_code == 200

        ended = second.post("/api/memory/sessions/w1/end", headers=DAVE).json()
        assert (ended["saved"], ended["status"], ended["reason"]) == (False, "skipped", "user opted out of persistence")

        assert second.put("/api/memory/privacy", json={"opt_out": False}, headers=DAVE).status_code == 200
        for process in (first, second):
            assert process.get("/api/memory/sessions/w1", headers=DAVE).status_code == 404
        again = first.post("/api/memory/sessions/w1/end", headers=DAVE).json()
        assert (again["saved"], again["reason"]) == (False, "session has no turns")
        assert first.get("/api/memory/episodes", headers=DAVE).json()["episodes"] == []
