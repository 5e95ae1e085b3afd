"""Request bodies: snake_case keys (camelCase accepted), unknown keys refused, an example each for ``/openapi.json``."""

from __future__ import annotations

from typing import Annotated, Any, ClassVar, Literal

from pydantic import BaseModel, BeforeValidator, ConfigDict, Field, model_validator

from agtos.schemas.identifiers import RecordId
from agtos.schemas.records import (
    LOCAL_TIME_RULE,
    LOCAL_TIME_SHOWN,
    MAX_TIMESTAMP_MS,
    OFFSET_OF_SENT_TIME,
    EntityType,
    Role,
    SentTime,
    Turn,
    UtcOffset,
    json_number,
    local_time_in_range,
    snake_case_keys,
    with_utc_offset,
)

# Request bodies: snake_case keys, or the camelCase the responses use; unknown keys refused; each carries
# an example for /openapi.json.
# They live here (not in the routers) so the Python client and the MCP tools build the same bodies.
MAX_QUERY_CHARS = 1_000
MERGED_INTO_ITSELF = "an entity cannot be merged into itself: duplicate_id must not be the entity_id of the path"
SpeakerName = Annotated[str, Field(min_length=1, max_length=128)]


JSONInt = Annotated[int, BeforeValidator(json_number)]  # an integer request field: a JSON number only
# an optional one (the validator outside the union: inside it, pydantic writes the bounds as "ge"/"le", not JSON Schema)
OptionalJSONInt = Annotated[int | None, BeforeValidator(json_number)]
JSONBool = Annotated[bool, Field(strict=True)]  # a boolean request field: true or false only, not 0 or "off"


def request_config(*examples: dict[str, Any], min_fields: int = 0) -> ConfigDict:
    """A request model's config: unknown keys refused, ``examples`` shown in the OpenAPI schema, and
    ``min_fields`` as its ``minProperties`` (an update naming no field is refused: the document says so)."""
    extra: dict[str, Any] = {"examples": list(examples)}
    if min_fields:
        extra["minProperties"] = min_fields
    return ConfigDict(extra="forbid", json_schema_extra=extra)


class RequestModel(BaseModel):
    """Base of the request bodies: each field also taken under its camelCase name (``sessionId``).

    ``cross_field_rules``: what a body must also satisfy that its JSON Schema cannot state (a rule
    between fields, or between the body and the path); each is the message of the 422 that refuses
    it, and the operation's OpenAPI description lists them (``serving.strict_json``)."""

    cross_field_rules: ClassVar[tuple[str, ...]] = ()
    _snake_case_keys = model_validator(mode="before")(snake_case_keys)


class TurnIn(RequestModel):
    """One turn as a client sends it: no ``tool`` role and no ``is_summary`` (working memory's
    own summaries are the only summary turns)."""

    model_config = ConfigDict(extra="forbid")
    role: Literal["user", "assistant", "system"]
    content: str = Field(min_length=1, max_length=100_000, pattern=r"\S", description="not blank")
    timestamp: SentTime | None = Field(default=None, description="when it was said; default: now")
    name: str | None = Field(default=None, max_length=128, description="the speaker's name")
    utc_offset: UtcOffset = Field(
        default=None,
        description="minutes east of UTC where it was said; default: the offset an ISO timestamp names "
        "(relative dates resolve against that local day, and it is shown on it), else UTC",
    )

    _offset_of_sent_time = OFFSET_OF_SENT_TIME
    _local_time_shown = LOCAL_TIME_SHOWN
    cross_field_rules = (LOCAL_TIME_RULE,)

    def to_turn(self, name: str | None = None) -> Turn:
        """The stored turn, named ``name`` when given."""
        return Turn.model_validate({**self.model_dump(exclude_none=True), **({"name": name} if name else {})})


class TurnsIn(RequestModel):
    model_config = request_config(
        {
            "turns": [
                {"role": "user", "content": "What is the weather forecast for San Francisco?"},
                {"role": "assistant", "content": "Sunny, 19 degrees."},
                {"role": "user", "content": "I prefer metric units."},
            ],
            "speakers": {"user": "Alice"},
        }
    )
    turns: list[TurnIn] = Field(min_length=1, max_length=200)
    speakers: dict[Role, SpeakerName] = Field(
        default_factory=dict, description="speaker names by role, given to the turns that carry no name"
    )
    cross_field_rules = TurnIn.cross_field_rules

    def named_turns(self) -> list[Turn]:
        """The turns, each named by its own ``name`` or else by ``speakers``."""
        return [
            t.to_turn() if t.name or t.role not in self.speakers else t.to_turn(self.speakers[Role(t.role)])
            for t in self.turns
        ]


class ContextRequest(RequestModel):
    model_config = request_config({"query": "what units should I answer in?", "token_budget": 600})
    query: str = Field(
        min_length=1, max_length=MAX_QUERY_CHARS, pattern=r"\S", description="what the agent is about to answer"
    )
    session_id: RecordId | None = Field(default=None, description="the live session to include")
    token_budget: JSONInt = Field(default=800, ge=50, le=8_000, description="tokens the memory section may take")
    limit: JSONInt = Field(default=10, ge=1, le=50, description="items per tier")


class AskRequest(RequestModel):
    model_config = request_config({"question": "Which units does the user like?"})
    question: str = Field(min_length=1, max_length=2_000, pattern=r"\S", description="a question about the user")
    limit: JSONInt = Field(default=5, ge=1, le=20, description="evidence items to draw on")


class ResponseIn(RequestModel):
    model_config = request_config(
        {
            "session_id": "s1",
            "query": "Compare the two flights",
            "response": "Flight A is cheaper but has a layover; therefore flight B is the better choice.",
            "tool_calls": 2,
        }
    )
    session_id: RecordId
    response: str = Field(min_length=1, max_length=100_000, pattern=r"\S")
    query: str | None = Field(default=None, max_length=10_000)
    tool_calls: JSONInt = Field(default=0, ge=0, le=1_000)
    reasoning_steps: OptionalJSONInt = Field(default=None, ge=0, le=1_000)


ForgetKind = Literal["episode", "memory", "conclusion", "entity"]


class ForgetRequest(RequestModel):
    model_config = request_config({"kind": "episode", "id": "ep-0123456789abcdef"}, {"kind": "all"})
    kind: ForgetKind | Literal["all"] = Field(description="the record's kind, or 'all' for everything of the user")
    id: RecordId | None = Field(default=None, description="the record's id (none with 'all')")
    cross_field_rules = ("give an id for one record, and no id with kind 'all'",)

    @model_validator(mode="after")
    def _id_matches_kind(self) -> ForgetRequest:
        if (self.kind == "all") != (self.id is None):
            raise ValueError(self.cross_field_rules[0])
        return self


class PrivacySettings(RequestModel):
    model_config = request_config({"opt_out": True, "forget_existing": False})
    opt_out: JSONBool
    forget_existing: JSONBool = False


SourceName = Literal["claude_code", "cursor", "windsurf", "aider", "copilot"]


class ImportRequest(RequestModel):
    model_config = request_config({"sources": ["claude_code", "cursor"]})
    sources: list[SourceName] | None = Field(default=None, max_length=5, description="all when absent")


class EntityUpdate(RequestModel):
    """Fields to change; at least one. A rename keeps the old name as an alias unless ``aliases`` is sent."""

    model_config = request_config({"name": "Acme Corporation", "aliases": ["Acme", "ACME Corp"]}, min_fields=1)
    name: str | None = Field(default=None, min_length=1, max_length=256, pattern=r"\S")
    type: EntityType | None = None
    aliases: list[Annotated[str, Field(min_length=1, max_length=256, pattern=r"\S")]] | None = Field(
        default=None, max_length=200
    )
    confidence: float | None = Field(default=None, ge=0.0, le=1.0)
    cross_field_rules = ("send at least one of name, type, aliases, confidence that is not null",)

    @model_validator(mode="after")
    def _something(self) -> EntityUpdate:
        if not self.model_fields_set or all(getattr(self, f) is None for f in self.model_fields_set):
            raise ValueError(self.cross_field_rules[0])
        return self


class MergeRequest(RequestModel):
    model_config = request_config({"duplicate_id": "ent-0123456789abcdef"})
    duplicate_id: RecordId = Field(description="the entity folded into this one")
    cross_field_rules = (MERGED_INTO_ITSELF,)  # checked against the path's id where the merge runs


MAX_CONVERSATION_SESSIONS = 100
MAX_CONVERSATION_TURNS = 2_000


_SESSION_EXAMPLE: dict[str, Any] = {
    "id": "chat-2023-05-08",
    "started_at": 1683536400000,
    "speakers": {"user": "Jon", "assistant": "Gina"},
    "turns": [
        {"role": "user", "content": "I lost my job yesterday.", "timestamp": 1683536400000},
        {"role": "assistant", "content": "I'm sorry, Jon. What happened?", "timestamp": 1683536460000},
    ],
}


class SentTurn(Turn):
    """A turn of a chat log as sent: its local time is a real date too (the stored :class:`Turn` is not
    checked, so that one written before the rule stays readable)."""

    _local_time_shown = LOCAL_TIME_SHOWN


class ConversationSession(RequestModel):
    """One past session of a chat log: its turns in order, each with its time."""

    model_config = request_config(_SESSION_EXAMPLE)
    id: RecordId = Field(description="the session's id: ingesting it again stores nothing new")
    started_at: SentTime | None = Field(default=None, description="the time of turns sent without a timestamp")
    speakers: dict[Role, SpeakerName] = Field(
        default_factory=dict, description="speaker names by role, given to the turns that carry no name"
    )
    turns: list[SentTurn] = Field(min_length=1, max_length=MAX_CONVERSATION_TURNS)
    cross_field_rules = (
        "startedAt leaves room to date the turns sent without a timestamp (1 ms each) by 9999-12-31T23:59:59.999Z",
        "startedAt leaves room to date the turns sent without a timestamp by 9999-12-31T23:59:59.999 in their "
        "local time too (startedAt's offset, or the turn's utcOffset)",
        LOCAL_TIME_RULE,
    )

    @model_validator(mode="after")
    def _room_to_date(self) -> ConversationSession:
        """The last turn sent without a time is dated ``started_at`` + its position: a real date too."""
        undated = [i for i, t in enumerate(self.turns) if "timestamp" not in t.model_fields_set]
        if self.started_at is not None and undated and self.started_at + undated[-1] > MAX_TIMESTAMP_MS:
            raise ValueError(self.cross_field_rules[0])
        if self.started_at is not None and not all(
            local_time_in_range(self.started_at + i, self.turns[i].utc_offset) for i in undated
        ):
            raise ValueError(self.cross_field_rules[1])
        return self

    @model_validator(mode="before")
    @classmethod
    def _offset_of_started_at(cls, data: Any) -> Any:
        """A turn sent without a time is dated ``started_at``, and said where its offset names."""
        data = snake_case_keys(cls, data)
        if isinstance(data, dict) and isinstance(data.get("turns"), list) and data.get("started_at") is not None:
            turns = [with_utc_offset(snake_case_keys(Turn, t), data["started_at"]) for t in data["turns"]]
            data = {**data, "turns": turns}
        return data

    def dated_turns(self) -> list[Turn]:
        """The turns named by ``speakers`` and, when sent without a time, dated ``started_at`` (+1 ms each)."""
        out: list[Turn] = []
        for i, turn in enumerate(self.turns):
            update: dict[str, Any] = {}
            if not turn.name and turn.role in self.speakers:
                update["name"] = self.speakers[Role(turn.role)]
            if "timestamp" not in turn.model_fields_set and self.started_at is not None:
                update["timestamp"] = self.started_at + i
            out.append(turn.model_copy(update=update) if update else turn)
        return out


class ConversationsIn(RequestModel):
    model_config = request_config({"sessions": [_SESSION_EXAMPLE]})
    sessions: list[ConversationSession] = Field(min_length=1, max_length=MAX_CONVERSATION_SESSIONS)
    #: its own rule, then each session's (listed in the operation's description)
    cross_field_rules = ("session ids must be unique within a request", *ConversationSession.cross_field_rules)

    @model_validator(mode="after")
    def _unique_ids(self) -> ConversationsIn:
        ids = [s.id for s in self.sessions]
        if len(set(ids)) != len(ids):
            raise ValueError(self.cross_field_rules[0])
        return self
