"""Request body size limit: 413 with a JSON ``message`` instead of reading an unbounded body.

A declared ``Content-Length`` over the limit is refused before the app runs. A body
without one (chunked or streamed) is counted as it arrives; the moment it passes the
limit, reading stops and whatever the app would have answered is replaced by the 413.
Nothing is buffered here: chunks are handed to the app as they come.
"""

from __future__ import annotations

import json

from starlette.types import ASGIApp, Message, Receive, Scope, Send

DEFAULT_MAX_BODY_BYTES = 1_048_576  # 1 MiB


class BodyTooLarge(Exception):
    """Raised from ``receive`` when a streamed body passes the limit (answered with 413)."""


class BodySizeLimitMiddleware:
    """Pure ASGI middleware: HTTP request bodies larger than ``max_body_bytes`` get a 413."""

    def __init__(self, app: ASGIApp, max_body_bytes: int = DEFAULT_MAX_BODY_BYTES) -> None:
        if max_body_bytes < 0:
            raise ValueError("max_body_bytes must be >= 0")
        self.app = app
        self.max_body_bytes = max_body_bytes

    def _message(self) -> str:
        return f"request body too large: the limit is {self.max_body_bytes} bytes"

    async def _send_413(self, send: Send) -> None:
        body = json.dumps({"message": self._message()}).encode()
        await send(
            {
                "type": "http.response.start",
                "status": 413,
                "headers": [
                    (b"content-type", b"application/json"),
                    (b"content-length", str(len(body)).encode()),
                    (b"connection", b"close"),
                ],
            }
        )
        await send({"type": "http.response.body", "body": body})

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        declared = _content_length(scope)
        if declared is not None and declared > self.max_body_bytes:
            await self._send_413(send)
            return

        received = 0
        too_large = False
        started = False

        async def limited_receive() -> Message:
            nonlocal received, too_large
            if too_large:
                raise BodyTooLarge(self._message())
            message = await receive()
            if message["type"] == "http.request":
                received += len(message.get("body", b""))
                if received > self.max_body_bytes:
                    too_large = True
                    raise BodyTooLarge(self._message())
            return message

        async def guarded_send(message: Message) -> None:
            nonlocal started
            if too_large and not started:
                return  # the app's answer to a cut-off body (400/422/500) is replaced by the 413
            if message["type"] == "http.response.start":
                started = True
            await send(message)

        try:
            await self.app(scope, limited_receive, guarded_send)
        except Exception:
            if not too_large or started:
                raise
        if too_large and not started:
            await self._send_413(send)


def _content_length(scope: Scope) -> int | None:
    """The declared Content-Length, or None when absent or unreadable (then bytes are counted)."""
    for name, value in scope.get("headers", ()):
        if name == b"content-length":
            try:
                return int(value)
            except ValueError:
                return None
    return None
