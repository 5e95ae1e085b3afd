"""Whether an episode is a chat between named people is worked out once per episode's turns (issue
14, item 8): the Dreamer asks it of every episode of the user's 50-episode window at each session
end, and re-read every turn of them each time. A changed turn is read again, never answered from
another episode's or an older version's entry."""

from __future__ import annotations

from collections import OrderedDict
from typing import Any

import agtos.tasks.explicit as explicit
from agtos.schemas import Role, StoredTurn, Turn


def turns(second: str | None, episode: str = "ep-1") -> list[StoredTurn]:
    said = [
        (Role.user, "Jon", "Hey! How was the trip?"),
        (Role.assistant, second, "Great, thanks."),
        (Role.user, "Jon", "Cool."),
    ]
    return [
        StoredTurn(user_id="u", episode_id=episode, position=i, role=r, name=n, content=c, timestamp=1_000 + i)
        for i, (r, n, c) in enumerate(said)
    ]


def test_between_people_is_read_once_per_turns(monkeypatch: Any) -> None:
    calls: list[int] = []
    real = explicit.utterances

    def counted(said: list[Turn]) -> Any:
        calls.append(len(said))
        return real(said)

    monkeypatch.setattr(explicit, "utterances", counted)
    monkeypatch.setattr(explicit, "_PEOPLE", OrderedDict())  # empty: no earlier test's
    assert explicit.between_people(turns("Gina")) is True and calls == [3]
    assert explicit.between_people(turns("Gina")) is True and calls == [3]  # before: read again
    assert explicit.between_people(turns(None)) is False and calls == [3, 3]  # one named person: an agent chat
    assert explicit.between_people(turns(None, "ep-2")) is False and len(calls) == 3
    assert explicit.between_people([]) is False
