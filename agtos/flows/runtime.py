"""The services a flow works with: the ones registered by this process, else built from the environment.

API processes and tests register theirs with :func:`use_runtime`; a Prefect worker running a
deployment builds one set from the environment on first use.
"""

from __future__ import annotations

import threading

from agtos.memory.services import Services

_lock = threading.Lock()
_current: Services | None = None


def use_runtime(services: Services | None) -> None:
    global _current
    with _lock:
        _current = services


def runtime() -> Services:
    global _current
    with _lock:
        if _current is None:
            from agtos.config import Settings

            _current = Services(Settings.from_env())
        return _current
