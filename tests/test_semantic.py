"""The semantic index: chunking (pure), worker `semantic.index`, and explicit semantic recall."""

from __future__ import annotations

import numpy as np
import pytest
from memory_helpers import BrokenEmbedder, add_chat, days_ago, events, write_config
from sqlalchemy import select
from typer.testing import CliRunner

from caesar import audit
from caesar.cli.main import app as cli_app
from caesar.db.models import SemanticChunk, SemanticIndexCursor
from caesar.memory.engine.vectors import from_row
from caesar.memory.semantic import chunk_text
from caesar.workers import run_until_caught_up

RENOVATION = (
    "For the kitchen renovation, start with the plumbing before the cabinets go in.\n\n"
    "Budget about 15% extra for surprises behind the walls. Get three quotes from contractors."
)


# -- chunking ---------------------------------------------------------------------------------
def test_short_text_is_one_chunk_with_whitespace_normalised():
    assert chunk_text("Hello   there.\nHow are you?", 100) == ["Hello there. How are you?"]
    assert chunk_text("", 100) == [] and chunk_text(" \n\n ", 100) == []


def test_paragraphs_are_packed_up_to_the_limit():
    paragraphs = ["a" * 40, "b" * 40, "c" * 40]
    assert chunk_text("\n\n".join(paragraphs), 100) == ["a" * 40 + " " + "b" * 40, "c" * 40]


def test_long_paragraph_splits_on_sentences_then_words_then_hard():
    sentences = " ".join(f"Sentence number {i} is here." for i in range(20))
    chunks = chunk_text(sentences, 100)
    assert all(len(c) <= 100 for c in chunks)
    assert all(c.endswith(".") for c in chunks)  # cut on sentence boundaries
    assert " ".join(chunks) == sentences  # nothing lost, nothing reordered
    words = "word " * 100
    assert all(len(c) <= 100 and not c.startswith(" ") for c in chunk_text(words, 100))
    blob = "x" * 250
    assert chunk_text(blob, 100) == ["x" * 100, "x" * 100, "x" * 50]


@pytest.mark.parametrize("limit", [100, 137, 800])
def test_chunks_never_exceed_limit_and_keep_every_word(limit):
    text = (RENOVATION + " ") * 20 + "https://example.com/" + "q" * 300
    chunks = chunk_text(text, limit)
    assert all(0 < len(c) <= limit for c in chunks)
    assert "".join(chunks).replace(" ", "") == "".join(text.split())


# -- worker -----------------------------------------------------------------------------------
@pytest.fixture
def svc(make_services):
    return make_services(semantic={"index_enabled": True, "chunk_chars": 100})


def test_worker_indexes_replies(svc):
    when = days_ago(5)
    chat_id = add_chat(svc, "how do I plan a kitchen renovation?", RENOVATION, when)
    worker = svc.workers["semantic.index"]
    assert worker.enabled
    assert run_until_caught_up(worker) == 1
    with svc.db.read() as session:
        chunks = list(session.scalars(select(SemanticChunk).order_by(SemanticChunk.chunk_index)))
        cursor = session.scalar(select(SemanticIndexCursor.last_audit_id))
    assert [c.chunk_index for c in chunks] == list(range(len(chunks))) and len(chunks) >= 2
    assert " ".join(c.text for c in chunks) == " ".join(RENOVATION.split())
    for c in chunks:
        assert (c.audit_log_id, c.model, c.created_at) == (chat_id, "all-MiniLM-L6-v2", when)
        vector = from_row(c.embedding_f32, None)
        assert vector.shape == (384,) and np.allclose(vector, c.embedding, atol=1e-7)
    [indexed] = events(svc, audit.SEMANTIC_INDEXED)
    assert indexed.payload == {
        "audit_log_id": chat_id,
        "chunks": len(chunks),
        "model": "all-MiniLM-L6-v2",
    }
    assert cursor == chat_id


def test_semantic_recall_api(svc, llm):
    from fastapi.testclient import TestClient

    from caesar.api import create_app

    renovation_id = add_chat(svc, "kitchen renovation?", RENOVATION)
    add_chat(svc, "dog food?", "Biscuit should eat twice a day; ask the vet about portion sizes.")
    run_until_caught_up(svc.workers["semantic.index"])
    with TestClient(create_app(svc.settings, svc, run_workers=False)) as client:
        response = client.post(
            "/v1/memory/semantic_recall",
            json={"query": "what did we say about the renovation budget?", "top_k": 2},
        )
        assert response.status_code == 200, response.text
        chunks = response.json()["chunks"]
        assert len(chunks) == 2
        assert chunks[0]["audit_log_id"] == renovation_id and "15% extra" in chunks[0]["text"]
        assert chunks[0]["score"] >= chunks[1]["score"]
        assert set(chunks[0]) == {
            "chunk_id",
            "audit_log_id",
            "chunk_index",
            "text",
            "score",
            "created_at",
        }
        for bad in ({"query": ""}, {"query": "  "}, {"query": "x", "top_k": 0}, {"q": "x"}):
            assert client.post("/v1/memory/semantic_recall", json=bad).status_code == 422


def test_embedder_failure_is_audited_and_cursor_advances(svc):
    chat_id = add_chat(svc, "renovation?", RENOVATION)
    svc.embedder.set(BrokenEmbedder())
    assert run_until_caught_up(svc.workers["semantic.index"]) == 1
    [failed] = events(svc, audit.SEMANTIC_INDEX_FAILED)
    assert failed.payload["audit_log_id"] == chat_id and "EmbedderError" in failed.payload["error"]
    with svc.db.read() as session:
        assert session.scalar(select(SemanticIndexCursor.last_audit_id)) == chat_id
        assert session.scalars(select(SemanticChunk)).all() == []


def test_index_is_off_by_default_and_needs_the_embedder(make_services):
    assert not make_services().workers["semantic.index"].enabled
    off = make_services(semantic={"enabled": False, "index_enabled": True})
    assert not off.workers["semantic.index"].enabled


def test_cli_semantic_recall(svc, tmp_path, monkeypatch):
    add_chat(svc, "kitchen renovation?", RENOVATION)
    run_until_caught_up(svc.workers["semantic.index"])
    monkeypatch.setenv("CAESAR_CONFIG", str(write_config(tmp_path / "caesar.toml", svc.settings)))
    result = CliRunner().invoke(cli_app, ["semantic-recall", "renovation budget", "--top-k", "1"])
    assert result.exit_code == 0, result.output
    assert "15% extra" in result.output
