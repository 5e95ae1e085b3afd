"""Query expansion through a stub Ollama, and keyword fallback when the embedder is unavailable."""

from __future__ import annotations

import json

from fastapi.testclient import TestClient

from agtos.config import LLMSlot, Settings
from agtos.memory.coordinator import MemoryCoordinator
from agtos.serving.app import create_app
from tests.helpers import BrokenEmbedder, user
from tests.stub_servers import StubModelServer
from tests.test_semantic_search import seed


def test_query_expansion_widens_recall(settings: Settings) -> None:
    with StubModelServer() as stub:
        slot = LLMSlot(provider="ollama", model="qwen3:4b", base_url=stub.url)
        expanding = MemoryCoordinator(settings.with_overrides(query_expansion=True, llm_slots={"expansion": slot}))
        try:
            seed(expanding)
            # the original query matches nothing by keyword; the expansion names the rare token
            stub.queue_chat(json.dumps({"queries": ["XJ-9000 router", "home network setup"]}))
            hits = expanding.search_episodes("alice", "that networking gadget", 3, "bm25")
            assert hits and hits[0].episode.id == "ep-router"
            chat = stub.requests_to("/api/chat")[-1]
            assert chat.body["format"] == "json" and chat.body["model"] == "qwen3:4b"

            stub.queue_chat("this is not json")  # a broken reply: fall back to the original query
            assert expanding.search_episodes("alice", "that networking gadget", 3, "bm25") == []
        finally:
            expanding.close()


def test_expansion_is_off_by_default(coordinator: MemoryCoordinator) -> None:
    assert coordinator.semantic.expander is None


def test_embedder_unavailable_falls_back_to_keyword_search(settings: Settings) -> None:
    coordinator = MemoryCoordinator(settings, embedder=BrokenEmbedder())  # type: ignore[arg-type]
    try:
        with TestClient(create_app(coordinator=coordinator)) as client:
            turns = [
                {"role": "user", "content": "Configure the XJ-9000 router firmware."},
                {"role": "assistant", "content": "Done, I've updated the firmware."},
            ]
            client.post("/api/memory/sessions/s1/turns", json={"turns": turns}, headers=user("ann"))
            assert client.post("/api/memory/sessions/s1/end", headers=user("ann")).json()["saved"] is True
            results = client.get("/api/memory/search", params={"q": "XJ-9000"}, headers=user("ann")).json()
            assert results["count"] == 1 and results["results"][0]["matchType"] == "keyword"
            health = client.get("/health").json()
            assert health["status"] == "degraded" and "semantic" in health["degraded"]
            assert health["tiers"]["semantic"]["searchMode"] == "bm25"
            assert "keyword" in health["tiers"]["semantic"]["degradedTo"]
    finally:
        coordinator.close()
