"""Counting Redis round trips: each command a redis-py client sends alone and each pipeline it
executes (MULTI/EXEC or not) is one round trip. Used by ``benchmarks/search_scale.py`` and
``tests/test_read_round_trips.py``."""

from __future__ import annotations

from typing import Any

import redis


class RoundTrips:
    """Wraps a redis-py client: records each command sent alone and each pipeline executed."""

    def __init__(self, client: redis.Redis) -> None:
        self.sent: list[str] = []
        execute_command, pipeline = client.execute_command, client.pipeline

        def counted_command(*args: Any, **options: Any) -> Any:
            self.sent.append(str(args[0]))
            return execute_command(*args, **options)

        def counted_pipeline(*args: Any, **options: Any) -> Any:
            pipe = pipeline(*args, **options)
            execute = pipe.execute

            def counted_execute(*a: Any, **kw: Any) -> Any:
                names = sorted({str(c[0][0]) for c in pipe.command_stack})
                self.sent.append(f"pipeline[{','.join(names)}]x{len(pipe.command_stack)}")
                return execute(*a, **kw)

            pipe.execute = counted_execute  # type: ignore[method-assign]
            return pipe

        client.execute_command = counted_command  # type: ignore[method-assign]
        client.pipeline = counted_pipeline  # type: ignore[method-assign]
