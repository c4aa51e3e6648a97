"""The embedded GGUF provider with the real model (SmolLM2-135M through xllamacpp): a chat
answers with no outside service, streams, stops within max_tokens, gets the memory block, and
answers what it was told."""

from __future__ import annotations

import threading
from pathlib import Path

import pytest
from conftest import OWNER

from caesar.brain import Brain
from caesar.config import ProviderSettings, Settings
from caesar.errors import ConfigError
from caesar.gateway.base import Completion, Generation
from caesar.gateway.gguf_provider import GGUFProvider, bundled_model
from caesar.memory.scope import Scope
from caesar.workers import run_until_caught_up

pytestmark = pytest.mark.xdist_group("gguf")  # one model load per worker, not per test

LIMIT = 24


@pytest.fixture(scope="module")
def provider() -> GGUFProvider:
    return GGUFProvider("embedded", ProviderSettings(kind="gguf", max_tokens=LIMIT))


def test_the_bundled_model_is_found_without_importing_its_package():
    path = bundled_model()
    assert path.suffix == ".gguf" and path.stat().st_size > 50_000_000


def test_a_reply_stops_within_max_tokens(provider):
    completion = provider.complete(
        [{"role": "user", "content": "Write a very long story about a dragon."}],
        "smollm2",
        task="chat",
    )
    assert completion.text.strip()
    assert 0 < completion.usage.completion_tokens <= LIMIT
    assert completion.provider == "embedded"


def test_the_bundled_models_template_takes_no_tools_as_llamacpp_reports(provider):
    # measured (llama.cpp's /props chat_template_caps), not assumed: SmolLM2's template has no
    # tool calls, so a client's tools are answered without (tests/test_clients.py)
    assert "tools" not in provider.takes and "response_format" in provider.takes


def test_an_operators_turn_cuts_off_background_work_which_then_runs_again(provider):
    long = Generation(max_tokens=LIMIT, temperature=0, background=True)
    done: list[Completion] = []
    before = provider.turns.preempted

    def background() -> None:
        said = [{"role": "user", "content": "Write a very long story about a dragon."}]
        done.append(provider.complete(said, "m", task="chat", generation=long))

    worker = threading.Thread(target=background)
    worker.start()
    assert provider.turns.generating.wait(timeout=30)  # its first words are out
    turn = provider.complete([{"role": "user", "content": "Say hello."}], "m", task="chat")
    finished_first = worker.is_alive()  # the background request is still to run again
    worker.join(timeout=60)
    assert turn.text.strip() and finished_first
    assert provider.turns.preempted == before + 1
    [completion] = done
    assert completion.text.strip() and 0 < completion.usage.completion_tokens <= LIMIT


def test_a_turn_hangs_up_a_background_request_still_reading_its_prompt(provider):
    """A title request over a long chat is read by llama.cpp in steps of 64 tokens; a turn
    does not wait for the rest of it (it was 11 s here with the whole prompt read at once)."""
    chat = " ".join(f"On day {i} the thermostat was set to {i % 30} degrees." for i in range(90))
    said = [{"role": "user", "content": f"### Task: a title for this chat.\n{chat}"}]
    title = Generation(max_tokens=LIMIT, temperature=0, background=True)
    done: list[Completion] = []
    before = provider.turns.preempted
    worker = threading.Thread(
        target=lambda: done.append(provider.complete(said, "m", task="chat", generation=title))
    )
    worker.start()
    assert provider.turns.cuttable.wait(timeout=30)  # llama.cpp has it
    reading_its_prompt = not provider.turns.generating.is_set()
    turn = provider.complete([{"role": "user", "content": "Say hello."}], "m", task="chat")
    worker.join(timeout=300)
    assert reading_its_prompt and turn.text.strip()
    assert provider.turns.preempted == before + 1
    [completion] = done  # and it ran again to its end
    assert completion.text.strip() and completion.usage.prompt_tokens > 1000


def test_streaming_ends_with_the_usage(provider):
    chunks = list(
        provider.stream([{"role": "user", "content": "Count to one hundred."}], "m", task="chat")
    )
    assert "".join(c.text for c in chunks).strip()
    assert chunks[-1].text == "" and 0 < chunks[-1].usage.completion_tokens <= LIMIT


def test_the_default_route_chats_with_the_embedded_model():
    """What `make run` gets: chat on the embedded model, the memory tasks offline."""
    routes = Settings().gateway.routes
    assert routes["chat"].startswith("embedded:")
    assert Settings().gateway.providers["embedded"].kind == "gguf"
    assert routes["memory_extract"].startswith("offline:")
    assert routes["memory_summarise"].startswith("offline:")


def test_a_turn_sends_the_memory_block_to_the_model(make_services):
    services = make_services(
        gateway={
            "providers": {"embedded": {"kind": "gguf", "max_tokens": LIMIT}},
            "routes": {"chat": "embedded:smollm2"},
        }
    )
    brain = Brain(services)
    bare = brain.turn("What's my dog called?", scope=Scope(OWNER))
    services.facts.set_by_operator("dog_name", "Biscuit", scope=Scope(OWNER))
    informed = brain.turn("What's my dog called?", scope=Scope(OWNER))
    # the facts block reached the model: its prompt grew by it
    assert informed.usage.prompt_tokens > bare.usage.prompt_tokens + 10
    assert informed.reply.strip() and informed.usage.completion_tokens <= LIMIT


def test_a_missing_model_file_is_a_clear_error(tmp_path: Path):
    spec = ProviderSettings(kind="gguf", model_path=tmp_path / "nope.gguf")
    with pytest.raises(ConfigError, match="model_path: no file"):
        GGUFProvider("mine", spec)


def test_the_openai_endpoint_honours_max_tokens_and_reports_length(make_services):
    from fastapi.testclient import TestClient

    from caesar.api import create_app

    services = make_services(
        gateway={
            "providers": {"embedded": {"kind": "gguf", "max_tokens": LIMIT}},
            "routes": {"chat": "embedded:smollm2"},
        }
    )
    long = [{"role": "user", "content": "Write a very long story about a dragon."}]
    with TestClient(create_app(services.settings, services, run_workers=False)) as client:
        # the client's own limit, under the operator's: honoured, and the cut is reported
        body = client.post("/v1/chat/completions", json={"messages": long, "max_tokens": 5})
        assert body.status_code == 200, body.text
        reply = body.json()
        assert reply["choices"][0]["finish_reason"] == "length"
        assert reply["usage"]["completion_tokens"] <= 5
        # a client asking for more than the operator allows gets the operator's limit
        body = client.post("/v1/chat/completions", json={"messages": long, "max_tokens": 10_000})
        assert body.json()["usage"]["completion_tokens"] <= LIMIT
        with client.stream(
            "POST", "/v1/chat/completions", json={"messages": long, "max_tokens": 5, "stream": True}
        ) as events:
            frames = [line for line in events.iter_lines() if line.startswith("data: {")]
        assert '"finish_reason": "length"' in frames[-1]
        # what nothing can honour is refused; tools the model's template lacks are dropped,
        # and the reply says so (issue #26)
        for extra in ({"n": 2}, {"logprobs": True}):
            refused = client.post("/v1/chat/completions", json={"messages": long, **extra})
            assert refused.status_code == 400, refused.text
        tools = [{"type": "function", "function": {"name": "f"}}]
        answered = client.post("/v1/chat/completions", json={"messages": long, "tools": tools})
        assert answered.status_code == 200 and answered.headers["x-caesar-ignored"] == "tools"


def test_a_fact_told_in_one_chat_is_answered_in_a_new_one(make_services):
    """The first five minutes (issue #25) with the embedded defaults: the small-model prompt,
    greedy decoding, the fact learned by the offline extractor. Before them the model
    answered "Your sister's name is Dana." to such questions (bench/probe_first_five.py at dda303d
    measures 20; told the name as well, it still calls the dog "Dana" now and then)."""
    services = make_services(
        gateway={
            "providers": {"embedded": {"kind": "gguf"}},
            "routes": {
                "chat": "embedded:smollm2",
                "memory_extract": "offline:patterns",
                "memory_summarise": "offline:textrank",
            },
        },
        memory={"facts_extract": {"enabled": True}},
    )
    assert services.settings.chat_prompt() == "small"
    brain = Brain(services)
    brain.turn("My sister's name is Maya and she lives in Toronto.", scope=Scope(OWNER))
    run_until_caught_up(services.workers["memory.extract"])
    assert {f.key: f.value for f in services.facts.list_all(scope=Scope(OWNER))} == {
        "sister_name": "Maya"
    }
    answer = brain.turn("What is my sister's name?", scope=Scope(OWNER))  # a new chat: no history
    assert "maya" in answer.reply.lower()
    assert answer.finish_reason == "stop"


def test_the_model_loads_without_the_openai_sdk_which_comes_with_the_client():
    """Issue #25: importing the openai SDK took ~0.9 s of the GIL on the first start's ready
    path; loading the model does not import it, and serve's warm-up makes the client after
    /healthz says ready (cli/main.py `_connect_chat_model`)."""
    import subprocess
    import sys

    script = (
        "import sys\n"
        "from caesar.config import ProviderSettings\n"
        "from caesar.gateway.gguf_provider import GGUFProvider\n"
        "p = GGUFProvider('embedded', ProviderSettings(kind='gguf', max_tokens=4))\n"
        "p.start()\n"
        "print('openai' in sys.modules)\n"
        "client = p.connect()\n"
        "print('openai' in sys.modules, client is p.connect())\n"
        "said = [{'role': 'user', 'content': 'Hi'}]\n"
        "print(bool(p.complete(said, 'm', task='chat').text))\n"
    )
    done = subprocess.run(
        [sys.executable, "-c", script], capture_output=True, text=True, timeout=120
    )
    assert done.returncode == 0, done.stderr
    assert done.stdout.split("\n")[:3] == ["False", "True True", "True"]
