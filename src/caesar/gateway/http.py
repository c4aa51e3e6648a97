"""The HTTP client both SDKs get: their own defaults, plus a bound on how long a provider may
make us wait.

Retries stay the SDKs' (connection errors, 408/409/429/5xx; exponential backoff, honouring
`Retry-After`). But the SDKs differ on a long `Retry-After`: openai waits up to 120 s,
anthropic as long as asked. A chat turn has an operator waiting, so a response asking for
more than `max_retry_wait_seconds` gets `x-should-retry: false` (a header both SDKs obey
before anything else): the SDK gives up at once and the gateway answers 503 naming the wait,
instead of hanging. Waits within the bound are left to the SDK.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from caesar.gateway.errors import retry_after_seconds


def cap_retry_after(max_wait_seconds: float) -> Callable[[Any], None]:
    """An httpx2 response hook: forbid a retry the provider wants us to wait too long for."""

    def hook(response: Any) -> None:
        if response.status_code < 400:
            return
        wait = retry_after_seconds(response.headers)
        if wait is not None and wait > max_wait_seconds:
            response.headers["x-should-retry"] = "false"

    return hook


def sdk_http_client(client_class: type[Any], max_wait_seconds: float) -> Any:
    """`client_class` is the SDK's `DefaultHttpxClient` (its pool limits, redirects, keep-alive)."""
    return client_class(event_hooks={"response": [cap_retry_after(max_wait_seconds)]})
