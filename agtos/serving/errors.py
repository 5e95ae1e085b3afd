"""Every error is a JSON body with a ``message``; no tracebacks ever reach a client."""

from __future__ import annotations

import logging
from typing import Any

from fastapi import FastAPI, Request
from fastapi.exceptions import RequestValidationError
from fastapi.responses import JSONResponse
from pydantic import ValidationError
from starlette.exceptions import HTTPException as StarletteHTTPException
from starlette.routing import Match
from starlette.staticfiles import StaticFiles

from agtos.memory.privacy_controls import NotFoundError, OptedOutError
from agtos.schemas.api import ErrorOut, ValidationErrorOut
from agtos.schemas.identifiers import ID_RULES
from agtos.serving.lock_waits import REQUEST_LOCK_WAIT_S
from agtos.serving.strict_json import DUPLICATE_KEY, NOT_UTF8
from agtos.storage.keys import InvalidIdentifier
from agtos.storage.redis_conn import StorageUnavailable
from agtos.storage.session_journal import IdempotencyConflict, JournalFull
from agtos.storage.user_lock import LockBusy

log = logging.getLogger(__name__)

FASTAPI_BODY_PARSE_ERROR = "There was an error parsing the body"  # its 400 for a body json.loads cannot decode
UNDECODABLE = "undecodable: invalid UTF-8 or nested too deeply"
HTTP_METHODS = ("GET", "HEAD", "POST", "PUT", "PATCH", "DELETE")  # the ones a route here may serve
CORS_OFF = "OPTIONS is served only as the CORS preflight of an origin listed in AGTOS_CORS_ORIGINS (none by default)"

ERROR_DESCRIPTIONS = {
    400: "Invalid, duplicate or placeholder ('null', 'undefined') X-User-Id, a duplicate Authorization header, an "
    "invalid record id, a service key without X-User-Id, or a Host not in "
    "AGTOS_ALLOWED_HOSTS",
    401: "Auth is on and the API key is missing, invalid or revoked (WWW-Authenticate: Bearer)",
    403: "Not allowed: the user opted out of persistence, a user key names another user, a cross-site write, "
    "or an operation that needs a service key",
    404: "No such record for this user",
    409: "Conflicts with the current state",
    413: "Request body too large, or a session journal cap reached (turns or bytes per session, live sessions "
    "or journalled turns per user): nothing was written",
    415: "A state-changing request whose body is not JSON, or a JSON body declaring a charset other than UTF-8",
    422: "Invalid request: a field, a query parameter or header given twice, a malformed or non-UTF-8 JSON body, or "
    "a JSON object that names a key twice",
    429: "Rate limit of this API key exceeded (Retry-After says when to retry)",
    500: "Internal error",
    503: "Memory storage (Redis) is unavailable, or (a write) another writer of this user's records kept their lock "
    f"for the whole wait of {REQUEST_LOCK_WAIT_S:g} s and nothing was written (Retry-After says when to retry)",
}
STORAGE_RETRY_AFTER_S = 2  # a 503's Retry-After while Redis is down: a restart or failover takes seconds
RETRY_AFTER = {
    "Retry-After": {
        "description": "Whole seconds to wait before retrying",
        "required": True,
        "schema": {"type": "integer", "minimum": 1},
    }
}
#: the headers an error status is always sent with (every route that can answer the status documents them)
ERROR_HEADERS: dict[int, dict[str, Any]] = {
    401: {
        "WWW-Authenticate": {
            "description": "The scheme to send a key with",
            "required": True,
            "schema": {"type": "string", "enum": ["Bearer"]},
        }
    },
    429: RETRY_AFTER,
    503: RETRY_AFTER,
}


def errors(*codes: int) -> dict[int | str, dict[str, Any]]:
    """OpenAPI ``responses`` for error statuses: each a JSON body with a ``message``, and its headers."""
    return {
        code: {
            "model": ValidationErrorOut if code == 422 else ErrorOut,
            "description": ERROR_DESCRIPTIONS[code],
            **({"headers": ERROR_HEADERS[code]} if code in ERROR_HEADERS else {}),
        }
        for code in codes
    }


def error_response(code: int) -> dict[str, Any]:
    """The OpenAPI response object of an error status added to the document after FastAPI built it."""
    ref = {"$ref": "#/components/schemas/ErrorOut"}
    response = {"description": ERROR_DESCRIPTIONS[code], "content": {"application/json": {"schema": ref}}}
    return response | ({"headers": ERROR_HEADERS[code]} if code in ERROR_HEADERS else {})


USER_ERRORS = errors(400, 422, 500, 503)  # routes with X-User-Id (FastAPI would add its own 422 otherwise)


#: the body as a whole is not an object, as FastAPI says of a body it did not read as JSON
_NOT_AN_OBJECT = frozenset({"model_attributes_type", "dict_type", "model_type"})
_MISMATCH = "string_pattern_mismatch"  # an id against its pattern: said in words (identifiers.ID_RULES)
NOT_JSON_HINT = "the body is read as JSON only with Content-Type: application/json"


def _field_errors(errors: list[dict], json_sent: bool = True) -> list[dict]:
    out = []
    for err in errors:
        if not json_sent and tuple(err.get("loc", ())) == ("body",) and err.get("type") in _NOT_AN_OBJECT:
            out.append({"field": "body", "message": NOT_JSON_HINT})  # not FastAPI's "a valid dictionary"
            continue
        if err.get("type") == "json_invalid":
            detail = str((err.get("ctx") or {}).get("error", ""))
            if detail.startswith((DUPLICATE_KEY, NOT_UTF8)):  # {"a": 1, "a": 2}, UTF-16 or Latin-1 (strict_json)
                out.append({"field": "body", "message": detail})
            else:
                out.append({"field": "body", "message": f"malformed JSON ({err.get('msg', 'decode error')})"})
            continue
        # the body as a whole (missing, or not an object) is the field "body", as the JSON errors above
        field = ".".join(str(p) for p in err.get("loc", ()) if p != "body") or "body"
        rule = ID_RULES.get(str((err.get("ctx") or {}).get("pattern", ""))) if err.get("type") == _MISMATCH else None
        out.append({"field": field, "message": f"must be {rule}" if rule else err.get("msg", "")})
    return out


def _validation_response(errors: list[dict], json_sent: bool = True) -> JSONResponse:
    fields = _field_errors(errors, json_sent)
    summary = "; ".join(f"{f['field']}: {f['message']}" for f in fields[:5])
    return JSONResponse(status_code=422, content={"message": f"invalid request: {summary}", "errors": fields})


def install_error_handlers(app: FastAPI) -> None:
    @app.exception_handler(RequestValidationError)
    async def _request_invalid(request: Request, exc: RequestValidationError) -> JSONResponse:
        media = request.headers.get("content-type", "").split(";", 1)[0].strip().lower()
        return _validation_response(list(exc.errors()), media == "application/json" or media.endswith("+json"))

    @app.exception_handler(ValidationError)
    async def _model_invalid(_: Request, exc: ValidationError) -> JSONResponse:
        # request input fails as RequestValidationError (422) before a route runs; a bare
        # ValidationError here means stored data did not match its schema: a server fault
        log.error("stored record failed validation: %s", exc)
        return JSONResponse(
            status_code=500, content={"message": f"stored {exc.title} record is invalid; see the server log"}
        )

    @app.exception_handler(InvalidIdentifier)
    async def _bad_id(_: Request, exc: InvalidIdentifier) -> JSONResponse:
        return JSONResponse(status_code=400, content={"message": str(exc)})

    @app.exception_handler(OptedOutError)
    async def _opted_out(_: Request, exc: OptedOutError) -> JSONResponse:
        return JSONResponse(status_code=403, content={"message": str(exc)})

    @app.exception_handler(NotFoundError)
    async def _not_found(_: Request, exc: NotFoundError) -> JSONResponse:
        return JSONResponse(status_code=404, content={"message": str(exc)})

    @app.exception_handler(StorageUnavailable)
    async def _storage_down(_: Request, exc: StorageUnavailable) -> JSONResponse:
        log.warning("503: %s", exc)  # the connection error (host, port, socket path) stays in the server log
        return JSONResponse(
            status_code=503,
            content={"message": "memory storage (Redis) is unavailable; try again later"},
            headers={"Retry-After": str(STORAGE_RETRY_AFTER_S)},
        )

    @app.exception_handler(LockBusy)
    async def _lock_busy(_: Request, exc: LockBusy) -> JSONResponse:
        return JSONResponse(
            status_code=503, content={"message": str(exc)}, headers={"Retry-After": str(exc.retry_after_s)}
        )

    @app.exception_handler(IdempotencyConflict)
    async def _idempotency_conflict(_: Request, exc: IdempotencyConflict) -> JSONResponse:
        return _validation_response([{"loc": ("header", "Idempotency-Key"), "msg": str(exc)}])

    @app.exception_handler(JournalFull)
    async def _journal_full(_: Request, exc: JournalFull) -> JSONResponse:
        return JSONResponse(status_code=413, content={"message": str(exc)})

    @app.exception_handler(StarletteHTTPException)
    async def _http(request: Request, exc: StarletteHTTPException) -> JSONResponse:
        if exc.status_code == 400 and exc.detail == FASTAPI_BODY_PARSE_ERROR:  # not UTF-8, nested too deep
            return _validation_response([{"type": "json_invalid", "msg": UNDECODABLE}])
        message = exc.detail if isinstance(exc.detail, str) else "request failed"
        if exc.status_code == 405 and request.method == "OPTIONS":  # not a preflight that CORS answered
            message = CORS_OFF
        headers = exc.headers
        if exc.status_code == 405:  # Starlette names the first route of the path only (GET of GET/PUT/DELETE)
            headers = {**(headers or {}), "Allow": allowed_methods(request)}
        return JSONResponse(status_code=exc.status_code, content={"message": message}, headers=headers)

    @app.exception_handler(Exception)
    async def _unexpected(_: Request, exc: Exception) -> JSONResponse:
        log.exception("unhandled error")
        return JSONResponse(status_code=500, content={"message": f"internal error: {type(exc).__name__}"})


def allowed_methods(request: Request) -> str:
    """A 405's ``Allow`` header: every method some route serves at the request's path (RFC 9110 15.5.6);
    a mounted static directory's (the Knowledge page: its scope is the mount's, which no route matches)
    GET and HEAD, as Starlette's ``StaticFiles`` serves."""
    if isinstance(request.scope.get("endpoint"), StaticFiles):
        return "GET, HEAD"
    routes = request.app.router.routes
    served = [
        m for m in HTTP_METHODS if any(r.matches({**request.scope, "method": m})[0] is Match.FULL for r in routes)
    ]
    if "GET" in served and "HEAD" not in served:  # answered as its GET (serving.head_requests)
        served.insert(served.index("GET") + 1, "HEAD")
    return ", ".join(served)
