"""Provider SDK failures → caesar's `ProviderError` tree, translated once, here.

Both SDKs share one shape (`APITimeoutError` ⊂ `APIConnectionError`, `APIStatusError`, the
in-band stream `APIError`), so one function serves both; the SDK module is passed in so
importing this file never pulls in an SDK. What the SDKs let escape unwrapped is handled
too: `httpx2` transport errors (anthropic lets `RemoteProtocolError` / `ReadTimeout` out of
a broken stream) and `json.JSONDecodeError` from a malformed 200 body.

Every message is cut free of the provider's API key before it leaves: a provider that echoes
the key ("Incorrect API key provided: sk-…") must not put it in an HTTP answer or a log line.
"""

from __future__ import annotations

import email.utils
import time
from collections.abc import Iterable, Mapping
from types import ModuleType
from typing import Any

from caesar.errors import ProviderBadResponse, ProviderError, ProviderTimeout, ProviderUnavailable

REDACTED = "[redacted]"
MIN_SECRET_CHARS = 8  # "ollama" and similar placeholders are not secrets
MAX_DETAIL_CHARS = 500

# What the SDKs raise while parsing a body that is not what the protocol promised.
BAD_BODY_ERRORS: tuple[type[BaseException], ...] = (
    ValueError,  # json.JSONDecodeError is one
    KeyError,
    IndexError,
    AttributeError,
    TypeError,
)


def redact(text: str, secrets: Iterable[str]) -> str:
    for secret in sorted(
        {s for s in secrets if s and len(s) >= MIN_SECRET_CHARS}, key=len, reverse=True
    ):
        text = text.replace(secret, REDACTED)
    return text


def retry_after_seconds(headers: Mapping[str, str], now: float | None = None) -> float | None:
    """The wait a response asks for, from `retry-after-ms` or `Retry-After` (seconds or an
    HTTP date), as both SDKs read it; None when absent or unreadable."""
    for name, divisor in (("retry-after-ms", 1000.0), ("retry-after", 1.0)):
        value = headers.get(name)
        if value is None:
            continue
        try:
            return float(value) / divisor
        except ValueError:
            pass
    value = headers.get("retry-after")
    if not value:
        return None
    try:
        parsed = email.utils.parsedate_tz(value)
        if parsed is None:
            return None
        return float(email.utils.mktime_tz(parsed)) - (time.time() if now is None else now)
    except (TypeError, ValueError, OverflowError):
        return None


def _api_message(exc: Any) -> str:
    """The provider's own words: `error.message` from either protocol's error body."""
    body = getattr(exc, "body", None)
    if isinstance(body, dict):
        error = body.get("error", body)
        if isinstance(error, dict) and isinstance(error.get("message"), str):
            return str(error["message"])
        if isinstance(error, str):
            return error
    return str(getattr(exc, "message", None) or exc)


def _asked_wait(exc: Any) -> str:
    """ "; it asks to wait 600 s" when the failed response carried a Retry-After."""
    headers = getattr(getattr(exc, "response", None), "headers", None) or {}
    wait = retry_after_seconds(headers)
    return f"; it asks to wait {wait:.0f} s" if wait is not None and wait > 0 else ""


def _status_error(provider: str, exc: Any, status: int, message: str) -> ProviderError:
    if status == 429:
        return ProviderUnavailable(provider, f"rate limited (429){_asked_wait(exc)}: {message}")
    if status < 400:
        # An error event inside a 200 stream (Anthropic `event: error`, e.g. overloaded).
        return ProviderUnavailable(provider, f"the stream reported an error: {message}")
    if status >= 500 or status in (408, 409):
        return ProviderUnavailable(provider, f"server error {status}{_asked_wait(exc)}: {message}")
    if status in (401, 403):
        return ProviderError(
            provider,
            f"refused the credentials ({status}): {message}; check gateway.providers."
            f"{provider}.api_key",
        )
    if status == 404:
        return ProviderError(
            provider,
            f"not found (404): {message}; check the model in gateway.routes and the "
            f"provider's base_url",
        )
    return ProviderError(provider, f"rejected the request ({status}): {message}")


def _translate(sdk: ModuleType | None, provider: str, exc: BaseException) -> ProviderError:
    import httpx2

    if isinstance(exc, ProviderError):
        return exc
    if sdk is not None:
        if isinstance(exc, sdk.APITimeoutError):
            return ProviderTimeout(provider, "no answer within timeout_seconds")
        if isinstance(exc, sdk.APIConnectionError):
            cause = exc.__cause__ or exc.__context__
            why = f": {type(cause).__name__}: {cause}" if cause else ""
            return ProviderUnavailable(
                provider,
                f"connection failed{why}; is the server at gateway.providers.{provider}.base_url "
                "running (e.g. `ollama serve` for the default local provider)?",
            )
        if isinstance(exc, sdk.APIResponseValidationError):
            return ProviderBadResponse(provider, f"unexpected response shape: {exc}")
        if isinstance(exc, sdk.APIStatusError):
            return _status_error(provider, exc, exc.status_code, _api_message(exc))
        if isinstance(exc, sdk.APIError):
            # openai raises a bare APIError for an error event inside a streamed answer.
            return ProviderUnavailable(
                provider, f"the stream reported an error: {_api_message(exc)}"
            )
    if isinstance(exc, httpx2.TimeoutException):
        return ProviderTimeout(provider, "no answer within timeout_seconds (mid-stream)")
    if isinstance(exc, httpx2.HTTPError | httpx2.StreamError):
        return ProviderUnavailable(provider, f"the connection broke: {type(exc).__name__}: {exc}")
    if isinstance(exc, BAD_BODY_ERRORS):
        return ProviderBadResponse(provider, f"unreadable response: {type(exc).__name__}: {exc}")
    return ProviderError(provider, f"unexpected failure: {type(exc).__name__}: {exc}")


def translate(
    sdk: ModuleType | None, provider: str, exc: BaseException, secrets: Iterable[str] = ()
) -> ProviderError:
    """One `ProviderError` subtype for any failure while talking to `provider`, its message
    capped and free of `secrets`."""
    error = _translate(sdk, provider, exc)
    detail = redact(error.detail, secrets)
    if len(detail) > MAX_DETAIL_CHARS:
        detail = detail[: MAX_DETAIL_CHARS - 1] + "…"
    if detail == error.detail:
        return error
    return type(error)(error.provider, detail)


# Everything a provider call may raise that `translate` knows how to turn into a ProviderError.
def catchable(sdk: ModuleType) -> tuple[type[BaseException], ...]:
    import httpx2

    return (sdk.APIError, httpx2.HTTPError, httpx2.StreamError, *BAD_BODY_ERRORS)
