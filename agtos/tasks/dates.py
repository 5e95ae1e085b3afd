"""Relative time expressions of a turn ("yesterday", "last Friday", "two weeks ago", "in 2019")
resolved to absolute dates against the turn's own timestamp.

A short pattern list only finds the candidate spans (free-text date search also takes "we" for
Wednesday and "may" for May); the date arithmetic is :mod:`dateparser`'s, with the turn's time as
``RELATIVE_BASE``. A weekday or a month named alone ("on Tuesday", "in March") is the most recent one
before the turn in past-tense speech, the next one in future-tense speech (``PREFER_DATES_FROM``) or
where a thing one has on a day is said in the present ("I have a dentist appointment on Tuesday",
"the party is on Saturday"), and left unresolved where the sentence shows neither ("Tuesday is my
day off", "I have yoga on Tuesday"); "last/this/next weekend" is the Saturday of dateparser's
last/this/next week. A season is named by its first day, a winter by its December ("last winter"
said in May 2023 is the winter of 2022-23, shown as "winter 2022–23"); "over the summer" is read by
its tense as "this summer" is; "the end of the month" is this month's, the last one's where it is said
in the past. A span that lasts up to now ("I've been skiing for 10 years", a present perfect) is shown
by its start ("since 2013"), as is "it's been 8 months since" ("May 2023"). A count said roughly ("a few
days ago", "several years back", "in a few weeks") is dated by three (several: five) of its units and
"the other day" by four days before; they are shown as the range they may mean, marked ``≈`` ("a few
days ago [≈ 4–6 May 2023]", "the other day [≈ 1–7 May 2023]"). Holidays ("last Christmas", "on
Halloween") are the :mod:`holidays` library's days (:mod:`agtos.tasks.holiday_dates`), by last/next or the tense, and
not where they name a thing ("a Christmas tree", "New Year's reservations"). "In two weeks" said in the past is how
long a thing took, not a date ("we did it in two weeks"); a perfect's "have" said before an "and" also dates the span
after it ("I have lived in Ohio and worked there for 5 years"). A weekday of one's own said on that weekday is that day
("how was your Tuesday?", "happy Sunday!"); "a few nights ago" is read as days. Times are read on the local day where
the turn was said: UTC, unless its timestamp was sent with an offset
(``2023-05-09T01:00:00+09:00`` was said on 9 May, though it is 8 May in UTC).
"""

from __future__ import annotations

import calendar
import re
from collections.abc import Callable
from datetime import UTC, date, datetime, timedelta
from functools import lru_cache

from dateparser.date import DateDataParser

from agtos.schemas import DatePeriod, ResolvedDate, StoredTurn
from agtos.tasks.holiday_dates import HOLIDAY, holiday_day, may_name_holiday

MAX_DATES = 64

_WEEKDAY = r"(?:monday|tuesday|wednesday|thursday|friday|saturday|sunday)"
_MONTH = r"(?:january|february|march|april|may|june|july|august|september|october|november|december)"
_COUNT = r"(?:\d{1,3}|an?|one|two|three|four|five|six|seven|eight|nine|ten|eleven|twelve|(?:a )?couple(?: of)?)"
_UNIT = r"(?:day|week|month|year)s?"
_SEASON = r"(?:spring|summer|fall|autumn|winter)"
_DAY = r"\d{1,2}(?:st|nd|rd|th)?"
_ORDINAL = r"(?:[12]\d|3[01]|0?[1-9])(?:st|nd|rd|th)"
_ABOUT = r"(?:about|almost|nearly|over|around|roughly|more than|the past|the last)"
#: a count said roughly ("a few days ago", "several years back"): the date is shown as the range it may mean
_FEW = r"(?:a few|few|several)"
_NUM = rf"(?:{_COUNT}|{_FEW})"
_PART_OF_DAY = r"(?:morning|afternoon|evening|night)"
#: "<count> <unit> back" is "ago" where a clause goes on ("a few years back, I", "two weeks back when"), not in
#: "two weeks back home", "a few days back in Ohio" (where one was)
_BACK = r"back(?=\s*(?:$|[^\w\s]|(?:when|then|i|we|you|he|she|they|it|and|but|so|or|my|our|that|this|there)\b))"
#: a month written alone: capitalised "May" only (the verb "may" is not a month), the others either way
_MONTH_ALONE = (
    "(?:" + "|".join("May" if m == "may" else f"[{m[0].upper()}{m[0]}]{m[1:]}" for m in _MONTH[3:-1].split("|")) + ")"
)
#: words that may follow a date said alone ("on the 3rd, we", "Christmas was"); any other word makes it a
#: thing's name ("the 3rd floor", "Christmas tree", "New Year's reservations", "Halloween traditions")
_AFTER_DATE = (
    "at|and|but|so|or|when|because|as|if|then|in|for|with|after|before|this|next|last|too|of|to|from|on|i|we"
    "|you|he|she|they|it|my|our|his|her|their|the|a|was|is|were|are|will|went|came|got|felt|together|already"
    "|again|here|there|yet|morning|afternoon|evening|night"
)
_NO_NOUN = rf"(?!\s+(?!(?:{_AFTER_DATE})\b)[a-z])"
_NO_THING = rf"(?!['’]?s?\s+(?!(?:{_AFTER_DATE})\b)[a-z])"  # also "New Year" + "s reservations"
_NOT_DATED = r"(?!\s*(?:,\s*|of\s+)?\d)"  # "May 2", "March 2019", "January of 2018": others' (or absolute)

# each pattern's group 1 is the span handed to dateparser
_PATTERNS = [
    re.compile(p, re.IGNORECASE)
    for p in (
        r"\b(the day (?:before yesterday|after tomorrow))\b",
        rf"\b((?:yesterday|tomorrow)(?: {_PART_OF_DAY})?|today|tonight|last night)\b",
        r"\b(this (?:morning|afternoon|evening))\b",
        rf"\b((?:last|next|this) (?:week|weekend|month|year|{_SEASON}|{_WEEKDAY}(?: {_PART_OF_DAY})?))\b",
        r"\b(the other (?:day|night))\b(?! of\b)",  # some days ago: shown as the week before the turn's day
        rf"\b(this (?:past|coming) (?:weekend|{_WEEKDAY}))\b",  # "this past weekend": last weekend
        r"\b(?:over|on|during|at|for) (the weekend)\b",  # by the sentence's tense: the latest or the coming one
        rf"\b({_WEEKDAY}(?: (?:morning|afternoon|evening|night))?)\b",  # alone: by the sentence's tense
        rf"\b({_NUM} {_UNIT} (?:ago|{_BACK})|{_COUNT} weekends? ago)\b",  # weekends: the Saturday that many weeks ago
        rf"\b({_NUM} nights? ago)\b",  # "a few nights ago": as many days ago
        rf"\bon (the {_ORDINAL})\b(?! (?:of )?{_MONTH}){_NO_NOUN}",  # a day of the month alone: by its tense
        rf"\b(for (?:{_ABOUT} )?{_NUM} {_UNIT})\b",  # in a present perfect: since when
        rf"\b(been (?:{_ABOUT} )?{_NUM} {_UNIT}) since\b",  # "it's been 8 months since I saw him": 8 months ago
        r"\b((?:the )?(?:end|beginning|start) of the (?:week|month|year))\b",  # by the tense: this, last or next
        rf"\b(?:over|during|in|through) (the {_SEASON})\b",  # by the sentence's tense, as "this summer"
        rf"\b(in {_NUM} {_UNIT})\b",
        rf"\b({_NUM} {_UNIT} from (?:now|today))\b",  # as "in a week"
        r"\b(?:in|since|during|of) ((?:19|20)\d{2})\b",
        rf"\b({_MONTH} {_DAY})\b(?!\s*(?:,\s*)?\d{{4}})",  # "May 2" (with a year it is no longer relative)
        rf"\b({_DAY} (?:of )?{_MONTH})\b(?!\s*(?:,\s*)?\d{{4}})",
    )
] + [
    re.compile(rf"\b((?i:last|next|this) {_MONTH_ALONE})\b{_NOT_DATED}"),
    re.compile(rf"\b(?i:in|since|during|until|till|by|of|early|late|mid|through) ({_MONTH_ALONE})\b{_NOT_DATED}"),
    re.compile(rf"\b(?i:mid-)({_MONTH_ALONE})\b{_NOT_DATED}"),
]

#: "last Christmas", or a holiday named alone (by the sentence's tense); searched only where one may be named
_HOLIDAY_PATTERN = re.compile(rf"\b((?:(?:last|next|this) )?{HOLIDAY})\b{_NO_THING}", re.IGNORECASE)

_PERIODS = {"day": DatePeriod.day, "part_of_day": DatePeriod.day, "week": DatePeriod.week}
_PERIODS |= {"month": DatePeriod.month, "year": DatePeriod.year}


def turn_datetime(timestamp_ms: int, utc_offset: int | None = None) -> datetime:
    """A stored timestamp (ms since the epoch) as a naive datetime: UTC, or local ``utc_offset``
    minutes east of it; UTC where that local time is past year 9999, which no date holds (the API
    refuses such a turn; a record or a queued job from before that rule may hold one)."""
    try:
        return datetime.fromtimestamp(timestamp_ms / 1000 + 60 * (utc_offset or 0), UTC).replace(tzinfo=None)
    except (ValueError, OverflowError):
        return datetime.fromtimestamp(timestamp_ms / 1000, UTC).replace(tzinfo=None)


def candidate_spans(text: str) -> list[tuple[int, int]]:
    """Character spans that may be relative date expressions, in order, without overlaps."""
    patterns = [*_PATTERNS, _HOLIDAY_PATTERN] if may_name_holiday(text) else _PATTERNS
    found = sorted({m.span(1) for pattern in patterns for m in pattern.finditer(text)}, key=lambda s: (s[0], -s[1]))
    spans: list[tuple[int, int]] = []
    for start, end in found:
        if not spans or start >= spans[-1][1]:
            spans.append((start, end))
    return spans


def resolve_dates(text: str, timestamp_ms: int, utc_offset: int | None = None) -> list[ResolvedDate]:
    """The expressions of ``text`` that dateparser resolves, as dates relative to ``timestamp_ms``'s
    day (the local one, ``utc_offset`` minutes east of UTC)."""
    day = turn_datetime(timestamp_ms, utc_offset).date()
    out: list[ResolvedDate] = []
    for start, end in candidate_spans(text)[:MAX_DATES]:
        span = text[start:end].lower()
        if _said_on_the_day(text, start, end, day):  # "how was your Tuesday?" said on a Tuesday: that day
            out.append(ResolvedDate(text=text[start:end], start=start, date=day.isoformat(), period=DatePeriod.day))
            continue
        said_in = tense(text, start, end) if any(p.fullmatch(span) for p in _BY_TENSE) else None
        if said_in is not None and _GENERIC.search(text, 0, start):  # "a Sunday morning tradition"
            continue
        if said_in is not None and _HOLIDAY_ALONE.fullmatch(span) and _experienced(text, start):
            continue  # "I've celebrated New Year's in Miami before": no one day
        if _SPAN.fullmatch(span) and not _up_to_now(text, start):
            continue  # "I'll be away for two weeks": no span that ends now
        if _IN_COUNT.fullmatch(span) and _took(text, start, end):
            continue  # "I finished it in a few days": how long it took, no date
        try:
            resolved = _resolve_span(span, day, said_in)
        except (OverflowError, ValueError):  # past 9999-12-31 (or before year 1): no date to show
            resolved = None
        if resolved is not None:
            out.append(ResolvedDate(text=text[start:end], start=start, date=resolved[0], period=resolved[1]))
    return out


#: a weekday one has or wishes ("how was your Tuesday?", "happy Sunday!", "have a lovely Sunday"): said on that
#: weekday, that day; not one a noun follows ("my Tuesday class": every Tuesday's)
_WEEKDAY_ALONE = re.compile(rf"({_WEEKDAY})(?: {_PART_OF_DAY})?", re.IGNORECASE)
_YOURS = re.compile(r"\b(?:my|your|our|happy|(?:have|enjoy)\s+(?:a|an|your)(?:\s+\w+)?)\s+$", re.IGNORECASE)
_NOUN_AFTER = re.compile(rf"\s+(?!(?:{_AFTER_DATE})\b)[a-z]", re.IGNORECASE)


def _said_on_the_day(text: str, start: int, end: int, day: date) -> bool:
    """Whether ``text[start:end]`` is a weekday of one's own said on that very weekday ("how was your
    Tuesday?" said on Tuesday 9 May is 9 May, not 2 May), a greeting's ("happy Sunday!") or one's own."""
    m = _WEEKDAY_ALONE.fullmatch(text, start, end)
    if m is None or m.group(1).lower() != calendar.day_name[day.weekday()].lower():
        return False
    return _YOURS.search(text, 0, start) is not None and _NOUN_AFTER.match(text, end) is None


# a weekday or a month named alone: which one depends on the tense it is said in
_ALONE = re.compile(rf"{_WEEKDAY}(?: (?:morning|afternoon|evening|night))?|{_MONTH}")
_WEEKEND = re.compile(r"(last|this|next) weekend")
_WEEKENDS_AGO = re.compile(rf"({_COUNT}) weekends? ago")
_FROM_NOW = re.compile(rf"({_NUM} {_UNIT}) from (?:now|today)")
_COUPLE = re.compile(r"(?:a )?couple(?: of)?")
#: the count a rough one is dated by: "a few" is about three (two to four), "several" about five (three to seven)
_FEW_COUNT = {"a few": 3, "few": 3, "several": 5}
_FEW_SAID = re.compile(rf"\b({_FEW}) ")
_BACK_SAID = re.compile(r" back$")
_WITH_PART_OF_DAY = re.compile(rf"(yesterday|tomorrow|(?:last|next|this) {_WEEKDAY}) {_PART_OF_DAY}")
_OTHER_DAY = re.compile(r"the other (?:day|night)")
_NIGHTS_AGO = re.compile(rf"({_NUM}) nights? ago")
_BEEN_SINCE = re.compile(rf"been (?:{_ABOUT} )?({_NUM} {_UNIT})")
_END_OF = re.compile(r"(?:the )?(end|beginning|start) of the (week|month|year)")
_DAY_ALONE = re.compile(r"the (\d{1,2})(?:st|nd|rd|th)")
_HOLIDAY_SAID = re.compile(rf"(?:(last|next|this) )?({HOLIDAY})")
_HOLIDAY_ALONE = re.compile(HOLIDAY)
_THIS_PAST = re.compile(r"this (past|coming) ")
_LAST_THIS_NEXT_MONTH = re.compile(rf"(last|this|next) ({_MONTH})")
_LAST_THIS_NEXT_SEASON = re.compile(rf"(last|this|next) ({_SEASON})")
_THIS_SEASON = re.compile(rf"(?:this|the) {_SEASON}")
_THE_SEASON = re.compile(rf"the ({_SEASON})")
#: spans read by the tense they are said in
_BY_TENSE = (
    _ALONE,
    _THIS_SEASON,
    _DAY_ALONE,
    _HOLIDAY_ALONE,
    re.compile(rf"this {HOLIDAY}"),
    re.compile("the weekend"),
    _END_OF,
)
_SPAN = re.compile(rf"for (?:{_ABOUT} )?({_NUM} {_UNIT})")
#: "in two weeks": a date to come, or how long a thing took where said in the past ("we did it in two weeks")
_IN_COUNT = re.compile(rf"in {_NUM} {_UNIT}")
#: a weekday or month after these is no one day or month ("a Sunday morning tradition", "every Monday")
_GENERIC = re.compile(r"\b(?:a|an|every|each|any|some|one|the)\s+$", re.IGNORECASE)
#: the month a season starts (meteorological, northern hemisphere): a winter is named by its December
_SEASON_START = {"spring": 3, "summer": 6, "fall": 9, "autumn": 9, "winter": 12}
_PREFER = {"last": "past", "this": "current_period", "next": "future"}

_SENTENCE_END = re.compile(r"[.!?\n]")
_CLAUSE_END = re.compile(r"[.!?\n,;:]|\b(?:and|but|because|when|while|though|although)\b", re.IGNORECASE)
_WORDS = re.compile(r"[\w']+")
_FUTURE_WORDS = frozenset("will shall won't gonna tomorrow next upcoming until till".split())
_PAST_WORDS = frozenset(
    """was were did had went got bought came made met saw took told ate drove flew gave found left lost spent
    won ran sat slept spoke heard felt kept sent sold began wrote caught brought ago yesterday since last""".split()
)
#: words ending in -ed that are no past tense
_NOT_PAST = frozenset("speed indeed proceed exceed succeed breed bleed greed hundred sacred naked wicked".split())
#: an -ed word after these is an adjective ("I'm so excited"), not a past tense
_BEFORE_ADJECTIVE = frozenset(
    "am is are i'm we're you're they're he's she's so very really pretty too be been being get getting feel".split()
)
_BE_NOW = frozenset("am is are i'm we're you're they're he's she's".split())
#: past tenses of arranging something: what was booked is often still to come ("I booked a trip for June")
_ARRANGED = frozenset("booked scheduled reserved registered arranged organised organized rescheduled postponed".split())
#: things one has on a day (an appointment, an exam): had or have on a weekday, said in the present, the next one
_EVENTS = frozenset(
    """appointment meeting interview exam test class lesson date party flight surgery checkup check-up shift
    deadline presentation concert game match recital audition rehearsal wedding funeral ceremony trip""".split()
)


def _event(word: str) -> bool:
    """Whether ``word`` names one of the :data:`_EVENTS` or several ("exams", "classes", "parties")."""
    if word in _EVENTS:
        return True
    if word.endswith("ies"):
        return word[:-3] + "y" in _EVENTS
    return word.endswith("s") and (word[:-1] in _EVENTS or (word.endswith("es") and word[:-2] in _EVENTS))


#: "have", and "got" after these, is the present ("I've got a test on Friday"), not a past tense
_HAVE = frozenset("have has i've we've you've they've he's she's it's".split())


def _cue(words: list[str], i: int) -> str | None:
    """``"future"``, ``"past"`` or None: what word ``i`` of a sentence says of its tense."""
    word, after = words[i], words[i + 1] if i + 1 < len(words) else ""
    before = words[i - 1] if i else ""
    if (word in _FUTURE_WORDS and not (word == "next" and after == "to")) or word.endswith("'ll"):
        return "future"
    if (word, after) in {("going", "to"), ("can't", "wait"), ("cannot", "wait"), ("looking", "forward")}:
        return "future"
    if word in {"plan", "plans", "planning", "planned"} and after in {"to", "on", "for"}:
        return "future"
    if word in _BE_NOW and after.endswith("ing"):  # "I'm flying to Rome on Tuesday"
        return "future"
    if _present_event(words, i):  # "I have a dentist appointment on Tuesday", "the party is on Saturday"
        return "future"
    if word == "got" and before in _HAVE:  # "I've got": have
        return None
    if word in _PAST_WORDS:
        return "past"
    if len(word) > 4 and word.endswith("ed") and word not in _NOT_PAST and before not in _BEFORE_ADJECTIVE:
        return "past"
    return None


def _present_event(words: list[str], i: int) -> bool:
    """Word ``i`` names a thing one has on a day, in the present: after a "have" or "has" a few words
    before it ("I have a dentist appointment", "we've got an exam"), or before "is" ("my interview is",
    "the party's")."""
    word = words[i]
    if word.endswith("'s") and word[:-2] in _EVENTS:
        return True
    if not _event(word):
        return False
    if i + 1 < len(words) and words[i + 1] in {"is", "are"}:
        return True
    for j in range(i - 1, max(-1, i - 5), -1):
        if words[j] in _HAVE or (words[j] == "got" and j and words[j - 1] in _HAVE):
            return True
        if words[j] in _PAST_WORDS or (len(words[j]) > 4 and words[j].endswith("ed")):
            return False  # "I have had an interview", "we've booked a class"
    return False


#: a present perfect ("I've been skiing", "she has lived", "we have known"): what it says lasts up to now
_PERFECT = re.compile(
    r"\b(?:i've|we've|you've|they've|have|has|(?:he|she|it)'s)(?: \w+)?? (?:been|had|known|lived|worked|played"
    r"|done|owned|used|studied|practi[cs]ed|loved|wanted|taught|run|kept|stayed|dated|followed)\b",
    re.IGNORECASE,
)


#: a clause that goes on with the participle of a present perfect without its "have" ("I have lived in Ohio
#: and worked there"): the perfect is said before the "and"
_SHARED_HAVE = re.compile(
    r"(?:,\s*)?\b(?:and|or|but)\s+(?:also\s+|then\s+)?(?:been|had|known|lived|worked|played|done|owned|used|studied"
    r"|practi[cs]ed|loved|wanted|taught|run|kept|stayed|dated|followed)\b",
    re.IGNORECASE,
)


def _up_to_now(text: str, start: int) -> bool:
    """Whether the span at ``start`` is said in a present perfect clause ("I've been skiing for 10 years"),
    also one whose "have" is said before an "and" ("I have lived in Ohio and worked there for 5 years")."""
    bound = max((m.start() for m in _CLAUSE_END.finditer(text, 0, start)), default=-1)
    while bound >= 0 and _SHARED_HAVE.match(text, bound):  # "... and worked there": the clause before it too
        bound = max((m.start() for m in _CLAUSE_END.finditer(text, 0, bound)), default=-1)
    begin = m.end() if bound >= 0 and (m := _CLAUSE_END.match(text, bound)) else 0
    return _PERFECT.search(text.replace("’", "'"), begin, start) is not None


_EXPERIENCE = re.compile(
    r"\b(?:(?:have|has|haven't|hasn't|i've|we've|you've|they've)\s+(?:\w+\s+)?(?:\w+ed|been|had|seen|done|gone|spent"
    r"|made|eaten)|ever|never)\b",
    re.IGNORECASE,
)


def _experienced(text: str, start: int) -> bool:
    """Whether the clause before ``start`` is a present perfect or says ever/never ("I have celebrated",
    not "what did you have")."""
    begin = max((m.end() for m in _CLAUSE_END.finditer(text, 0, start)), default=0)
    return _EXPERIENCE.search(text.replace("’", "'"), begin, start) is not None


def tense(text: str, start: int, end: int) -> str | None:
    """``"past"`` or ``"future"``: the tense ``text[start:end]`` is said in, by the cue nearest it in
    its clause, else in its sentence (a past verb, "ago", "since"; "will", "going to", "tomorrow",
    "I'm flying"); None without one ("Tuesday is my day off")."""
    for boundary in (_CLAUSE_END, _SENTENCE_END):
        found = _nearest_cue(text, start, end, boundary, _cue)
        if found != "":
            return found
    return None


def _nearest_cue(
    text: str, start: int, end: int, boundary: re.Pattern[str], cue_of: Callable[[list[str], int], str | None]
) -> str | None:
    """The cue (``cue_of`` a word) nearest ``text[start:end]`` in the part ``boundary`` ends; None where
    the part says its tense is in doubt ("born", "booked"), ``""`` where no word is a cue."""
    text = text.replace("’", "'")  # "I’m", "I’ll": typed on phones (the same length: the offsets hold)
    begin = max((m.end() for m in boundary.finditer(text, 0, start)), default=0)
    stop = m.start() if (m := boundary.search(text, end)) else len(text)
    found = [m for m in _WORDS.finditer(text, begin, stop) if not start <= m.start() < end]
    words = [m.group().lower() for m in found]
    if "born" in words:  # "born in March": a birthday's month, not a date
        return None
    if _ARRANGED.intersection(words):  # "booked a trip for June": the trip's June may be the next one
        return None
    cues = [
        (min(abs(m.start() - end), abs(start - m.end())), cue)
        for i, m in enumerate(found)
        if (cue := cue_of(words, i)) is not None
    ]
    return min(cues)[1] if cues else ""


#: past tenses written as their present: past after a subject ("I read it in 3 days"; a present one there is
#: a habit, which a count of days after it also measures)
_SAME_PAST = frozenset("read put cut set hit let quit beat hurt shut split spread cost".split())
_SUBJECTS = frozenset("i we you they he she".split())
_RELATIVE = frozenset("that which who".split())


#: verbs that report what another said: the tense of what they report is its own ("he told me it comes in
#: two weeks", "they promised it would be ready in two weeks")
_REPORTING = frozenset("said told promised mentioned explained texted emailed replied warned".split())


#: past participles that are no past tense of :data:`_PAST_WORDS`: "I'd done it" is "I had done it"
_PARTICIPLES = frozenset(
    "done been gone seen taken eaten written given driven gotten forgotten known grown shown begun run read".split()
)


def _participle(word: str) -> bool:
    """Whether ``word`` may be a past participle ("finished", "done"), so "I'd" before it is "I had"."""
    return word in _PARTICIPLES or (len(word) > 4 and word.endswith("ed"))


def _took_cue(words: list[str], i: int) -> str | None:
    """:func:`_cue`, and a present verb after "that" ("a job that starts": ``"future"``), "would" ("it would be
    ready": ``"future"``) or a past written as its present after a subject ("we read": ``"past"``); no cue
    from a verb that reports ("he told me")."""
    word, before = words[i], words[i - 1] if i else ""
    after = words[i + 1] if i + 1 < len(words) else ""
    if word in _REPORTING:
        return None
    if before in _RELATIVE and word.endswith("s") and not word.endswith("ss") and word not in {"was", "has"}:
        return "future"  # "a job that starts in two weeks"
    if word.endswith("'d") and _participle(after):
        return "past"  # "I'd done it in two weeks": had done
    if word == "would" or (word.endswith("'d") and _cue(words, i + 1) is None):
        return "future"  # the future of a past: "she said she'd call in a few days"
    if cue := _cue(words, i):
        return cue
    return "past" if word in _SAME_PAST and before in _SUBJECTS else None


def _took(text: str, start: int, end: int) -> bool:
    """Whether "in <count> <units>" at ``text[start:end]`` says how long a thing took, not when it will be:
    its clause is in the past ("I finished it in a few days", "we did it in two weeks", "I read it in 3
    days"); not where it is to come ("I'm moving in two weeks", "the exam is in a few days") or without a tense
    ("see you in two weeks")."""
    return _nearest_cue(text, start, end, _CLAUSE_END, _took_cue) == "past"


def _parse(span: str, day: date, prefer: str | None = None) -> tuple[date, DatePeriod] | None:
    """dateparser's reading of ``span`` on ``day`` (a weekday or month alone: the ``prefer`` one)."""
    settings: dict[str, object] = {"RELATIVE_BASE": datetime.combine(day, datetime.min.time())}
    settings["RETURN_TIME_AS_PERIOD"] = True
    if prefer is not None:
        settings["PREFER_DATES_FROM"] = prefer
    data = DateDataParser(languages=["en"], settings=settings).get_date_data(span)
    period = _PERIODS.get(data.period or "")
    if data.date_obj is None or period is None:
        return None
    return data.date_obj.date(), period


@lru_cache(maxsize=8192)
def _resolve_span(span: str, day: date, said_in: str | None = None) -> tuple[str, DatePeriod] | None:
    """One expression against the start of the turn's day (every pattern names a day or longer, so
    the time of day never changes the answer), a weekday or month alone by the tense ``said_in``
    (None: left unresolved); cached, as the same phrases recur across a chat."""
    if m := _THIS_PAST.match(span):  # "this past Friday": last Friday; "this coming Friday": next Friday
        rest = span[m.end() :]
        coming = "this " if rest == "weekend" else "next "  # "this coming weekend": this (calendar) week's
        return _resolve_span(("last " if m.group(1) == "past" else coming) + rest, day, said_in)
    if m := _WITH_PART_OF_DAY.fullmatch(span):  # "yesterday morning", "last Friday night": that day
        return _resolve_span(m.group(1), day, said_in)
    if m := _NIGHTS_AGO.fullmatch(span):  # "a few nights ago": as many days ago
        return _resolve_span(f"{m.group(1)} days ago", day)
    if _OTHER_DAY.fullmatch(span):  # "the other day": some days before, shown as the week before (≈ 1-7 May)
        return _resolve_span("4 days ago", day)
    if m := _BEEN_SINCE.fullmatch(span):  # "it's been 8 months since ...": 8 months ago
        return _resolve_span(f"{m.group(1)} ago", day)
    if m := _END_OF.fullmatch(span):  # "at the end of the month": which month by the tense
        return _resolve_span(f"{_which_period(m.group(1), said_in)} {m.group(2)}", day)
    if m := _HOLIDAY_SAID.fullmatch(span):  # "last Christmas", "on Halloween" (by the tense)
        which = m.group(1) if m.group(1) in {"last", "next"} else said_in or m.group(1)  # "this": by the tense
        found_day = holiday_day(m.group(2), day, which)
        return (found_day.isoformat(), DatePeriod.day) if found_day else None
    if span == "the weekend":  # "over the weekend": the latest one begun (past) or the coming one (future)
        return _the_weekend(day, said_in)
    if _ALONE.fullmatch(span):
        found = _parse(span, day, said_in) if said_in else None
        if found is None:
            return None
        resolved, period = found
        if said_in == "future" and period == DatePeriod.month and resolved.month == day.month:
            resolved = _in_year(resolved, day.year)  # "in May" said in May: this May
        return resolved.isoformat(), period
    if m := _WEEKEND.fullmatch(span):  # the Saturday of the calendar week (:func:`_resolve_span` of "last week")
        week = _resolve_span(f"{m.group(1)} week", day)
        return ((date.fromisoformat(week[0]) + timedelta(days=5)).isoformat(), DatePeriod.weekend) if week else None
    if m := _WEEKENDS_AGO.fullmatch(span):  # "two weekends ago": the Saturday of the week two weeks ago
        week = _resolve_span(f"{m.group(1)} weeks ago", day)
        if week is None:
            return None
        weeks_ago = date.fromisoformat(week[0])
        return (weeks_ago + timedelta(days=5 - weeks_ago.weekday())).isoformat(), DatePeriod.weekend
    if m := _DAY_ALONE.fullmatch(span):  # "on the 3rd": the latest 3rd (past) or the next one (future)
        return _day_of_month(int(m.group(1)), day, said_in)
    if m := _LAST_THIS_NEXT_MONTH.fullmatch(span):
        found = _parse(m.group(2), day, _PREFER[m.group(1)])
        if found is None:
            return None
        resolved = found[0]
        if m.group(1) == "last" and resolved.month == day.month:  # "last May" said in May: a year ago
            resolved = _in_year(resolved, day.year - 1)
        return resolved.isoformat(), DatePeriod.month
    if m := _LAST_THIS_NEXT_SEASON.fullmatch(span):
        return _season(m.group(1), _SEASON_START[m.group(2)], day, said_in)
    if m := _THE_SEASON.fullmatch(span):  # "over the summer": this summer, in a tense ("I love the summer": None)
        return _season("this", _SEASON_START[m.group(1)], day, said_in) if said_in else None
    if m := _SPAN.fullmatch(span):  # "for 10 years" (up to now): since 10 years ago
        return _resolve_span(f"{m.group(1)} ago", day)
    if m := _FROM_NOW.fullmatch(span):  # "a week from today": in a week
        span = f"in {m.group(1)}"
    span = _COUPLE.sub("2", span)  # "a couple of weeks ago": two (dateparser reads no "couple")
    span = _BACK_SAID.sub(" ago", span)  # "two days back": two days ago
    span = _FEW_SAID.sub(lambda m: f"{_FEW_COUNT[m.group(1)]} ", span)  # "a few days ago": dated by 3 days ago
    found = _parse(span, day)
    if found is None:
        return None
    resolved, period = found
    if period == DatePeriod.week and _COUNTED.search(span):  # "three weeks ago": that many weeks from the day
        return resolved.isoformat(), DatePeriod.day
    if period == DatePeriod.week:  # "last week": the calendar week, named by its Monday
        resolved -= timedelta(days=resolved.weekday())
    return resolved.isoformat(), period


def _which_period(part: str, said_in: str | None) -> str:
    """Which week, month or year "the end/beginning/start of the month" names: this one, but the latest
    over where its end is said in the past ("we moved at the end of the month") and the next where its
    beginning is said in the future ("I'll start at the beginning of the year")."""
    if part == "end":
        return "last" if said_in == "past" else "this"
    return "next" if said_in == "future" else "this"


def _the_weekend(day: date, said_in: str | None) -> tuple[str, DatePeriod] | None:
    """The Saturday of "the weekend" said on ``day``: in the past the latest weekend begun by then, in the
    future the next one not over (said on a Sunday: the next week's)."""
    if said_in is None:
        return None
    saturday = day + timedelta(days=5 - day.weekday())  # this calendar week's
    if said_in == "past" and day.weekday() < 5:
        saturday -= timedelta(days=7)
    elif said_in == "future" and day.weekday() == 6:
        saturday += timedelta(days=7)
    return saturday.isoformat(), DatePeriod.weekend


def _day_of_month(number: int, day: date, said_in: str | None) -> tuple[str, DatePeriod] | None:
    """Day ``number`` of a month said on ``day``: in the past the latest one up to ``day``, in the future
    the next one after it (months without that day skipped); None without a tense."""
    if said_in is None:
        return None
    year, month, step = day.year, day.month, -1 if said_in == "past" else 1
    for _ in range(13):
        if number <= calendar.monthrange(year, month)[1]:
            found = date(year, month, number)
            if (found <= day) if said_in == "past" else (found > day):
                return found.isoformat(), DatePeriod.day
        month += step
        year, month = (year - 1, 12) if month == 0 else (year + 1, 1) if month == 13 else (year, month)
    return None


def _in_year(day: date, year: int) -> date:
    """``day`` of its month in ``year`` (29 February: the 28th)."""
    return day.replace(year=year, day=min(day.day, 28))


def _season(which: str, first: int, day: date, said_in: str | None) -> tuple[str, DatePeriod] | None:
    """Last/this/next season (starting in month ``first``) said on ``day``, named by its first day (a
    winter by its December: the winter of 2022-23 is 1 December 2022): last is the latest one that is
    over ("last summer" said in May 2023 or July 2023 is 2022's, in October 2023's; "last winter" said
    in May 2023 or January 2024 is 2022-23's); next is the one after the latest to begin, once that
    one began this calendar year or is under way ("next winter" said in January 2024 is 2024-25's);
    this is the one under way, else by the tense ``said_in`` the latest over (past) or the next to
    come (future), else the nearer of the two ("this summer" said in May 2023 or in October 2023 is
    2023's). Where they are ambiguous ("next summer" said in May, "next winter" in October: this
    coming one or the one after; "this summer" said in January without a tense), None. Dateparser
    reads no seasons."""
    since = (day.month - first) % 12  # months since the latest start
    latest = date(day.year - (day.month < first), first, 1)
    under_way = since <= 2
    if which == "last":
        found = _in_year(latest, latest.year - 1) if under_way else latest
    elif which == "next":
        if not under_way and latest.year != day.year:
            return None
        found = _in_year(latest, latest.year + 1)
    elif under_way:
        found = latest
    else:
        ended, coming = since - 2, 12 - since  # months since its end, to the next start
        if said_in is None and ended == coming:
            return None
        future = said_in == "future" or (said_in is None and coming < ended)
        found = _in_year(latest, latest.year + 1) if future else latest
    return found.isoformat(), DatePeriod.season


# a count of weeks ("a week ago", "three weeks ago", "in 2 weeks") names a day that many weeks away
_COUNTED = re.compile(r"\b(?:a|an|one|two|three|four|five|six|seven|eight|nine|ten|couple of|few|\d+) weeks?\b")


_MONTHS = (
    {m.lower(): n for n, m in enumerate(calendar.month_name) if m}
    | {m.lower(): n for n, m in enumerate(calendar.month_abbr) if m}
    | {"sept": 9}
)
_MONTH_WORD = (
    r"(jan(?:uary)?|feb(?:ruary)?|mar(?:ch)?|apr(?:il)?|may|june?|july?|aug(?:ust)?|sept?(?:ember)?|oct(?:ober)?"
    r"|nov(?:ember)?|dec(?:ember)?)"
)
_ORD = r"(?:st|nd|rd|th)?"
_NAMED = [  # (pattern, order of the groups: d(ay), m(onth number), w(ord month), y(ear))
    (re.compile(r"\b(\d{4})-(\d{1,2})-(\d{1,2})\b"), "ymd"),
    (re.compile(r"\b(\d{1,2})\.(\d{1,2})\.(\d{4})\b"), "dmy"),  # 21.01.2024: day first
    (re.compile(r"\b(\d{1,2})/(\d{1,2})/(\d{4})\b"), "dmy|mdy"),  # either way when both are dates
    (re.compile(rf"\b(\d{{1,2}}){_ORD}(?: of)? {_MONTH_WORD}\.?,? (\d{{4}})\b", re.IGNORECASE), "dwy"),
    (re.compile(rf"\b{_MONTH_WORD}\.? (\d{{1,2}}){_ORD},? (\d{{4}})\b", re.IGNORECASE), "wdy"),
]


def named_days(text: str) -> list[date]:
    """The calendar days ``text`` names with a year ("5 Jan 2024", "January 5th, 2024",
    "21.01.2024", "2024-01-21"; "01/02/2024" names both readings), in order, each once."""
    found: list[tuple[int, date]] = []
    for pattern, orders in _NAMED:
        for match in pattern.finditer(text):
            for order in orders.split("|"):
                parts = dict(zip(order, match.groups(), strict=True))
                month = _MONTHS.get(parts["w"].lower().rstrip(".")) if "w" in parts else int(parts["m"])
                try:
                    found.append((match.start(), date(int(parts["y"]), month or 0, int(parts["d"]))))
                except ValueError:
                    continue  # not a real date (31.02.2024, 13/13/2024)
    return list(dict.fromkeys(day for _, day in sorted(found, key=lambda f: f[0])))


def format_day(day: date) -> str:
    """``7 May 2023``."""
    return f"{day.day} {day:%B %Y}"


#: a date said roughly: "a few days ago", "several years back", "in a few weeks", "the other day"
_APPROXIMATE = re.compile(rf"\b(?:({_FEW}) ({_UNIT}|nights?)|the other (?:day|night))\b")
#: how far either way of its date a rough count may reach, in its units ("a few": 2 to 4, "several": 3 to 7)
_FEW_REACH = {"a few": 1, "few": 1, "several": 2}


def approximate(resolved: ResolvedDate) -> bool:
    """Whether ``resolved`` was said roughly ("a few days ago"): shown ``[≈ …]``, as the range it may mean."""
    return _APPROXIMATE.search(resolved.text.lower()) is not None


def _approximate_range(resolved: ResolvedDate, said: re.Match[str]) -> str:
    """The range a rough date may mean around its ``date``: ``4–6 May 2023`` ("a few days ago" said on 8 May),
    ``10–24 April 2023`` (a few weeks), ``January–March 2023`` (a few months), ``2019–2021`` (a few years);
    "the other day" is 1 to 7 days before the turn's day."""
    day = date.fromisoformat(resolved.date)
    reach, unit = (_FEW_REACH[said.group(1)], said.group(2).rstrip("s")) if said.group(1) else (3, "day")
    if resolved.period == DatePeriod.year:
        return f"{day.year - reach}–{day.year + reach}"
    if resolved.period == DatePeriod.month:
        first, last = (date((n := day.year * 12 + day.month - 1 + k) // 12, n % 12 + 1, 1) for k in (-reach, reach))
        return f"{first:%B}–{last:%B %Y}" if first.year == last.year else f"{first:%B %Y}–{last:%B %Y}"
    first, last = (day + timedelta(days=k * reach * (7 if unit == "week" else 1)) for k in (-1, 1))
    if (first.year, first.month) == (last.year, last.month):
        return f"{first.day}–{format_day(last)}"
    return (
        f"{first.day} {first:%B}–{format_day(last)}"
        if first.year == last.year
        else f"{format_day(first)}–{format_day(last)}"
    )


def format_resolved(resolved: ResolvedDate) -> str:
    """The absolute date in words, as precise as the expression: ``7 May 2023``, ``June 2023``, ``2019``; a
    date said roughly as the range it may mean (``4–6 May 2023``)."""
    if _SPAN.fullmatch(resolved.text.lower()):  # "for 10 years [= since 2013]"; "for a few years [≈ since 2020]"
        return f"since {format_resolved(resolved.model_copy(update={'text': 'then'}))}"
    if said := _APPROXIMATE.search(resolved.text.lower()):
        return _approximate_range(resolved, said)
    day = date.fromisoformat(resolved.date)
    if resolved.period == DatePeriod.year:
        return str(day.year)
    if resolved.period == DatePeriod.month:
        return f"{day:%B %Y}"
    if resolved.period == DatePeriod.week:
        return f"week of {format_day(day)}"
    if resolved.period == DatePeriod.weekend:
        return f"weekend of {format_day(day)}"
    if resolved.period == DatePeriod.season:  # as it was called: "fall" or "autumn"; a winter by both years
        name = resolved.text.split()[-1].lower()
        return f"{name} {day.year}–{(day.year + 1) % 100:02d}" if day.month == 12 else f"{name} {day.year}"
    return format_day(day)


#: the rest of a word an expression ends inside (:func:`agtos.tasks.text.words` reads "yesterday's" and
#: "Friday-night" as one word): letters after an apostrophe or a hyphen; not digits ("May 2-3" is a range)
_WORD_REST = re.compile(r"(?:['’ʼ-]+[^\W\d_]+)+")


def annotate(text: str, dates: list[ResolvedDate]) -> str:
    """``text`` with ``[= <date>]`` after each resolved expression (``[≈ <range>]`` after a rough one), after
    the whole word it ends inside ("next week's [= week of 15 May 2023] party")."""
    out, last = [], 0
    for resolved in sorted(dates, key=lambda d: d.start):
        end = resolved.start + len(resolved.text)
        if resolved.start < last or text[resolved.start : end] != resolved.text:
            continue  # not this text's expression (edited or overlapping): leave it out
        absolute = format_resolved(resolved)
        if absolute != resolved.text:  # "in 2019" needs no "[= 2019]"
            # after the whole word: "yesterday's [= 7 May 2023] party", "Friday-night [= 5 May 2023] pizza", not
            # "yesterday [= …]'s", "Friday [= …]-night" (a word cut in two is no longer the word a summary says);
            # a word that holds the next expression too keeps a note for each ("Monday [= …]-Friday [= …]")
            rest = _WORD_REST.match(text, end)
            if rest and not any(end <= other.start < rest.end() for other in dates):
                end = rest.end()
            out += [text[last:end], f" [{'≈' if approximate(resolved) else '='} {absolute}]"]
            last = end
    return "".join(out) + text[last:]


def speaker(turn: StoredTurn) -> str:
    """The speaker's name, else the role (``User``, ``Assistant``)."""
    return turn.name or str(turn.role).capitalize()


def attributed(turn: StoredTurn, text: str) -> str:
    """``Caroline: <text>``; a text that already opens with the speaker's ``"Caroline: "`` (a transcript
    pasted with its names, kept as sent) is not attributed twice."""
    name = speaker(turn)
    stripped = text.lstrip()
    if stripped[: len(name) + 1].lower() == f"{name.lower()}:" and stripped[len(name) + 1 : len(name) + 2].isspace():
        text = stripped[len(name) + 1 :].lstrip()
    return f"{name}: {text}"


def turn_prefix(turn: StoredTurn) -> str:
    """``(8 May 2023) Caroline: ``: when the turn was said, and by whom."""
    return f"({format_day(turn_datetime(turn.timestamp, turn.utc_offset).date())}) {speaker(turn)}: "


def format_turn(turn: StoredTurn) -> str:
    """``(8 May 2023) Caroline: I went to the support group yesterday [= 7 May 2023]``."""
    return turn_prefix(turn) + annotate(turn.content, turn.dates)
