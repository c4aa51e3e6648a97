""" "Answer in prompt" measured from outside, as a user meets it: a real `caesar serve`, history
brought in by `caesar import` and `caesar worker --once`, each question sent to POST /v1/chat,
and the system prompt read back on the provider's side (a local OpenAI-compatible server that
records what it is sent). The in-process figure (bench/prompt_quality.py, `Brain.prepare` at the
question's time) is computed for the same questions, in the same run, for comparison.

Usage: .venv/bin/python bench/prompt_over_http.py [--conversations 1]

With two conversations or more it also sends the off-topic probe (the previous conversation's
questions, about other people) and counts the prompts that carry a past-conversations block.

The questions are asked now, not at their dates, with shipped settings (no window override):
where the age window is on (`max_age_days`), a history older than it recalls nothing over HTTP;
with it off, only the relative time phrases differ (the ranking orders comparable matches by
relative age).

CAESAR_SRC=/path/to/src runs it against another checkout's caesar (the `caesar` commands get it
on PYTHONPATH).
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import threading
import time
import urllib.request
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "bench"))

import benchlib  # noqa: E402
import recall_quality as rq  # noqa: E402  (puts the caesar under test on the path)
from answer_match import present, toks  # noqa: E402  (put on the path by prompt_quality)
from prompt_quality import memory_chars  # noqa: E402

from caesar.memory.context.render import EPISODES_HEADER  # noqa: E402

CAESAR = ROOT / ".venv" / "bin" / "caesar"


class Recorder(BaseHTTPRequestHandler):
    """An OpenAI-compatible chat endpoint that keeps each request's system prompt."""

    prompts: list[str] = []

    def do_POST(self) -> None:  # noqa: N802 - http.server's name
        body = json.loads(self.rfile.read(int(self.headers["content-length"])))
        Recorder.prompts.append(body["messages"][0]["content"])
        reply = {
            "id": "r",
            "object": "chat.completion",
            "created": 0,
            "model": "recorder",
            "choices": [
                {
                    "index": 0,
                    "message": {"role": "assistant", "content": "ok"},
                    "finish_reason": "stop",
                }
            ],
            "usage": {"prompt_tokens": 1, "completion_tokens": 1, "total_tokens": 2},
        }
        data = json.dumps(reply).encode()
        self.send_response(200)
        self.send_header("content-type", "application/json")
        self.send_header("content-length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)

    def log_message(self, *args: Any) -> None:
        pass


def post(url: str, body: dict[str, Any]) -> dict[str, Any]:
    request = urllib.request.Request(
        url, data=json.dumps(body).encode(), headers={"content-type": "application/json"}
    )
    with urllib.request.urlopen(request, timeout=60) as response:
        return dict(json.loads(response.read()))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--conversations", type=int, default=1)
    parser.add_argument(
        "--recall-chars",
        type=int,
        default=None,
        help="the chat provider's recall_chars, e.g. 2500 (the embedded model's budget, what "
        "the in-process figure uses); default: its kind's (openai: 6,000)",
    )
    args = parser.parse_args()
    budget = "" if args.recall_chars is None else f"recall_chars = {args.recall_chars}\n"
    haystacks = rq.load_locomo(rq.DATA / "locomo" / "locomo_dev.json")[: args.conversations]
    recorder = ThreadingHTTPServer(("127.0.0.1", 0), Recorder)
    threading.Thread(target=recorder.serve_forever, daemon=True).start()
    outside = inside = n = chars_out = 0
    # the off-topic probe of recall_quality.py, from outside: the previous conversation's
    # questions (about another pair of people) asked of this one
    previous: list[rq.Question] = []
    offtopic = offtopic_n = 0
    for haystack in haystacks:
        with tempfile.TemporaryDirectory(prefix="caesar-http-") as tmp:
            home = Path(tmp)
            config = home / "caesar.toml"
            config.write_text(
                f"""run_workers = false
[embedder]
cache_dir = "{rq.OUT / "models"}"
[gateway.providers.recorder]
kind = "openai"
base_url = "http://127.0.0.1:{recorder.server_port}/v1"
max_retries = 0
{budget}[gateway.providers.offline]
kind = "offline"
[gateway.routes]
chat = "recorder:m"
memory_extract = "offline:patterns"
memory_summarise = "offline:textrank"
[memory.episodes_summarise]
enabled = true
"""
            )
            env = {
                # CAESAR_SRC is the bench's, not a setting: caesar refuses unknown CAESAR_ keys
                **{k: v for k, v in os.environ.items() if k != "CAESAR_SRC"},
                "CAESAR_HOME": str(home),
                "CAESAR_CONFIG": str(config),
                "PYTHONPATH": str(rq.SRC),
            }
            lines = [
                json.dumps({"created_at": s.created_at.isoformat(), "messages": turns})
                for s in haystack.sessions
                if (turns := rq.importable(s.messages)) is not None
            ]
            (home / "history.jsonl").write_text("\n".join(lines) + "\n")
            for command in (
                ["db", "upgrade"],
                ["import", str(home / "history.jsonl")],
                ["worker", "--once", "memory.summarise", "memory.passages"],
            ):
                done = subprocess.run([CAESAR, *command], env=env, capture_output=True, text=True)
                if done.returncode:
                    raise SystemExit(f"caesar {' '.join(command)}: {done.stderr.strip()}")
            port = benchlib.free_port()
            server = subprocess.Popen(
                [CAESAR, "serve", "--port", str(port)], env=env, stdout=subprocess.DEVNULL
            )
            try:
                base = f"http://127.0.0.1:{port}"
                for _ in range(600):
                    try:
                        with urllib.request.urlopen(f"{base}/healthz", timeout=2) as r:
                            if r.status == 200:
                                break
                    except OSError:
                        pass
                    time.sleep(0.2)
                built = rq.build(haystack, rq_embedder(), home / "inside")
                try:
                    for q in haystack.questions:
                        evidence = "\n".join(built.sessions_text.get(k, "") for k in q.evidence)
                        if not present(q.answer, set(toks(evidence))):
                            continue
                        post(f"{base}/v1/chat", {"message": q.text})
                        prompt = Recorder.prompts[-1]
                        from caesar.brain import Brain

                        own = Brain(built.services).prepare(
                            q.text, now=q.now, person=benchlib.OWNER
                        )
                        n += 1
                        outside += bool(present(q.answer, set(toks(prompt))))
                        inside += bool(present(q.answer, set(toks(own.messages[0]["content"]))))
                        chars_out += memory_chars(prompt)
                    for probe in previous:
                        post(f"{base}/v1/chat", {"message": probe.text})
                        offtopic_n += 1
                        offtopic += EPISODES_HEADER in Recorder.prompts[-1]
                    previous = haystack.questions
                finally:
                    built.services.close()
            finally:
                server.terminate()
                server.wait(timeout=30)
        print(f"{haystack.name}: {n} answerable questions so far", flush=True)
    print(
        f"answer in prompt over HTTP: {outside / n:.3f} ({chars_out / n:,.0f} memory chars/turn); "
        f"in-process Brain.prepare at the questions' dates: {inside / n:.3f}; n = {n}"
    )
    if offtopic_n:
        print(
            f"off-topic turns over HTTP that injected a past conversation: "
            f"{offtopic / offtopic_n:.3f} of {offtopic_n}"
        )


def rq_embedder() -> Any:
    from caesar.config import Settings
    from caesar.embeddings import MiniLMEmbedder

    real = MiniLMEmbedder(Settings(home=rq.OUT, embedder={"cache_dir": rq.OUT / "models"}))
    return rq.CachedEmbedder(real, rq.OUT / "embedding-cache.sqlite")


if __name__ == "__main__":
    main()
