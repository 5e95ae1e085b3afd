"""Hypothesis profiles: ``dev`` (default), ``ci`` (CI=true) and ``fuzz`` (``make fuzz``).

``HYPOTHESIS_PROFILE`` picks one explicitly. ``ci`` is deterministic (derandomized, no example
database) with 200 examples per property or state machine; ``fuzz`` is random and long.
"""

from __future__ import annotations

import os

from hypothesis import HealthCheck, settings

_common = {"deadline": None, "suppress_health_check": list(HealthCheck)}
settings.register_profile("dev", max_examples=30, derandomize=True, database=None, **_common)
settings.register_profile("ci", max_examples=200, derandomize=True, database=None, print_blob=True, **_common)
settings.register_profile("fuzz", max_examples=2_000, derandomize=False, print_blob=True, **_common)


def selected() -> str:
    if os.environ.get("HYPOTHESIS_PROFILE"):
        return os.environ["HYPOTHESIS_PROFILE"]
    return "ci" if os.environ.get("CI", "").lower() in ("1", "true", "yes") else "dev"


settings.load_profile(selected())
