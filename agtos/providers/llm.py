"""LLM providers: Ollama and OpenAI-compatible chat APIs over HTTP, and a local transformers model
directory in process (:mod:`agtos.providers.transformers_llm`), behind one interface.

``build_llm(slot)`` returns ``None`` when the slot names no provider: callers then use
their deterministic built-in fallback, so everything works offline.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any, Protocol

import httpx

from agtos.config import LLMSlot
from agtos.tasks.url_credentials import mask_urls, split_userinfo

DEFAULT_BASE_URLS = {
    "ollama": "http://127.0.0.1:11434",
    "openai": "https://api.openai.com/v1",
    "openrouter": "https://openrouter.ai/api/v1",
}


class LLMError(RuntimeError):
    """The provider failed or answered something unusable."""


class LLMProvider(Protocol):
    """Chat completion: messages in, assistant text out."""

    name: str
    model: str

    def chat(self, messages: list[dict[str, str]], *, json_mode: bool = False) -> str: ...


@dataclass
class _HTTPProvider:
    name: str
    model: str
    base_url: str
    api_key: str = ""
    timeout_s: float = 60.0

    def _post(self, path: str, payload: dict[str, Any]) -> dict[str, Any]:
        headers = {"Authorization": f"Bearer {self.api_key}"} if self.api_key else {}
        url, auth = split_userinfo(self.base_url.rstrip("/") + path)  # URL credentials go as Basic auth, unlogged
        try:
            response = httpx.post(url, json=payload, headers=headers, auth=auth, timeout=self.timeout_s)
            response.raise_for_status()
            return response.json()
        except (httpx.HTTPError, json.JSONDecodeError) as exc:
            raise LLMError(f"{self.name} request to {path} failed: {mask_urls(str(exc))}") from exc


class OllamaProvider(_HTTPProvider):
    """Ollama's ``POST /api/chat`` (non-streaming)."""

    def chat(self, messages: list[dict[str, str]], *, json_mode: bool = False) -> str:
        payload: dict[str, Any] = {"model": self.model, "messages": messages, "stream": False}
        if json_mode:
            payload["format"] = "json"
        body = self._post("/api/chat", payload)
        try:
            return str(body["message"]["content"])
        except (KeyError, TypeError) as exc:
            raise LLMError(f"ollama answered without message.content: {body!r:.200}") from exc


class OpenAICompatibleProvider(_HTTPProvider):
    """``POST {base}/chat/completions`` as spoken by OpenAI, OpenRouter, vLLM, llama.cpp..."""

    def chat(self, messages: list[dict[str, str]], *, json_mode: bool = False) -> str:
        payload: dict[str, Any] = {"model": self.model, "messages": messages}
        if json_mode:
            payload["response_format"] = {"type": "json_object"}
        body = self._post("/chat/completions", payload)
        try:
            return str(body["choices"][0]["message"]["content"])
        except (KeyError, IndexError, TypeError) as exc:
            raise LLMError(f"{self.name} answered without choices[0].message.content") from exc


def build_llm(slot: LLMSlot) -> LLMProvider | None:
    """The provider a slot names, or None for the built-in deterministic fallback."""
    kind = slot.provider.lower()
    if kind in ("", "none", "builtin"):
        return None
    base = slot.base_url or DEFAULT_BASE_URLS.get(kind, "")
    if kind == "ollama":
        return OllamaProvider("ollama", slot.model, base, slot.api_key, slot.timeout_s)
    if kind in ("openai", "openrouter", "openai-compatible"):
        if not base:
            raise ValueError(f"LLM provider {kind!r} needs a base_url")
        return OpenAICompatibleProvider(kind, slot.model, base, slot.api_key, slot.timeout_s)
    if kind == "transformers":  # in process, from a local directory; torch is imported only on first use
        from agtos.providers.transformers_llm import TransformersLLM

        return TransformersLLM(slot.model, max_new_tokens=slot.max_tokens, timeout_s=slot.timeout_s)
    raise ValueError(f"unknown LLM provider {slot.provider!r} (use none, ollama, openai, openrouter, transformers)")


def parse_json_reply(text: str) -> Any:
    """JSON from a model reply, tolerating a fenced ```json block around it."""
    cleaned = text.strip()
    if cleaned.startswith("```"):
        cleaned = cleaned.strip("`")
        cleaned = cleaned[cleaned.find("\n") + 1 :] if "\n" in cleaned else cleaned
    try:
        return json.loads(cleaned)
    except json.JSONDecodeError as exc:
        raise LLMError(f"model reply is not JSON: {text[:200]!r}") from exc
