"""uvicorn's HTTP/1.1 protocol, with an absolute-form request target's authority as the ``Host``.

``GET http://evil.example/api/memory/episodes HTTP/1.1`` with ``Host: 127.0.0.1``: RFC 9112 section
3.2.2 says a server MUST ignore the ``Host`` header of an absolute-form request and use the target's
authority. uvicorn's httptools protocol (the one ``agtos serve`` runs) keeps only the target's path
and query in the ASGI scope, so the Host allow-list would judge ``127.0.0.1`` and serve the request.
:class:`AbsoluteFormProtocol` replaces the ``Host`` header with the target's authority before the
scope reaches the app; ``agtos serve`` names it as uvicorn's ``http`` (:data:`PROTOCOL`). Under
uvicorn's h11 protocol the scope's ``raw_path`` keeps the whole target, which the guard reads
itself (:func:`agtos.serving.auth.target_authority`).

The app installs the same rewrite on uvicorn's httptools protocol itself (:func:`install`, called by
:func:`agtos.serving.app.create_app`): ``uvicorn agtos.serving.main:app`` run directly, with uvicorn's
default protocol, judged the ``Host`` header of an absolute-form request (issue 15), and no ASGI
middleware can do it there, since that protocol hands the app no trace of the target's authority.
"""

from __future__ import annotations

import httptools
from uvicorn.protocols.http.httptools_impl import HttpToolsProtocol

PROTOCOL = "agtos.serving.http_protocol:AbsoluteFormProtocol"  # uvicorn.run(http=...), importable in each worker


def authority(target: bytes) -> bytes | None:
    """The ``host[:port]`` of an absolute-form target (``http://a.example:80/x`` -> ``a.example:80``), an IPv6
    host in brackets; None for an origin-form (``/x``) or asterisk-form target."""
    if target[:1] in (b"/", b"*", b""):
        return None
    url = httptools.parse_url(target)
    host = url.host or b""
    if b":" in host:
        host = b"[" + host + b"]"
    return host if url.port is None else host + b":%d" % url.port


def put_target_authority_in_host(protocol: HttpToolsProtocol) -> None:
    """Before the scope is built: an absolute-form request's ``Host`` header becomes its target's authority."""
    try:
        named = authority(protocol.url)
    except httptools.HttpParserInvalidURLError:
        named = None  # uvicorn's own parse of the target answers it (400)
    if named is not None:  # the scope holds this list: changed in place, one Host, the target's
        protocol.headers[:] = [(k, v) for k, v in protocol.headers if k != b"host"] + [(b"host", named)]


_uvicorn_on_headers_complete = HttpToolsProtocol.on_headers_complete


def _on_headers_complete(self: HttpToolsProtocol) -> None:
    put_target_authority_in_host(self)
    _uvicorn_on_headers_complete(self)


def install() -> None:
    """Every httptools connection of this process judges an absolute-form target by its authority (idempotent).

    uvicorn resolves its protocol class before importing the app, so the class itself is amended: a
    subclass named by the app would never be used."""
    HttpToolsProtocol.on_headers_complete = _on_headers_complete  # type: ignore[method-assign]


class AbsoluteFormProtocol(HttpToolsProtocol):
    """httptools' protocol; an absolute-form request's ``Host`` is its target's authority (RFC 9112 3.2.2)."""

    def on_headers_complete(self) -> None:
        put_target_authority_in_host(self)
        _uvicorn_on_headers_complete(self)
