"""Long turns in the context: the window shown is the one that matched, not the turn's start."""

from __future__ import annotations

from agtos.schemas.records import StoredTurn
from agtos.tasks.context import focus, turn_items
from agtos.tasks.verbatim_turns import turn_units

# sixty distinct sentences, far past one 200-token context line and the embedder's 256-token window
LONG = " ".join(f"Entry {n} records parcel {n * 7} at the depot." for n in range(1, 61))


def test_no_shared_sentence_keeps_the_window_around_the_given_position() -> None:
    around = LONG.index("Entry 40 ")
    shown = focus(LONG, {"zebra"}, 20, around)
    assert "Entry 40 " in shown and "Entry 1 " not in shown
    assert shown.startswith("…") and shown.endswith("…")


def test_no_query_terms_keeps_the_window_around_the_given_position() -> None:
    shown = focus(LONG, set(), 20, LONG.index("Entry 50 "))
    assert "Entry 50 " in shown and not shown.startswith("Entry 1 ")


def test_a_matched_later_window_of_a_long_turn_is_what_the_line_shows() -> None:
    turn = StoredTurn(
        user_id="u",
        episode_id="ep-1",
        session_id="s",
        position=0,
        role="user",
        name="Gina",
        content=LONG,
        timestamp=1_683_540_000_000,
    )
    units = turn_units([turn])
    assert len(units) >= 3  # the long turn was indexed in several windows
    last = units[-1].text.rsplit("Entry ", 2)[-2].split(" ")[0]  # an entry number inside the last window
    line = turn_items([turn], turn, 0.5, query="", chunk=len(units) - 1)[0].text
    assert f"Entry {last} " in line and "Entry 1 " not in line
    assert line.startswith("Gina: …") or "Gina" in line.split("…")[0]
