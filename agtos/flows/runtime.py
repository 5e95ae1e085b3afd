"""The coordinator a flow works with: the one registered by this process, else one from env.

API processes and tests register theirs with :func:`use_runtime`; a Prefect worker running a
deployment builds one from the environment on first use.
"""

from __future__ import annotations

import threading
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from agtos.memory.coordinator import MemoryCoordinator

_lock = threading.Lock()
_current: MemoryCoordinator | None = None


def use_runtime(coordinator: MemoryCoordinator | None) -> None:
    global _current
    with _lock:
        _current = coordinator


def runtime() -> MemoryCoordinator:
    global _current
    with _lock:
        if _current is None:
            from agtos.config import Settings
            from agtos.memory.coordinator import MemoryCoordinator

            _current = MemoryCoordinator(Settings.from_env())
        return _current
