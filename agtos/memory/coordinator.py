"""MemoryCoordinator: the one facade over working, episodic and (later) semantic memory."""

from __future__ import annotations

import logging
from dataclasses import dataclass
from typing import Any

from agtos.config import Settings
from agtos.events import EventBus
from agtos.memory.episodic import build_episode
from agtos.memory.working import WorkingMemory, WorkingMemoryStore
from agtos.providers.llm import LLMProvider, build_llm
from agtos.schemas import Episode, ProfileUpdate, Turn, UserProfile
from agtos.storage.episodes import EpisodeStore
from agtos.storage.keys import GlobalKeys, check_record_id, check_user_id
from agtos.storage.profiles import ProfileStore
from agtos.storage.redis_conn import RedisConnector, StorageUnavailable
from agtos.tasks.keyword_search import rank_by_keywords
from agtos.tasks.summarize import build_summariser

log = logging.getLogger(__name__)

SESSION_ENDED = "sessionEnded"
KEYWORD_SEARCH_WINDOW = 2_000


@dataclass(frozen=True)
class SessionEndResult:
    session_id: str
    saved: bool
    reason: str
    episode: Episode | None

    def public(self) -> dict[str, Any]:
        return {
            "sessionId": self.session_id,
            "saved": self.saved,
            "reason": self.reason,
            "episode": self.episode.public() if self.episode else None,
        }


@dataclass(frozen=True)
class SearchHit:
    episode: Episode
    score: float
    match_type: str

    def public(self) -> dict[str, Any]:
        return {**self.episode.public(), "score": self.score, "matchType": self.match_type}


class MemoryCoordinator:
    """Owns the tiers of one service process; the API and CLI call only this."""

    def __init__(
        self,
        settings: Settings,
        connector: RedisConnector | None = None,
        llm: LLMProvider | None = None,
    ) -> None:
        self.settings = settings
        self.keys = GlobalKeys(settings.key_prefix)
        self.connector = connector or RedisConnector(
            settings.redis_url, settings.data_dir, settings.redis_timeout_s
        )
        self.llm = llm if llm is not None else build_llm(settings.llm_slot("summarize"))
        self.summariser = build_summariser(self.llm)
        self.working = WorkingMemoryStore(settings.working, self.summariser)
        self.episodes = EpisodeStore(self.connector, self.keys, settings.episode_ttl_seconds)
        self.profiles = ProfileStore(self.connector, self.keys)
        self.events = EventBus()

    # -- working memory ---------------------------------------------------------------
    def add_turn(self, user_id: str, session_id: str, turn: Turn) -> WorkingMemory:
        """Append a turn to the session's working memory and journal it to Redis if reachable."""
        check_user_id(user_id)
        check_record_id(session_id, "session id")
        wm = self.working.get_or_create(user_id, session_id)
        if not wm.messages:
            self._restore_from_journal(user_id, session_id, wm)
        wm.add(turn)
        self._journal(user_id, session_id, turn)
        return wm

    def session(self, user_id: str, session_id: str) -> WorkingMemory | None:
        check_record_id(session_id, "session id")
        return self.working.get(check_user_id(user_id), session_id)

    def _journal(self, user_id: str, session_id: str, turn: Turn) -> None:
        key = self.keys.user(user_id).session_turns(session_id)
        ttl = self.settings.session_journal_ttl_seconds

        def op(r: Any) -> None:
            pipe = r.pipeline(transaction=True)
            pipe.rpush(key, turn.model_dump_json())
            pipe.ltrim(key, -5_000, -1)
            pipe.expire(key, ttl)
            pipe.execute()

        try:
            self.connector.run(op)
        except StorageUnavailable:
            log.warning("session journal not written (Redis unavailable); turn kept in working memory")

    def _journal_turns(self, user_id: str, session_id: str) -> list[Turn]:
        key = self.keys.user(user_id).session_turns(session_id)
        try:
            raws = self.connector.run(lambda r: r.lrange(key, 0, -1))
        except StorageUnavailable:
            return []
        return [Turn.model_validate_json(raw) for raw in raws]

    def _restore_from_journal(self, user_id: str, session_id: str, wm: WorkingMemory) -> None:
        """After a restart (or on another API worker) a session continues from its journal."""
        for turn in self._journal_turns(user_id, session_id):
            wm.add(turn)

    # -- episodic memory --------------------------------------------------------------
    def end_session(self, user_id: str, session_id: str) -> SessionEndResult:
        """Summarise the session, apply the save heuristics and store the episode (idempotent)."""
        check_user_id(user_id)
        check_record_id(session_id, "session id")
        turns = self._journal_turns(user_id, session_id)
        if not turns:
            wm = self.working.get(user_id, session_id)
            turns = list(wm.messages) if wm else []
        if not turns:
            return SessionEndResult(session_id, False, "session has no turns", None)
        draft = build_episode(user_id, session_id, turns, self.summariser)
        if not draft.decision.save:
            self._clear_session(user_id, session_id)
            return SessionEndResult(session_id, False, draft.decision.reason, None)
        self.episodes.save(draft.episode)
        self._clear_session(user_id, session_id)
        self.events.emit(
            SESSION_ENDED, {"user_id": user_id, "session_id": session_id, "episode_id": draft.episode.id}
        )
        return SessionEndResult(session_id, True, draft.decision.reason, draft.episode)

    def _clear_session(self, user_id: str, session_id: str) -> None:
        self.working.drop(user_id, session_id)
        key = self.keys.user(user_id).session_turns(session_id)
        self.connector.run(lambda r: r.delete(key))

    def list_episodes(self, user_id: str, limit: int = 20) -> list[Episode]:
        return self.episodes.recent(check_user_id(user_id), limit)

    def search_episodes(self, user_id: str, query: str, limit: int = 10) -> list[SearchHit]:
        """Keyword search over the user's most recent episodes."""
        window = self.episodes.recent(check_user_id(user_id), KEYWORD_SEARCH_WINDOW)
        return [SearchHit(ep, score, "keyword") for ep, score in rank_by_keywords(query, window, limit)]

    # -- profile ----------------------------------------------------------------------
    def get_profile(self, user_id: str) -> UserProfile:
        return self.profiles.get(check_user_id(user_id))

    def update_profile(self, user_id: str, update: ProfileUpdate) -> UserProfile:
        return self.profiles.merge(check_user_id(user_id), update)

    # -- health -----------------------------------------------------------------------
    def health(self) -> dict[str, Any]:
        redis_info = self.connector.describe()
        tiers = {
            "working": {"available": True, "sessions": len(self.working.active_sessions())},
            "episodic": {"available": redis_info["available"], "redis": redis_info},
        }
        degraded = [name for name, tier in tiers.items() if not tier["available"]]
        return {
            "status": "degraded" if degraded else "ok",
            "degraded": degraded,
            "tiers": tiers,
            "llm": {"provider": self.llm.name if self.llm else "builtin", "summariser": self.summariser.name},
        }

    def close(self) -> None:
        self.connector.close()
