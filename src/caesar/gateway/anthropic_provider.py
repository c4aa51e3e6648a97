"""Anthropic's Messages API through the official SDK (retries with backoff are the SDK's,
Retry-After capped in gateway/http.py; failures translated in gateway/errors.py)."""

from __future__ import annotations

import json
import time
from collections.abc import Iterator
from typing import Any

import anthropic

from caesar.config import ProviderSettings, reply_limit
from caesar.errors import ProviderBadResponse, ProviderError
from caesar.gateway.base import (
    Completion,
    Generation,
    Message,
    StreamChunk,
    ToolUse,
    Usage,
    within,
)
from caesar.gateway.errors import catchable, translate
from caesar.gateway.http import sdk_http_client

# A client's tools, translated both ways; Anthropic has no `response_format`.
TAKES = frozenset({"tools", "tool_choice", "parallel_tool_calls"})


def _turn(m: Message) -> dict[str, Any]:
    """One OpenAI message as an Anthropic turn: an assistant's tool calls become `tool_use`
    blocks, a `tool` message a user turn holding its `tool_result`."""
    if m["role"] == "tool":
        result = {
            "type": "tool_result",
            "tool_use_id": m.get("tool_call_id", ""),
            "content": m["content"],
        }
        return {"role": "user", "content": [result]}
    calls = m.get("tool_calls") or []
    if not calls:
        return {"role": m["role"], "content": m["content"]}
    blocks: list[dict[str, Any]] = [{"type": "text", "text": m["content"]}] if m["content"] else []
    for call in calls:
        function = call.get("function") or {}
        try:
            arguments = json.loads(function.get("arguments") or "{}")
        except json.JSONDecodeError:
            arguments = {"arguments": function.get("arguments")}
        blocks.append(
            {
                "type": "tool_use",
                "id": call.get("id", ""),
                "name": function.get("name", ""),
                "input": arguments,
            }
        )
    return {"role": "assistant", "content": blocks}


def _blocks(content: str | list[dict[str, Any]]) -> list[dict[str, Any]]:
    return [{"type": "text", "text": content}] if isinstance(content, str) else content


def split_system(messages: list[Message]) -> tuple[str, list[dict[str, Any]]]:
    """Anthropic takes the system prompt apart and wants user/assistant turns alternating,
    starting with the user: merge neighbours of one role and drop a leading assistant turn."""
    system = "\n\n".join(m["content"] for m in messages if m["role"] == "system")
    turns: list[dict[str, Any]] = []
    for m in messages:
        if m["role"] == "system":
            continue
        turn = _turn(m)
        if turns and turns[-1]["role"] == turn["role"]:
            before, now = turns[-1]["content"], turn["content"]
            if isinstance(before, str) and isinstance(now, str):
                merged: Any = before + "\n\n" + now
            else:
                merged = _blocks(before) + _blocks(now)
            turns[-1] = {"role": turn["role"], "content": merged}
        else:
            turns.append(turn)
    while turns and turns[0]["role"] != "user":
        turns.pop(0)
    return system, turns


def _tool_choice(choice: Any, parallel: bool | None) -> dict[str, Any] | None:
    """OpenAI's tool_choice in Anthropic's words."""
    named = {"auto": {"type": "auto"}, "none": {"type": "none"}, "required": {"type": "any"}}
    out: dict[str, Any] | None = None
    if isinstance(choice, str):
        out = named.get(choice)
    elif isinstance(choice, dict) and choice.get("type") == "function":
        out = {"type": "tool", "name": (choice.get("function") or {}).get("name", "")}
    if parallel is False:
        out = {**(out or {"type": "auto"}), "disable_parallel_tool_use": True}
    return out


def tool_params(use: ToolUse) -> dict[str, Any]:
    """A client's OpenAI tools as the Messages API takes them."""
    tools = [
        {
            "name": f.get("name", ""),
            "description": f.get("description", ""),
            "input_schema": f.get("parameters") or {"type": "object", "properties": {}},
        }
        for f in (t.get("function") or {} for t in use.tools)
    ]
    if not tools:
        return {}
    choice = _tool_choice(use.tool_choice, use.parallel_tool_calls)
    return {"tools": tools, **({"tool_choice": choice} if choice else {})}


def _call(block: Any) -> dict[str, Any]:
    arguments = json.dumps(block.input, ensure_ascii=False)
    return {
        "id": block.id,
        "type": "function",
        "function": {"name": block.name, "arguments": arguments},
    }


class AnthropicProvider:
    can_chat = True
    takes = TAKES

    def __init__(self, name: str, settings: ProviderSettings) -> None:
        self.name = name
        api_key = settings.api_key.get_secret_value() if settings.api_key else None
        self._secrets = [api_key] if api_key else []
        self._max_tokens = reply_limit(settings)  # the Messages API requires one
        self._catch = catchable(anthropic)
        kwargs: dict[str, Any] = {}
        if settings.base_url:
            kwargs["base_url"] = settings.base_url
        self._client = anthropic.Anthropic(
            api_key=api_key,
            timeout=settings.timeout_seconds,
            max_retries=settings.max_retries,
            http_client=sdk_http_client(
                anthropic.DefaultHttpxClient, settings.max_retry_wait_seconds
            ),
            **kwargs,
        )

    def _error(self, exc: BaseException) -> ProviderError:
        return translate(anthropic, self.name, exc, self._secrets)

    def _params(
        self, messages: list[Message], model: str, generation: Generation | None = None
    ) -> dict[str, Any]:
        system, turns = split_system(messages)
        if not turns:
            raise ProviderError(self.name, "nothing to send: the messages hold no user turn")
        limit = within(generation, self._max_tokens)
        params: dict[str, Any] = {"model": model, "max_tokens": limit, "messages": turns}
        if generation is not None and generation.temperature is not None:
            params["temperature"] = min(generation.temperature, 1.0)  # Anthropic's range: 0–1
        if generation is not None and generation.stop:
            params["stop_sequences"] = list(generation.stop)
        if system:
            params["system"] = system
        if generation is not None and generation.tools is not None:
            params.update(tool_params(generation.tools))
        return params

    def complete(
        self,
        messages: list[Message],
        model: str,
        *,
        task: str,
        json_mode: bool = False,
        generation: Generation | None = None,
    ) -> Completion:
        # Anthropic has no JSON mode; the memory prompts ask for JSON and replies are validated.
        params = self._params(messages, model, generation)
        started = time.perf_counter()
        try:
            response = self._client.messages.create(**params)
            text = "".join(block.text for block in response.content if block.type == "text")
            calls = [_call(block) for block in response.content if block.type == "tool_use"]
            usage = Usage(response.usage.input_tokens, response.usage.output_tokens)
            finish = _finish(response.stop_reason)
        except self._catch as exc:
            raise self._error(exc) from exc
        return Completion(
            text=text,
            provider=self.name,
            model=response.model or model,
            usage=usage,
            latency_ms=(time.perf_counter() - started) * 1000,
            finish_reason=finish,
            tool_calls=calls or None,
        )

    def stream(
        self,
        messages: list[Message],
        model: str,
        *,
        task: str,
        generation: Generation | None = None,
    ) -> Iterator[StreamChunk]:
        """Text as it arrives; the last chunk is empty and carries the usage. The stream must
        end with `message_stop`: a body that stops early, even cleanly, is a
        `ProviderBadResponse` (the SDK itself does not complain)."""
        params = self._params(messages, model, generation)
        stopped = False
        calls: dict[int, int] = {}  # a tool_use block's index -> its tool call's index
        try:
            with self._client.messages.stream(**params) as events:
                for event in events:
                    if event.type == "content_block_delta" and event.delta.type == "text_delta":
                        yield StreamChunk(event.delta.text)
                    elif (
                        event.type == "content_block_start"
                        and event.content_block.type == "tool_use"
                    ):
                        calls[event.index] = len(calls)
                        block = event.content_block
                        start = {"index": calls[event.index], **_call(block)}
                        start["function"]["arguments"] = ""
                        yield StreamChunk("", tool_calls=[start])
                    elif (
                        event.type == "content_block_delta"
                        and event.delta.type == "input_json_delta"
                    ):
                        piece = {"arguments": event.delta.partial_json}
                        yield StreamChunk(
                            "", tool_calls=[{"index": calls[event.index], "function": piece}]
                        )
                    elif event.type == "message_stop":
                        stopped = True
                final = events.get_final_message() if stopped else None
                usage = (
                    Usage(final.usage.input_tokens, final.usage.output_tokens) if final else None
                )
        except self._catch as exc:
            raise self._error(exc) from exc
        if usage is None:
            raise ProviderBadResponse(self.name, "stream ended before the reply was finished")
        yield StreamChunk(
            "", usage=usage, finish_reason=_finish(final.stop_reason if final else None)
        )


def _finish(stop_reason: str | None) -> str:
    """Anthropic's stop_reason in OpenAI's words: a reply cut at max_tokens is "length", one
    that calls tools "tool_calls"."""
    return {"max_tokens": "length", "tool_use": "tool_calls"}.get(stop_reason or "", "stop")
