"""User profiles in Redis (no TTL: a profile lives until the user is forgotten)."""

from __future__ import annotations

from agtos.schemas import ProfileUpdate, UserProfile
from agtos.schemas.records import now_ms
from agtos.storage.keys import GlobalKeys
from agtos.storage.redis_conn import RedisConnector


class ProfileStore:
    def __init__(self, connector: RedisConnector, keys: GlobalKeys) -> None:
        self.connector = connector
        self.keys = keys

    def get(self, user_id: str) -> UserProfile:
        return self.parse(user_id, self.connector.run(lambda r: r.get(self.key(user_id))))

    def key(self, user_id: str) -> str:
        """The profile's key (a caller reading it with other keys of the user in one round trip)."""
        return self.keys.user(user_id).profile()

    @staticmethod
    def parse(user_id: str, raw: bytes | str | None) -> UserProfile:
        """The profile stored as ``raw`` (None: none stored yet)."""
        return UserProfile.model_validate_json(raw) if raw else UserProfile(user_id=user_id, updated_at=0)

    def merge(self, user_id: str, update: ProfileUpdate) -> UserProfile:
        """Apply the fields present in ``update``; list fields are replaced, not appended."""
        current = self.get(user_id)
        changes = update.model_dump(exclude_unset=True)
        # null clears name / communication_style; a list or opt_out sent as null is left unchanged
        changes = {k: v for k, v in changes.items() if v is not None or UserProfile.model_fields[k].default is None}
        merged = UserProfile.model_validate(
            {**current.model_dump(), **changes, "user_id": user_id, "updated_at": now_ms()}
        )
        self.save(merged)
        return merged

    def save(self, profile: UserProfile) -> None:
        key = self.keys.user(profile.user_id).profile()
        self.connector.run(lambda r: r.set(key, profile.model_dump_json()))
