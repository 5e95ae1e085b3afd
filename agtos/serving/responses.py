"""Responses written by the route itself, for the hot read and append paths.

A sync route's return value is validated against its ``response_model`` again by FastAPI on a
worker thread (a second thread hand-off per request, after the one that ran the route), then
dumped. A route that already built its response model can return :func:`json_model` instead: the
same JSON (camelCase aliases, compact), one thread hand-off. ``response_model`` stays declared on
the route for the OpenAPI document.
"""

from __future__ import annotations

from fastapi import Response
from pydantic import BaseModel


def json_model(model: BaseModel, status_code: int = 200) -> Response:
    """``model`` as FastAPI would write it as the route's response model."""
    return Response(model.model_dump_json(by_alias=True), status_code=status_code, media_type="application/json")
