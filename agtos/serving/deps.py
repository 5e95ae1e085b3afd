"""Request dependencies: the coordinator of this app, the caller's key and the caller's user id.

They are ``async`` on purpose: they never block (the key check runs on the cheap reads' threads), and
FastAPI would otherwise run each sync dependency on a worker thread — a thread hop per dependency.
"""

from __future__ import annotations

from typing import Annotated, Any

from fastapi import Depends, HTTPException, Path, Request

from agtos.memory.coordinator import MemoryCoordinator
from agtos.schemas.identifiers import ID_MAX_LENGTH, RECORD_ID, USER_ID
from agtos.serving.auth import BEARER, Authenticator, Principal
from agtos.serving.offload import in_read_thread
from agtos.storage.keys import check_user_id

USER_HEADER = "X-User-Id"
PRINCIPAL_KEY = "agtos.principal"  # request scope: what get_principal found
#: what a client's unset variable turns into (JavaScript, JSON, Python): one bucket shared by every such bug
PLACEHOLDER_IDS = frozenset({"null", "undefined", "none", "nan"})


def id_path(description: str) -> Any:
    """A record id in the path: the pattern and length the storage keys accept, stated in the OpenAPI (else 422)."""
    return Path(pattern=RECORD_ID, max_length=ID_MAX_LENGTH, description=description)


def _any_case(word: str) -> str:
    return "".join(f"[{c.upper()}{c}]" if c.isalpha() else c for c in word)


#: ``X-User-Id`` as :func:`get_user_id` accepts it: a user id, and none of the placeholders in any case
USER_HEADER_PATTERN = f"^(?!(?:{'|'.join(_any_case(w) for w in sorted(PLACEHOLDER_IDS))})$){USER_ID.removeprefix('^')}"


async def get_coordinator(request: Request) -> MemoryCoordinator:
    return request.app.state.coordinator


async def get_principal(request: Request) -> Principal | None:
    """The API key this request proves (401 without a valid one, 429 past its rate); None while auth is off.

    Found once per request: the guarded routers' own dependency, which FastAPI solves before a
    route's parameters, keeps it in the request scope for ``get_user_id`` and ``require_service``
    (no second key check or rate-limit token, no dependency sub-tree solved again). The bearer
    scheme is read here, not as a sub-dependency (one fewer dependency per request); the OpenAPI
    document declares it on the guarded operations (``app.document_guards``)."""
    if PRINCIPAL_KEY in request.scope:
        cached: Principal | None = request.scope[PRINCIPAL_KEY]
        return cached
    if len(request.headers.getlist("authorization")) > 1:  # which one counts would depend on the reader
        raise HTTPException(status_code=400, detail="send Authorization once")
    authenticator: Authenticator = request.app.state.authenticator
    credentials = await BEARER(request)
    if credentials is None and authenticator.known_off():
        principal = None  # the hot path of an open (loopback) install: no thread hop, no Redis call
    else:
        token = credentials.credentials if credentials else None
        # on the cheap reads' pool: a key check never waits for a thread behind long sync routes
        principal = await in_read_thread(authenticator.authenticate, token)
    request.scope[PRINCIPAL_KEY] = principal
    return principal


USER_HEADER_DESCRIPTION = (
    "Whose memory this call reads or writes. A user key acts for its own user (a different value is a 403); a "
    "service key must name the user. Without auth: the configured default user when absent."
)


def user_header_parameter() -> dict[str, Any]:
    """``X-User-Id`` as the OpenAPI document declares it (optional string) on each operation that reads it
    through :func:`get_user_id` (``app.document_guards`` adds it, as FastAPI did for a ``Header`` parameter).
    A string only: FastAPI's ``anyOf`` with ``null`` let schemathesis send ``X-User-Id: null`` as valid, which
    the server refuses (a client's unset value); an absent header is ``required: false``."""
    schema = {"type": "string", "pattern": USER_HEADER_PATTERN, "maxLength": ID_MAX_LENGTH}
    return {
        "name": USER_HEADER,
        "in": "header",
        "required": False,
        "schema": {**schema, "description": USER_HEADER_DESCRIPTION, "title": USER_HEADER},
        "description": USER_HEADER_DESCRIPTION,
    }


async def get_user_id(request: Request) -> str:
    """The caller's user id from ``X-User-Id`` (validated, sent at most once), the user key's user, or the default.

    The header is read here, not declared as a FastAPI ``Header`` parameter: FastAPI inspects such a
    parameter's annotation on every request (~30 µs of the event loop's CPU per request, on every route
    that names the user); the OpenAPI document declares it as before (:func:`user_header_parameter`)."""
    sent = request.headers.getlist(USER_HEADER)
    if len(sent) > 1:
        raise HTTPException(status_code=400, detail=f"send {USER_HEADER} once")
    x_user_id = sent[0] if sent else None
    if x_user_id is not None and x_user_id.lower() in PLACEHOLDER_IDS:
        raise HTTPException(status_code=400, detail=f"{USER_HEADER} {x_user_id!r} is an unset client value, not a user")
    principal = await get_principal(request)
    if principal is None:
        coordinator: MemoryCoordinator = request.app.state.coordinator
        return check_user_id(x_user_id if x_user_id is not None else coordinator.settings.default_user)
    if principal.is_service:
        if x_user_id is None:
            raise HTTPException(status_code=400, detail=f"a service key must name the user in {USER_HEADER}")
        return check_user_id(x_user_id)
    own = principal.key.subject
    if x_user_id is not None and x_user_id != own:
        raise HTTPException(status_code=403, detail=f"this API key acts only for user {own!r}")
    return own


async def require_service(request: Request) -> Principal:
    """A service key (403 for a user key or while auth is off)."""
    principal = await get_principal(request)
    if principal is None or not principal.is_service:
        raise HTTPException(status_code=403, detail="this operation needs a service key (agtos keys create --service)")
    return principal


Coordinator = Annotated[MemoryCoordinator, Depends(get_coordinator)]
Caller = Annotated[Principal | None, Depends(get_principal)]
UserId = Annotated[str, Depends(get_user_id)]
ServiceKey = Annotated[Principal, Depends(require_service)]
