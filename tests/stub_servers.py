"""A local stand-in for Ollama and OpenAI-compatible model servers, for tests.

Usage::

    with StubModelServer() as stub:
        stub.queue_chat('{"facts": []}', "second reply")   # chat replies, in order
        stub.fail_next(500)                                # next request gets HTTP 500
        stub.malformed_next()                              # next one gets 200 + broken JSON
        OllamaProvider("ollama", "llama3", stub.url).chat([...])
        stub.requests[-1].body                             # what the client sent

Endpoints (the real wire formats; OpenAI routes match by suffix, so ``stub.url + "/v1"``
works as a base URL): Ollama ``POST /api/chat`` (non-stream JSON, or NDJSON when
``stream`` is not false), ``POST /api/embed``, ``GET /api/ps``; OpenAI
``POST .../chat/completions`` and ``POST .../embeddings``.

Chat content comes from the queue, else from ``chat_responder(body)`` (default ``"stub reply"``).
Embeddings are :func:`hash_embedding` of each text: a hashed bag of words, deliberately
*not* unit-norm, so texts sharing words are similar and clients must normalise.
"""

from __future__ import annotations

import hashlib
import json
import re
import threading
import time
from collections import deque
from collections.abc import Callable
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from types import TracebackType
from typing import Any

ChatReply = str | Callable[[dict[str, Any]], str]
_WORD = re.compile(r"\w+")


def hash_embedding(text: str, dim: int = 64) -> list[float]:
    """Deterministic bag-of-words vector: each lower-cased word adds 1 to a hashed bucket."""
    vector = [0.0] * dim
    for word in _WORD.findall(text.lower()) or [text or "<empty>"]:
        bucket = int.from_bytes(hashlib.blake2b(word.encode(), digest_size=8).digest(), "big") % dim
        vector[bucket] += 1.0
    return vector


@dataclass
class RecordedRequest:
    """One request the stub received (``headers`` keys lower-cased, ``body`` parsed JSON or None)."""

    method: str
    path: str
    body: Any
    headers: dict[str, str]


@dataclass
class _Fault:
    status: int
    malformed: bool
    path_suffix: str | None
    body: bytes | None = None  # the answer's raw body (else a short JSON error, or the malformed JSON)


@dataclass
class StubModelServer:
    """Threaded HTTP stub on ``127.0.0.1`` (random port); use as a context manager.

    Attributes a test may set: ``chat_responder``, ``embed_dim``, ``loaded_models`` (what
    ``/api/ps`` lists; Ollama chat/embed calls add their model), ``api_key`` (when set,
    OpenAI routes answer 401 unless ``Authorization: Bearer <api_key>``), ``delay_s`` (sleep
    before each answer), ``reverse_embeddings`` (OpenAI ``data`` returned in reverse order).
    """

    chat_responder: Callable[[dict[str, Any]], str] = lambda body: "stub reply"
    embed_dim: int = 64
    loaded_models: list[str] = field(default_factory=list)
    api_key: str | None = None
    delay_s: float = 0.0
    reverse_embeddings: bool = False
    requests: list[RecordedRequest] = field(default_factory=list, init=False)
    _chat_queue: deque[ChatReply] = field(default_factory=deque, init=False, repr=False)
    _faults: deque[_Fault] = field(default_factory=deque, init=False, repr=False)
    _lock: threading.Lock = field(default_factory=threading.Lock, init=False, repr=False)
    _server: ThreadingHTTPServer | None = field(default=None, init=False, repr=False)
    _thread: threading.Thread | None = field(default=None, init=False, repr=False)

    # -- lifecycle ----------------------------------------------------------------------------
    @property
    def url(self) -> str:
        """Base URL, e.g. ``http://127.0.0.1:54321`` (no trailing slash)."""
        if self._server is None:
            raise RuntimeError("stub server is not running")
        host, port = self._server.server_address[:2]
        return f"http://{host}:{port}"

    def start(self) -> StubModelServer:
        stub = self

        class Handler(_Handler):
            server_stub = stub

        self._server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self._server.daemon_threads = True
        self._thread = threading.Thread(target=self._server.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True)
        self._thread.start()
        return self

    def stop(self) -> None:
        if self._server is not None:
            self._server.shutdown()
            self._server.server_close()
            self._server = None
        if self._thread is not None:
            self._thread.join(timeout=5)
            self._thread = None

    def __enter__(self) -> StubModelServer:
        return self.start()

    def __exit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        self.stop()

    # -- scripting ----------------------------------------------------------------------------
    def queue_chat(self, *replies: ChatReply) -> None:
        """Chat contents for the next chat calls, in order (a callable gets the request body)."""
        with self._lock:
            self._chat_queue.extend(replies)

    def fail_next(
        self, status: int = 500, *, times: int = 1, path_suffix: str | None = None, body: bytes | None = None
    ) -> None:
        """The next ``times`` requests (optionally only paths ending so) get HTTP ``status`` (with ``body``)."""
        with self._lock:
            self._faults.extend(_Fault(status, False, path_suffix, body) for _ in range(times))

    def malformed_next(self, *, times: int = 1, path_suffix: str | None = None, body: bytes | None = None) -> None:
        """The next ``times`` requests get HTTP 200 with a body that is not valid JSON (``body``)."""
        with self._lock:
            self._faults.extend(_Fault(200, True, path_suffix, body) for _ in range(times))

    def requests_to(self, path_suffix: str) -> list[RecordedRequest]:
        """Recorded requests whose path ends with ``path_suffix``."""
        return [r for r in self.requests if r.path.endswith(path_suffix)]

    # -- internals used by the handler -------------------------------------------------------
    def _take_fault(self, path: str) -> _Fault | None:
        with self._lock:
            for fault in self._faults:
                if fault.path_suffix is None or path.endswith(fault.path_suffix):
                    self._faults.remove(fault)
                    return fault
        return None

    def _chat_content(self, body: dict[str, Any]) -> str:
        with self._lock:
            reply = self._chat_queue.popleft() if self._chat_queue else self.chat_responder
        return reply if isinstance(reply, str) else reply(body)

    def _note_model(self, model: Any) -> None:
        with self._lock:
            if isinstance(model, str) and model and model not in self.loaded_models:
                self.loaded_models.append(model)


def _inputs(body: dict[str, Any]) -> list[str]:
    raw = body.get("input", [])
    return [raw] if isinstance(raw, str) else [str(t) for t in raw]


def _now_iso() -> str:
    return time.strftime("%Y-%m-%dT%H:%M:%S.000000000Z", time.gmtime())


class _Handler(BaseHTTPRequestHandler):
    server_stub: StubModelServer

    def log_message(self, format: str, *args: Any) -> None:  # silence stderr logging
        pass

    def do_GET(self) -> None:
        self._handle("GET")

    def do_POST(self) -> None:
        self._handle("POST")

    def _send(self, status: int, payload: Any = None, raw: bytes | None = None, ctype: str = "") -> None:
        data = raw if raw is not None else json.dumps(payload).encode()
        self.send_response(status)
        self.send_header("Content-Type", ctype or "application/json; charset=utf-8")
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)

    def _handle(self, method: str) -> None:
        stub = self.server_stub
        length = int(self.headers.get("Content-Length") or 0)
        raw = self.rfile.read(length) if length else b""
        try:
            body = json.loads(raw) if raw else None
        except json.JSONDecodeError:
            body = None
        path = self.path.split("?", 1)[0]
        headers = {k.lower(): v for k, v in self.headers.items()}
        with stub._lock:
            stub.requests.append(RecordedRequest(method, path, body, headers))
        if stub.delay_s:
            time.sleep(stub.delay_s)
        fault = stub._take_fault(path)
        if fault is not None:
            if fault.malformed:
                self._send(200, raw=fault.body or b'{"this is": not json', ctype="application/json")
            elif fault.body is not None:
                self._send(fault.status, raw=fault.body, ctype="text/plain")
            else:
                self._send(fault.status, {"error": f"stub failure {fault.status}"})
            return
        route = (method, path)
        openai_route = method == "POST" and path.endswith(("/chat/completions", "/embeddings"))
        if openai_route and stub.api_key and headers.get("authorization") != f"Bearer {stub.api_key}":
            self._send(401, {"error": {"message": "invalid api key", "type": "invalid_request_error"}})
            return
        if method == "POST" and not isinstance(body, dict):
            self._send(400, {"error": "request body must be a JSON object"})
            return
        if route == ("POST", "/api/chat"):
            self._ollama_chat(body)
        elif route == ("POST", "/api/embed"):
            stub._note_model(body.get("model"))
            vectors = [hash_embedding(t, stub.embed_dim) for t in _inputs(body)]
            self._send(
                200,
                {
                    "model": body.get("model", ""),
                    "embeddings": vectors,
                    "total_duration": 1_000_000,
                    "load_duration": 1000,
                    "prompt_eval_count": sum(len(t.split()) for t in _inputs(body)),
                },
            )
        elif route == ("GET", "/api/ps"):
            expires = time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(time.time() + 300))
            models = [
                {
                    "name": m,
                    "model": m,
                    "size": 1_000_000,
                    "digest": hashlib.sha256(m.encode()).hexdigest(),
                    "details": {"format": "gguf", "family": "stub"},
                    "expires_at": expires,
                    "size_vram": 1_000_000,
                }
                for m in list(stub.loaded_models)
            ]
            self._send(200, {"models": models})
        elif openai_route and path.endswith("/chat/completions"):
            self._openai_chat(body)
        elif openai_route:
            inputs = _inputs(body)
            data = [
                {"object": "embedding", "embedding": hash_embedding(t, stub.embed_dim), "index": i}
                for i, t in enumerate(inputs)
            ]
            if stub.reverse_embeddings:
                data.reverse()
            tokens = sum(len(t.split()) for t in inputs)
            self._send(
                200,
                {
                    "object": "list",
                    "data": data,
                    "model": body.get("model", ""),
                    "usage": {"prompt_tokens": tokens, "total_tokens": tokens},
                },
            )
        else:
            self._send(404, {"error": f"no stub route for {method} {path}"})

    def _ollama_chat(self, body: dict[str, Any]) -> None:
        stub = self.server_stub
        stub._note_model(body.get("model"))
        content = stub._chat_content(body)
        model = body.get("model", "")
        final = {
            "model": model,
            "created_at": _now_iso(),
            "message": {"role": "assistant", "content": content},
            "done_reason": "stop",
            "done": True,
            "total_duration": 1_000_000,
            "load_duration": 1000,
            "prompt_eval_count": 10,
            "eval_count": max(1, len(content.split())),
        }
        if body.get("stream", True) is False:
            self._send(200, final)
            return
        chunk = {"model": model, "created_at": _now_iso(), "message": final["message"], "done": False}
        final_chunk = {**final, "message": {"role": "assistant", "content": ""}}
        lines = (json.dumps(chunk) + "\n" + json.dumps(final_chunk) + "\n").encode()
        self._send(200, raw=lines, ctype="application/x-ndjson")

    def _openai_chat(self, body: dict[str, Any]) -> None:
        content = self.server_stub._chat_content(body)
        prompt_tokens = sum(len(str(m.get("content", "")).split()) for m in body.get("messages", []))
        completion_tokens = max(1, len(content.split()))
        self._send(
            200,
            {
                "id": f"chatcmpl-stub{len(self.server_stub.requests)}",
                "object": "chat.completion",
                "created": int(time.time()),
                "model": body.get("model", ""),
                "choices": [
                    {
                        "index": 0,
                        "message": {"role": "assistant", "content": content},
                        "finish_reason": "stop",
                    }
                ],
                "usage": {
                    "prompt_tokens": prompt_tokens,
                    "completion_tokens": completion_tokens,
                    "total_tokens": prompt_tokens + completion_tokens,
                },
            },
        )


#: a JSON POST handler's answer: (HTTP status, JSON payload), or None to send nothing (a hung request)
JsonAnswer = tuple[int, Any] | None


class JsonPostServer:
    """A loopback HTTP server whose POSTs get ``answer(path, body)`` as JSON, each in a thread of its own
    (``url``, ``close``): the base of the tests' small embedding stubs."""

    def __init__(self, answer: Callable[[str, dict[str, Any]], JsonAnswer]) -> None:
        class Handler(BaseHTTPRequestHandler):
            def log_message(self, format: str, *args: Any) -> None:
                pass

            def do_POST(self) -> None:
                body = json.loads(self.rfile.read(int(self.headers.get("Content-Length") or 0)))
                reply = answer(self.path, body)
                if reply is None:
                    return
                status, payload = reply
                data = json.dumps(payload).encode()
                self.send_response(status)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)

        self._server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self._server.daemon_threads = True
        self._thread = threading.Thread(target=self._server.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True)
        self._thread.start()

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self._server.server_address[1]}"

    def close(self) -> None:
        self._server.shutdown()
        self._server.server_close()
        self._thread.join(timeout=5)
