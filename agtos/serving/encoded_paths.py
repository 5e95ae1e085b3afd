"""An encoded slash (``%2F``) stays inside its path segment, so an id that holds one is refused as an id.

``POST /api/memory/sessions/a%2Fb/turns``: uvicorn (both its protocols) and Starlette's test client
decode the whole path before routing, so the id's ``/`` became a path separator and the request a
404 of a path no route has (``/sessions/a/b/turns``), unlike every other id the API refuses (a 422
naming the parameter and the id rules). :class:`EncodedSlashMiddleware` routes on the path decoded
everywhere except at an encoded slash, which stays ``%2F`` in its segment: the route matches and the
id (``a%2Fb``) fails the record-id pattern like ``a:b`` does, a 422 from the usual validation.
"""

from __future__ import annotations

import re
from urllib.parse import unquote, urlsplit

from starlette.types import ASGIApp, Receive, Scope, Send

ENCODED_SLASH = re.compile("%2f", re.IGNORECASE)


def routed_path(raw_path: bytes) -> str | None:
    """The path to route ``raw_path`` by: percent-decoded except for each ``%2F``, kept as written
    (upper-cased); None when the target holds no encoded slash (the server's decoding stands). An
    absolute-form target (uvicorn's h11 leaves it whole in ``raw_path``) routes by its path."""
    target = raw_path.decode("latin-1")
    if not ENCODED_SLASH.search(target):
        return None
    if not target.startswith("/"):
        target = urlsplit(target).path or "/"
    return "%2F".join(unquote(piece) for piece in ENCODED_SLASH.split(target))


class EncodedSlashMiddleware:
    """Pure ASGI middleware: an encoded slash in the request path stays in its segment (see the module)."""

    def __init__(self, app: ASGIApp) -> None:
        self.app = app

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] == "http":
            path = routed_path(scope.get("raw_path") or b"")
            if path is not None:
                scope = {**scope, "path": path}
        await self.app(scope, receive, send)
