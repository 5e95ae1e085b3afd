"""Every public route of the API as a client method, declared once with :func:`~agtos.client.endpoint_spec.endpoint`."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Annotated, Any, Literal

from pydantic import Field, TypeAdapter

from agtos.client.endpoint_spec import UNSET, Call, Endpoint, Parts, Unset, body, body_fields, endpoint
from agtos.schemas import EntityType, MaintenanceReport, ProfileUpdate, Turn
from agtos.schemas.api import (
    MAX_QUERY_CHARS,
    AskOut,
    AskRequest,
    ConclusionDeletedOut,
    ConclusionsOut,
    ContextOut,
    ContextRequest,
    ConversationSession,
    ConversationsIn,
    ConversationsOut,
    DreamOut,
    EntityConclusionsOut,
    EntityDeletedOut,
    EntityEnvelope,
    EntityEpisodesOut,
    EntityMergeOut,
    EntityPageOut,
    EntityRelationshipsOut,
    EntityStatsOut,
    EntityUpdate,
    EpisodesOut,
    ForgetAllOut,
    ForgetItemOut,
    ForgetKind,
    ForgetRequest,
    HealthOut,
    ImportOut,
    ImportRequest,
    MaintenanceHistoryOut,
    MaintenanceRun,
    MemoriesOut,
    MemoryDeletedOut,
    MemoryHistoryOut,
    MemoryIn,
    MemoryOut,
    MemoryUpdate,
    MemoryWriteOut,
    MergeRequest,
    PrivacyOut,
    PrivacySettings,
    PrivacyUpdateOut,
    ProfileOut,
    ResponseIn,
    ResponseIngestOut,
    SearchOut,
    SessionEndOut,
    SessionOut,
    SourceName,
    SourcesOut,
    TurnsAppendedOut,
    TurnsIn,
)

SearchMode = Literal["hybrid", "vector", "bm25"]
ConclusionKind = Literal["explicit", "deductive", "inductive", "abductive"]

ForgetResult = ForgetAllOut | ForgetItemOut
FORGET_RESULT: TypeAdapter[ForgetResult] = TypeAdapter(ForgetResult)


# ruff: noqa: N805 - the functions below build a call's parts; Endpoint binds them to the client
class Endpoints:
    """Every public route of the API as a method (the client test checks none is missing)."""

    def _send(self, call: Call[Any]) -> Any:
        raise NotImplementedError

    # -- health ---------------------------------------------------------------------------
    @endpoint("GET", "/health", HealthOut)
    def health() -> Parts:
        """Per-tier status (always 200 while the service runs)."""
        return Parts()

    @endpoint("GET", "/metrics", str)
    def metrics() -> Parts:
        """Prometheus metrics (text exposition format)."""
        return Parts()

    # -- sessions -------------------------------------------------------------------------
    @endpoint("POST", "/api/memory/sessions/{session_id}/turns", TurnsAppendedOut)
    def add_turns(
        session_id: str, turns: Sequence[Turn | Mapping[str, Any]], speakers: Mapping[str, str] | None = None
    ) -> Parts:
        """Append turns (``{"role", "content", "name"?, "timestamp"?}``) to a live session."""
        return Parts({"session_id": session_id}, body=body(TurnsIn, turns=list(turns), speakers=speakers))

    @endpoint("GET", "/api/memory/sessions/{session_id}", SessionOut)
    def get_session(session_id: str) -> Parts:
        """A live session's working memory (404 if none)."""
        return Parts({"session_id": session_id})

    @endpoint("POST", "/api/memory/sessions/{session_id}/end", SessionEndOut)
    def end_session(session_id: str, wait: float | None = None) -> Parts:
        """Summarise the session into an episode (idempotent); queue mode: ``wait`` up to that many seconds."""
        return Parts({"session_id": session_id}, params={"wait": wait})

    @endpoint("POST", "/api/memory/conversations", ConversationsOut)
    def ingest_conversations(sessions: Sequence[ConversationSession | Mapping[str, Any]]) -> Parts:
        """Store past sessions (id, started_at?, speakers?, dated turns) in one batch; idempotent on ids."""
        return Parts(body=body(ConversationsIn, sessions=list(sessions)))

    # -- memories -------------------------------------------------------------------------
    @endpoint("POST", "/api/memory/memories", MemoryWriteOut)
    def add_memory(
        text: str,
        kind: Literal["fact", "preference"] | None = None,
        source: str | None = None,
        valid_from: int | None = None,
        valid_until: int | None = None,
    ) -> Parts:
        """Remember a fact or preference; a near-duplicate of a stored one is merged (``merged_into``)."""
        fields = {"source": source, "valid_from": valid_from, "valid_until": valid_until}
        return Parts(body=body(MemoryIn, text=text, kind=kind, **fields))

    @endpoint("GET", "/api/memory/memories", MemoriesOut)
    def list_memories(
        q: Annotated[
            str | None,
            Field(max_length=MAX_QUERY_CHARS, pattern=r"\S", description="search (hybrid); newest first without"),
        ] = None,
        kind: Literal["fact", "preference", "pattern"] | None = None,
        limit: Annotated[int, Field(ge=1, le=100)] = 20,
        offset: Annotated[int, Field(ge=0, le=10_000)] = 0,
    ) -> Parts:
        """Memories, newest first, or the best matches of ``q``."""
        return Parts(params={"q": q, "kind": kind, "limit": limit, "offset": offset})

    @endpoint("GET", "/api/memory/memories/{memory_id}", MemoryOut)
    def get_memory(memory_id: str) -> Parts:
        return Parts({"memory_id": memory_id})

    @endpoint("PUT", "/api/memory/memories/{memory_id}", MemoryOut)
    def update_memory(
        memory_id: str,
        text: str | None = None,
        kind: Literal["fact", "preference"] | None = None,
        valid_from: int | None = None,
        valid_until: int | Unset | None = UNSET,
    ) -> Parts:
        """Edit a memory; ``valid_until=None`` makes a closed memory current again."""
        fields = {"text": text, "kind": kind, "valid_from": valid_from}
        until = {} if isinstance(valid_until, Unset) else {"valid_until": valid_until}
        return Parts({"memory_id": memory_id}, body=MemoryUpdate.model_validate({**body_fields(fields), **until}))

    @endpoint("DELETE", "/api/memory/memories/{memory_id}", MemoryDeletedOut)
    def delete_memory(memory_id: str) -> Parts:
        return Parts({"memory_id": memory_id})

    @endpoint("GET", "/api/memory/memories/{memory_id}/history", MemoryHistoryOut)
    def memory_history(memory_id: str) -> Parts:
        """Every change of a memory, oldest first, with its origin."""
        return Parts({"memory_id": memory_id})

    # -- recall ---------------------------------------------------------------------------
    @endpoint("GET", "/api/memory/episodes", EpisodesOut)
    def list_episodes(limit: int | None = None) -> Parts:
        """Episodes, newest first."""
        return Parts(params={"limit": limit})

    @endpoint("GET", "/api/memory/search", SearchOut)
    def search(
        q: Annotated[str, Field(min_length=1, max_length=MAX_QUERY_CHARS, pattern=r"\S", description="query")],
        limit: Annotated[int, Field(ge=1, le=50)] = 10,
        mode: Annotated[SearchMode | None, Field(description="override AGTOS_MEMORY_SEARCH_MODE for this call")] = None,
    ) -> Parts:
        """Episodes ranked by their best evidence (hybrid BM25 + vector unless ``mode``)."""
        return Parts(params={"q": q, "limit": limit, "mode": mode})

    @endpoint("POST", "/api/memory/context", ContextOut)
    def context(
        query: str, session_id: str | None = None, token_budget: int | None = None, limit: int | None = None
    ) -> Parts:
        """The memory section for a system prompt, fitted to ``token_budget`` tokens."""
        return Parts(
            body=body(ContextRequest, query=query, session_id=session_id, token_budget=token_budget, limit=limit)
        )

    @endpoint("POST", "/api/memory/ask", AskOut)
    def ask(question: str, limit: int | None = None) -> Parts:
        """An answer about the user with the evidence it drew on."""
        return Parts(body=body(AskRequest, question=question, limit=limit))

    @endpoint("GET", "/api/memory/profile", ProfileOut)
    def get_profile() -> Parts:
        return Parts()

    @endpoint("PUT", "/api/memory/profile", ProfileOut)
    def update_profile(update: ProfileUpdate | Mapping[str, Any]) -> Parts:
        """Merge the fields given into the profile."""
        return Parts(body=ProfileUpdate.model_validate(update))

    # -- insight --------------------------------------------------------------------------
    @endpoint("GET", "/api/memory/conclusions", ConclusionsOut)
    def list_conclusions(limit: int | None = None, type: ConclusionKind | None = None) -> Parts:
        return Parts(params={"limit": limit, "type": type})

    @endpoint("DELETE", "/api/memory/conclusions/{conclusion_id}", ConclusionDeletedOut)
    def delete_conclusion(conclusion_id: str) -> Parts:
        return Parts({"conclusion_id": conclusion_id})

    @endpoint("POST", "/api/memory/dream", DreamOut)
    def dream() -> Parts:
        """Consolidate recent episodes into conclusions now."""
        return Parts()

    @endpoint("POST", "/api/memory/responses", ResponseIngestOut)
    def ingest_response(
        session_id: str,
        response: str,
        query: str | None = None,
        tool_calls: int | None = None,
        reasoning_steps: int | None = None,
    ) -> Parts:
        """Query-as-Ingest: keep a valuable agent response as an episode."""
        fields = {"query": query, "tool_calls": tool_calls, "reasoning_steps": reasoning_steps}
        return Parts(body=body(ResponseIn, session_id=session_id, response=response, **fields))

    # -- maintenance ----------------------------------------------------------------------
    @endpoint("POST", "/api/memory/maintain", MaintenanceRun)
    def maintain() -> Parts:
        """Queue a lint sweep (202); follow it with :meth:`maintenance_run`."""
        return Parts()

    @endpoint("GET", "/api/memory/maintain/runs/{run_id}", MaintenanceRun)
    def maintenance_run(run_id: str) -> Parts:
        return Parts({"run_id": run_id})

    @endpoint("GET", "/api/memory/maintain/history", MaintenanceHistoryOut)
    def maintenance_history(limit: int | None = None) -> Parts:
        return Parts(params={"limit": limit})

    @endpoint("GET", "/api/memory/maintain/history/{timestamp}", MaintenanceReport)
    def maintenance_report(timestamp: int) -> Parts:
        return Parts({"timestamp": timestamp})

    # -- privacy, import ------------------------------------------------------------------
    @endpoint("POST", "/api/memory/forget", FORGET_RESULT, ForgetResult)
    def forget(kind: ForgetKind | Literal["all"], id: str | None = None) -> Parts:
        """Delete one record (``kind``, ``id``) or, with ``"all"``, everything stored for the user."""
        return Parts(body=body(ForgetRequest, kind=kind, id=id))

    @endpoint("GET", "/api/memory/privacy", PrivacyOut)
    def get_privacy() -> Parts:
        return Parts()

    @endpoint("PUT", "/api/memory/privacy", PrivacyUpdateOut)
    def set_privacy(opt_out: bool, forget_existing: bool | None = None) -> Parts:
        return Parts(body=body(PrivacySettings, opt_out=opt_out, forget_existing=forget_existing))

    @endpoint("GET", "/api/memory/sources", SourcesOut)
    def list_sources() -> Parts:
        """Other AI tools' memories the server can import."""
        return Parts()

    @endpoint("POST", "/api/memory/import", ImportOut)
    def import_sources(sources: Sequence[SourceName] | None = None) -> Parts:
        return Parts(body=body(ImportRequest, sources=None if sources is None else list(sources)))

    # -- entities -------------------------------------------------------------------------
    @endpoint("GET", "/api/entities", EntityPageOut)
    def list_entities(
        q: str | None = None, type: EntityType | None = None, limit: int | None = None, offset: int | None = None
    ) -> Parts:
        return Parts(params={"q": q, "type": type, "limit": limit, "offset": offset})

    @endpoint("GET", "/api/entities/stats", EntityStatsOut)
    def entity_stats() -> Parts:
        return Parts()

    @endpoint("GET", "/api/entities/{entity_id}", EntityEnvelope)
    def get_entity(entity_id: str) -> Parts:
        return Parts({"entity_id": entity_id})

    @endpoint("PUT", "/api/entities/{entity_id}", EntityEnvelope)
    def update_entity(
        entity_id: str,
        name: str | None = None,
        type: EntityType | None = None,
        aliases: Sequence[str] | None = None,
        confidence: float | None = None,
    ) -> Parts:
        fields = {"name": name, "type": type, "aliases": None if aliases is None else list(aliases)}
        return Parts({"entity_id": entity_id}, body=body(EntityUpdate, confidence=confidence, **fields))

    @endpoint("DELETE", "/api/entities/{entity_id}", EntityDeletedOut)
    def delete_entity(entity_id: str) -> Parts:
        return Parts({"entity_id": entity_id})

    @endpoint("POST", "/api/entities/{entity_id}/merge", EntityMergeOut)
    def merge_entity(entity_id: str, duplicate_id: str) -> Parts:
        return Parts({"entity_id": entity_id}, body=body(MergeRequest, duplicate_id=duplicate_id))

    @endpoint("GET", "/api/entities/{entity_id}/episodes", EntityEpisodesOut)
    def entity_episodes(entity_id: str) -> Parts:
        return Parts({"entity_id": entity_id})

    @endpoint("GET", "/api/entities/{entity_id}/conclusions", EntityConclusionsOut)
    def entity_conclusions(entity_id: str, limit: int | None = None) -> Parts:
        return Parts({"entity_id": entity_id}, params={"limit": limit})

    @endpoint("GET", "/api/entities/{entity_id}/relationships", EntityRelationshipsOut)
    def entity_relationships(entity_id: str) -> Parts:
        return Parts({"entity_id": entity_id})


def routes() -> dict[tuple[str, str], str]:
    """(HTTP method, path template) → the client method that calls it."""
    return {(e.method, e.path): name for name, e in vars(Endpoints).items() if isinstance(e, Endpoint)}
