"""The settings tree: TOML via CAESAR_CONFIG, env overrides, defaults, and refusals."""

from __future__ import annotations

from pathlib import Path

import pytest

from caesar.config import (
    TASKS,
    Settings,
    is_loopback,
    load_settings,
    reply_limit,
    unknown_variables,
)
from caesar.errors import ConfigError

TOKEN = "a-long-enough-api-token-0123"
CLAUDE_KEY = "sk-ant-test-key-0123456789"

# The example from issue #2, with real-looking values in place of "…".
ISSUE_TOML = f"""
database_url = "sqlite:////home/me/.caesar/caesar.db"
api_token = "{TOKEN}"            # required when host is not loopback
host = "127.0.0.1"
port = 8042

[gateway.providers.local]   # any OpenAI-compatible server
kind = "openai"
base_url = "http://127.0.0.1:11434/v1"
api_key = "ollama"

[gateway.providers.claude]
kind = "anthropic"
api_key = "{CLAUDE_KEY}"

[gateway.routes]            # task -> "provider:model"
chat = "local:llama3.2"
memory_extract = "local:llama3.2"
memory_summarise = "local:llama3.2"
"""


@pytest.fixture
def toml_file(tmp_path: Path, monkeypatch: pytest.MonkeyPatch):
    """Write TOML text to a file and point CAESAR_CONFIG at it."""

    def write(text: str) -> Path:
        path = tmp_path / "caesar.toml"
        path.write_text(text)
        monkeypatch.setenv("CAESAR_CONFIG", str(path))
        return path

    return write


def test_issue_example_toml_loads(toml_file):
    toml_file(ISSUE_TOML)
    settings = load_settings()
    assert settings.database_url == "sqlite:////home/me/.caesar/caesar.db"
    assert settings.sqlalchemy_url == "sqlite:////home/me/.caesar/caesar.db"
    assert settings.api_token is not None and settings.api_token.get_secret_value() == TOKEN
    assert (settings.host, settings.port) == ("127.0.0.1", 8042)
    providers = settings.gateway.providers
    assert set(providers) == {"local", "claude", "offline"}  # offline: built in
    assert providers["local"].kind == "openai"
    assert providers["local"].base_url == "http://127.0.0.1:11434/v1"
    assert providers["claude"].kind == "anthropic"
    assert providers["claude"].api_key.get_secret_value() == CLAUDE_KEY
    assert settings.gateway.routes == {task: "local:llama3.2" for task in TASKS}


def test_secrets_do_not_show_in_repr(toml_file):
    toml_file(ISSUE_TOML)
    settings = load_settings()
    assert TOKEN not in repr(settings) and CLAUDE_KEY not in repr(settings)
    assert TOKEN not in str(settings.model_dump())


def test_env_overrides_toml_with_nested_delimiter(toml_file, monkeypatch):
    toml_file(ISSUE_TOML)
    monkeypatch.setenv("CAESAR_MEMORY__EPISODES_RECALL__TOP_K", "5")
    monkeypatch.setenv("CAESAR_SEMANTIC__ENABLED", "false")
    monkeypatch.setenv("CAESAR_PORT", "9000")
    monkeypatch.setenv("CAESAR_GATEWAY__ROUTES__CHAT", "claude:claude-haiku")
    settings = load_settings()
    assert settings.memory.episodes_recall.top_k == 5
    assert settings.semantic.enabled is False
    assert settings.port == 9000
    # The env var changed one route; the TOML's providers and other routes are still there.
    assert settings.gateway.routes["chat"] == "claude:claude-haiku"
    assert settings.gateway.routes["memory_extract"] == "local:llama3.2"
    assert set(settings.gateway.providers) == {"local", "claude", "offline"}


def test_env_alone_without_a_file(monkeypatch, tmp_path):
    monkeypatch.setenv("CAESAR_MEMORY__EPISODES_RECALL__TOP_K", "7")
    monkeypatch.setenv("CAESAR_HOME", str(tmp_path / "h"))
    settings = load_settings()
    assert settings.memory.episodes_recall.top_k == 7
    assert settings.sqlalchemy_url == f"sqlite:///{tmp_path / 'h' / 'caesar.db'}"


@pytest.mark.parametrize(
    ("routes", "background"),
    [
        ({"chat": "local:llama3.2"}, "local:llama3.2"),  # the chat model, as before issue #49
        ({}, "offline:tasks"),  # the embedded model: answered offline
        ({"chat_background": "local:qwen2.5"}, "local:qwen2.5"),  # the operator's own
    ],
)
def test_a_clients_background_tasks_go_to_the_chat_model_unless_it_is_the_embedded_one(
    monkeypatch, tmp_path, routes, background
):
    monkeypatch.setenv("CAESAR_HOME", str(tmp_path))
    settings = load_settings(gateway={"routes": routes})
    assert settings.gateway.routes["chat_background"] == background


def test_keyword_overrides_beat_env(monkeypatch):
    monkeypatch.setenv("CAESAR_PORT", "9000")
    assert load_settings(port=9100).port == 9100


def test_defaults_chat_on_the_embedded_model_and_remember_offline(monkeypatch, tmp_path):
    """A fresh install needs no outside service (issue #15): chat on the bundled GGUF model,
    the memory tasks and a client's background tasks (issue #49) on the offline provider;
    Ollama stays configured as `local`."""
    monkeypatch.setenv("CAESAR_HOME", str(tmp_path))
    settings = load_settings()
    routes, providers = settings.gateway.routes, settings.gateway.providers
    assert routes == {
        "chat": "embedded:smollm2-135m-instruct",
        "chat_background": "offline:tasks",
        "memory_extract": "offline:patterns",
        "memory_summarise": "offline:textrank",
    }
    assert providers["embedded"].kind == "gguf" and providers["embedded"].model_path is None
    assert providers["embedded"].threads == 1
    assert reply_limit(providers["embedded"]) == 256  # the kind's default
    assert reply_limit(providers["local"]) == 1024
    assert providers["local"].kind == "openai"
    assert providers["local"].base_url == "http://127.0.0.1:11434/v1"
    assert settings.host == "127.0.0.1" and settings.port == 8042
    assert settings.api_token is None
    assert settings.max_request_bytes == 1024 * 1024
    assert settings.sqlalchemy_url == f"sqlite:///{tmp_path / 'caesar.db'}"


def test_default_home_is_dot_caesar(monkeypatch, tmp_path):
    monkeypatch.setenv("HOME", str(tmp_path))
    assert Settings().home == tmp_path / ".caesar"


def test_adr_setting_names_and_defaults():
    memory = Settings().memory
    summarise = memory.episodes_summarise
    # on (issue #13): one summary per conversation, on the offline route
    assert (summarise.enabled, summarise.interval_seconds, summarise.batch_size) == (True, 60.0, 4)
    recall = memory.episodes_recall
    assert recall.enabled is True
    # issue #12 departs here: up to 8 candidates, how many fit decided by prompt_chars
    assert (recall.top_k, recall.prompt_chars, recall.ranking) == (8, 2500, "prior")
    assert recall.similarity_threshold == 0.45
    # issue 22 departs here: no age window, no TTL (docs/episodes.md, "no age wall")
    assert recall.max_age_days is None
    assert Settings().retention.ttl_days is None and not Settings().retention.active
    assert recall.halflife_days == 30.0
    assert recall.recall_weight_scale == 0.25
    importance = memory.facts_importance
    assert (importance.halflife_days, importance.edit_weight_scale) == (60.0, 0.5)
    assert memory.facts_extract.enabled is True  # the default route is offline:patterns (no LLM)
    assert Settings().semantic.enabled is True


@pytest.mark.parametrize("source", ["toml", "env"])
def test_an_install_that_set_an_age_window_or_a_ttl_keeps_it(source, toml_file, monkeypatch):
    """The new defaults are off, but an operator who chose 90 days (or any other) keeps it."""
    if source == "toml":
        toml_file("[memory.episodes_recall]\nmax_age_days = 90\n[retention]\nttl_days = 30\n")
    else:
        monkeypatch.setenv("CAESAR_MEMORY__EPISODES_RECALL__MAX_AGE_DAYS", "90")
        monkeypatch.setenv("CAESAR_RETENTION__TTL_DAYS", "30")
    settings = load_settings()
    assert settings.memory.episodes_recall.max_age_days == 90
    assert settings.retention.ttl_days == 30 and settings.retention.active
    assert not load_settings(retention={"ttl_days": 30, "enabled": False}).retention.active


@pytest.mark.parametrize("source", ["toml", "env"])
def test_timezone_is_an_iana_name(source, toml_file, monkeypatch):
    from zoneinfo import ZoneInfo

    if source == "toml":
        toml_file('timezone = "America/New_York"\n')
    else:
        monkeypatch.setenv("CAESAR_TIMEZONE", "America/New_York")
    settings = load_settings()
    assert settings.timezone == "America/New_York"
    assert settings.zone == ZoneInfo("America/New_York")
    assert settings.zone is settings.zone  # read once


def test_no_timezone_is_the_hosts(monkeypatch):
    from zoneinfo import ZoneInfo

    import tzlocal.unix

    monkeypatch.setenv("TZ", "Europe/Berlin")
    monkeypatch.setattr(tzlocal.unix, "_cache_tz", None)
    assert load_settings().timezone is None
    assert load_settings().zone == ZoneInfo("Europe/Berlin")


@pytest.mark.parametrize(
    ("value", "hint"),
    [
        ("Europe/Berln", " (did you mean 'Europe/Berlin'?)"),
        ("america/new_york", " (did you mean 'America/New_York'?)"),
        ("CEST+2", ""),
        ("../../etc/passwd", ""),
        ("", ""),
    ],
)
def test_an_unknown_timezone_is_refused_at_start_up_naming_it(value, hint, monkeypatch):
    monkeypatch.setenv("CAESAR_TIMEZONE", value)
    with pytest.raises(ConfigError) as info:
        load_settings()
    message = str(info.value)
    assert f"timezone: Value error, timezone {value!r} is not an IANA time zone name" in message
    assert message.endswith(f"{hint}; leave it unset for the host's zone")


def test_offline_provider_serves_memory_tasks(toml_file):
    toml_file(
        """
[gateway.providers.offline]
kind = "offline"
[gateway.providers.local]
kind = "openai"
base_url = "http://127.0.0.1:11434/v1"
[gateway.routes]
chat = "local:llama3.2"
memory_extract = "offline:patterns"
memory_summarise = "offline:textrank"
"""
    )
    settings = load_settings()
    assert settings.gateway.routes["memory_summarise"] == "offline:textrank"


def test_routing_chat_to_offline_is_a_clear_config_error(toml_file):
    toml_file(
        """
[gateway.providers.offline]
kind = "offline"
[gateway.routes]
chat = "offline:none"
memory_extract = "offline:x"
memory_summarise = "offline:x"
"""
    )
    with pytest.raises(ConfigError) as info:
        load_settings()
    message = str(info.value)
    assert "gateway.routes.chat" in message
    assert "offline" in message and "cannot chat" in message
    assert "kind 'openai' or 'anthropic'" in message  # names the fix


def test_unknown_provider_in_route_names_the_fix():
    with pytest.raises(ConfigError) as info:
        load_settings(gateway={"routes": {"chat": "nosuch:model"}})
    message = str(info.value)
    assert "'nosuch'" in message and "[gateway.providers.nosuch]" in message
    assert "local" in message and "offline" in message  # what is configured


def test_default_route_to_a_provider_that_was_replaced():
    # Only claude configured and only chat routed: the memory tasks keep their default
    # routes to the built-in offline provider, which is always there.
    settings = load_settings(
        gateway={
            "providers": {"claude": {"kind": "anthropic", "api_key": CLAUDE_KEY}},
            "routes": {"chat": "claude:claude-haiku"},
        }
    )
    assert settings.gateway.routes["memory_extract"] == "offline:patterns"
    assert settings.gateway.providers["offline"].kind == "offline"
    # chat's default route names the embedded model, which was replaced: the message says so
    with pytest.raises(ConfigError) as info:
        load_settings(
            gateway={
                "providers": {"claude": {"kind": "anthropic", "api_key": CLAUDE_KEY}},
                "routes": {"memory_extract": "claude:claude-haiku"},
            }
        )
    message = str(info.value)
    assert "gateway.routes.chat" in message and "default route" in message
    assert CLAUDE_KEY not in message


@pytest.mark.parametrize("target", ["llama3.2", "local:", ":llama3.2", ""])
def test_malformed_route(target):
    with pytest.raises(ConfigError, match="expected 'provider:model'"):
        load_settings(gateway={"routes": {"chat": target}})


@pytest.mark.parametrize("host", ["0.0.0.0", "192.168.1.10", "::", "example.com"])
def test_non_loopback_host_without_token_refused(host):
    with pytest.raises(ConfigError) as info:
        load_settings(host=host)
    assert "api_token" in str(info.value) and "loopback" in str(info.value)


@pytest.mark.parametrize("host", ["127.0.0.1", "localhost", "::1", "127.0.0.2"])
def test_loopback_hosts_need_no_token(host):
    assert is_loopback(host)
    assert load_settings(host=host).host == host


def test_non_loopback_host_with_token_allowed():
    settings = load_settings(host="0.0.0.0", api_token=TOKEN)
    assert settings.api_token.get_secret_value() == TOKEN


def test_short_token_refused_without_echoing_it():
    with pytest.raises(ConfigError) as info:
        load_settings(api_token="short-secret")
    assert "16 characters" in str(info.value)
    assert "short-secret" not in str(info.value)


def test_token_from_env(monkeypatch):
    monkeypatch.setenv("CAESAR_API_TOKEN", TOKEN)
    monkeypatch.setenv("CAESAR_HOST", "0.0.0.0")
    assert load_settings().api_token.get_secret_value() == TOKEN


def test_missing_config_file(monkeypatch, tmp_path):
    monkeypatch.setenv("CAESAR_CONFIG", str(tmp_path / "nope.toml"))
    with pytest.raises(ConfigError, match="does not exist"):
        load_settings()


def test_invalid_toml_is_a_config_error(toml_file):
    toml_file("port = [unclosed\n")
    with pytest.raises(ConfigError, match="not valid TOML"):
        load_settings()


def test_unknown_setting_is_refused(toml_file):
    toml_file("prot = 8042\n")
    with pytest.raises(ConfigError, match="prot"):
        load_settings()


def test_misspelled_nested_keys_are_refused_with_a_suggestion(toml_file):
    """Issue #15: `[memory.facts_extrct]` and `enabeld = true` were accepted without a word,
    and the worker they meant to enable stayed off."""
    toml_file(
        "[memory.facts_extrct]\nenabled = true\n"
        "[memory.episodes_summarise]\nenabeld = true\n"
        '[gateway.providers.local]\nkind = "openai"\napi_kee = "x"\n'
    )
    with pytest.raises(ConfigError) as info:
        load_settings()
    message = str(info.value)
    assert "memory.facts_extrct" in message and "did you mean 'facts_extract'?" in message
    assert "memory.episodes_summarise.enabeld" in message and "'enabled'?" in message
    assert "gateway.providers.local.api_kee" in message and "'api_key'?" in message


def test_misspelled_variables_are_refused_with_a_suggestion(monkeypatch):
    monkeypatch.setenv("CAESAR_MEMORY__FACTS_EXTRACT__ENABELD", "true")
    monkeypatch.setenv("CAESAR_PROT", "8042")
    monkeypatch.setenv("CAESAR_MEMORY__EPISODES_RECALL__TOP_K", "4")  # a real one passes
    with pytest.raises(ConfigError) as info:
        load_settings()
    lines = str(info.value).splitlines()[1:]
    assert lines == [
        "  CAESAR_MEMORY__FACTS_EXTRACT__ENABELD: no setting 'memory.facts_extract.enabeld' "
        "(did you mean 'enabled'?)",
        "  CAESAR_PROT: no setting 'prot' (did you mean 'port'?)",
    ]
    monkeypatch.delenv("CAESAR_MEMORY__FACTS_EXTRACT__ENABELD")
    monkeypatch.delenv("CAESAR_PROT")
    settings = load_settings()
    assert settings.memory.episodes_recall.top_k == 4
    # a provider's name is free, its table's keys are not; lists and values given as JSON pass
    assert unknown_variables(
        {
            "CAESAR_GATEWAY__PROVIDERS__MINE__BASE_URL": "x",
            "CAESAR_GATEWAY__PROVIDERS__MINE__BASEURL": "x",
            "CAESAR_PROACTIVE": "[]",
            "CAESAR_CONFIG": "caesar.toml",
            "HOME": "/root",
        }
    ) == {
        "gateway.providers.mine.baseurl": "  CAESAR_GATEWAY__PROVIDERS__MINE__BASEURL: no "
        "setting 'gateway.providers.mine.baseurl' (did you mean 'base_url'?)"
    }


def test_generation_settings_name_a_task(toml_file):
    toml_file("[gateway.generation.chta]\ntemperature = 0.2\n")
    with pytest.raises(
        ConfigError, match="gateway.generation.chta: no such task .did you mean 'chat'"
    ):
        load_settings()


def test_wrong_type_is_refused(monkeypatch):
    monkeypatch.setenv("CAESAR_MEMORY__EPISODES_RECALL__TOP_K", "three")
    with pytest.raises(ConfigError, match="memory.episodes_recall.top_k"):
        load_settings()


def test_unknown_provider_kind(toml_file):
    toml_file('[gateway.providers.x]\nkind = "gemini"\n')
    with pytest.raises(ConfigError, match="kind"):
        load_settings()


def test_summarising_needs_the_embedder():
    with pytest.raises(ConfigError, match="semantic.enabled"):
        load_settings(memory={"episodes_summarise": {"enabled": True}}, semantic={"enabled": False})


def test_retry_wait_cap_default():
    assert Settings().gateway.providers["local"].max_retry_wait_seconds == 30.0


# -- docs -------------------------------------------------------------------------------------
def _setting_paths(model: type, prefix: str = "") -> list[str]:
    from pydantic import BaseModel

    paths = []
    for name, field in model.model_fields.items():
        annotation = field.annotation
        if isinstance(annotation, type) and issubclass(annotation, BaseModel):
            paths += _setting_paths(annotation, f"{prefix}{name}.")
        else:
            paths.append(prefix + name)
    return paths


def test_every_setting_is_documented():
    """A setting nobody can find does not exist: docs/configuration.md names each one."""
    from caesar.config import ProactiveSettings, ProviderSettings

    doc = (Path(__file__).resolve().parent.parent / "docs" / "configuration.md").read_text()
    missing = [p for p in _setting_paths(Settings) if f"`{p}`" not in doc]
    missing += [f for f in ProviderSettings.model_fields if f"| `{f}` |" not in doc]
    missing += [
        f"proactive[].{f}"
        for f in ProactiveSettings.model_fields
        if f"`proactive[].{f}`" not in doc
    ]
    assert missing == [], f"undocumented settings: {missing}"


def test_an_embedder_model_the_bundled_kind_does_not_run_is_a_clear_error(tmp_path):
    from pydantic import ValidationError

    from caesar.config import BUNDLED_EMBEDDER
    from caesar.minilm import MODEL_ID

    assert BUNDLED_EMBEDDER == MODEL_ID
    with pytest.raises(ValidationError, match='unknown to kind = "minilm"'):
        Settings(home=tmp_path, embedder={"model": "bge-small-en"})
    settings = Settings(
        home=tmp_path, embedder={"kind": "openai", "model": "bge-small-en", "base_url": "x"}
    )
    assert settings.embedder.model == "bge-small-en"


def test_embedder_threads_reach_the_model_and_are_bounded(tmp_path):
    from pydantic import ValidationError

    from caesar.embeddings import MiniLMEmbedder

    assert Settings(home=tmp_path).embedder.threads == 1
    embedder = MiniLMEmbedder(Settings(home=tmp_path, embedder={"threads": 2}))
    assert embedder._model.threads == 2  # the ONNX session is built with it on first use
    with pytest.raises(ValidationError):
        Settings(home=tmp_path, embedder={"threads": 0})


def test_the_recall_budget_follows_the_chat_route(monkeypatch):
    # by the kind of the chat route's provider: the embedded model little, a large one more
    assert Settings().memory.episodes_recall.prompt_chars == 2500  # the embedded default
    claude = {"claude": {"kind": "anthropic", "api_key": CLAUDE_KEY}}
    routed = Settings(gateway={"providers": claude, "routes": {"chat": "claude:haiku"}})
    assert routed.memory.episodes_recall.prompt_chars == 6000
    own = {"claude": {"kind": "anthropic", "api_key": CLAUDE_KEY, "recall_chars": 12_000}}
    mine = Settings(gateway={"providers": own, "routes": {"chat": "claude:haiku"}})
    assert mine.memory.episodes_recall.prompt_chars == 12_000
    # an explicit setting wins, from the environment too
    monkeypatch.setenv("CAESAR_MEMORY__EPISODES_RECALL__PROMPT_CHARS", "3000")
    chosen = load_settings(gateway={"providers": own, "routes": {"chat": "claude:haiku"}})
    assert chosen.memory.episodes_recall.prompt_chars == 3000
