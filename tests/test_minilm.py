"""Tests for caesar.minilm (uses the real bundled all-MiniLM-L6-v2 model)."""

from __future__ import annotations

import os
import pathlib
import subprocess
import sys
import textwrap
from collections import Counter
from concurrent.futures import ThreadPoolExecutor

import numpy as np
import pytest

os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")

_SRC = pathlib.Path(__file__).resolve().parents[1] / "src"
try:  # installed (editable) or on sys.path already
    import caesar.minilm  # noqa: F401
except ImportError:  # pragma: no cover - plain checkout
    sys.path.insert(0, str(_SRC))

from caesar.minilm import DIM, MODEL_ID, MiniLM

LONG_TEXT = " ".join(
    f"sentence {i} talks about the weather, the garden, and the neighbour's dog." for i in range(60)
)  # well over 300 tokens -> exercises truncation at max_seq_length=256

TEXTS = [
    "What time is my dentist appointment tomorrow?",
    "",
    "I tried the thermostat thing you suggested",
    "   leading and trailing whitespace   ",
    "Ünïcödé, emoji 🙂 and CJK 漢字 tokens",
    LONG_TEXT,
]


@pytest.fixture(scope="session")
def cache_dir(tmp_path_factory: pytest.TempPathFactory) -> pathlib.Path:
    return tmp_path_factory.mktemp("minilm-cache")


@pytest.fixture(scope="session")
def onnx_model(cache_dir: pathlib.Path) -> MiniLM:
    m = MiniLM(cache_dir, backend="onnx")
    m.load()
    return m


@pytest.fixture(scope="session")
def torch_model(cache_dir: pathlib.Path) -> MiniLM:
    m = MiniLM(cache_dir, backend="torch")
    m.load()
    return m


def _cos(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    a = a / np.linalg.norm(a, axis=-1, keepdims=True)
    b = b / np.linalg.norm(b, axis=-1, keepdims=True)
    return (a * b).sum(-1)


def test_constants_and_properties(onnx_model: MiniLM) -> None:
    assert MODEL_ID == "all-MiniLM-L6-v2"
    assert DIM == 384
    assert onnx_model.model_id == MODEL_ID
    assert onnx_model.dim == DIM


def test_unknown_backend_rejected(tmp_path: pathlib.Path) -> None:
    with pytest.raises(ValueError):
        MiniLM(tmp_path, backend="tensorflow")


def test_long_text_really_is_truncated(torch_model: MiniLM) -> None:
    st = torch_model._st
    assert st.max_seq_length == 256
    assert len(st.tokenizer(LONG_TEXT)["input_ids"]) > 300


def test_onnx_matches_torch(onnx_model: MiniLM, torch_model: MiniLM) -> None:
    """The fused export (Attention/SkipLayerNorm/BiasGelu, pooling in the graph) stays the
    reference sentence-transformers model up to float noise, batched and one text at a time."""
    a = onnx_model.embed_batch(TEXTS)
    b = torch_model.embed_batch(TEXTS)
    assert a.shape == b.shape == (len(TEXTS), DIM)
    assert np.all(_cos(a, b) > 0.9999), _cos(a, b)
    assert float(np.abs(a - b).max()) <= 1e-4
    singles = np.stack([onnx_model.embed(t) for t in TEXTS])
    assert float(np.abs(singles - b).max()) <= 1e-4


def test_export_is_the_fused_sentence_encoder(onnx_model: MiniLM) -> None:
    """Guards the speed-up: if a new torch/onnxruntime stops the fusions, this says so."""
    import onnx

    graph = onnx.load(str(onnx_model.onnx_path)).graph
    ops = Counter(node.op_type for node in graph.node)
    assert ops["EmbedLayerNormalization"] == 1
    assert ops["Attention"] == ops["BiasGelu"] == 6  # one per layer
    assert ops["SkipLayerNormalization"] == 12
    assert [o.name for o in graph.output] == ["sentence_embedding"]
    assert [i.name for i in graph.input] == ["input_ids", "attention_mask"]


def test_onnx_single_matches_batch(onnx_model: MiniLM) -> None:
    """A text's vector is the same alone and among others."""
    batch = onnx_model.embed_batch(TEXTS)
    for i, text in enumerate(TEXTS):
        single = onnx_model.embed_batch([text])[0]
        assert _cos(single, batch[i]) > 0.99999


def test_onnx_matches_torch_chunked_large_batch(onnx_model: MiniLM, torch_model: MiniLM) -> None:
    """150 texts of varied lengths, some repeated: every vector in the input's order."""
    texts = [f"note {i}: " + "remember to water the plants " * (i % 13) for i in range(150)]
    a = onnx_model.embed_batch(texts)
    b = torch_model.embed_batch(texts)
    assert a.shape == (150, DIM)
    assert np.all(_cos(a, b) > 0.9999)
    assert float(np.abs(a - b).max()) <= 1e-4


def test_texts_that_truncate_alike_get_one_vector(onnx_model: MiniLM) -> None:
    """A window whose first turn fills the model's 256 tokens is that turn, as the model sees
    it: it is embedded once and both get the vector the turn alone gets."""
    turn = "we walked the dog along the river before breakfast " * 40  # > 256 tokens
    window = turn + " then it rained all afternoon"
    both = onnx_model.embed_batch([turn, "a short one", window, "a short one"])
    assert np.array_equal(both[0], both[2]) and np.array_equal(both[1], both[3])
    assert _cos(both[0], onnx_model.embed(turn)) > 0.99999
    assert _cos(both[1], onnx_model.embed("a short one")) > 0.99999


def test_cut_short_says_which_texts_the_model_reads_only_the_start_of(onnx_model: MiniLM) -> None:
    words = "river " * 254  # 254 tokens, with [CLS] and [SEP] the 256 the model reads
    assert onnx_model.cut_short([words, words + "bank", "a short one"]) == [False, True, False]


def test_shape_dtype_normalisation(onnx_model: MiniLM) -> None:
    v = onnx_model.embed_batch(TEXTS)
    assert v.dtype == np.float32
    assert v.shape == (len(TEXTS), DIM)
    assert np.allclose(np.linalg.norm(v, axis=1), 1.0, atol=1e-5)
    assert np.all(np.isfinite(v))
    assert onnx_model.embed("hello").shape == (DIM,)


@pytest.mark.parametrize("backend", ["onnx", "torch"])
def test_empty_list(backend: str, onnx_model: MiniLM, torch_model: MiniLM) -> None:
    model = onnx_model if backend == "onnx" else torch_model
    v = model.embed_batch([])
    assert v.shape == (0, DIM)
    assert v.dtype == np.float32


def test_empty_list_does_not_load(tmp_path: pathlib.Path) -> None:
    m = MiniLM(tmp_path / "never", backend="onnx")
    assert m.embed_batch([]).shape == (0, DIM)
    assert not (tmp_path / "never").exists()


def test_single_str_rejected(onnx_model: MiniLM) -> None:
    with pytest.raises(TypeError):
        onnx_model.embed_batch("not a list")  # type: ignore[arg-type]


def test_semantic_sanity(onnx_model: MiniLM) -> None:
    query, sleep, cooking = onnx_model.embed_batch(
        [
            "I tried the thermostat thing you suggested",
            (
                "I keep waking up at night because the bedroom is too hot; "
                "try setting the thermostat lower before you go to sleep."
            ),
            "Simmer the garlic and tomatoes for twenty minutes, then stir in the basil.",
        ]
    )
    assert float(query @ sleep) > float(query @ cooking) + 0.1


def test_export_is_reused(cache_dir: pathlib.Path, onnx_model: MiniLM) -> None:
    path = onnx_model.onnx_path
    assert path.parent == cache_dir
    assert path.name.startswith(f"{MODEL_ID}-") and path.suffix == ".onnx"
    assert path.exists()
    before = path.stat().st_mtime_ns
    files_before = sorted(p.name for p in cache_dir.iterdir())

    second = MiniLM(cache_dir, backend="onnx")
    assert second.onnx_path == path
    v = second.embed_batch(["I tried the thermostat thing you suggested"])
    assert v.shape == (1, DIM)

    assert path.stat().st_mtime_ns == before
    assert sorted(p.name for p in cache_dir.iterdir()) == files_before
    assert not [p for p in cache_dir.iterdir() if p.name.endswith(".tmp")]


def test_lazy_init_thread_safe(cache_dir: pathlib.Path, onnx_model: MiniLM) -> None:
    expected = onnx_model.embed_batch(TEXTS[:3])
    fresh = MiniLM(cache_dir, backend="onnx")  # not loaded yet: threads race the lazy init

    def worker() -> list[np.ndarray]:
        return [fresh.embed_batch(TEXTS[:3]) for _ in range(5)]

    with ThreadPoolExecutor(max_workers=4) as pool:
        futures = [pool.submit(worker) for _ in range(4)]
        results = [r for f in futures for r in f.result()]
    assert len(results) == 20
    for r in results:
        assert np.allclose(r, expected, atol=1e-6)


def test_concurrent_processes_export_once(tmp_path: pathlib.Path) -> None:
    """Two processes racing on an empty cache dir: one exports, the other waits and reuses."""
    script = textwrap.dedent(
        """
        import logging, pathlib, sys
        sys.path.insert(0, sys.argv[2])
        logging.basicConfig(level=logging.INFO, stream=sys.stdout, format="%(message)s")
        from caesar.minilm import MiniLM
        v = MiniLM(pathlib.Path(sys.argv[1])).embed_batch(["race"])
        assert v.shape == (1, 384)
        print("OK")
        """
    )
    env = dict(os.environ, HF_HUB_OFFLINE="1", TRANSFORMERS_OFFLINE="1")
    procs = [
        subprocess.Popen(
            [sys.executable, "-c", script, str(tmp_path), str(_SRC)],
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
            env=env,
        )
        for _ in range(2)
    ]
    outs = [p.communicate(timeout=180) for p in procs]
    for p, (out, err) in zip(procs, outs, strict=True):
        assert p.returncode == 0, err
        assert "OK" in out
    exports = sum(out.count("exported all-MiniLM-L6-v2") for out, _ in outs)
    assert exports == 1
    onnx_files = [p for p in tmp_path.iterdir() if p.suffix == ".onnx"]
    assert len(onnx_files) == 1
    assert not [p for p in tmp_path.iterdir() if p.name.endswith(".tmp")]


def test_an_idle_model_is_unloaded_and_loads_again_on_the_next_embed(cache_dir) -> None:
    """The worker process drops its embedder between conversations (issue #25)."""
    model = MiniLM(cache_dir, backend="onnx")
    assert model.release_if_idle(0) is False  # nothing loaded yet
    first = model.embed_batch(["my dog is called Biscuit"])
    assert model.release_if_idle(3600) is False  # used just now
    assert model.release_if_idle(0) is True
    assert model._session is None and not model._loaded
    again = model.embed_batch(["my dog is called Biscuit"])
    np.testing.assert_array_equal(first, again)
    assert model._loaded
