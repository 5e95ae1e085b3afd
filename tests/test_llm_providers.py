"""LLM providers against the local stub server, JSON reply parsing, summariser fallback."""

from __future__ import annotations

import json
from collections.abc import Callable, Iterator

import httpx
import pytest

from agtos.config import LLMSlot
from agtos.providers.llm import (
    LLMError,
    LLMProvider,
    OllamaProvider,
    OpenAICompatibleProvider,
    build_llm,
    parse_json_reply,
)
from agtos.schemas import Role, Turn
from agtos.tasks.summarize import LLMSummariser, extractive_summary
from tests.stub_servers import StubModelServer

MESSAGES = [{"role": "system", "content": "be brief"}, {"role": "user", "content": "hello there"}]


@pytest.fixture
def stub() -> Iterator[StubModelServer]:
    with StubModelServer() as server:
        yield server


def ollama(stub: StubModelServer) -> OllamaProvider:
    return OllamaProvider("ollama", "llama3.2", stub.url, timeout_s=5)


def openai(stub: StubModelServer, key: str = "sk-test") -> OpenAICompatibleProvider:
    return OpenAICompatibleProvider("openai", "gpt-4o-mini", stub.url + "/v1", key, timeout_s=5)


def test_ollama_chat_payload_and_reply(stub: StubModelServer) -> None:
    stub.queue_chat("first answer", '{"ok": true}')
    provider = ollama(stub)
    assert provider.chat(MESSAGES) == "first answer"
    assert provider.chat(MESSAGES, json_mode=True) == '{"ok": true}'
    plain, json_req = stub.requests_to("/api/chat")
    assert plain.body == {"model": "llama3.2", "messages": MESSAGES, "stream": False}
    assert json_req.body["format"] == "json"
    assert "authorization" not in plain.headers
    assert provider.chat(MESSAGES) == "stub reply"  # queue empty: default responder


def test_openai_chat_payload_and_reply(stub: StubModelServer) -> None:
    stub.api_key = "sk-test"
    stub.queue_chat(lambda body: body["messages"][-1]["content"].upper())
    provider = openai(stub)
    assert provider.chat(MESSAGES) == "HELLO THERE"
    assert provider.chat(MESSAGES, json_mode=True) == "stub reply"
    plain, json_req = stub.requests
    assert plain.path == "/v1/chat/completions"
    assert plain.body == {"model": "gpt-4o-mini", "messages": MESSAGES}
    assert plain.headers["authorization"] == "Bearer sk-test"
    assert json_req.body["response_format"] == {"type": "json_object"}


@pytest.mark.parametrize("make", [ollama, openai], ids=["ollama", "openai"])
def test_http_errors_and_malformed_bodies_raise_llm_error(
    stub: StubModelServer, make: Callable[[StubModelServer], LLMProvider]
) -> None:
    provider = make(stub)
    stub.fail_next(500)
    with pytest.raises(LLMError, match="500"):
        provider.chat(MESSAGES)
    stub.malformed_next()
    with pytest.raises(LLMError):
        provider.chat(MESSAGES)
    assert provider.chat(MESSAGES) == "stub reply"  # faults are one-shot


def test_openai_wrong_key_and_unreachable_server(stub: StubModelServer) -> None:
    stub.api_key = "sk-right"
    with pytest.raises(LLMError, match="401"):
        openai(stub, key="sk-wrong").chat(MESSAGES)
    provider = ollama(stub)
    stub.stop()
    with pytest.raises(LLMError):
        provider.chat(MESSAGES)


def test_build_llm(stub: StubModelServer) -> None:
    assert build_llm(LLMSlot()) is None
    provider = build_llm(LLMSlot(provider="ollama", model="qwen3", base_url=stub.url))
    assert isinstance(provider, OllamaProvider) and provider.chat(MESSAGES) == "stub reply"
    assert isinstance(build_llm(LLMSlot(provider="openrouter", model="m")), OpenAICompatibleProvider)
    with pytest.raises(ValueError, match="unknown LLM provider"):
        build_llm(LLMSlot(provider="bard"))


def test_stub_ollama_ps_and_streaming(stub: StubModelServer) -> None:
    assert httpx.get(stub.url + "/api/ps").json() == {"models": []}
    stub.queue_chat("streamed")
    response = httpx.post(stub.url + "/api/chat", json={"model": "llama3.2", "messages": MESSAGES})
    chunks = [json.loads(line) for line in response.text.splitlines()]
    assert chunks[0]["message"]["content"] == "streamed" and chunks[-1]["done"] is True
    (loaded,) = httpx.get(stub.url + "/api/ps").json()["models"]
    assert loaded["name"] == loaded["model"] == "llama3.2" and loaded["expires_at"]
    assert httpx.get(stub.url + "/nope").status_code == 404


@pytest.mark.parametrize(
    ("reply", "parsed"),
    [
        ('```json\n{"facts": ["likes tea"]}\n```', {"facts": ["likes tea"]}),
        ("```\n[1, 2]\n```", [1, 2]),
        ('  {"a": 1}  ', {"a": 1}),
    ],
)
def test_parse_json_reply(reply: str, parsed: object) -> None:
    assert parse_json_reply(reply) == parsed


def test_parse_json_reply_rejects_prose() -> None:
    with pytest.raises(LLMError, match="not JSON"):
        parse_json_reply("Sure! I cannot do that.")


def _turns() -> list[Turn]:
    return [
        Turn(role=Role.user, content="I want to plan a trip to Lisbon in May. I love seafood."),
        Turn(role=Role.assistant, content="Lisbon in May is lovely. Try the seafood in Alfama."),
    ]


def test_llm_summariser_uses_the_llm(stub: StubModelServer) -> None:
    stub.queue_chat("  User plans a May trip to Lisbon and loves seafood.  ")
    summariser = LLMSummariser(ollama(stub))
    assert summariser.name == "llm:ollama"
    assert summariser.summarise(_turns()) == "User plans a May trip to Lisbon and loves seafood."
    assert "Lisbon" in stub.requests[0].body["messages"][-1]["content"]


def test_llm_summariser_falls_back_to_extractive(stub: StubModelServer) -> None:
    turns = _turns()
    summariser = LLMSummariser(openai(stub))
    stub.fail_next(500)
    assert summariser.summarise(turns) == extractive_summary(turns)
    stub.malformed_next()
    assert summariser.summarise(turns) == extractive_summary(turns)
    stub.queue_chat("   ")  # an empty reply also falls back
    assert summariser.summarise(turns) == extractive_summary(turns)
