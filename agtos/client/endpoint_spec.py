"""How the client declares a route: :func:`endpoint` turns a function that builds a call's :class:`Parts`
into an :class:`Endpoint`, bound to the sync client as a blocking method and to the async one as a coroutine."""

from __future__ import annotations

import enum
import functools
from collections.abc import Awaitable, Callable, Mapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Generic, ParamSpec, TypeVar, overload
from urllib.parse import quote

import httpx
from pydantic import BaseModel, TypeAdapter

if TYPE_CHECKING:
    from agtos.client.routes import Endpoints
    from agtos.client.transport import AsyncMemoryClient, MemoryClient

T = TypeVar("T")
P = ParamSpec("P")
B = TypeVar("B", bound=BaseModel)


@dataclass(frozen=True)
class Parts:
    """What one call sends besides the route: path values, query parameters, a body."""

    path: Mapping[str, str | int] = field(default_factory=dict)
    params: Mapping[str, Any] = field(default_factory=dict)
    body: BaseModel | None = None


@dataclass(frozen=True)
class Call(Generic[T]):
    method: str
    url: str
    params: dict[str, Any]
    json: Any
    result: TypeAdapter[T]

    def parse(self, response: httpx.Response) -> T:
        if response.headers.get("content-type", "").startswith("application/json"):
            return self.result.validate_json(response.content)
        return self.result.validate_python(response.text)


class Endpoint(Generic[P, T]):
    """One route (method, path template, response model) and the function that builds a call's parts."""

    def __init__(self, method: str, path: str, result: TypeAdapter[T], returns: Any, build: Callable[P, Parts]) -> None:
        self.method, self.path, self.result, self.returns, self.build = method, path, result, returns, build
        functools.update_wrapper(self, build)  # type: ignore[arg-type]

    def call(self, *args: P.args, **kwargs: P.kwargs) -> Call[T]:
        parts = self.build(*args, **kwargs)
        url = self.path.format_map({k: quote(str(v), safe="") for k, v in parts.path.items()})
        params = {k: v for k, v in parts.params.items() if v is not None}
        body = None if parts.body is None else parts.body.model_dump(mode="json", exclude_unset=True)
        return Call(self.method, url, params, body, self.result)

    @overload
    def __get__(self, obj: None, owner: type) -> Endpoint[P, T]: ...
    @overload
    def __get__(self, obj: MemoryClient, owner: type) -> Callable[P, T]: ...
    @overload
    def __get__(self, obj: AsyncMemoryClient, owner: type) -> Callable[P, Awaitable[T]]: ...
    def __get__(self, obj: Endpoints | None, owner: type) -> Any:
        if obj is None:
            return self

        @functools.wraps(self.build)
        def bound(*args: P.args, **kwargs: P.kwargs) -> Any:
            return obj._send(self.call(*args, **kwargs))

        return bound


def endpoint(
    method: str, path: str, result: type[T] | TypeAdapter[T], returns: Any = None
) -> Callable[[Callable[P, Parts]], Endpoint[P, T]]:
    """Declare a route's method: HTTP method, path template, response model (``returns``: the type a
    union's adapter validates)."""
    adapter: TypeAdapter[T] = result if isinstance(result, TypeAdapter) else TypeAdapter(result)
    return lambda build: Endpoint(method, path, adapter, returns or result, build)


def body_fields(fields: Mapping[str, Any]) -> dict[str, Any]:
    """The arguments given: None stands for the API's default."""
    return {k: v for k, v in fields.items() if v is not None}


def body(model: type[B], **fields: Any) -> B:
    """A request body from the arguments given, checked by the API's own request model."""
    return model.model_validate(body_fields(fields))


class Unset(enum.Enum):
    """Marks an argument not given where None means something (``valid_until=None``: clear it)."""

    token = "unset"


UNSET = Unset.token
