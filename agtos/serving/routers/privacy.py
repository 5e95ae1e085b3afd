"""Privacy: forget records or everything, opt out of persistence."""

from __future__ import annotations

from fastapi import APIRouter

from agtos.schemas.api import (
    ForgetAllOut,
    ForgetItemOut,
    ForgetRequest,
    PrivacyOut,
    PrivacySettings,
    PrivacyUpdateOut,
)
from agtos.serving.deps import Coordinator, UserId
from agtos.serving.errors import USER_ERRORS, errors
from agtos.serving.lock_waits import first_lock_bounded
from agtos.serving.strict_json import StrictJSONRoute

router = APIRouter(prefix="/api/memory", tags=["privacy"], responses=USER_ERRORS, route_class=StrictJSONRoute)


@router.post("/forget", response_model=ForgetAllOut | ForgetItemOut, responses=errors(404, 413))
def forget(coordinator: Coordinator, user_id: UserId, body: ForgetRequest) -> ForgetAllOut | ForgetItemOut:
    """Delete one record (from Redis and every index) or everything stored for this user."""
    if body.kind == "all":
        return ForgetAllOut.model_validate(coordinator.privacy.forget_all(user_id))
    assert body.id is not None
    if body.kind == "episode":  # its record goes before its first lock: it waits for each lock in full
        return ForgetItemOut.model_validate(coordinator.privacy.forget_item(user_id, body.kind, body.id))
    with first_lock_bounded():
        forgotten = coordinator.privacy.forget_item(user_id, body.kind, body.id)
    return ForgetItemOut.model_validate(forgotten)


@router.get("/privacy", response_model=PrivacyOut)
def get_privacy(coordinator: Coordinator, user_id: UserId) -> PrivacyOut:
    """The user's opt-out setting, read from Redis (503 while it cannot be read: never a guess)."""
    return PrivacyOut(user_id=user_id, opt_out=coordinator.privacy.opt_out_setting(user_id))


@router.put("/privacy", response_model=PrivacyUpdateOut, responses=errors(413))
def put_privacy(coordinator: Coordinator, user_id: UserId, body: PrivacySettings) -> PrivacyUpdateOut:
    """Opt out (working memory only, nothing written to Redis) or back in."""
    return PrivacyUpdateOut.model_validate(coordinator.privacy.set_opt_out(user_id, body.opt_out, body.forget_existing))
