"""The pydantic records and pyarrow schemas are one contract."""

from __future__ import annotations

import pyarrow as pa
import pytest
from pydantic import ValidationError

from agtos.schemas import Conclusion, Episode, Turn, UserProfile
from agtos.schemas.arrow import ALL_SCHEMAS, EPISODE_SCHEMA, to_table


@pytest.mark.parametrize("name", sorted(ALL_SCHEMAS))
def test_every_arrow_schema_names_every_model_field(name: str) -> None:
    schema = ALL_SCHEMAS[name]
    models = {
        "episode": Episode,
        "turn": Turn,
        "conclusion": Conclusion,
        "profile": UserProfile,
    }
    if name in models:
        assert schema.names == list(models[name].model_fields)


def test_episode_rows_round_trip_through_arrow() -> None:
    episode = Episode(user_id="u", summary="User likes tea", keywords=["tea"], importance=0.7, type="preference")
    table = to_table([episode], EPISODE_SCHEMA)
    assert table.schema.equals(EPISODE_SCHEMA)
    row = table.to_pylist()[0]
    assert Episode.model_validate(row) == episode
    assert table.schema.field("keywords").type == pa.list_(pa.string())
    assert table.schema.field("timestamp").type == pa.int64()


@pytest.mark.parametrize(
    "bad",
    [
        {"user_id": "u", "summary": "x", "importance": 1.5},
        {"user_id": "u", "summary": "x", "importance": -0.1},
        {"user_id": "u", "summary": "x", "type": "gossip"},
        {"user_id": "u", "summary": ""},
        {"user_id": "u", "summary": "x", "surprise": 1},
    ],
)
def test_episode_validation_rejects(bad: dict) -> None:
    with pytest.raises(ValidationError):
        Episode(**bad)


def test_conclusion_types_and_confidence_bounds() -> None:
    assert Conclusion(user_id="u", text="t", type="inductive", confidence=0.4).type == "inductive"
    with pytest.raises(ValidationError):
        Conclusion(user_id="u", text="t", type="guess", confidence=0.4)
    with pytest.raises(ValidationError):
        Conclusion(user_id="u", text="t", type="explicit", confidence=1.2)
