"""The one place that names Redis keys.

Every per-user key is built by :class:`UserKeys`, which starts with
``{prefix}:u:{<user_id>}:`` (the braces are literal: a Redis Cluster hash tag). User ids are
validated against a strict alphabet before they reach a key, so no id can contain ``:``,
``*``, braces or whitespace and one user's keys can never match another user's pattern.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from functools import cache

from agtos.schemas.identifiers import ID_MAX_LENGTH, ID_RULES, RECORD_ID, USER_ID


def _bounded(pattern: str) -> re.Pattern[str]:
    """``pattern`` (one of :mod:`agtos.schemas.identifiers`) with its length bound, for ``fullmatch``."""
    return re.compile(rf"(?=.{{1,{ID_MAX_LENGTH}}}\Z){pattern}", re.DOTALL)


# Compiled on first use, not at import: mutmut's forkserver imports the modules before it switches a
# mutant on, so a pattern compiled at import would never see ``_bounded``'s mutants (docs/testing.md).
@cache
def user_id_pattern() -> re.Pattern[str]:
    """A user id, for ``fullmatch``: not "." or "..", no path-like ids."""
    return _bounded(USER_ID)


@cache
def record_id_pattern() -> re.Pattern[str]:
    """A session, episode or record id, for ``fullmatch``: not only dots, ".." is a path segment."""
    return _bounded(RECORD_ID)


class InvalidIdentifier(ValueError):
    """A user, session or record id that cannot be used in a key."""


def check_user_id(user_id: str) -> str:
    if not user_id_pattern().fullmatch(user_id or ""):
        raise InvalidIdentifier(f"user id must be {ID_RULES[USER_ID]}")
    return user_id


def check_record_id(value: str, what: str = "id") -> str:
    if not record_id_pattern().fullmatch(value or ""):
        raise InvalidIdentifier(f"{what} must be {ID_RULES[RECORD_ID]}")
    return value


@dataclass(frozen=True)
class GlobalKeys:
    """Keys that are not owned by one user."""

    prefix: str

    def users(self) -> str:
        return f"{self.prefix}:users"

    def meta(self, name: str) -> str:
        return f"{self.prefix}:meta:{name}"

    def user(self, user_id: str) -> UserKeys:
        return UserKeys(self.prefix, check_user_id(user_id))


@dataclass(frozen=True)
class UserKeys:
    """All keys of one user."""

    prefix: str
    user_id: str

    @property
    def base(self) -> str:
        """``{prefix}:u:{<user>}``: the braces are a Redis Cluster hash tag, so every key of one
        user lands in the same slot and per-user transactions and Lua scripts work on a cluster."""
        return f"{self.prefix}:u:{{{self.user_id}}}"

    def all_pattern(self) -> str:
        """SCAN pattern matching every key of this user (ids cannot contain glob chars)."""
        return f"{self.base}:*"

    # episodic tier
    def episode(self, episode_id: str) -> str:
        return f"{self.base}:episode:{check_record_id(episode_id, 'episode id')}"

    def episode_timeline(self) -> str:
        return f"{self.base}:episodes:by_time"

    def episode_turns(self, episode_id: str) -> str:
        """The verbatim turns of one episode (a list, index = position)."""
        return f"{self.base}:turns:{check_record_id(episode_id, 'episode id')}"

    # sessions
    def session_turns(self, session_id: str) -> str:
        return f"{self.base}:session:{check_record_id(session_id, 'session id')}:turns"

    def session_ended(self, session_id: str) -> str:
        return f"{self.base}:session:{check_record_id(session_id, 'session id')}:ended"

    def active_sessions(self) -> str:
        return f"{self.base}:sessions:active"

    # profile
    def profile(self) -> str:
        return f"{self.base}:profile"

    # generic namespaced helpers for later tiers (semantic, conclusions, entities...)
    def record(self, kind: str, record_id: str) -> str:
        return f"{self.base}:{kind}:{check_record_id(record_id, kind + ' id')}"

    def collection(self, kind: str, name: str) -> str:
        return f"{self.base}:{kind}:_{name}"
