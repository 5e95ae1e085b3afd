"""HTTP request and response models: the typed contract of every route, documented in ``/openapi.json``.

API models write camelCase keys (``alias_generator=to_camel``) and accept either spelling.
Stored records embedded in a response (a profile, conclusions, turns, lint reports) keep
the snake_case shape of :mod:`agtos.schemas.records`, as they always had. Fields with a
default are optional keys: routes that omit keys (health) serialise with ``exclude_unset``.

The models live in one module per group of routes; this package re-exports every public name of
them (``from agtos.schemas.api import SearchOut``).
"""

# ruff: noqa: F403 - the star imports are the re-exports
from __future__ import annotations

from agtos.schemas.api.admin_models import *
from agtos.schemas.api.entity_models import *
from agtos.schemas.api.health_models import *
from agtos.schemas.api.memory_models import *
from agtos.schemas.api.recall_models import *
from agtos.schemas.api.request_bodies import *
from agtos.schemas.api.response_base import *
from agtos.schemas.api.session_models import *
