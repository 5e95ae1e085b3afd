"""Cross-origin (CORS) access: off unless ``AGTOS_CORS_ORIGINS`` lists browser origins.

Off, a preflight (``OPTIONS``) is a JSON 405 that says how to turn CORS on, and browser pages of
other origins can neither read the API's answers nor send it a JSON body or an ``Authorization``
header. On, the listed origins (and only they) get the preflight and the response headers; no
cookies are involved (``allow_credentials`` stays off: keys travel in ``Authorization``).
"""

from __future__ import annotations

from typing import Any

from fastapi.responses import JSONResponse
from starlette.datastructures import Headers
from starlette.middleware.cors import CORSMiddleware
from starlette.responses import Response

from agtos.serving.deps import USER_HEADER


def cors_options(origins: frozenset[str]) -> dict[str, Any]:
    """CORSMiddleware's arguments for ``origins``: the API's methods and request headers, its error headers exposed."""
    return {
        "allow_origins": sorted(origins),
        "allow_methods": ["GET", "POST", "PUT", "DELETE"],
        "allow_headers": ["Authorization", "Content-Type", USER_HEADER],
        "expose_headers": ["Retry-After", "Location", "WWW-Authenticate"],
        "max_age": 600,
    }


class JsonCorsMiddleware(CORSMiddleware):
    """Starlette's CORS middleware, its refused preflights answered as JSON errors like every other error."""

    def preflight_response(self, request_headers: Headers) -> Response:
        response = super().preflight_response(request_headers)
        if response.status_code < 400:
            return response
        reason = bytes(response.body).decode(errors="replace")
        return JSONResponse(status_code=response.status_code, content={"message": f"CORS preflight refused: {reason}"})
