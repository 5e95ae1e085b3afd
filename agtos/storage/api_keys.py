"""API keys: stored hashed in Redis, looked up on every request (no cache), compared in constant time.

A key reads ``agt_<id>_<secret>``: ``<id>`` (12 hex characters) names the record, ``<secret>`` is
``secrets.token_urlsafe(32)`` (256 bits). Only the SHA-256 of the whole key is stored, in one hash
``{prefix}:{auth}:keys`` (field = id, value = the JSON record); a presented key is hashed and
compared with ``hmac.compare_digest`` against the record its id names. Revoking deletes the field,
so every process refuses the key on its next request. Creating the first key also sets
``{prefix}:{auth}:on``: auth stays on when the last key is revoked (revoking a leaked key never
opens the API), until ``disable`` clears it while no key exists.
"""

from __future__ import annotations

import hashlib
import hmac
import json
import re
import secrets
import time
from dataclasses import asdict, dataclass, replace
from typing import Any, Literal

import redis
from redis.commands.core import Script

from agtos.storage.keys import GlobalKeys, check_user_id
from agtos.storage.rate_limit import TOKEN_BUCKET_LUA, RateDecision, RateLimiter, decision
from agtos.storage.redis_conn import RedisConnector, as_text

KeyKind = Literal["user", "service"]
KEY_PREFIX = "agt_"
ID_HEX = 12
KEY_PATTERN = re.compile(rf"^{KEY_PREFIX}([0-9a-f]{{{ID_HEX}}})_([A-Za-z0-9_-]{{16,128}})$")
SERVICE_NAME_PATTERN = re.compile(r"^[A-Za-z0-9_.@-]{1,64}$")


@dataclass(frozen=True)
class ApiKey:
    """One key's stored record (never the key itself)."""

    id: str
    kind: KeyKind
    subject: str  # the user id of a user key, the name of a service key
    created_at: float
    digest: str  # hex SHA-256 of the whole key

    @property
    def user_id(self) -> str | None:
        return self.subject if self.kind == "user" else None


@dataclass(frozen=True)
class AuthLookup:
    """What one request's key check found: whether auth is on (a key was created), and the matching key if any;
    ``known``: Redis holds the on/off marker (False on a fresh install, and after Redis lost its data);
    ``rate``: the rate-limit token :meth:`ApiKeyStore.check` took for the key (None: none taken)."""

    enabled: bool
    key: ApiKey | None
    known: bool = True
    rate: RateDecision | None = None


# KEYS: the marker, the keys hash, the presented key's bucket; ARGV: the key's id, the SHA-256 of the
# presented key, rate, burst. Returns {marker found (0/1), marker, record found (0/1), record, allowed,
# wait ms}; allowed -1: no token taken (no such key, another digest, or rate 0: the limit is off).
_CHECK_LUA = (
    """
local marker = redis.call('GET', KEYS[1])
local raw = redis.call('HGET', KEYS[2], ARGV[1])
local out = {marker and 1 or 0, marker or '', raw and 1 or 0, raw or '', -1, 0}
local bucket, rate, burst = KEYS[3], tonumber(ARGV[3]), tonumber(ARGV[4])
if not raw or rate <= 0 then return out end
local ok, record = pcall(cjson.decode, raw)
if not ok or type(record) ~= 'table' or record.digest ~= ARGV[2] then return out end
"""
    + TOKEN_BUCKET_LUA
    + """
out[5], out[6] = allowed, wait_ms
return out
"""
)


def digest(key: str) -> str:
    return hashlib.sha256(key.encode()).hexdigest()


class ApiKeyStore:
    """Create, list, revoke and check API keys (one Redis hash; ids are the fields)."""

    def __init__(self, connector: RedisConnector, keys: GlobalKeys) -> None:
        self.connector = connector
        self.key = f"{keys.prefix}:{{auth}}:keys"  # the hash tag keeps the rate-limit buckets in the same slot
        self.on_key = f"{keys.prefix}:{{auth}}:on"
        self._check: Script | None = None

    def create(self, kind: KeyKind, subject: str) -> tuple[str, ApiKey]:
        """A new key and its record; the key is returned once and never stored."""
        if kind == "user":
            check_user_id(subject)
        elif not SERVICE_NAME_PATTERN.fullmatch(subject):
            raise ValueError("service name must be 1-64 characters of letters, digits, '_', '.', '@' or '-'")
        key_id = secrets.token_hex(ID_HEX // 2)
        key = f"{KEY_PREFIX}{key_id}_{secrets.token_urlsafe(32)}"
        record = ApiKey(id=key_id, kind=kind, subject=subject, created_at=time.time(), digest=digest(key))
        if not self.connector.run(lambda r: r.hsetnx(self.key, key_id, json.dumps(asdict(record)))):
            return self.create(kind, subject)  # an id collision (2^-48 per pair): draw again
        self.connector.run(lambda r: r.set(self.on_key, 1))
        return key, record

    def list(self) -> list[ApiKey]:
        """Every key's record, oldest first."""
        raw = self.connector.run(lambda r: r.hgetall(self.key))
        return sorted((_record(value) for value in raw.values()), key=lambda k: (k.created_at, k.id))

    def revoke(self, key_id: str) -> bool:
        """Delete the key; False when no key has this id."""
        return bool(self.connector.run(lambda r: r.hdel(self.key, key_id)))

    def enabled(self) -> bool:
        """Whether a key was ever created (and auth not disabled since)."""
        return _on(self.connector.run(lambda r: r.get(self.on_key)))

    def disable(self) -> bool:
        """Switch key auth off again; refused (False) while any key exists."""

        def op(r: redis.Redis) -> bool:
            if r.hlen(self.key):
                return False
            r.set(self.on_key, 0)  # an explicit off: a missing marker may be lost data (see Authenticator)
            return True

        return self.connector.run(op)

    def lookup(self, presented: str | None) -> AuthLookup:
        """One round trip: whether auth is on, and the record ``presented`` proves (None if it proves none)."""
        match = KEY_PATTERN.fullmatch(presented or "")
        if presented is None or match is None:
            marker = self.connector.run(lambda r: r.get(self.on_key))
            return AuthLookup(enabled=_on(marker), key=None, known=marker is not None)

        def op(r: redis.Redis) -> list[Any]:
            pipe = r.pipeline(transaction=False)
            pipe.get(self.on_key)
            pipe.hget(self.key, match.group(1))
            return pipe.execute()

        marker, raw = self.connector.run(op)
        return _proved(presented, marker, raw)

    def check(self, presented: str | None, limiter: RateLimiter) -> AuthLookup:
        """:meth:`lookup` and, for a key that proves its record, a token of its rate-limit bucket
        (``limiter``'s) in the same round trip: one script (the marker, the keys and the buckets share
        the ``{auth}`` hash tag, a slot on Redis Cluster). The script takes the token only when the
        presented key's SHA-256 equals the record's, so a wrong secret for a real key id drains nothing;
        the record is then compared here in constant time as :meth:`lookup` does. ``rate`` is None when
        no token was taken (no key proved, or a rate of 0: the limit is off)."""
        match = KEY_PATTERN.fullmatch(presented or "")
        if presented is None or match is None:
            return self.lookup(presented)
        key_id, presented_digest = match.group(1), digest(presented)
        keys = [self.on_key, self.key, limiter.bucket_key(key_id)]
        args: list[str | float] = [key_id, presented_digest, limiter.rate, limiter.burst]

        def op(r: redis.Redis) -> list[Any]:
            if self._check is None:
                self._check = r.register_script(_CHECK_LUA)
            return list(self._check(keys=keys, args=args, client=r))

        has_marker, marker, has_raw, raw, allowed, wait_ms = self.connector.run(op)
        found = _proved(presented, marker if int(has_marker) else None, raw if int(has_raw) else None)
        if found.key is None or int(allowed) < 0:
            return found
        return replace(found, rate=decision(allowed, wait_ms))


def _proved(presented: str, marker: bytes | str | None, raw: bytes | str | None) -> AuthLookup:
    """The lookup of ``presented`` given the marker and the record its id names (None: absent)."""
    record = _record(raw) if raw is not None else None
    if record is None or not hmac.compare_digest(record.digest, digest(presented)):
        return AuthLookup(enabled=_on(marker), key=None, known=marker is not None)
    return AuthLookup(enabled=True, key=record)


def _on(marker: bytes | str | None) -> bool:
    """The marker says on: ``1`` once a key was created (``0`` after ``agtos keys off``)."""
    return marker is not None and as_text(marker) == "1"


def _record(raw: bytes | str) -> ApiKey:
    return ApiKey(**json.loads(as_text(raw)))
