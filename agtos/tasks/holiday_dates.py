"""Holidays named in a turn ("last Christmas", "on New Year's Eve", "for Thanksgiving") as calendar days.

The days are the :mod:`holidays` library's United States calendar, public and unofficial days
together (Christmas Eve, Halloween, Valentine's Day, Easter Sunday, Mother's Day...): Thanksgiving,
Easter or Mother's Day move from year to year, and no rule for them is written here.
"""

from __future__ import annotations

import re
from datetime import date
from functools import lru_cache

import holidays
from holidays.constants import PUBLIC, UNOFFICIAL

#: what people say (lower case, straight apostrophes) → the library's name of the day
_SPOKEN = {
    r"christmas eve|xmas eve": "Christmas Eve",
    r"christmas(?: day)?|xmas": "Christmas Day",
    r"new years?(?:'s)? eve|nye": "New Year's Eve",
    r"new years?(?:'s)?(?: day)?": "New Year's Day",
    r"thanksgiving(?: day)?": "Thanksgiving Day",
    r"halloween": "Halloween",
    r"valentines?(?:'s)?(?: day)?": "Valentine's Day",
    r"easter(?: sunday)?": "Easter Sunday",
    r"good friday": "Good Friday",
    r"mothers?(?:'s)? day": "Mother's Day",
    r"fathers?(?:'s)? day": "Father's Day",
    r"independence day|(?:the )?(?:fourth|4th) of july": "Independence Day",
    r"memorial day": "Memorial Day",
    r"labou?r day": "Labor Day",
    r"(?:st\.?|saint) patrick(?:'s)?(?: day)?|st\.? paddy(?:'s)?(?: day)?": "Saint Patrick's Day",
}
_NAMES = [(re.compile(spoken), name) for spoken, name in _SPOKEN.items()]
#: the alternation the date patterns search for (longer names first, any apostrophe)
HOLIDAY = "(?:" + "|".join(p.replace("'", "['’]") for p in _SPOKEN) + ")"


#: a word every holiday name holds (lower case): a text without any names none
_HINTS = (
    "christmas",
    "xmas",
    "year",
    "nye",
    "thanksgiving",
    "halloween",
    "valentine",
    "easter",
    "friday",
    "mother",
    "father",
    "independence",
    "july",
    "memorial",
    "labo",
    "patrick",
    "paddy",
)


def may_name_holiday(text: str) -> bool:
    """Whether ``text`` may name a holiday (a cheap test before :data:`HOLIDAY` is searched)."""
    lower = text.lower()
    return any(hint in lower for hint in _HINTS)


def holiday_name(spoken: str) -> str | None:
    """The library's name of the holiday ``spoken`` names ("New Years" → "New Year's Day"), or None."""
    said = " ".join(spoken.lower().replace("’", "'").split())
    return next((name for pattern, name in _NAMES if pattern.fullmatch(said)), None)


@lru_cache(maxsize=64)
def _days_of(year: int) -> dict[str, date]:
    calendar = holidays.country_holidays("US", years=year, categories=(PUBLIC, UNOFFICIAL))
    return {name: day for day, name in sorted(calendar.items()) if "(observed)" not in name}


def occurrences(name: str, around: date) -> list[date]:
    """The days the holiday ``name`` falls on in the year before ``around``'s, its year and the next."""
    found = (_days_of(year).get(name) for year in (around.year - 1, around.year, around.year + 1))
    return [day for day in found if day is not None]


def holiday_day(spoken: str, day: date, which: str | None) -> date | None:
    """The holiday ``spoken`` said on ``day``: ``which`` "last" the latest before ``day``, "next" and
    "future" the first after it, "past" the latest up to ``day``, "this" the nearer of those two (``day``
    itself when it is the day); None for no tense or no such holiday."""
    name = holiday_name(spoken)
    if name is None or which is None:
        return None
    days = occurrences(name, day)
    before = [d for d in days if d < day or (d == day and which in {"past", "this"})]
    after = [d for d in days if d > day]  # said on the day, "I'll celebrate Christmas" is next year's
    latest, coming = (before[-1] if before else None), (after[0] if after else None)
    if which in {"last", "past"}:
        return latest
    if which in {"next", "future"}:
        return coming
    if latest is None or coming is None:
        return latest or coming
    return latest if (day - latest) <= (coming - day) else coming
