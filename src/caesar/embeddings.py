"""The Embedder protocol (ADR-0010, reused unchanged by ADR-0034): texts in, unit vectors out.

One abstract method, `embed_batch`; `embed` is derived from it. Every stored vector carries
`model_id`, and recall only compares vectors of the same model.
"""

from __future__ import annotations

import threading
from collections.abc import Sequence
from concurrent.futures import Future, ThreadPoolExecutor
from typing import Protocol

import numpy as np

from caesar.config import Settings
from caesar.errors import ConfigError, EmbedderError


class Embedder(Protocol):
    """Called from more than one thread (a turn embeds its message on one of `embed_soon`'s):
    an implementation must be safe to share between threads. It may also say which texts its
    model reads only the start of (`cut_short(texts) -> list[bool]`, see `cut_short` below)."""

    @property
    def model_id(self) -> str: ...

    def embed_batch(self, texts: Sequence[str]) -> np.ndarray:
        """float32 array of shape (len(texts), dim), each row L2-normalised."""
        ...


def embed_one(embedder: Embedder, text: str) -> np.ndarray:
    return embedder.embed_batch([text])[0]


def cut_short(embedder: Embedder, texts: Sequence[str]) -> list[bool]:
    """Which of `texts` are longer than the embedder's model reads, so that their vector is of
    their start alone (MiniLM: 256 tokens); none, for an embedder that does not say."""
    says = getattr(embedder, "cut_short", None)
    return list(says(texts)) if says is not None else [False] * len(texts)


# A turn embeds its message here while it reads what needs no vector (its facts, the keyword
# pool): ONNX Runtime and SQLite both let go of the GIL, so on two cores the ~5 ms embedding
# and the reads overlap (docs/performance.md, "The embedding beside the reads"). Threads start
# on first use, as turns need them: as many as turns embed at once, up to 16 (a remote embedder
# answers in ~100 ms, and turns arriving together should not queue behind one another).
_SOON = ThreadPoolExecutor(max_workers=16, thread_name_prefix="caesar-embed")


def embed_soon(handle: EmbedderHandle, text: str) -> Future[np.ndarray]:
    """`text`'s vector, computed on another thread: `.result()` is it, or raises what the
    embedding raised."""
    return _SOON.submit(lambda: embed_one(handle.get(), text))


def vector_of(vector: np.ndarray | Future[np.ndarray]) -> np.ndarray:
    """The vector itself, waiting for it if it is still being computed (`embed_soon`)."""
    return vector.result() if isinstance(vector, Future) else vector


def normalise(vectors: np.ndarray) -> np.ndarray:
    vectors = np.asarray(vectors, dtype=np.float32)
    norms = np.linalg.norm(vectors, axis=1, keepdims=True)
    norms[norms == 0] = 1.0
    return vectors / norms


class MiniLMEmbedder:
    """The bundled all-MiniLM-L6-v2 (384-d), ONNX Runtime by default."""

    def __init__(self, settings: Settings) -> None:
        from caesar.minilm import MODEL_ID, MiniLM

        self._model = MiniLM(
            settings.model_cache_dir,
            backend=settings.embedder.backend,
            threads=settings.embedder.threads,
        )
        self._model_id = MODEL_ID

    @property
    def model_id(self) -> str:
        return self._model_id

    def release_if_idle(self, idle_seconds: float) -> bool:
        return self._model.release_if_idle(idle_seconds)

    def embed_batch(self, texts: Sequence[str]) -> np.ndarray:
        try:
            return self._model.embed_batch(list(texts))
        except Exception as exc:  # any load/inference failure is an embedder failure
            raise EmbedderError(f"{self._model_id}: {type(exc).__name__}: {exc}") from exc

    def cut_short(self, texts: Sequence[str]) -> list[bool]:
        try:
            return self._model.cut_short(texts)
        except Exception as exc:  # a tokenizer that cannot load is an embedder failure
            raise EmbedderError(f"{self._model_id}: {type(exc).__name__}: {exc}") from exc


class OpenAIEmbedder:
    """Embeddings from an OpenAI-compatible server (OpenAI, Ollama's /v1/embeddings, …)."""

    def __init__(self, settings: Settings) -> None:
        import openai

        spec = settings.embedder
        self._model = spec.model
        self._client = openai.OpenAI(
            base_url=spec.base_url,
            api_key=spec.api_key.get_secret_value() if spec.api_key else "not-needed",
            max_retries=2,
            timeout=30,
        )

    @property
    def model_id(self) -> str:
        return self._model

    def embed_batch(self, texts: Sequence[str]) -> np.ndarray:
        import openai

        if not texts:
            return np.zeros((0, 0), dtype=np.float32)
        try:
            response = self._client.embeddings.create(model=self._model, input=list(texts))
        except openai.OpenAIError as exc:
            raise EmbedderError(f"{self._model}: {type(exc).__name__}: {exc}") from exc
        rows = sorted(response.data, key=lambda d: d.index)
        return normalise(np.array([r.embedding for r in rows], dtype=np.float32))


class EmbedderHandle:
    """Builds the configured embedder once, lazily, and shares it (thread-safe)."""

    def __init__(self, settings: Settings) -> None:
        self._settings = settings
        self._lock = threading.Lock()
        self._embedder: Embedder | None = None

    @property
    def enabled(self) -> bool:
        return self._settings.semantic.enabled

    def get(self) -> Embedder:
        if not self.enabled:
            raise ConfigError("the embedder is off (semantic.enabled = false)")
        if self._embedder is None:
            with self._lock:
                if self._embedder is None:
                    self._embedder = build_embedder(self._settings)
        return self._embedder

    def release_if_idle(self, idle_seconds: float) -> bool:
        """Unload a local model unused for `idle_seconds` (see MiniLM.release_if_idle)."""
        release = getattr(self._embedder, "release_if_idle", None)
        return bool(release and release(idle_seconds))

    def set(self, embedder: Embedder) -> None:
        """Install a specific embedder (e.g. one shared across apps in one process)."""
        self._embedder = embedder


def build_embedder(settings: Settings) -> Embedder:
    if settings.embedder.kind == "openai":
        return OpenAIEmbedder(settings)
    return MiniLMEmbedder(settings)
