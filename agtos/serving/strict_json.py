"""Requests are read strictly: a JSON object that names a key twice, a scalar query parameter sent
twice, a body that is not UTF-8 or a declared charset other than UTF-8 are refused, never guessed at.

Python's ``json.loads`` (Starlette's ``Request.json``) keeps the last of duplicate keys, so
``{"content": "a", "content": "b"}`` was read as ``"b"``, silently; parsers differ on which one
wins (some keep the first), so a proxy and this API could each act on a different value. Every
API route (:class:`StrictJSONRoute`) reads its body through :class:`StrictJSONRequest`, whose
decoding refuses a repeated key with a :class:`DuplicateKey` error naming it; FastAPI turns that
``JSONDecodeError`` into its ``json_invalid`` validation error, answered as the 422
``invalid request: body: duplicate key 'content'…`` (:mod:`agtos.serving.errors`). The two
spellings of one field (``session_id`` and ``sessionId``) are different keys here and are refused
by the request models (also a 422). The same holds for the query: ``?limit=1&limit=50`` took the
last value; a scalar query parameter given more than once is a 422 naming it (``query.limit``), and
so is a declared header (two ``Idempotency-Key`` values: the first was used; ``X-User-Id`` has its 400).

Charset: a JSON body is UTF-8 (RFC 8259 section 8.1: JSON exchanged between systems "MUST be
encoded using UTF-8"). ``json.loads`` also guesses UTF-16 and UTF-32 from the NUL bytes, so such a
body was accepted while a Latin-1 one was refused; now any body that is not UTF-8 is a 422 (``body: not
UTF-8 …``) and a ``Content-Type`` declaring another ``charset`` is a 415. A leading UTF-8 byte order
mark is ignored (section 8.1: parsers "MAY ignore the presence of a byte order mark").
"""

from __future__ import annotations

import codecs
import functools
import json
from collections.abc import Callable, Coroutine, Iterator
from email.message import Message
from typing import Any

from fastapi import Depends, HTTPException, Request, Response
from fastapi.dependencies.models import Dependant
from fastapi.exceptions import RequestValidationError
from fastapi.routing import APIRoute

DUPLICATE_KEY = "duplicate key"
NOT_UTF8 = "not UTF-8"
UTF8_RULE = "JSON bodies must be UTF-8 (RFC 8259 section 8.1)"
REPEATED_PARAMETER = "repeated_parameter"  # the validation error type of a scalar parameter sent twice


class DuplicateKey(json.JSONDecodeError):
    """A JSON object names ``key`` twice."""

    def __init__(self, key: str, doc: str) -> None:
        super().__init__(f"{DUPLICATE_KEY} {key!r}: each key may appear once in an object", doc, 0)
        self.key = key


class NotUTF8(json.JSONDecodeError):
    """A body that is not UTF-8 (UTF-16/32, Latin-1…)."""

    def __init__(self, what: str, doc: str) -> None:
        super().__init__(f"{NOT_UTF8} ({what}): {UTF8_RULE}", doc, 0)


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


def utf8_text(body: bytes) -> str:
    """``body`` decoded as UTF-8, a leading byte order mark dropped; :class:`NotUTF8` otherwise."""
    encoding = json.detect_encoding(body)  # what json.loads would guess from the NUL bytes
    if encoding not in ("utf-8", "utf-8-sig"):
        raise NotUTF8(f"looks like {encoding.upper()}", body.decode("latin-1"))
    try:
        return body.removeprefix(codecs.BOM_UTF8).decode("utf-8")
    except UnicodeDecodeError as exc:
        raise NotUTF8(f"invalid byte at {exc.start}", body.decode("latin-1")) from None


def loads_strict(body: bytes | str) -> Any:
    """``json.loads`` of UTF-8 text, refusing an object that names a key twice (:class:`DuplicateKey`)."""
    text = utf8_text(body) if isinstance(body, bytes) else body
    try:
        return json.loads(text, object_pairs_hook=_object)
    except _Repeated as repeated:
        raise DuplicateKey(repeated.key, text) from None


def declared_charset(content_type: str | None) -> str | None:
    """The ``charset`` parameter of a ``Content-Type`` (lower case), or None. A short value is memoised: a
    client sends the same few, and parsing one with :class:`email.message.Message` took ~10 µs of the event
    loop per request (a long one is parsed each time: the memo holds at most 256 values of 128 characters)."""
    if not content_type:
        return None
    return _charset(content_type) if len(content_type) <= 128 else _charset.__wrapped__(content_type)


@functools.lru_cache(maxsize=256)
def _charset(content_type: str) -> str | None:
    message = Message()
    message["content-type"] = content_type
    charset = message.get_param("charset")
    return charset.strip().lower() if isinstance(charset, str) else None


class StrictJSONRequest(Request):
    """A request whose JSON body is decoded by :func:`loads_strict`, refused (415) when it declares
    a charset other than UTF-8."""

    async def json(self) -> Any:
        if not hasattr(self, "_json"):
            charset = declared_charset(self.headers.get("content-type"))
            if charset not in (None, "utf-8", "utf8"):
                raise HTTPException(415, f"charset {charset!r} is not accepted: {UTF8_RULE}")
            self._json = loads_strict(await self.body())
        return self._json


def _dependants(dependant: Dependant) -> Iterator[Dependant]:
    yield dependant
    for sub in dependant.dependencies:
        yield from _dependants(sub)


def param_names(dependant: Dependant) -> dict[str, frozenset[str]]:
    """The query parameters and declared headers a route reads, by place (all scalars in this API)."""
    ds = list(_dependants(dependant))
    return {
        "query": frozenset(p.alias for d in ds for p in d.query_params),
        "header": frozenset(p.alias for d in ds for p in d.header_params),
    }


def refuse_repeated(request: Request, names: dict[str, frozenset[str]]) -> None:
    """A 422 naming each query parameter or declared header of ``names`` given more than once."""
    errors = []
    for place, listed in names.items():
        given = request.query_params if place == "query" else request.headers
        what = "query parameter" if place == "query" else "header"
        for name in sorted(listed):
            values = given.getlist(name)
            if len(values) > 1:
                message = f"given {len(values)} times: each {what} may appear once"
                errors.append({"type": REPEATED_PARAMETER, "loc": (place, name), "msg": message, "input": values})
    if errors:
        raise RequestValidationError(errors)


RULES_HEADING = "Rules the JSON Schema cannot state (each a 422 with this message):"


def with_rules(description: str, dependant: Dependant) -> str:
    """``description`` followed by the ``cross_field_rules`` of the request body models, once."""
    rules = [
        rule
        for d in _dependants(dependant)
        for param in d.body_params
        for rule in getattr(param.field_info.annotation, "cross_field_rules", ())
    ]
    if not rules or RULES_HEADING in description:
        return description
    return "\n\n".join([description, RULES_HEADING, *(f"- {rule}" for rule in rules)]).strip()


class StrictJSONRoute(APIRoute):
    """An API route that reads its JSON body with :class:`StrictJSONRequest` and each query parameter
    once, after its other checks (FastAPI's custom request and route class; every router of the API is made with
    ``route_class=StrictJSONRoute``); its OpenAPI description lists its body's cross-field rules."""

    def __init__(self, path: str, endpoint: Callable[..., Any], **kwargs: Any) -> None:
        once = ParamsOnce()  # after the router's dependencies (the key: 401 first), as a bad value would be
        given = [d for d in kwargs.pop("dependencies", None) or () if not isinstance(d.dependency, ParamsOnce)]
        super().__init__(path, endpoint, dependencies=[*given, Depends(once)], **kwargs)
        once.names = param_names(self.dependant)
        self.description = with_rules(self.description, self.dependant)

    def get_route_handler(self) -> Callable[[Request], Coroutine[Any, Any, Response]]:
        handler = super().get_route_handler()

        async def strict(request: Request) -> Response:
            return await handler(StrictJSONRequest(request.scope, request.receive))

        return strict


class ParamsOnce:
    """A route's dependency that refuses each of its query parameters and declared headers given more than once."""

    def __init__(self) -> None:
        self.names: dict[str, frozenset[str]] = {}

    async def __call__(self, request: Request) -> None:  # async: a sync one would take a thread of AnyIO's pool
        refuse_repeated(request, self.names)
