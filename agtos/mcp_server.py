"""MCP server: one user's agtos memory as tools for any MCP-capable agent (Claude Desktop/Code, Cursor…).

``agtos mcp`` serves stdio, ``agtos mcp --http`` streamable HTTP. Every tool is one call of
:mod:`agtos.client` against a running API (``--url`` with ``--api-key``), or against the API in this
process on the embedded defaults when no URL is given. A server acts for one user (``--user`` or
``AGTOS_USER_ID``): each MCP session of it reads and writes that user's memory only.

The tools' input schemas are derived, parameter by parameter, from the client method they call (whose
arguments the client test checks against the API's OpenAPI) and the constraints and descriptions of the
API's request model; their results are the API's response models. Nothing is restated here.
"""

from __future__ import annotations

import inspect
import json
from collections.abc import AsyncIterator, Awaitable, Callable
from contextlib import asynccontextmanager
from dataclasses import dataclass
from typing import Annotated, Any

import httpx
from mcp.server.mcpserver import MCPServer
from mcp.server.mcpserver.exceptions import ToolError
from pydantic import BaseModel, Field

from agtos import __version__
from agtos.client import AsyncMemoryClient, Endpoint, Endpoints, MemoryAPIError
from agtos.schemas.api import AskRequest, ContextRequest, ForgetKind, MemoryIn
from agtos.schemas.identifiers import RecordId

INSTRUCTIONS = (
    "Long-term memory of the user. Call get_context before answering to recall what matters for the "
    "question; remember stable facts and preferences the user states; recall searches past "
    "conversations; ask_about_user answers a question about the user with evidence; forget deletes "
    "one record the user asks to forget. The user's profile is the resource memory://profile."
)


@dataclass(frozen=True)
class ToolSpec:
    """An MCP tool: the client method it calls, the request model that describes its arguments."""

    name: str
    method: str
    description: str
    request: type[BaseModel] | None = None
    narrowed: dict[str, Any] | None = None  # argument -> (annotation, default) where the tool offers less


TOOLS = (
    ToolSpec(
        "remember",
        "add_memory",
        "Store a fact or preference about the user (one short sentence, e.g. 'User takes their coffee black'). "
        "A near-duplicate of a stored memory is merged into it.",
        MemoryIn,
    ),
    ToolSpec(
        "recall",
        "search",
        "Search past conversations: episodes ranked by their best matching turns, with those turns as highlights.",
    ),
    ToolSpec(
        "get_context",
        "context",
        "The memory section to read before answering: profile, facts, conclusions and past turns relevant to "
        "the query, fitted to a token budget.",
        ContextRequest,
    ),
    ToolSpec(
        "ask_about_user",
        "ask",
        "Answer a question about the user (preferences, facts, habits) with the evidence it rests on.",
        AskRequest,
    ),
    ToolSpec(
        "forget",
        "forget",
        "Delete one stored record the user wants forgotten: an episode, memory, conclusion or entity, by id.",
        narrowed={
            "kind": (ForgetKind, inspect.Parameter.empty),
            "id": (Annotated[RecordId, Field(description="the record's id")], inspect.Parameter.empty),
        },
    ),
    ToolSpec(
        "list_memories",
        "list_memories",
        "List the user's stored memories (newest first), or those matching q.",
    ),
)


def tool_signature(spec: ToolSpec) -> inspect.Signature:
    """The client method's parameters, each annotated with its request-model field (type, bounds, text)."""
    endpoint: Endpoint[Any, Any] = vars(Endpoints)[spec.method]
    signature = inspect.signature(endpoint.build, eval_str=True)
    fields = spec.request.model_fields if spec.request else {}
    params = []
    for name, param in signature.parameters.items():
        annotation, default = param.annotation, param.default
        if name in fields:
            info = fields[name]
            annotation = Annotated[(info.annotation, *info.metadata, Field(description=info.description))]
            if default is not inspect.Parameter.empty:
                default = info.get_default(call_default_factory=True)
        if spec.narrowed and name in spec.narrowed:
            annotation, default = spec.narrowed[name]
        params.append(param.replace(kind=inspect.Parameter.KEYWORD_ONLY, annotation=annotation, default=default))
    return inspect.Signature(params, return_annotation=endpoint.returns)


def make_tool(spec: ToolSpec, memory: Callable[[], AsyncMemoryClient]) -> Callable[..., Awaitable[Any]]:
    async def tool(**arguments: Any) -> Any:
        try:
            return await getattr(memory(), spec.method)(**arguments)
        except MemoryAPIError as exc:
            raise ToolError(f"{exc.status}: {exc.message}") from exc  # the tool result says what the API said

    tool.__name__ = spec.name
    tool.__doc__ = spec.description
    tool.__signature__ = tool_signature(spec)  # type: ignore[attr-defined]
    return tool


def build_server(connect: Callable[[], AsyncIterator[AsyncMemoryClient]]) -> MCPServer[Any]:
    """The MCP server; ``connect`` yields the client for the server's lifetime (and closes it)."""
    holder: dict[str, AsyncMemoryClient] = {}

    @asynccontextmanager
    async def lifespan(_: MCPServer[Any]) -> AsyncIterator[None]:
        async with asynccontextmanager(connect)() as client:
            holder["client"] = client
            yield

    server: MCPServer[Any] = MCPServer(
        "agtos-memory", instructions=INSTRUCTIONS, version=__version__, lifespan=lifespan, log_level="WARNING"
    )
    for spec in TOOLS:
        server.add_tool(make_tool(spec, lambda: holder["client"]), name=spec.name, description=spec.description)

    @server.resource("memory://profile", name="profile", mime_type="application/json")
    async def profile() -> str:
        """The user's profile: name, communication style, preferences, patterns, facts."""
        found = await holder["client"].get_profile()
        return json.dumps(found.profile.model_dump(mode="json"))

    return server


def remote(url: str, api_key: str | None, user_id: str | None) -> Callable[[], AsyncIterator[AsyncMemoryClient]]:
    """A client of the API at ``url``."""

    async def connect() -> AsyncIterator[AsyncMemoryClient]:
        async with AsyncMemoryClient(url, api_key=api_key, user_id=user_id) as client:
            yield client

    return connect


def in_process(api_key: str | None, user_id: str | None) -> Callable[[], AsyncIterator[AsyncMemoryClient]]:
    """A client of the API run in this process on the environment's settings (embedded Redis by default)."""

    async def connect() -> AsyncIterator[AsyncMemoryClient]:
        from agtos.config import Settings
        from agtos.memory.coordinator import MemoryCoordinator
        from agtos.serving.app import create_app

        coordinator = MemoryCoordinator(Settings.from_env())
        transport = httpx.ASGITransport(create_app(coordinator=coordinator))
        try:
            async with (
                httpx.AsyncClient(transport=transport, base_url="http://127.0.0.1") as http,
                AsyncMemoryClient(http=http, api_key=api_key, user_id=user_id) as client,
            ):
                yield client
        finally:
            coordinator.close()

    return connect


def run(url: str | None, api_key: str | None, user_id: str | None, http: bool, host: str, port: int) -> None:
    """Serve until the client goes away (stdio) or the process is stopped (HTTP)."""
    server = build_server(remote(url, api_key, user_id) if url else in_process(api_key, user_id))
    if http:
        server.run("streamable-http", host=host, port=port)
    else:
        server.run("stdio")
