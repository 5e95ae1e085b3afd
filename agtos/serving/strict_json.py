"""JSON request bodies are read strictly: an object that names a key twice is a 422.

Python's ``json.loads`` (Starlette's ``Request.json``) keeps the last of duplicate keys, so
``{"content": "a", "content": "b"}`` was read as ``"b"``, silently; parsers differ on which one
wins (some keep the first), so a proxy and this API could each act on a different value. Every
API route (:class:`StrictJSONRoute`) reads its body through :class:`StrictJSONRequest`, whose
decoding refuses a repeated key with a :class:`DuplicateKey` error naming it; FastAPI turns that
``JSONDecodeError`` into its ``json_invalid`` validation error, answered as the 422
``invalid request: body: duplicate key 'content'…`` (:mod:`agtos.serving.errors`). The two
spellings of one field (``session_id`` and ``sessionId``) are different keys here and are refused
by the request models (also a 422).
"""

from __future__ import annotations

import json
from collections.abc import Callable, Coroutine
from typing import Any

from fastapi import Request, Response
from fastapi.routing import APIRoute

DUPLICATE_KEY = "duplicate key"


class DuplicateKey(json.JSONDecodeError):
    """A JSON object names ``key`` twice."""

    def __init__(self, key: str, doc: str) -> None:
        super().__init__(f"{DUPLICATE_KEY} {key!r}: each key may appear once in an object", doc, 0)
        self.key = key


class _Repeated(Exception):
    def __init__(self, key: str) -> None:
        self.key = key


def _object(pairs: list[tuple[str, Any]]) -> dict[str, Any]:
    """An object's members as a dict; a key named twice raises (``object_pairs_hook``)."""
    out = dict(pairs)
    if len(out) < len(pairs):
        seen: set[str] = set()
        for key, _ in pairs:
            if key in seen:
                raise _Repeated(key)
            seen.add(key)
    return out


def loads_strict(body: bytes | str) -> Any:
    """``json.loads``, refusing an object that names a key twice (:class:`DuplicateKey`)."""
    try:
        return json.loads(body, object_pairs_hook=_object)
    except _Repeated as repeated:
        doc = body.decode("utf-8", "replace") if isinstance(body, bytes) else body
        raise DuplicateKey(repeated.key, doc) from None


class StrictJSONRequest(Request):
    """A request whose JSON body is decoded by :func:`loads_strict`."""

    async def json(self) -> Any:
        if not hasattr(self, "_json"):
            self._json = loads_strict(await self.body())
        return self._json


class StrictJSONRoute(APIRoute):
    """An API route that reads its JSON body with :class:`StrictJSONRequest` (FastAPI's custom
    request and route class; every router of the API is made with ``route_class=StrictJSONRoute``)."""

    def get_route_handler(self) -> Callable[[Request], Coroutine[Any, Any, Response]]:
        handler = super().get_route_handler()

        async def strict(request: Request) -> Response:
            return await handler(StrictJSONRequest(request.scope, request.receive))

        return strict
