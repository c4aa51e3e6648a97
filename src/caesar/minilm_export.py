"""One-off export of the bundled MiniLM transformer to an optimised ONNX sentence encoder.

The recipe (its version is ``minilm._EXPORT_REVISION``):

1. ``torch.onnx.export`` of the Hugging Face BERT encoder (eager attention, so the padding
   mask stays a graph input);
2. onnxruntime's transformer optimizer fuses it into EmbedLayerNormalization, Attention,
   SkipLayerNormalization and BiasGelu ops (exact float32 kernels - no quantisation): far
   fewer nodes and one QKV matmul per layer instead of three;
3. mean pooling over the attention mask and L2 normalisation are appended to the graph, so
   the output ``sentence_embedding`` (batch x 384, unit rows) needs no numpy afterwards;
4. the result is checked against torch + the reference pooling before it is moved into place.

torch, transformers and onnx are only imported here, never on the query path.
"""

from __future__ import annotations

import contextlib
import logging
import os
import pathlib
import uuid
import warnings
from collections.abc import Iterator
from typing import Any

import numpy as np

logger = logging.getLogger(__name__)

OUTPUT = "sentence_embedding"
# The exported vectors must equal sentence-transformers' to float noise; the export check
# uses the same bound the tests hold the finished embedder to.
MAX_ABS_ERROR = 1e-5


@contextlib.contextmanager
def no_progress_bars() -> Iterator[None]:
    """Silence transformers' "Loading weights" tqdm bar while loading the model."""
    from transformers.utils import logging as hf_logging

    were_enabled = hf_logging.is_progress_bar_enabled()
    hf_logging.disable_progress_bar()
    try:
        yield
    finally:
        if were_enabled:
            hf_logging.enable_progress_bar()


def mean_pool_normalise(hidden: np.ndarray, mask: np.ndarray) -> np.ndarray:
    """sentence-transformers' Pooling(mean) + Normalize, in numpy: the reference the graph's
    own pooling is checked against."""
    m = mask.astype(np.float32)[:, :, None]
    pooled = (hidden * m).sum(axis=1) / np.clip(m.sum(axis=1), 1e-9, None)
    norms = np.linalg.norm(pooled, axis=1, keepdims=True)
    return (pooled / np.maximum(norms, 1e-12)).astype(np.float32)


def _fuse(path: pathlib.Path, num_heads: int, hidden_size: int) -> Any:
    """onnxruntime's BERT fusions (Python graph rewrites only: opt_level=0 keeps the file
    free of hardware-specific ops, onnxruntime applies its own at load time)."""
    from onnxruntime.transformers.optimizer import optimize_model  # type: ignore[import-untyped]

    optimized = optimize_model(
        str(path),
        model_type="bert",
        num_heads=num_heads,
        hidden_size=hidden_size,
        opt_level=0,
        use_gpu=False,
    )
    stats = {k: v for k, v in optimized.get_fused_operator_statistics().items() if v}
    logger.info("fused MiniLM graph: %s", stats)
    if not stats.get("Attention"):
        # Still correct (the export check below runs either way), only slower.
        logger.warning("onnxruntime did not fuse MiniLM's attention; queries will be slower")
    return optimized.model


def _append_pooling(model: Any, hidden_name: str) -> None:
    """Replace the graph output ``hidden_name`` (batch x seq x dim) with ``OUTPUT``:
    masked mean over the sequence, then L2 normalisation (both as in sentence-transformers).
    """
    from onnx import TensorProto, helper

    graph = model.graph

    def const(name: str, value: float | list[int], dtype: int) -> str:
        vals = value if isinstance(value, list) else [value]
        dims = [len(vals)] if isinstance(value, list) else []
        graph.initializer.append(helper.make_tensor(name, dtype, dims, vals))
        return name

    one = const("pool/axis1", [1], TensorProto.INT64)
    last = const("pool/axis2", [2], TensorProto.INT64)
    tiny = const("pool/min_count", 1e-9, TensorProto.FLOAT)
    eps = const("pool/min_norm", 1e-12, TensorProto.FLOAT)
    nodes = [
        helper.make_node("Cast", ["attention_mask"], ["pool/mask"], to=TensorProto.FLOAT),
        helper.make_node("Unsqueeze", ["pool/mask", last], ["pool/mask3"]),
        helper.make_node("Mul", [hidden_name, "pool/mask3"], ["pool/masked"]),
        helper.make_node("ReduceSum", ["pool/masked", one], ["pool/sum"], keepdims=0),
        helper.make_node("ReduceSum", ["pool/mask", one], ["pool/count"], keepdims=1),
        helper.make_node("Max", ["pool/count", tiny], ["pool/count_safe"]),
        helper.make_node("Div", ["pool/sum", "pool/count_safe"], ["pool/mean"]),
        helper.make_node("ReduceL2", ["pool/mean"], ["pool/norm"], axes=[1], keepdims=1),
        helper.make_node("Max", ["pool/norm", eps], ["pool/norm_safe"]),
        helper.make_node("Div", ["pool/mean", "pool/norm_safe"], [OUTPUT]),
    ]
    graph.node.extend(nodes)
    dim = graph.output[0].type.tensor_type.shape.dim[2].dim_value
    del graph.output[:]
    graph.output.append(helper.make_tensor_value_info(OUTPUT, TensorProto.FLOAT, ["batch", dim]))


def export_onnx(model_dir: pathlib.Path, target: pathlib.Path) -> None:
    """Export the bundled model as a fused ONNX sentence encoder to ``target`` atomically.

    Inputs ``input_ids`` / ``attention_mask`` (int64, batch x sequence, dynamic), output
    ``sentence_embedding`` (float32, batch x 384, L2-normalised).  The graph is checked
    against torch on a padded batch before it is moved into place.
    """
    import onnx
    import onnxruntime as ort  # type: ignore[import-untyped]
    import torch
    from transformers import AutoModel

    with no_progress_bars():
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
        reference = mean_pool_normalise(encoder(ids, mask).numpy(), mask.numpy())

    stem = f".{target.name}.{os.getpid()}.{uuid.uuid4().hex[:8]}"
    raw, tmp = target.with_name(f"{stem}.raw.tmp"), target.with_name(f"{stem}.tmp")
    try:
        with warnings.catch_warnings(), torch.no_grad():
            warnings.simplefilter("ignore")
            torch.onnx.export(
                encoder,
                (ids, mask),
                str(raw),
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
        fused = _fuse(raw, model.config.num_attention_heads, model.config.hidden_size)
        _append_pooling(fused, "last_hidden_state")
        onnx.save_model(fused, str(tmp))

        sess = ort.InferenceSession(str(tmp), providers=["CPUExecutionProvider"])
        got = sess.run([OUTPUT], {"input_ids": ids.numpy(), "attention_mask": mask.numpy()})[0]
        err = float(np.abs(got - reference).max())
        if not err < MAX_ABS_ERROR:
            raise RuntimeError(
                f"ONNX export of {model_dir.name} disagrees with torch (max abs err {err:.2e})"
            )
        del sess
        os.replace(tmp, target)
    finally:
        for path in (raw, tmp):
            with contextlib.suppress(FileNotFoundError):
                path.unlink()


__all__ = ["OUTPUT", "export_onnx", "mean_pool_normalise", "no_progress_bars"]
