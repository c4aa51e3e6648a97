""" "Answer in prompt" measured from outside, as a user meets it: a real `caesar serve`, history
brought in by `caesar import` and `caesar worker --once`, each LoCoMo question sent to POST
/v1/chat and the system prompt read back on the provider's side; the in-process figure
(`Brain.prepare` at the question's time) beside it. With two conversations or more, also the
off-topic probe. Method: bench/README.md.

Usage: .venv/bin/python bench/prompt_over_http.py [--conversations 1] [--recall-chars 2500]

CAESAR_SRC=/path/to/src runs it against another checkout's caesar (the `caesar` commands get it
on PYTHONPATH).
"""

from __future__ import annotations

import json
import tempfile
from pathlib import Path
from typing import Annotated

import benchlib
import procs
import recall_quality as rq  # puts the caesar under test on the path
from answer_match import present, toks  # put on the path by prompt_quality
from fakes.llm_server import FakeLLMServer
from prompt_quality import memory_chars

from caesar.brain import Brain
from caesar.memory.render import EPISODES_HEADER
from caesar.memory.scope import Scope


def config(recorder: str, recall_chars: int | None) -> str:
    budget = "" if recall_chars is None else f"recall_chars = {recall_chars}\n"
    return f"""run_workers = false
[embedder]
cache_dir = "{rq.OUT / "models"}"
[gateway.providers.recorder]
kind = "openai"
base_url = "{recorder}"
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


def prompt_over_http(
    conversations: int = 1,
    recall_chars: Annotated[
        int | None,
        "the chat provider's recall_chars, e.g. 2500 (the embedded model's budget, what "
        "the in-process figure uses); default: its kind's (openai: 6,000)",
    ] = None,
) -> None:
    haystacks = rq.load_locomo(rq.DATA / "locomo" / "locomo_dev.json")[:conversations]
    outside = inside = n = chars_out = 0
    # the off-topic probe of recall_quality.py, from outside: the previous conversation's
    # questions (about another pair of people) asked of this one
    previous: list[rq.Question] = []
    offtopic = offtopic_n = 0
    with FakeLLMServer(reply=lambda body, protocol: "ok") as llm:

        def prompt_sent() -> str:  # the system prompt of the chat the provider last answered
            return str(llm.requests[-1]["json"]["messages"][0]["content"])

        for haystack in haystacks:
            with tempfile.TemporaryDirectory(prefix="caesar-http-") as tmp:
                home = Path(tmp)
                env = procs.caesar_env(home, config(llm.base_url, recall_chars))
                lines = [
                    json.dumps({"created_at": s.created_at.isoformat(), "messages": turns})
                    for s in haystack.sessions
                    if (turns := rq.importable(s.messages)) is not None
                ]
                (home / "history.jsonl").write_text("\n".join(lines) + "\n")
                procs.caesar(env, "db", "upgrade")
                procs.caesar(env, "import", str(home / "history.jsonl"), "--no-learn")
                procs.caesar(env, "worker", "--once", "memory.summarise", "memory.passages")
                with procs.Server(env, timeout=600) as server:
                    built = rq.build(haystack, rq.cached_embedder(), home / "inside")
                    try:
                        for q in haystack.questions:
                            evidence = "\n".join(built.sessions_text.get(k, "") for k in q.evidence)
                            if not present(q.answer, set(toks(evidence))):
                                continue
                            procs.post(server.url + "/v1/chat", {"message": q.text})
                            prompt = prompt_sent()
                            own = Brain(built.services).prepare(
                                q.text, now=q.now, scope=Scope(benchlib.OWNER)
                            )
                            n += 1
                            outside += bool(present(q.answer, set(toks(prompt))))
                            inside += bool(present(q.answer, set(toks(own.messages[0]["content"]))))
                            chars_out += memory_chars(prompt)
                        for probe in previous:
                            procs.post(server.url + "/v1/chat", {"message": probe.text})
                            offtopic_n += 1
                            offtopic += EPISODES_HEADER in prompt_sent()
                        previous = haystack.questions
                    finally:
                        built.services.close()
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


if __name__ == "__main__":
    benchlib.cli(prompt_over_http)
