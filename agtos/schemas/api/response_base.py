"""The base of the response models (camelCase on the wire) and the error bodies of every 4xx/5xx."""

from __future__ import annotations

from pydantic import BaseModel, ConfigDict, Field
from pydantic.alias_generators import to_camel


class ApiModel(BaseModel):
    """Base of the response models: camelCase on the wire, built from domain objects' attributes."""

    model_config = ConfigDict(alias_generator=to_camel, populate_by_name=True, from_attributes=True)


class ErrorOut(ApiModel):
    """Every 4xx/5xx: a human-readable ``message`` (never a connection string or a traceback)."""

    message: str
    detail: str | None = None


class FieldErrorOut(ApiModel):
    field: str = Field(
        description="dotted location of the bad input ('body' for the body as a whole: missing, not an object, "
        "not JSON, or a rule across its fields)"
    )
    message: str


class ValidationErrorOut(ApiModel):
    """422: the request did not match the schema (``errors`` per field) or an edit is impossible."""

    message: str
    errors: list[FieldErrorOut] = Field(default_factory=list)
