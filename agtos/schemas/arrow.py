"""pyarrow schemas derived from the pydantic records, so the two can never drift."""

from __future__ import annotations

import types
import typing
from enum import Enum
from typing import Any

import pyarrow as pa
from pydantic import BaseModel

from agtos.schemas import records


def _arrow_type(name: str, annotation: Any) -> pa.DataType:
    origin = typing.get_origin(annotation)
    if origin in (typing.Union, types.UnionType):
        inner = [a for a in typing.get_args(annotation) if a is not type(None)]
        return _arrow_type(name, inner[0])
    if origin is list:
        (item,) = typing.get_args(annotation)
        return pa.list_(_arrow_type(name, item))
    if origin is dict or annotation is dict:
        return pa.string()  # nested documents travel as JSON text
    if isinstance(annotation, type) and issubclass(annotation, Enum):
        return pa.string()
    if isinstance(annotation, type) and issubclass(annotation, BaseModel):
        return pa.string()  # a nested record travels as JSON text, like dict fields
    if annotation is bool:
        return pa.bool_()
    if annotation is int:
        return pa.int64()
    if annotation is float:
        return pa.float64()
    if annotation is str:
        return pa.string()
    raise TypeError(f"no arrow type for field {name!r}: {annotation!r}")


def arrow_schema(model: type[BaseModel]) -> pa.Schema:
    """The pyarrow schema of a record model, field for field."""
    fields = []
    for name, info in model.model_fields.items():
        nullable = not info.is_required() or typing.get_origin(info.annotation) in (
            typing.Union,
            types.UnionType,
        )
        fields.append(pa.field(name, _arrow_type(name, info.annotation), nullable=nullable))
    return pa.schema(fields, metadata={"record": model.__name__})


EPISODE_SCHEMA = arrow_schema(records.Episode)
TURN_SCHEMA = arrow_schema(records.Turn)
STORED_TURN_SCHEMA = arrow_schema(records.StoredTurn)
MEMORY_SCHEMA = arrow_schema(records.Memory)
CONCLUSION_SCHEMA = arrow_schema(records.Conclusion)
ENTITY_SCHEMA = arrow_schema(records.Entity)
RELATIONSHIP_SCHEMA = arrow_schema(records.Relationship)
PROFILE_SCHEMA = arrow_schema(records.UserProfile)
REPORT_SCHEMA = arrow_schema(records.MaintenanceReport)

ALL_SCHEMAS: dict[str, pa.Schema] = {
    "episode": EPISODE_SCHEMA,
    "turn": TURN_SCHEMA,
    "stored_turn": STORED_TURN_SCHEMA,
    "memory": MEMORY_SCHEMA,
    "conclusion": CONCLUSION_SCHEMA,
    "entity": ENTITY_SCHEMA,
    "relationship": RELATIONSHIP_SCHEMA,
    "profile": PROFILE_SCHEMA,
    "report": REPORT_SCHEMA,
}


def to_table(rows: list[BaseModel], schema: pa.Schema) -> pa.Table:
    """Records to an arrow table that conforms to ``schema`` (dict fields as JSON)."""
    import json

    dict_fields = {f.name for f in schema if pa.types.is_string(f.type)}
    item_fields = {f.name for f in schema if pa.types.is_list(f.type) and pa.types.is_string(f.type.value_type)}
    data = []
    for row in rows:
        item = row.model_dump(mode="json")
        for key in dict_fields & item.keys():
            if isinstance(item[key], dict | list):
                item[key] = json.dumps(item[key])
        for key in item_fields & item.keys():  # list[dict] fields: one JSON text per item
            if isinstance(item[key], list):
                item[key] = [json.dumps(v) if isinstance(v, dict | list) else v for v in item[key]]
        data.append(item)
    return pa.Table.from_pylist(data, schema=schema)


__all__ = ["ALL_SCHEMAS", "arrow_schema", "to_table"]
