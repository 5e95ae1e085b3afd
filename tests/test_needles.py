"""tests/needles.py: a code such as "8812" is found as itself, never inside a random id, a time or a score."""

from __future__ import annotations

import pytest

from tests.needles import holds, occurrences


@pytest.mark.parametrize(
    "text",
    ["My locker code is 8812.", "code 8812, please", "t:8812", "a\x008812\x00b", '{"text": "8812"}', "8812"],
)
def test_a_code_is_found_as_a_whole_number(text: str) -> None:
    assert holds(text, "8812") and holds(text.encode(), "8812")


@pytest.mark.parametrize(
    "text",
    ["3f64a88129c84b5b", "ep-ecbee0318812f5fa", "1796630881234", '{"score": 0.8812}', "18812.5", "8812.25"],
)
def test_a_code_inside_an_id_a_time_or_a_score_is_not_that_code(text: str) -> None:
    assert not holds(text, "8812") and not holds(text.encode(), "8812")


def test_words_and_ids_are_plain_substrings_and_codes_are_counted_whole() -> None:
    assert holds(b"ep-ecbee031a053f5fa.t0", "ep-ecbee031a053f5fa") and holds("Priya's trainer", "Priya")
    assert occurrences(b'{"c": "PIN 4417"}{"c": "PIN 4417", "at": 1796630744170}', "4417") == 2
