"""Blocking route work on worker threads at less event-loop CPU than a sync route's hand-off.

A sync FastAPI route runs on AnyIO's thread pool: a capacity limiter, a ``queue.Queue`` (a Python
``Condition`` notified on every put) and a cancel-shielded checkpoint, all on the event loop that
every request of the process passes through. The hot routes (search, context, turn appends,
session ends) are ``async`` and hand their blocking call to :func:`in_thread` instead: one
``ThreadPoolExecutor`` submit (a C ``SimpleQueue``) and a future the loop awaits. Same semantics
for the route: the call runs in a copy of the request's context and its exception is raised in the
route. At most :data:`MAX_THREADS` calls run at once (AnyIO's default is 40 as well); more wait
in the executor's queue.

The cheap reads (``/health``, an episode list, a maintenance run's status or history) have their own
small pool, :func:`in_read_thread`: they never queue behind long work, neither behind the hot routes'
calls here nor behind the sync routes (``/ask``, ``/dream``, a ``/conversations`` back-fill…) that hold
AnyIO's 40 threads (under such a load a 404 of ``maintain/runs/{id}`` took up to 16 s; docs/measurements.md).
"""

from __future__ import annotations

import asyncio
import contextvars
import functools
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from typing import ParamSpec, TypeVar

P = ParamSpec("P")
T = TypeVar("T")

MAX_THREADS = 40
EXECUTOR = ThreadPoolExecutor(max_workers=MAX_THREADS, thread_name_prefix="agtos-request")
READ_THREADS = 8  # a few Redis round trips each: enough to keep them from queueing behind one another
READS = ThreadPoolExecutor(max_workers=READ_THREADS, thread_name_prefix="agtos-read")


async def in_thread(func: Callable[P, T], /, *args: P.args, **kwargs: P.kwargs) -> T:
    """``func(*args, **kwargs)`` on a request thread; the event loop serves other requests meanwhile."""
    call = functools.partial(contextvars.copy_context().run, func, *args, **kwargs)
    return await asyncio.get_running_loop().run_in_executor(EXECUTOR, call)


async def in_read_thread(func: Callable[P, T], /, *args: P.args, **kwargs: P.kwargs) -> T:
    """``func(*args, **kwargs)``, a cheap read, on the reads' own threads (not shared with long work)."""
    call = functools.partial(contextvars.copy_context().run, func, *args, **kwargs)
    return await asyncio.get_running_loop().run_in_executor(READS, call)
