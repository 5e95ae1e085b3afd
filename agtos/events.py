"""A tiny in-process event bus (``sessionEnded``, ``memory.contradiction.detected``...).

Handlers run synchronously and their failures are logged, never raised to the emitter.
"""

from __future__ import annotations

import logging
import threading
from collections import defaultdict
from collections.abc import Callable
from typing import Any

log = logging.getLogger(__name__)
Handler = Callable[[dict[str, Any]], None]


class EventBus:
    def __init__(self) -> None:
        self._handlers: dict[str, list[Handler]] = defaultdict(list)
        self._lock = threading.Lock()

    def subscribe(self, event: str, handler: Handler) -> None:
        with self._lock:
            self._handlers[event].append(handler)

    def emit(self, event: str, payload: dict[str, Any]) -> int:
        """Call every handler of ``event``; returns how many succeeded."""
        with self._lock:
            handlers = list(self._handlers.get(event, ()))
        ok = 0
        for handler in handlers:
            try:
                handler(payload)
                ok += 1
            except Exception:
                log.exception("handler for %s failed", event)
        return ok
