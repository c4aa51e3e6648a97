"""A local HTTP server speaking the real OpenAI and Anthropic wire protocols.

It lets caesar's gateway be exercised through the genuine ``openai`` and
``anthropic`` SDKs (no mocks). Typical use::

    with FakeLLMServer() as server:
        client = openai.OpenAI(base_url=server.base_url, api_key="k", max_retries=0)
        client.chat.completions.create(model="m", messages=[{"role": "user", "content": "hi"}])
        assert server.requests[-1]["headers"]["authorization"] == "Bearer k"

        server.fail_next("status", status=429, retry_after=0)
        server.replies = ["first", "second"]          # consumed in order
        server.reply = lambda body, protocol: "x"     # fallback reply

Endpoints
---------
OpenAI    : POST /v1/chat/completions (stream or not), POST /v1/embeddings,
            GET /v1/models
Anthropic : POST /v1/messages (stream or not), GET /v1/models (Anthropic shape
            when the request carries ``x-api-key`` / ``anthropic-version``)

Each entry of ``server.requests`` is a dict: method, path, query, headers
(lower-cased keys), json (parsed body or None), raw (bytes), protocol
("openai" | "anthropic"), api_key (from ``x-api-key`` or ``Authorization: Bearer``;
note anthropic SDK 2.x sends its api_key as ``Authorization: Bearer``), and
fault (kind consumed by that request, or None).

"Tokens" are whitespace-separated words everywhere (usage numbers, and the
``max_tokens`` / ``max_completion_tokens`` limit, which truncates the reply and
reports ``finish_reason="length"`` / ``stop_reason="max_tokens"`` like the real
APIs).

Fault kinds for :meth:`FakeLLMServer.fail_next` (each consumes one request;
pass ``path="/v1/messages"`` etc. to only apply to matching requests):

``status``        status=500, retry_after=None (seconds -> ``Retry-After``),
                  retry_after_ms=None, message=None, error_type=None,
                  headers=None (extra), should_retry=None (``x-should-retry``)
                  -> error JSON in the provider's real shape.
``delay``         seconds=2.0, mid_stream=False -> sleep before answering (or,
                  with mid_stream=True on a stream, after the first chunks),
                  then answer normally. Sleep is cut short by ``close()``.
``malformed``     200 ``application/json`` whose body is not JSON (for stream
                  requests: an SSE event whose data is not JSON).
``truncated``     200 JSON cut off midway. By default Content-Length matches the
                  truncated body (valid HTTP, invalid JSON); ``transport=True``
                  advertises the full length and closes early instead.
                  On stream requests it behaves like ``broken_stream``.
``broken_stream`` stream requests: a couple of SSE chunks, then the socket is
                  closed without the SSE terminator and without the final
                  HTTP chunk (``clean=True``: finish HTTP chunking properly but
                  still omit ``[DONE]`` / ``message_stop``). ``chunks=2``.
                  Non-stream requests: like ``truncated`` with transport=True.
``stream_error``  stream requests: a couple of chunks then an in-band SSE error
                  event (Anthropic ``event: error``; OpenAI ``data: {"error":..}``).
                  error_type / message overridable. Non-stream: like ``status``.
``disconnect``    close the socket without sending any response.
"""

from __future__ import annotations

import base64
import hashlib
import json
import random
import re
import socket
import struct
import threading
import time
import uuid
from collections.abc import Callable
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

__all__ = ["FAULT_KINDS", "FakeLLMServer", "count_tokens", "fake_embedding"]

FAULT_KINDS = frozenset(
    {"status", "delay", "malformed", "truncated", "broken_stream", "stream_error", "disconnect"}
)

ReplyFn = Callable[[dict, str], str | dict]

_HTTP_REASONS = {
    400: "Bad Request",
    401: "Unauthorized",
    403: "Forbidden",
    404: "Not Found",
    408: "Request Timeout",
    409: "Conflict",
    413: "Payload Too Large",
    422: "Unprocessable Entity",
    429: "Too Many Requests",
    500: "Internal Server Error",
    502: "Bad Gateway",
    503: "Service Unavailable",
    504: "Gateway Timeout",
    529: "Overloaded",
}

_OPENAI_ERRORS: dict[int, tuple[str, str | None, str]] = {
    # status: (type, code, message)
    400: ("invalid_request_error", None, "Invalid request."),
    401: ("invalid_request_error", "invalid_api_key", "Incorrect API key provided."),
    403: ("invalid_request_error", "unsupported_country_region_territory", "Forbidden."),
    404: ("invalid_request_error", "model_not_found", "The model does not exist."),
    409: ("invalid_request_error", None, "Conflict."),
    422: ("invalid_request_error", None, "Unprocessable entity."),
    429: (
        "requests",
        "rate_limit_exceeded",
        "Rate limit reached for requests. Please try again later.",
    ),
    500: ("server_error", None, "The server had an error while processing your request."),
    502: ("server_error", None, "Bad gateway."),
    503: ("server_error", None, "The engine is currently overloaded, please try again later."),
}

_ANTHROPIC_ERRORS: dict[int, tuple[str, str]] = {
    400: ("invalid_request_error", "Invalid request."),
    401: ("authentication_error", "invalid x-api-key"),
    403: (
        "permission_error",
        "Your API key does not have permission to use the specified resource.",
    ),
    404: ("not_found_error", "The requested resource could not be found."),
    413: ("request_too_large", "Request exceeds the maximum allowed number of bytes."),
    429: ("rate_limit_error", "Number of request tokens has exceeded your rate limit."),
    500: ("api_error", "Internal server error"),
    503: ("overloaded_error", "Overloaded"),
    529: ("overloaded_error", "Overloaded"),
}

_PIECE_RE = re.compile(r"\s*\S+")


def count_tokens(text: str) -> int:
    """The fake's notion of a token: a whitespace separated word."""
    return len(text.split())


def fake_embedding(text: str, dim: int = 8) -> list[float]:
    """Deterministic unit-length vector for ``text`` (exactly float32-representable)."""
    seed = int.from_bytes(hashlib.sha256(text.encode("utf-8")).digest()[:8], "big")
    rng = random.Random(seed)
    vec = [rng.gauss(0.0, 1.0) for _ in range(dim)]
    norm = sum(v * v for v in vec) ** 0.5 or 1.0
    vec = [v / norm for v in vec]
    # Round-trip through float32 so the "float" and "base64" encodings agree exactly.
    return list(struct.unpack(f"<{dim}f", struct.pack(f"<{dim}f", *vec)))


def _content_text(content: Any) -> str:
    """Text of an OpenAI/Anthropic message ``content`` (string or list of parts)."""
    if content is None:
        return ""
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        parts = []
        for part in content:
            if isinstance(part, str):
                parts.append(part)
            elif isinstance(part, dict):
                if isinstance(part.get("text"), str):
                    parts.append(part["text"])
                elif part.get("type") == "tool_result":
                    parts.append(_content_text(part.get("content")))
        return " ".join(p for p in parts if p)
    return str(content)


def _last_user_text(body: dict) -> str:
    for msg in reversed(body.get("messages") or []):
        if isinstance(msg, dict) and msg.get("role") == "user":
            return _content_text(msg.get("content"))
    return ""


def _prompt_tokens(body: dict) -> int:
    n = count_tokens(_content_text(body.get("system")))
    for msg in body.get("messages") or []:
        if isinstance(msg, dict):
            n += count_tokens(_content_text(msg.get("content")))
    return max(n, 1)


def default_reply(body: dict, protocol: str) -> str:
    return f"ok: {_last_user_text(body)}"


def _split_pieces(text: str, n: int = 3) -> list[str]:
    """Split ``text`` into about ``n`` pieces that concatenate back to ``text``."""
    words = _PIECE_RE.findall(text)
    if not words:
        return [text] if text else []
    words[-1] += text[len("".join(words)) :]  # trailing whitespace, if any
    size = max(1, -(-len(words) // n))
    return ["".join(words[i : i + size]) for i in range(0, len(words), size)]


def _truncate_words(text: str, limit: int) -> str:
    return "".join(_PIECE_RE.findall(text)[:limit]).lstrip()


class _Disconnect(Exception):
    """Raised inside the handler to drop the connection abruptly."""


class _HTTPServer(ThreadingHTTPServer):
    daemon_threads = True
    block_on_close = False
    allow_reuse_address = True
    fake: FakeLLMServer

    def handle_error(self, request, client_address):
        import sys

        exc = sys.exc_info()[1]
        if isinstance(exc, (ConnectionError, _Disconnect, socket.timeout, OSError)):
            return
        super().handle_error(request, client_address)


class _Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    server: _HTTPServer
    server_version = "FakeLLM/1.0"

    def log_message(self, format: str, *args: Any) -> None:  # silence stderr logging
        pass

    # -- plumbing ---------------------------------------------------------------------------

    def _read_body(self) -> bytes:
        if self.headers.get("transfer-encoding", "").lower() == "chunked":
            data = b""
            while True:
                size = int(self.rfile.readline().split(b";")[0].strip() or b"0", 16)
                if size == 0:
                    while self.rfile.readline() not in (b"\r\n", b"\n", b""):
                        pass
                    return data
                data += self.rfile.read(size)
                self.rfile.readline()
        length = int(self.headers.get("content-length") or 0)
        return self.rfile.read(length) if length else b""

    def _start(self, status: int, headers: dict[str, str]) -> None:
        self.send_response(status, _HTTP_REASONS.get(status))
        for k, v in headers.items():
            self.send_header(k, v)
        self.send_header("Connection", "close")
        self.end_headers()
        self.close_connection = True

    def _send_json(self, status: int, payload: Any, headers: dict[str, str] | None = None) -> None:
        body = json.dumps(payload).encode()
        self._send_raw(status, body, "application/json", headers)

    def _send_raw(
        self,
        status: int,
        body: bytes,
        content_type: str,
        headers: dict[str, str] | None = None,
        content_length: int | None = None,
    ) -> None:
        h = {
            "Content-Type": content_type,
            "Content-Length": str(len(body) if content_length is None else content_length),
        }
        h.update(self._id_headers())
        h.update(headers or {})
        self._start(status, h)
        self.wfile.write(body)
        self.wfile.flush()

    def _id_headers(self) -> dict[str, str]:
        rid = "req_" + uuid.uuid4().hex[:24]
        return {"request-id": rid} if self._protocol == "anthropic" else {"x-request-id": rid}

    # SSE (chunked transfer encoding)
    def _sse_start(self) -> None:
        h = {
            "Content-Type": "text/event-stream; charset=utf-8",
            "Cache-Control": "no-cache",
            "Transfer-Encoding": "chunked",
        }
        h.update(self._id_headers())
        self._start(200, h)

    def _chunk(self, data: bytes) -> None:
        if data:
            self.wfile.write(b"%x\r\n%s\r\n" % (len(data), data))
            self.wfile.flush()

    def _sse_end(self) -> None:
        self.wfile.write(b"0\r\n\r\n")
        self.wfile.flush()

    # -- dispatch ---------------------------------------------------------------------------

    def do_GET(self) -> None:
        self._handle("GET")

    def do_POST(self) -> None:
        self._handle("POST")

    def do_DELETE(self) -> None:
        self._handle("DELETE")

    def _handle(self, method: str) -> None:
        fake = self.server.fake
        raw = self._read_body()
        try:
            body = json.loads(raw) if raw else None
        except ValueError:
            body = None
        path = self.path.split("?", 1)[0]
        headers = {k.lower(): v for k, v in self.headers.items()}
        if path.rstrip("/").endswith("/messages") or (
            path.rstrip("/").endswith("/models")
            and ("x-api-key" in headers or "anthropic-version" in headers)
        ):
            self._protocol = "anthropic"
        else:
            self._protocol = "openai"
        api_key = headers.get("x-api-key")
        if api_key is None and headers.get("authorization", "").lower().startswith("bearer "):
            api_key = headers["authorization"][7:]
        record = {
            "method": method,
            "path": path,
            "query": self.path.split("?", 1)[1] if "?" in self.path else "",
            "headers": headers,
            "json": body,
            "raw": raw,
            "protocol": self._protocol,
            "api_key": api_key,
            "fault": None,
        }
        fault = fake._record_and_take_fault(record)
        self._stream = bool(isinstance(body, dict) and body.get("stream"))
        try:
            self._dispatch(method, path, body if isinstance(body, dict) else {}, api_key, fault)
        except (TimeoutError, _Disconnect, ConnectionError):
            self.close_connection = True
            try:
                self.connection.shutdown(socket.SHUT_RDWR)
            except OSError:
                pass

    def _dispatch(
        self, method: str, path: str, body: dict, api_key: str | None, fault: dict | None
    ) -> None:
        fake = self.server.fake
        if fault is not None:
            kind = fault["kind"]
            if kind == "disconnect":
                raise _Disconnect()
            if kind == "status" or (kind == "stream_error" and not self._stream):
                return self._send_error(fault.get("status", 500), fault)
            if kind == "delay" and not (fault.get("mid_stream") and self._stream):
                fake._closing.wait(float(fault.get("seconds", 2.0)))
                if fake._closing.is_set():
                    raise _Disconnect()
                fault = None
            if kind == "broken_stream" and not self._stream:
                fault = {"kind": "truncated", "transport": True}

        if fake.expected_api_key is not None and api_key != fake.expected_api_key:
            return self._send_error(401, {})

        route = (method, path.rstrip("/"))
        if route == ("POST", "/v1/chat/completions"):
            return self._chat_completions(body, fault)
        if route == ("POST", "/v1/messages"):
            return self._messages(body, fault)
        if route == ("POST", "/v1/embeddings"):
            return self._embeddings(body, fault)
        if route == ("GET", "/v1/models"):
            return self._models(fault)
        if method == "GET" and path.startswith("/v1/models/"):
            return self._model(path[len("/v1/models/") :], fault)
        return self._send_error(404, {"message": f"Unknown request URL: {method} {path}"})

    # -- errors -----------------------------------------------------------------------------

    def _error_payload(self, status: int, fault: dict) -> dict:
        if self._protocol == "anthropic":
            etype, msg = _ANTHROPIC_ERRORS.get(status, ("api_error", f"HTTP {status}"))
            return {
                "type": "error",
                "error": {
                    "type": fault.get("error_type") or etype,
                    "message": fault.get("message") or msg,
                },
                "request_id": "req_" + uuid.uuid4().hex[:24],
            }
        etype, code, msg = _OPENAI_ERRORS.get(
            status,
            ("server_error" if status >= 500 else "invalid_request_error", None, f"HTTP {status}"),
        )
        return {
            "error": {
                "message": fault.get("message") or msg,
                "type": fault.get("error_type") or etype,
                "param": None,
                "code": fault.get("code", code),
            }
        }

    def _send_error(self, status: int, fault: dict) -> None:
        headers: dict[str, str] = {}
        if fault.get("retry_after") is not None:
            headers["Retry-After"] = str(fault["retry_after"])
        if fault.get("retry_after_ms") is not None:
            headers["retry-after-ms"] = str(fault["retry_after_ms"])
        if fault.get("should_retry") is not None:
            headers["x-should-retry"] = "true" if fault["should_retry"] else "false"
        headers.update(fault.get("headers") or {})
        self._send_json(status, self._error_payload(status, fault), headers)

    def _invalid(self, message: str) -> None:
        self._send_error(400, {"message": message})

    # -- body-level faults for non-stream JSON responses ------------------------------------

    def _send_ok_json(self, payload: dict, fault: dict | None) -> None:
        data = json.dumps(payload).encode()
        kind = fault["kind"] if fault else None
        if kind == "malformed":
            return self._send_raw(200, b'{"id": "oops", this is <not> json!!', "application/json")
        if kind == "truncated":
            cut = data[: max(1, len(data) // 2)]
            if fault.get("transport"):
                self._send_raw(200, cut, "application/json", content_length=len(data))
                raise _Disconnect()
            return self._send_raw(200, cut, "application/json")
        self._send_raw(200, data, "application/json")

    # -- reply text ---------------------------------------------------------------------------

    def _reply(self, body: dict, max_tokens: int | None) -> tuple[str, bool, list[dict]]:
        """The reply's text, whether it was cut, and its tool calls: a queued reply may be
        ``{"tool_calls": [{"name": ..., "arguments": {...}}], "content": "..."}``."""
        reply: Any = self.server.fake._next_reply(body, self._protocol)
        calls: list[dict] = []
        if isinstance(reply, dict):
            calls = [
                {"id": c.get("id") or f"call_{uuid.uuid4().hex[:12]}", **c}
                for c in reply.get("tool_calls", [])
            ]
            reply = reply.get("content", "")
        if max_tokens is not None and count_tokens(reply) > max_tokens:
            return _truncate_words(reply, max_tokens), True, calls
        return reply, False, calls

    # -- streaming helper ---------------------------------------------------------------------

    def _run_stream(
        self, events: list[bytes], terminator: list[bytes], error_event: bytes, fault: dict | None
    ) -> None:
        """Send ``events`` then ``terminator``, applying a stream fault if any."""
        kind = fault["kind"] if fault else None
        self._sse_start()
        if kind in ("broken_stream", "truncated"):
            for ev in events[: int(fault.get("chunks", 2))]:
                self._chunk(ev)
            if fault.get("clean"):
                self._sse_end()
                return
            raise _Disconnect()
        if kind == "stream_error":
            for ev in events[: int(fault.get("chunks", 2))]:
                self._chunk(ev)
            self._chunk(error_event)
            self._sse_end()
            return
        if kind == "malformed":
            for ev in events[:1]:
                self._chunk(ev)
            self._chunk(
                b"data: {this is not json\n\n"
                if self._protocol == "openai"
                else b"event: content_block_delta\ndata: {this is not json\n\n"
            )
            self._sse_end()
            return
        for i, ev in enumerate(events):
            if kind == "delay" and i == int(fault.get("chunks", 2)):
                fake = self.server.fake
                fake._closing.wait(float(fault.get("seconds", 2.0)))
                if fake._closing.is_set():
                    raise _Disconnect()
            self._chunk(ev)
        for ev in terminator:
            self._chunk(ev)
        self._sse_end()

    # -- OpenAI -------------------------------------------------------------------------------

    def _chat_completions(self, body: dict, fault: dict | None) -> None:
        if not body.get("model"):
            return self._invalid("you must provide a model parameter")
        if not isinstance(body.get("messages"), list) or not body["messages"]:
            return self._invalid("Missing required parameter: 'messages'.")
        model = body["model"]
        limit = body.get("max_completion_tokens", body.get("max_tokens"))
        text, cut, calls = self._reply(body, limit)
        finish = "tool_calls" if calls else "length" if cut else "stop"
        wire_calls = [
            {
                "id": c["id"],
                "type": "function",
                "function": {"name": c["name"], "arguments": json.dumps(c.get("arguments", {}))},
            }
            for c in calls
        ]
        p_tok, c_tok = _prompt_tokens(body), count_tokens(text)
        usage = {"prompt_tokens": p_tok, "completion_tokens": c_tok, "total_tokens": p_tok + c_tok}
        cid = "chatcmpl-" + uuid.uuid4().hex[:24]
        created = int(time.time())

        if not self._stream:
            payload = {
                "id": cid,
                "object": "chat.completion",
                "created": created,
                "model": model,
                "system_fingerprint": "fp_fake",
                "choices": [
                    {
                        "index": 0,
                        "message": {
                            "role": "assistant",
                            "content": text if text or not calls else None,
                            "refusal": None,
                            **({"tool_calls": wire_calls} if calls else {}),
                        },
                        "logprobs": None,
                        "finish_reason": finish,
                    }
                ],
                "usage": usage,
            }
            return self._send_ok_json(payload, fault)

        include_usage = bool((body.get("stream_options") or {}).get("include_usage"))

        def chunk(delta: dict, finish_reason: str | None) -> bytes:
            obj: dict[str, Any] = {
                "id": cid,
                "object": "chat.completion.chunk",
                "created": created,
                "model": model,
                "system_fingerprint": "fp_fake",
                "choices": [
                    {"index": 0, "delta": delta, "logprobs": None, "finish_reason": finish_reason}
                ],
            }
            if include_usage:
                obj["usage"] = None
            return b"data: " + json.dumps(obj).encode() + b"\n\n"

        events = [chunk({"role": "assistant", "content": "", "refusal": None}, None)]
        events += [chunk({"content": piece}, None) for piece in _split_pieces(text) if piece]
        for i, call in enumerate(wire_calls):
            arguments = call["function"]["arguments"]
            opening = {**call, "function": {"name": call["function"]["name"], "arguments": ""}}
            events.append(chunk({"tool_calls": [{"index": i, **opening}]}, None))
            events += [
                chunk({"tool_calls": [{"index": i, "function": {"arguments": piece}}]}, None)
                for piece in (arguments[: len(arguments) // 2], arguments[len(arguments) // 2 :])
            ]
        events.append(chunk({}, finish))
        terminator = []
        if include_usage:
            terminator.append(
                b"data: "
                + json.dumps(
                    {
                        "id": cid,
                        "object": "chat.completion.chunk",
                        "created": created,
                        "model": model,
                        "system_fingerprint": "fp_fake",
                        "choices": [],
                        "usage": usage,
                    }
                ).encode()
                + b"\n\n"
            )
        terminator.append(b"data: [DONE]\n\n")
        err = fault or {}
        error_event = (
            b"data: "
            + json.dumps(
                {
                    "error": {
                        "message": err.get("message")
                        or "The server had an error while processing your request.",
                        "type": err.get("error_type") or "server_error",
                        "param": None,
                        "code": None,
                    }
                }
            ).encode()
            + b"\n\n"
        )
        self._run_stream(events, terminator, error_event, fault)

    def _embeddings(self, body: dict, fault: dict | None) -> None:
        inp = body.get("input")
        if inp is None or inp == "" or inp == []:
            return self._invalid("'input' : input must be a string or an array of strings")
        if not body.get("model"):
            return self._invalid("you must provide a model parameter")
        if isinstance(inp, str) or (isinstance(inp, list) and inp and isinstance(inp[0], int)):
            inputs = [inp]
        else:
            inputs = list(inp)
        dim = int(body.get("dimensions") or self.server.fake.embedding_dim)
        b64 = body.get("encoding_format") == "base64"
        data = []
        tokens = 0
        for i, item in enumerate(inputs):
            text = item if isinstance(item, str) else " ".join(str(t) for t in item)
            tokens += max(count_tokens(text), 1)
            vec = fake_embedding(text, dim)
            emb: Any = base64.b64encode(struct.pack(f"<{dim}f", *vec)).decode() if b64 else vec
            data.append({"object": "embedding", "index": i, "embedding": emb})
        payload = {
            "object": "list",
            "data": data,
            "model": body["model"],
            "usage": {"prompt_tokens": tokens, "total_tokens": tokens},
        }
        self._send_ok_json(payload, fault)

    def _models(self, fault: dict | None) -> None:
        fake = self.server.fake
        if self._protocol == "anthropic":
            data = [
                {"type": "model", "id": m, "display_name": m, "created_at": "2025-01-01T00:00:00Z"}
                for m in fake.models
            ]
            payload = {
                "data": data,
                "has_more": False,
                "first_id": data[0]["id"] if data else None,
                "last_id": data[-1]["id"] if data else None,
            }
        else:
            payload = {
                "object": "list",
                "data": [
                    {"id": m, "object": "model", "created": 1700000000, "owned_by": "fake"}
                    for m in fake.models
                ],
            }
        self._send_ok_json(payload, fault)

    def _model(self, model_id: str, fault: dict | None) -> None:
        if model_id not in self.server.fake.models:
            return self._send_error(404, {"message": f"The model '{model_id}' does not exist"})
        if self._protocol == "anthropic":
            payload = {
                "type": "model",
                "id": model_id,
                "display_name": model_id,
                "created_at": "2025-01-01T00:00:00Z",
            }
        else:
            payload = {"id": model_id, "object": "model", "created": 1700000000, "owned_by": "fake"}
        self._send_ok_json(payload, fault)

    # -- Anthropic ----------------------------------------------------------------------------

    def _messages(self, body: dict, fault: dict | None) -> None:
        for field in ("model", "messages", "max_tokens"):
            if field not in body:
                return self._invalid(f"{field}: Field required")
        if not isinstance(body["messages"], list) or not body["messages"]:
            return self._invalid("messages: at least one message is required")
        model = body["model"]
        text, cut, calls = self._reply(body, int(body["max_tokens"]))
        stop = "tool_use" if calls else "max_tokens" if cut else "end_turn"
        tool_blocks = [
            {"type": "tool_use", "id": c["id"], "name": c["name"], "input": c.get("arguments", {})}
            for c in calls
        ]
        in_tok, out_tok = _prompt_tokens(body), count_tokens(text)
        mid = "msg_" + uuid.uuid4().hex[:24]

        if not self._stream:
            payload = {
                "id": mid,
                "type": "message",
                "role": "assistant",
                "model": model,
                "content": ([{"type": "text", "text": text}] if text or not calls else [])
                + tool_blocks,
                "stop_reason": stop,
                "stop_sequence": None,
                "usage": {
                    "input_tokens": in_tok,
                    "output_tokens": out_tok,
                    "cache_creation_input_tokens": 0,
                    "cache_read_input_tokens": 0,
                },
            }
            return self._send_ok_json(payload, fault)

        def ev(name: str, data: dict) -> bytes:
            return f"event: {name}\ndata: {json.dumps(data)}\n\n".encode()

        events = [
            ev(
                "message_start",
                {
                    "type": "message_start",
                    "message": {
                        "id": mid,
                        "type": "message",
                        "role": "assistant",
                        "model": model,
                        "content": [],
                        "stop_reason": None,
                        "stop_sequence": None,
                        "usage": {
                            "input_tokens": in_tok,
                            "output_tokens": 1,
                            "cache_creation_input_tokens": 0,
                            "cache_read_input_tokens": 0,
                        },
                    },
                },
            ),
            ev(
                "content_block_start",
                {
                    "type": "content_block_start",
                    "index": 0,
                    "content_block": {"type": "text", "text": ""},
                },
            ),
            ev("ping", {"type": "ping"}),
        ]
        for piece in _split_pieces(text):
            events.append(
                ev(
                    "content_block_delta",
                    {
                        "type": "content_block_delta",
                        "index": 0,
                        "delta": {"type": "text_delta", "text": piece},
                    },
                )
            )
        events.append(ev("content_block_stop", {"type": "content_block_stop", "index": 0}))
        for i, block in enumerate(tool_blocks, start=1):
            arguments = json.dumps(block["input"])
            events.append(
                ev(
                    "content_block_start",
                    {
                        "type": "content_block_start",
                        "index": i,
                        "content_block": {**block, "input": {}},
                    },
                )
            )
            for piece in (arguments[: len(arguments) // 2], arguments[len(arguments) // 2 :]):
                delta = {"type": "input_json_delta", "partial_json": piece}
                events.append(
                    ev(
                        "content_block_delta",
                        {"type": "content_block_delta", "index": i, "delta": delta},
                    )
                )
            events.append(ev("content_block_stop", {"type": "content_block_stop", "index": i}))
        events.append(
            ev(
                "message_delta",
                {
                    "type": "message_delta",
                    "delta": {"stop_reason": stop, "stop_sequence": None},
                    "usage": {"output_tokens": out_tok},
                },
            )
        )
        terminator = [ev("message_stop", {"type": "message_stop"})]
        err = fault or {}
        error_event = ev(
            "error",
            {
                "type": "error",
                "error": {
                    "type": err.get("error_type") or "overloaded_error",
                    "message": err.get("message") or "Overloaded",
                },
            },
        )
        self._run_stream(events, terminator, error_event, fault)


class FakeLLMServer:
    """Real HTTP server on 127.0.0.1 (free port) speaking OpenAI + Anthropic protocols.

    Attributes you may set at any time:
      reply          callable(request_json: dict, protocol: "openai"|"anthropic") -> str
      replies        list[str | dict] consumed (FIFO) before falling back to ``reply``;
                     a dict ``{"tool_calls": [{"name", "arguments"}], "content"?}`` answers
                     with tool calls (OpenAI ``tool_calls``, Anthropic ``tool_use`` blocks)
      embedding_dim  int, default 8 (overridden per request by ``dimensions``)
      models         list[str] returned by GET /v1/models
      expected_api_key  str | None; when set, other keys get a 401 in provider shape
    """

    def __init__(
        self,
        *,
        reply: ReplyFn | None = None,
        embedding_dim: int = 8,
        models: list[str] | None = None,
    ) -> None:
        self.reply: ReplyFn = reply or default_reply
        self.replies: list[str | dict] = []
        self.embedding_dim = embedding_dim
        self.models: list[str] = list(models or ["gpt-fake", "claude-fake"])
        self.expected_api_key: str | None = None
        self.requests: list[dict] = []
        self._faults: list[dict] = []
        self._lock = threading.Lock()
        self._closing = threading.Event()
        self._httpd = _HTTPServer(("127.0.0.1", 0), _Handler)
        self._httpd.fake = self
        self.port: int = self._httpd.server_address[1]
        self.anthropic_base_url = f"http://127.0.0.1:{self.port}"
        self.base_url = f"{self.anthropic_base_url}/v1"
        self._thread = threading.Thread(
            target=self._httpd.serve_forever,
            kwargs={"poll_interval": 0.01},
            name=f"FakeLLMServer:{self.port}",
            daemon=True,
        )
        self._thread.start()
        self._closed = False

    # -- scripting ------------------------------------------------------------------------------

    def fail_next(self, kind: str, count: int = 1, *, path: str | None = None, **kw: Any) -> None:
        """Queue ``count`` one-shot faults of ``kind`` (see module docstring for kinds/kwargs).

        With ``path`` (e.g. "/v1/messages"), only requests to that path consume the fault;
        otherwise the next request of any kind does.
        """
        if kind not in FAULT_KINDS:
            raise ValueError(f"unknown fault kind {kind!r}; expected one of {sorted(FAULT_KINDS)}")
        with self._lock:
            for _ in range(count):
                self._faults.append({"kind": kind, "path": path, **kw})

    @property
    def pending_faults(self) -> list[dict]:
        with self._lock:
            return [dict(f) for f in self._faults]

    def reset(self) -> None:
        """Forget recorded requests, queued faults and queued replies."""
        with self._lock:
            self.requests.clear()
            self._faults.clear()
            self.replies.clear()

    @property
    def last_request(self) -> dict:
        with self._lock:
            return self.requests[-1]

    # -- internals -------------------------------------------------------------------------------

    def _record_and_take_fault(self, record: dict) -> dict | None:
        with self._lock:
            fault = None
            for i, f in enumerate(self._faults):
                if f["path"] is None or f["path"].rstrip("/") == record["path"].rstrip("/"):
                    fault = self._faults.pop(i)
                    break
            record["fault"] = fault["kind"] if fault else None
            self.requests.append(record)
            return fault

    def _next_reply(self, body: dict, protocol: str) -> str | dict:
        with self._lock:
            if self.replies:
                return self.replies.pop(0)
        return self.reply(body, protocol)

    # -- lifecycle -------------------------------------------------------------------------------

    def close(self) -> None:
        if self._closed:
            return
        self._closed = True
        self._closing.set()
        self._httpd.shutdown()
        self._httpd.server_close()
        self._thread.join(timeout=5)

    def __enter__(self) -> FakeLLMServer:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def __repr__(self) -> str:
        return f"<FakeLLMServer {self.anthropic_base_url} requests={len(self.requests)}>"
