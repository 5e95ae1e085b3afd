"""Pydantic models of every stored record: the single contract of the system."""

from __future__ import annotations

import functools
import json
import re
import time
import uuid
from datetime import UTC, datetime
from enum import StrEnum
from typing import Annotated, Any, Literal

from pydantic import (
    BaseModel,
    BeforeValidator,
    ConfigDict,
    Field,
    PrivateAttr,
    TypeAdapter,
    ValidationError,
    WithJsonSchema,
    field_validator,
    model_validator,
)
from pydantic.alias_generators import to_camel
from pydantic_core import PydanticCustomError

MAX_TIMESTAMP_MS = 253_402_300_799_999  # 9999-12-31T23:59:59.999Z: every stored time is a real date


_DATETIME = TypeAdapter(datetime)  # pydantic's RFC 3339 / ISO 8601 parser
_DATE_START = re.compile(r"\d{4}-\d\d-\d\d", re.ASCII)  # a date-time string starts with its date
EXAMPLE_TIME = "2023-05-08T18:00:00Z"


def to_ms(value: Any) -> Any:
    """A time as sent: ms since the epoch (as is), or an ISO 8601 date-time (a ``datetime``, or a string
    such as ``2023-05-08T18:00:00Z``; UTC when it names no offset) turned into ms. Another number as a
    string (``1683540000.5``, which pydantic's date-time parser reads as seconds) and a boolean are refused."""
    expected = f"expected ms since the epoch or an ISO 8601 date-time such as {EXAMPLE_TIME}"
    if isinstance(value, bool):  # JSON true is not 1 ms
        raise ValueError(expected)
    if isinstance(value, str) and not value.strip().isdigit():
        if not _DATE_START.match(value.strip()):  # pydantic's parser would read another number as seconds
            raise ValueError(expected)
        try:
            value = _DATETIME.validate_python(value.strip())
        except ValidationError:
            raise ValueError(expected) from None
    if not isinstance(value, datetime):
        return value
    moment = value if value.tzinfo else value.replace(tzinfo=UTC)
    return round(moment.timestamp() * 1000)


#: what a turn's ``utc_offset`` must also satisfy: Python's dates end with year 9999, in local time too
LOCAL_TIME_RULE = "a turn's local time (its timestamp + utcOffset minutes) is on or before 9999-12-31T23:59:59.999"


def local_time_in_range(timestamp: int, utc_offset: int | None) -> bool:
    """Whether the local time ``utc_offset`` minutes east of UTC at ``timestamp`` (ms) is a date that can be
    shown: 9999-12-31T23:59:59.999Z at +14:00 is in year 10000."""
    return timestamp + 60_000 * (utc_offset or 0) <= MAX_TIMESTAMP_MS


def _local_time_shown(turn: Any) -> Any:
    """A turn's validator: its local time is a real date (:data:`LOCAL_TIME_RULE`)."""
    if turn.timestamp is not None and not local_time_in_range(turn.timestamp, turn.utc_offset):  # None: now
        raise ValueError(LOCAL_TIME_RULE)
    return turn


#: a sent turn's validator (not the stored record's: one journalled before the rule stays readable)
LOCAL_TIME_SHOWN = model_validator(mode="after")(_local_time_shown)


def utc_offset_of(value: Any) -> int | None:
    """The UTC offset in minutes that a sent time names (``2023-05-09T01:00:00+09:00`` → 540), or None
    (ms since the epoch, UTC, no offset, not a date-time)."""
    if isinstance(value, str) and _DATE_START.match(value.strip()):
        try:
            value = _DATETIME.validate_python(value.strip())
        except ValidationError:
            return None
    offset = value.utcoffset() if isinstance(value, datetime) else None
    return (round(offset.total_seconds() / 60) or None) if offset is not None else None


def with_utc_offset(data: Any, sent: Any = None) -> Any:
    """A turn as sent (a dict) with the ``utc_offset`` its ``timestamp`` names (else ``sent``'s, a time
    it was given), unless it says one itself."""
    if isinstance(data, dict) and data.get("utc_offset") is None:
        offset = utc_offset_of(data["timestamp"] if data.get("timestamp") is not None else sent)
        if offset is not None:
            return {**data, "utc_offset": offset}
    return data


def json_number(value: Any) -> Any:
    """A client's integer as sent: ``true`` or ``"60"`` is no number (pydantic's lax mode read them as 1
    and 60); 60.0 is one (an integer in JSON Schema), checked by ``int`` after this."""
    if isinstance(value, bool | str):
        raise PydanticCustomError("int_type", "Input should be a valid integer")
    return value


#: minutes east of UTC where a turn was said (a JSON number, as the OpenAPI says)
UtcOffset = Annotated[int | None, Field(ge=-1440, le=1440), BeforeValidator(json_number)]


@functools.cache
def _camel_names(cls: type[BaseModel]) -> dict[str, str]:
    """``camelCase key -> field name`` of the fields of ``cls`` whose names change in camelCase: made once
    per model (each turn of an append was validated as three models, ~20 µs of ``to_camel`` calls each)."""
    return {camel: name for name in cls.model_fields if (camel := to_camel(name)) != name}


def snake_case_keys(cls: type[BaseModel], data: Any) -> Any:
    """A request body with its fields' camelCase keys (``sessionId``, as the responses spell them) renamed
    to their snake_case names, so that a client may echo what it received; both spellings of one field
    are refused."""
    if not isinstance(data, dict):
        return data
    camel = _camel_names(cls)
    if camel.keys().isdisjoint(data):
        return data
    both = [name for key, name in camel.items() if key in data and name in data]
    if both:
        raise ValueError(f"send {both[0]} once: as {both[0]} or as {to_camel(both[0])}")
    return {camel.get(key, key): value for key, value in data.items()}


#: a turn model's validator: camelCase keys renamed, its ``utc_offset`` read from its ISO ``timestamp`` unless sent
def _offset_of_sent_time(cls: type[BaseModel], data: Any) -> Any:
    return with_utc_offset(snake_case_keys(cls, data))


OFFSET_OF_SENT_TIME = model_validator(mode="before")(_offset_of_sent_time)


#: a time a client sends: ms since the epoch, or an ISO 8601 date-time (stored as ms)
SentTime = Annotated[
    int,
    Field(ge=0, le=MAX_TIMESTAMP_MS),
    BeforeValidator(to_ms),
    WithJsonSchema(
        {
            "anyOf": [
                {"type": "integer", "minimum": 0, "maximum": MAX_TIMESTAMP_MS},
                {"type": "string", "format": "date-time"},
            ],
            "pattern": r"^(19[7-9]\d|[2-9]\d{3})-",  # a string's year: 1970-9999 (integers: their bounds)
            "description": "ms since the epoch, or an ISO 8601 date-time (UTC when it names no offset) from "
            "1970-01-01T00:00:00Z to 9999-12-31T23:59:59.999Z",
        }
    ),
]


def now_ms() -> int:
    return int(time.time() * 1000)


def new_id(prefix: str) -> str:
    return f"{prefix}-{uuid.uuid4().hex[:12]}"


class EpisodeType(StrEnum):
    conversation = "conversation"
    correction = "correction"
    preference = "preference"
    task_outcome = "task_outcome"
    response_ingest = "response_ingest"


class Role(StrEnum):
    user = "user"
    assistant = "assistant"
    system = "system"
    tool = "tool"


class Record(BaseModel):
    """Base of stored records: strict on unknown fields so typos become 422s."""

    model_config = ConfigDict(extra="forbid", use_enum_values=True)


class Turn(Record):
    """One message of a conversation."""

    role: Role
    content: str = Field(min_length=1, max_length=100_000)
    timestamp: SentTime = Field(default_factory=now_ms)
    name: str | None = Field(
        default=None, max_length=128, description="the speaker's name (the tool's, for tool turns)"
    )
    is_summary: bool = False
    utc_offset: UtcOffset = Field(
        default=None,
        description="minutes east of UTC where it was said (read from an ISO timestamp's offset): relative "
        "dates resolve against that local day, and it is shown on it",
    )

    _offset_of_sent_time = OFFSET_OF_SENT_TIME


class DatePeriod(StrEnum):
    day = "day"
    week = "week"
    weekend = "weekend"  # named by its Saturday
    season = "season"  # spring, summer or fall/autumn, named by its first day (1 March, 1 June, 1 September)
    month = "month"
    year = "year"


class ResolvedDate(Record):
    """A relative time expression of a turn ("yesterday") and the absolute date it names."""

    text: str = Field(min_length=1, max_length=128, description="the expression as written")
    start: int = Field(ge=0, description="character offset of the expression in the turn")
    date: str = Field(pattern=r"^\d{4}-\d{2}-\d{2}$", description="ISO date, resolved against the turn's time")
    period: DatePeriod = Field(description="how precise the date is (a week names its Monday, a weekend its Saturday)")


class StoredTurn(Record):
    """One turn of an ended session, kept verbatim with its episode (same TTL, privacy and forget)."""

    user_id: str = Field(max_length=128)
    episode_id: str = Field(max_length=128)
    session_id: str = Field(default="", max_length=128)
    position: int = Field(ge=0, description="0-based place of the turn in its session")
    role: Role
    name: str | None = Field(default=None, max_length=128, description="the speaker's name")
    content: str = Field(min_length=1, max_length=100_000)
    timestamp: int = Field(ge=0, le=MAX_TIMESTAMP_MS, description="when it was said (as sent, in ms)")
    dates: list[ResolvedDate] = Field(default_factory=list, max_length=64)
    utc_offset: int | None = Field(default=None, ge=-1440, le=1440, description="minutes east of UTC where it was said")


class Episode(Record):
    """A saved session: summary, facts and keywords, with importance and type."""

    id: str = Field(default_factory=lambda: new_id("ep"), max_length=128)
    user_id: str = Field(max_length=128)
    session_id: str = Field(default="", max_length=128)
    summary: str = Field(min_length=1, max_length=20_000)
    keywords: list[str] = Field(default_factory=list, max_length=64)
    topic: str = Field(default="general", max_length=128)
    timestamp: int = Field(default_factory=now_ms, ge=0, le=MAX_TIMESTAMP_MS)
    importance: float = Field(default=0.5, ge=0.0, le=1.0)
    type: EpisodeType = EpisodeType.conversation
    facts: list[str] = Field(default_factory=list, max_length=256)
    entities: list[str] = Field(default_factory=list, max_length=256)
    utc_offset: UtcOffset = Field(
        default=None, description="minutes east of UTC where its last turn was said: it is dated on that local day"
    )
    #: each fact → when its turn said it (ms), and the turn's UTC offset if it was sent with one, known
    #: while the episode built from its turns is being ingested (kept by model_copy; not stored, not a
    #: field of the record or its Arrow schema)
    _fact_times: dict[str, int] = PrivateAttr(default_factory=dict)
    _fact_offsets: dict[str, int] = PrivateAttr(default_factory=dict)

    def said_at(self, fact: str) -> int:
        """When ``fact`` was said: its turn's time if known, else the episode's."""
        return self._fact_times.get(fact) or self.timestamp

    def offset_at(self, fact: str) -> int | None:
        """The UTC offset (minutes east) where ``fact``'s turn was said, if known."""
        return self._fact_offsets.get(fact) if self._fact_times.get(fact) else None

    def with_fact_times(self, times: dict[str, int], offsets: dict[str, int] | None = None) -> Episode:
        self._fact_times = dict(times)
        self._fact_offsets = dict(offsets or {})
        return self


class IngestItem(Record):
    """One unit of ingestion: a finished session's turns, or a ready episode."""

    user_id: str = Field(max_length=128)
    session_id: str = Field(default="", max_length=128)
    turns: list[Turn] = Field(default_factory=list)
    episode: Episode | None = None
    #: when its data was taken (Redis clock, ms; a queued session end: when it was queued), if before
    #: the ingestion: a forget-all of the user since then drops it
    since_ms: int | None = None


class MemoryKind(StrEnum):
    fact = "fact"
    preference = "preference"
    pattern = "pattern"


class Memory(Record):
    """A distilled semantic memory, kept until deleted."""

    id: str = Field(default_factory=lambda: new_id("mem"), max_length=128)
    user_id: str = Field(max_length=128)
    text: str = Field(min_length=1, max_length=20_000)
    kind: MemoryKind = MemoryKind.fact
    source_episode_ids: list[str] = Field(default_factory=list)
    created_at: int = Field(default_factory=now_ms, ge=0, le=MAX_TIMESTAMP_MS)
    importance: float = Field(default=0.5, ge=0.0, le=1.0)
    valid_from: int = Field(
        default=0, ge=0, le=MAX_TIMESTAMP_MS, description="when it became true or was stated (ms); created_at if unset"
    )
    valid_until: int | None = Field(
        default=None, ge=0, le=MAX_TIMESTAMP_MS, description="when a later fact replaced it (ms); None: current"
    )
    superseded_by: str | None = Field(default=None, max_length=128, description="the memory that replaced it")
    utc_offset: UtcOffset = Field(
        default=None, description="minutes east of UTC where it was said (its turn's): it is dated on that local day"
    )
    until_utc_offset: UtcOffset = Field(
        default=None, description="minutes east of UTC where the fact that ended it was said: valid_until's local day"
    )

    @model_validator(mode="after")
    def _valid_from_default(self) -> Memory:
        if not self.valid_from:  # records stored before validity existed: true since they were learned
            self.valid_from = self.created_at
        return self

    @property
    def current(self) -> bool:
        return self.valid_until is None


ChangeOrigin = Literal["extracted", "user", "lint", "supersession", "import"]
ChangeAction = Literal["created", "restated", "edited", "merged", "superseded", "supersedes", "reopened"]


class MemoryChange(Record):
    """One entry of a memory's history: what changed, when, and where the change came from."""

    memory_id: str = Field(max_length=128)
    at: int = Field(default_factory=now_ms, ge=0, le=MAX_TIMESTAMP_MS, description="when it was recorded (ms)")
    origin: ChangeOrigin
    action: ChangeAction
    text: str | None = Field(default=None, max_length=20_000, description="the text after the change")
    related_id: str | None = Field(
        default=None, max_length=128, description="the other memory (merged in, superseding or superseded)"
    )
    source_episode_id: str | None = Field(default=None, max_length=128)
    valid_from: int | None = Field(default=None, ge=0, le=MAX_TIMESTAMP_MS)
    valid_until: int | None = Field(default=None, ge=0, le=MAX_TIMESTAMP_MS)


class ConclusionType(StrEnum):
    explicit = "explicit"
    deductive = "deductive"
    inductive = "inductive"
    abductive = "abductive"


class Conclusion(Record):
    """A Dreamer-derived belief about the user."""

    id: str = Field(default_factory=lambda: new_id("con"), max_length=128)
    user_id: str = Field(max_length=128)
    text: str = Field(min_length=1, max_length=5_000)
    type: ConclusionType
    confidence: float = Field(ge=0.0, le=1.0)
    source_episode_ids: list[str] = Field(default_factory=list)
    source_turn_ids: list[str] = Field(
        default_factory=list, description="the turns that state it: '<episode id>.t<position>'"
    )
    category: str | None = Field(
        default=None, max_length=32, description="what it is about: allergy, job, home, family, preference, ..."
    )
    created_at: int = Field(default_factory=now_ms, ge=0, le=MAX_TIMESTAMP_MS)
    updated_at: int = Field(default_factory=now_ms, ge=0, le=MAX_TIMESTAMP_MS)
    stale: bool = False


class EntityType(StrEnum):
    person = "person"
    place = "place"
    organization = "organization"
    event = "event"
    thing = "thing"
    animal = "animal"  # pets ("our dog Pixel")


class Entity(Record):
    """A person, place, organisation, event or thing the user talks about."""

    id: str = Field(default_factory=lambda: new_id("ent"), max_length=128)
    user_id: str = Field(max_length=128)
    name: str = Field(min_length=1, max_length=256)
    type: EntityType
    aliases: list[str] = Field(default_factory=list)
    confidence: float = Field(default=0.5, ge=0.0, le=1.0)
    first_seen: int = Field(default_factory=now_ms, ge=0, le=MAX_TIMESTAMP_MS)
    last_seen: int = Field(default_factory=now_ms, ge=0, le=MAX_TIMESTAMP_MS)
    episode_ids: list[str] = Field(default_factory=list)
    deleted: bool = False


class Relationship(Record):
    """A typed edge between two entities."""

    id: str = Field(default_factory=lambda: new_id("rel"), max_length=128)
    user_id: str = Field(max_length=128)
    source_id: str
    target_id: str
    type: str = Field(min_length=1, max_length=64, description="works-at, lives-in, knows...")
    confidence: float = Field(default=0.5, ge=0.0, le=1.0)
    source_episode_ids: list[str] = Field(default_factory=list)
    valid_from: int | None = Field(default=None, ge=0, le=MAX_TIMESTAMP_MS, description="when it was first stated (ms)")
    valid_until: int | None = Field(
        default=None, ge=0, le=MAX_TIMESTAMP_MS, description="when a later edge replaced it (ms); None: current"
    )
    superseded_by: str | None = Field(default=None, max_length=128, description="the edge that replaced it")


class UserProfile(Record):
    """What the system knows about a user as a whole; PUT merges these fields."""

    user_id: str = Field(default="", max_length=128)
    name: str | None = Field(default=None, max_length=256)
    communication_style: str | None = Field(default=None, max_length=1_000)
    preferences: list[str] = Field(default_factory=list, max_length=500)
    patterns: list[str] = Field(default_factory=list, max_length=500)
    facts: list[str] = Field(default_factory=list, max_length=1_000)
    sources: dict[str, list[str]] = Field(
        default_factory=dict, description="the evidence of each derived line: conclusion, episode and turn ids"
    )
    opt_out: bool = False
    updated_at: int = Field(default_factory=now_ms, ge=0, le=MAX_TIMESTAMP_MS)

    @field_validator("sources", mode="before")
    @classmethod
    def _sources_from_json_text(cls, value: Any) -> Any:
        """Exports carry the mapping as JSON text (see agtos.schemas.arrow)."""
        return json.loads(value) if isinstance(value, str) else value


ProfileItem = Annotated[str, Field(max_length=5_000)]  # as long as a conclusion's text, which the Dreamer copies in
#: a character that is not a space in any engine's sense (Python's str.isspace, Unicode's White_Space, ECMAScript's
#: \s with U+FEFF), spelt out so the JSON Schema's pattern and the check below agree on every client
NOT_BLANK = r"[^\t\n\v\f\r\x1c-\x20\x85\xa0\u1680\u2000-\u200a\u2028\u2029\u202f\u205f\u3000\ufeff]"
#: a preference, pattern or fact line: not blank (a 422), as its JSON Schema states
ProfileLine = Annotated[ProfileItem, Field(json_schema_extra={"pattern": NOT_BLANK})]


class ProfileUpdate(Record):
    """A partial profile: only the fields present are changed."""

    model_config = ConfigDict(
        json_schema_extra={"examples": [{"name": "Alice", "preferences": ["metric units", "short answers"]}]}
    )

    name: str | None = Field(default=None, max_length=256)
    communication_style: str | None = Field(default=None, max_length=1_000)
    preferences: list[ProfileLine] | None = Field(default=None, max_length=500)
    patterns: list[ProfileLine] | None = Field(default=None, max_length=500)
    facts: list[ProfileLine] | None = Field(default=None, max_length=1_000)
    sources: dict[ProfileItem, list[str]] | None = None
    opt_out: bool | None = Field(default=None, strict=True)  # true or false as sent, not 0 or "off"

    @field_validator("preferences", "patterns", "facts")
    @classmethod
    def _no_blank_items(cls, items: list[str] | None) -> list[str] | None:
        if items is not None and not all(re.search(NOT_BLANK, item) for item in items):
            raise ValueError("list items must be non-empty strings")
        return items


class MaintenanceReport(Record):
    """The persisted outcome of one lint sweep (filled in by the lint issue)."""

    timestamp: int = Field(default_factory=now_ms, ge=0, le=MAX_TIMESTAMP_MS)
    user_id: str = Field(max_length=128)
    summary: dict[str, Any] = Field(default_factory=dict)
    steps: list[dict[str, Any]] = Field(default_factory=list)
