"""caesar's exception tree. Each boundary (HTTP handler, CLI, provider SDK) translates once.

CaesarError
├── ConfigError            settings that cannot work; the message names the fix
├── InputError             a request or file the operator sent is invalid (-> 4xx)
├── NotFound               a named thing does not exist (-> 404)
├── EmbedderError          the embedder failed to load or embed
└── ProviderError          an LLM provider failed; carries the provider name (-> 502)
    ├── ProviderTimeout        no answer in time (-> 504)
    ├── ProviderUnavailable    connection refused, 5xx, 429 after retries (-> 503)
    └── ProviderBadResponse    an answer that is not what the protocol promised (-> 502)
"""

from __future__ import annotations


class CaesarError(Exception):
    """Base of every error caesar raises on purpose."""


class ConfigError(CaesarError):
    pass


class InputError(CaesarError):
    pass


class NotFound(CaesarError):
    pass


class EmbedderError(CaesarError):
    pass


class ProviderError(CaesarError):
    http_status = 502

    def __init__(self, provider: str, message: str) -> None:
        super().__init__(f"provider {provider!r}: {message}")
        self.provider = provider
        self.detail = message


class ProviderTimeout(ProviderError):
    http_status = 504


class ProviderUnavailable(ProviderError):
    http_status = 503


class ProviderBadResponse(ProviderError):
    http_status = 502
