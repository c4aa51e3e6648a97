"""The offline summariser's TextRank (gateway/textrank.py) picks the sentence sumy's
TextRankSummarizer picks, on real chats: it replaced sumy's summariser so that the worker
does not import NLTK, scikit-learn and SciPy (issue #25), and must not change a summary."""

from __future__ import annotations

import json
import sys
from pathlib import Path

from caesar.gateway import offline, textrank

LOCOMO = Path(__file__).resolve().parents[2] / "shared/data/locomo/locomo_dev.json"


def _speakers_sentences() -> list[list[str]]:
    """Each speaker's sentences in each LoCoMo dev session, as the summariser splits them."""
    found = []
    for sample in json.loads(LOCOMO.read_text()):
        chat = sample["conversation"]
        for key, turns in chat.items():
            if not key.startswith("session_") or key.endswith("date_time"):
                continue
            for speaker in (chat["speaker_a"], chat["speaker_b"]):
                said = [t["text"] for t in turns if t["speaker"] == speaker]
                sentences = [s for text in said for s in offline._TOKENIZER.to_sentences(text)]
                sentences = [s for s in sentences if offline._content_words(s)]
                if len(sentences) >= 2:
                    found.append(sentences)
    return found


def test_the_best_sentence_is_sumys_on_every_locomo_session():
    from sumy.models.dom import ObjectDocumentModel, Paragraph, Sentence
    from sumy.nlp.stemmers import Stemmer
    from sumy.summarizers.text_rank import TextRankSummarizer

    tokenizer = offline._TOKENIZER
    chats = _speakers_sentences()
    assert len(chats) >= 200
    differ = []
    for sentences in chats:
        document = ObjectDocumentModel([Paragraph([Sentence(s, tokenizer) for s in sentences])])
        summariser = TextRankSummarizer(Stemmer("english"))
        summariser.stop_words = offline._STOP
        [theirs] = summariser(document, 1)
        ours = textrank.best(sentences, tokenizer.to_words, offline._STOP)
        if ours != str(theirs):
            differ.append((str(theirs), ours))
    assert differ == []  # measured: 256 of 256 the same


def test_ratings_follow_shared_words():
    """Two sentences about the thermostat outrank the one that shares nothing."""
    sentences = [
        "The thermostat is set to 65 degrees at night.",
        "My cat likes sardines.",
        "Lowering the thermostat at night helped me sleep.",
    ]
    rated = textrank.ratings([offline._TOKENIZER.to_words(s) for s in sentences], offline._STOP)
    assert rated[1] < min(rated[0], rated[2])
    assert textrank.best(sentences, offline._TOKENIZER.to_words, offline._STOP) != sentences[1]


def test_the_offline_summariser_does_not_import_nltk():
    import subprocess

    probe = "import sys; from caesar.gateway import offline; print('nltk' in sys.modules)"
    out = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "False"
