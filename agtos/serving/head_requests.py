"""``HEAD`` answered like ``GET`` without the body (RFC 9110 9.3.2), on every path that serves GET.

FastAPI's routes do not answer HEAD (Starlette's plain routes do): an uptime monitor's ``HEAD /health``
got a 405. :class:`HeadAsGetMiddleware` runs a HEAD request as its GET, with the same status and
headers (``Content-Length`` included: the size the GET's body would have), and sends no body. A path
without GET still answers HEAD with 405.
"""

from __future__ import annotations

from starlette.types import ASGIApp, Message, Receive, Scope, Send


class HeadAsGetMiddleware:
    """A HEAD request served by the GET route of its path, its body left out."""

    def __init__(self, app: ASGIApp) -> None:
        self.app = app

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http" or scope["method"] != "HEAD":
            await self.app(scope, receive, send)
            return

        async def without_body(message: Message) -> None:
            if message["type"] == "http.response.body":
                message = {**message, "body": b""}
            await send(message)

        await self.app({**scope, "method": "GET"}, receive, without_body)
