"""Typed Python client of the agtos memory API: ``MemoryClient`` (sync) and ``AsyncMemoryClient`` over httpx.

>>> with MemoryClient("http://127.0.0.1:4102", api_key="agt_…", user_id="alice") as memory:
...     memory.add_turns("s1", [{"role": "user", "content": "I take my coffee black."}])
...     memory.end_session("s1")
...     memory.search("coffee").results[0].summary

Every endpoint is one method returning the API's own response model (``agtos.schemas.api``); request
bodies are built and checked with the API's request models, so a bad argument fails here with pydantic's
``ValidationError`` before anything is sent. A non-2xx answer raises :class:`MemoryAPIError` with the
status and the API's ``message``; 429 and 503 are retried with exponential back-off (``Retry-After``
honoured). The module imports nothing of the server but its schemas.
"""

from agtos.client.endpoint_spec import Call, Endpoint, Parts
from agtos.client.routes import Endpoints, routes
from agtos.client.transport import AsyncMemoryClient, MemoryAPIError, MemoryClient, retry_delay

__all__ = [
    "AsyncMemoryClient",
    "Call",
    "Endpoint",
    "Endpoints",
    "MemoryAPIError",
    "MemoryClient",
    "Parts",
    "retry_delay",
    "routes",
]
