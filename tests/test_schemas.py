"""The pydantic records and the pyarrow schemas of the Parquet export (the documented contract).

Expected field names, arrow types and nullability are written out here, not derived from the
models, so a field renamed, dropped, re-typed or re-ordered on either side fails a test.
"""

from __future__ import annotations

import json

import pyarrow as pa
import pytest
from pydantic import BaseModel, ValidationError

from agtos.schemas import Conclusion, Episode, Memory, ResolvedDate, StoredTurn, Turn, UserProfile
from agtos.schemas.arrow import ALL_SCHEMAS, arrow_schema, to_table
from agtos.schemas.records import Entity, MaintenanceReport, Relationship

S, I64, F64, BOOL, STRS = pa.string(), pa.int64(), pa.float64(), pa.bool_(), pa.list_(pa.string())
REQUIRED, OPTIONAL = False, True  # arrow nullability: required model fields are not nullable

CONTRACT: dict[str, tuple[str, list[tuple[str, pa.DataType, bool]]]] = {
    "episode": (
        "Episode",
        [
            ("id", S, OPTIONAL),
            ("user_id", S, REQUIRED),
            ("session_id", S, OPTIONAL),
            ("summary", S, REQUIRED),
            ("keywords", STRS, OPTIONAL),
            ("topic", S, OPTIONAL),
            ("timestamp", I64, OPTIONAL),
            ("importance", F64, OPTIONAL),
            ("type", S, OPTIONAL),
            ("facts", STRS, OPTIONAL),
            ("entities", STRS, OPTIONAL),
            ("utc_offset", I64, OPTIONAL),  # minutes east of UTC where its last turn was said
        ],
    ),
    "turn": (
        "Turn",
        [
            ("role", S, REQUIRED),
            ("content", S, REQUIRED),
            ("timestamp", I64, OPTIONAL),
            ("name", S, OPTIONAL),
            ("is_summary", BOOL, OPTIONAL),
            ("utc_offset", I64, OPTIONAL),  # minutes east of UTC where it was said
        ],
    ),
    "stored_turn": (
        "StoredTurn",
        [
            ("user_id", S, REQUIRED),
            ("episode_id", S, REQUIRED),
            ("session_id", S, OPTIONAL),
            ("position", I64, REQUIRED),
            ("role", S, REQUIRED),
            ("name", S, OPTIONAL),
            ("content", S, REQUIRED),
            ("timestamp", I64, REQUIRED),
            ("dates", STRS, OPTIONAL),  # a list of ResolvedDate, one JSON text each
            ("utc_offset", I64, OPTIONAL),
        ],
    ),
    "memory": (
        "Memory",
        [
            ("id", S, OPTIONAL),
            ("user_id", S, REQUIRED),
            ("text", S, REQUIRED),
            ("kind", S, OPTIONAL),
            ("source_episode_ids", STRS, OPTIONAL),
            ("created_at", I64, OPTIONAL),
            ("importance", F64, OPTIONAL),
            ("valid_from", I64, OPTIONAL),  # issue 16: facts that change over time
            ("valid_until", I64, OPTIONAL),
            ("superseded_by", S, OPTIONAL),
            ("utc_offset", I64, OPTIONAL),  # minutes east of UTC where its turn was said
            ("until_utc_offset", I64, OPTIONAL),  # where the fact that ended it was said
        ],
    ),
    "conclusion": (
        "Conclusion",
        [
            ("id", S, OPTIONAL),
            ("user_id", S, REQUIRED),
            ("text", S, REQUIRED),
            ("type", S, REQUIRED),
            ("confidence", F64, REQUIRED),
            ("source_episode_ids", STRS, OPTIONAL),
            ("source_turn_ids", STRS, OPTIONAL),
            ("category", S, OPTIONAL),
            ("created_at", I64, OPTIONAL),
            ("updated_at", I64, OPTIONAL),
            ("stale", BOOL, OPTIONAL),
        ],
    ),
    "entity": (
        "Entity",
        [
            ("id", S, OPTIONAL),
            ("user_id", S, REQUIRED),
            ("name", S, REQUIRED),
            ("type", S, REQUIRED),
            ("aliases", STRS, OPTIONAL),
            ("confidence", F64, OPTIONAL),
            ("first_seen", I64, OPTIONAL),
            ("last_seen", I64, OPTIONAL),
            ("episode_ids", STRS, OPTIONAL),
            ("deleted", BOOL, OPTIONAL),
        ],
    ),
    "relationship": (
        "Relationship",
        [
            ("id", S, OPTIONAL),
            ("user_id", S, REQUIRED),
            ("source_id", S, REQUIRED),
            ("target_id", S, REQUIRED),
            ("type", S, REQUIRED),
            ("confidence", F64, OPTIONAL),
            ("source_episode_ids", STRS, OPTIONAL),
            ("valid_from", I64, OPTIONAL),  # issue 16: edges that change over time
            ("valid_until", I64, OPTIONAL),
            ("superseded_by", S, OPTIONAL),
        ],
    ),
    "profile": (
        "UserProfile",
        [
            ("user_id", S, OPTIONAL),
            ("name", S, OPTIONAL),
            ("communication_style", S, OPTIONAL),
            ("preferences", STRS, OPTIONAL),
            ("patterns", STRS, OPTIONAL),
            ("facts", STRS, OPTIONAL),
            ("sources", S, OPTIONAL),  # line -> evidence ids, as JSON text
            ("opt_out", BOOL, OPTIONAL),
            ("updated_at", I64, OPTIONAL),
        ],
    ),
    "report": (
        "MaintenanceReport",
        [
            ("timestamp", I64, OPTIONAL),
            ("user_id", S, REQUIRED),
            ("summary", S, OPTIONAL),  # a dict, exported as JSON text
            ("steps", STRS, OPTIONAL),  # a list of dicts, one JSON text each
        ],
    ),
}

T = 1_700_000_000_123
SAMPLES: dict[str, BaseModel] = {
    "episode": Episode(
        id="ep-1",
        user_id="u",
        session_id="s-1",
        summary="User likes tea",
        keywords=["tea", "green tea"],
        topic="food",
        timestamp=T,
        importance=0.7,
        type="preference",
        facts=["likes tea"],
        entities=["ent-tea"],
    ),
    "turn": Turn(role="tool", content="42 °C", timestamp=T, name="thermometer", is_summary=True),
    "stored_turn": StoredTurn(
        user_id="u", episode_id="ep-1", session_id="s-1", position=3, role="user", content="Hi", timestamp=T
    ),
    "memory": Memory(
        id="mem-1",
        user_id="u",
        text="Prefers metric units",
        kind="preference",
        source_episode_ids=["ep-1", "ep-2"],
        created_at=T,
        importance=0.9,
    ),
    "conclusion": Conclusion(
        id="con-1",
        user_id="u",
        text="User is vegetarian",
        type="deductive",
        confidence=0.35,
        source_episode_ids=["ep-1"],
        created_at=T,
        updated_at=T + 1,
        stale=True,
    ),
    "entity": Entity(
        id="ent-1",
        user_id="u",
        name="Ada Lovelace",
        type="person",
        aliases=["Ada"],
        confidence=0.8,
        first_seen=T,
        last_seen=T + 5,
        episode_ids=["ep-1"],
        deleted=True,
    ),
    "relationship": Relationship(
        id="rel-1",
        user_id="u",
        source_id="ent-1",
        target_id="ent-2",
        type="works-at",
        confidence=0.6,
        source_episode_ids=["ep-1"],
    ),
    "profile": UserProfile(
        user_id="u",
        name=None,
        communication_style="concise",
        preferences=["tea"],
        patterns=[],
        facts=["lives in Lyon"],
        opt_out=True,
        updated_at=T,
    ),
}


@pytest.mark.parametrize("kind", sorted(CONTRACT))
def test_arrow_schema_is_the_documented_contract(kind: str) -> None:
    record, fields = CONTRACT[kind]
    schema = ALL_SCHEMAS[kind]
    assert [(f.name, f.type, f.nullable) for f in schema] == fields
    assert schema.metadata == {b"record": record.encode()}


def test_every_record_kind_is_exported() -> None:
    assert sorted(ALL_SCHEMAS) == sorted(CONTRACT)


@pytest.mark.parametrize("kind", sorted(SAMPLES))
def test_records_round_trip_through_arrow(kind: str) -> None:
    """Every field, enums and None included, survives record -> arrow table -> record."""
    record = SAMPLES[kind]
    table = to_table([record], ALL_SCHEMAS[kind])
    assert table.schema.equals(ALL_SCHEMAS[kind], check_metadata=True) and table.num_rows == 1
    row = table.to_pylist()[0]
    assert type(record).model_validate(row) == record
    assert all(not isinstance(v, dict) for v in row.values())


def test_report_dicts_are_exported_as_json_text() -> None:
    summary = {"status": "completed", "merge": 2, "contradictionPipeline": {"nli": "disabled"}}
    steps = [{"step": "stale", "count": 1, "ids": ["c-1"]}, {"step": "prune", "count": 0, "ids": []}]
    report = MaintenanceReport(timestamp=T, user_id="u", summary=summary, steps=steps)
    row = to_table([report], ALL_SCHEMAS["report"]).to_pylist()[0]
    assert row["timestamp"] == T and row["user_id"] == "u"
    assert isinstance(row["summary"], str) and json.loads(row["summary"]) == summary
    assert all(isinstance(s, str) for s in row["steps"]) and [json.loads(s) for s in row["steps"]] == steps


def test_resolved_dates_of_a_turn_are_exported_as_json_text() -> None:
    dates = [ResolvedDate(text="yesterday", start=29, date="2023-05-07", period="day")]
    turn = StoredTurn(
        user_id="u",
        episode_id="ep-1",
        position=0,
        role="user",
        name="Caroline",
        content="I went to the support group yesterday",
        timestamp=T,
        dates=dates,
    )
    row = to_table([turn], ALL_SCHEMAS["stored_turn"]).to_pylist()[0]
    assert row["name"] == "Caroline" and row["position"] == 0
    assert [json.loads(d) for d in row["dates"]] == [
        {"text": "yesterday", "start": 29, "date": "2023-05-07", "period": "day"}
    ]


def test_a_field_type_without_an_arrow_mapping_is_an_error() -> None:
    class Odd(BaseModel):
        tags: set[int]

    with pytest.raises(TypeError, match="tags"):
        arrow_schema(Odd)


def test_optional_fields_are_nullable_and_unwrap_to_their_type() -> None:
    class Probe(BaseModel):
        count: int | None = None
        ratio: float = 0.5
        label: str

    schema = arrow_schema(Probe)
    assert [(f.name, f.type, f.nullable) for f in schema] == [
        ("count", I64, True),
        ("ratio", F64, True),
        ("label", S, False),
    ]
    table = pa.Table.from_pylist([{"count": None, "ratio": 0.25, "label": "x"}], schema=schema)
    assert table.column("count").null_count == 1


@pytest.mark.parametrize(
    "bad",
    [
        {"user_id": "u", "summary": "x", "importance": 1.5},
        {"user_id": "u", "summary": "x", "importance": -0.1},
        {"user_id": "u", "summary": "x", "type": "gossip"},
        {"user_id": "u", "summary": ""},
        {"user_id": "u", "summary": "x", "surprise": 1},
        {"user_id": "u", "summary": "x", "timestamp": 253_402_300_800_000},  # after 9999-12-31
    ],
)
def test_episode_validation_rejects(bad: dict) -> None:
    with pytest.raises(ValidationError):
        Episode(**bad)


def test_episode_bounds_are_inclusive() -> None:
    assert Episode(user_id="u", summary="x", importance=0.0).importance == 0.0
    assert Episode(user_id="u", summary="x", importance=1.0).importance == 1.0
    assert Episode(user_id="u", summary="x", timestamp=253_402_300_799_999).timestamp == 253_402_300_799_999


def test_conclusion_types_and_confidence_bounds() -> None:
    for kind in ("explicit", "deductive", "inductive", "abductive"):
        assert Conclusion(user_id="u", text="t", type=kind, confidence=0.4).type == kind
    with pytest.raises(ValidationError):
        Conclusion(user_id="u", text="t", type="guess", confidence=0.4)
    with pytest.raises(ValidationError):
        Conclusion(user_id="u", text="t", type="explicit", confidence=1.2)
    with pytest.raises(ValidationError):
        Conclusion(user_id="u", text="t", type="explicit")  # confidence is required
