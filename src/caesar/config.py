"""The one typed settings tree.

Sources, highest priority first: keyword arguments (tests), environment variables
(`CAESAR_` prefix, `__` between nested names: `CAESAR_MEMORY__EPISODES_RECALL__TOP_K=5`),
the TOML file named by `CAESAR_CONFIG`, then the defaults below. Built once by
`load_settings()` and passed down; there is no import-time global.
"""

from __future__ import annotations

import difflib
import ipaddress
import os
import tomllib
from collections.abc import Iterable, Mapping
from datetime import tzinfo
from functools import cached_property
from pathlib import Path
from types import UnionType
from typing import Annotated, Literal, Union, get_args, get_origin

from pydantic import BaseModel, ConfigDict, Field, SecretStr, field_validator, model_validator
from pydantic_settings import (
    BaseSettings,
    PydanticBaseSettingsSource,
    SettingsConfigDict,
    TomlConfigSettingsSource,
)

from caesar.errors import ConfigError

CHAT_TASK = "chat"
# A client's background requests (a chat's title, tags, follow-ups: api/background.py)
BACKGROUND_TASK = "chat_background"
MEMORY_TASKS = ("memory_extract", "memory_summarise")
TASKS = (CHAT_TASK, BACKGROUND_TASK, *MEMORY_TASKS)
# What the offline provider serves: the memory tasks, and a client's background tasks
OFFLINE_TASKS = (BACKGROUND_TASK, *MEMORY_TASKS)


class Section(BaseModel):
    """A table of settings. An unknown key is refused, never ignored: a typo such as
    `[memory.facts_extrct]` or `enabeld = true` must not leave the worker it meant to enable
    off without a word (issue #15)."""

    model_config = ConfigDict(extra="forbid")


def default_home() -> Path:
    return Path(os.environ.get("CAESAR_HOME", Path.home() / ".caesar"))


class ProviderSettings(Section):
    """One LLM endpoint. `openai` covers every OpenAI-compatible server (Ollama's /v1, vLLM,
    llama.cpp, LM Studio, OpenAI itself); `offline` needs no LLM and serves memory tasks only."""

    kind: Literal["openai", "anthropic", "offline", "gguf"]
    base_url: str | None = None
    api_key: SecretStr | None = None
    timeout_seconds: float = Field(default=60.0, gt=0)
    max_retries: int = Field(default=2, ge=0, le=10)
    # A provider asking (Retry-After) for a longer wait than this is not retried: the turn fails
    # at once with 503 rather than leaving the operator waiting (see docs/gateway.md).
    max_retry_wait_seconds: float = Field(default=30.0, ge=0)
    # kind "gguf": a local model run in-process by llama.cpp (gateway/gguf_provider.py).
    model_path: Path | None = None  # default: the bundled SmolLM2-135M-Instruct
    threads: int = Field(default=1, ge=1, le=64)  # two collapse under load on 2 cores
    context_size: int = Field(default=4096, ge=256, le=131_072)  # tokens
    # The longest reply, in tokens, sent with every request (a client's own max_tokens may only
    # lower it). None: by kind (`reply_limit`). A 135M model without a cap ran 181 s.
    max_tokens: int | None = Field(default=None, ge=1, le=131_072)
    # Sampling of the gguf kind: greedy, with no repeat penalty (DRY stops the loops;
    # gguf_provider.py). The penalty and any temperature cost the 135M model right answers: a
    # repeat penalty kept it from saying the name it was asked for ("Biscuzzle"), and 0.2
    # instead of greedy answered 8–16 of 20 on bench/probe_first_five.py at dda303d against 17.
    temperature: float = Field(default=0.0, ge=0, le=2)
    repeat_penalty: float = Field(default=1.0, ge=1, le=2)
    # How a chat turn's prompt is built when this provider answers it: "full" (the facts as
    # `key: value` lines and the past conversations in the system prompt, for models that
    # read well) or "small" (plain sentences in the operator's turn under a short system
    # prompt: memory/recall/plain.py). None: by kind (PROMPT_BY_KIND).
    prompt: Literal["full", "small"] | None = None
    # Characters of past conversations a chat turn gets when this provider answers it (the
    # chat route's): None: by kind (RECALL_CHARS_BY_KIND). An explicit
    # memory.episodes_recall.prompt_chars wins over both.
    recall_chars: int | None = Field(default=None, ge=200, le=50_000)
    # The share of those characters dated memories may take, one line each (issue #45,
    # memory/recall/said.py): None: by kind (SAID_SHARE_BY_KIND). An explicit
    # memory.episodes_recall.said_share wins over both.
    said_share: float | None = Field(default=None, ge=0, le=0.9)


# The past-conversations budget by the kind of the chat route's provider: the embedded 135M
# model reads little well, a large model can use more. Measured in docs/recall-quality.md
# ("Budget by route").
# The standing statements' block gets this fraction of the route's recall budget by default
STANDING_SHARE = 3
RECALL_CHARS_BY_KIND = {"gguf": 2500, "openai": 6000, "anthropic": 6000, "offline": 2500}
# The share of it dated memories get, by kind: none yet. At 6,000 characters 0.17 of lines
# raised the LoCoMo dev questions whose every evidence conversation is shown from 0.864 /
# 0.865 to 0.890 / 0.899 (halves A / B) and kept the answers, but the search of the nearest
# memories added 292 ms p50 to a turn at 100k episodes with a million memories (bench turn):
# opt-in (0.17) until that is cheap. At 2,500 the lines cost answers in both halves
# (docs/memories.md, "What recall does with them").
SAID_SHARE_BY_KIND = {"gguf": 0.0, "openai": 0.0, "anthropic": 0.0, "offline": 0.0}


# The prompt by the kind of the chat route's provider: only the embedded model is small.
# Measured in docs/recall-quality.md ("The embedded model's answers").
PROMPT_BY_KIND: dict[str, Literal["full", "small"]] = {
    "gguf": "small",
    "openai": "full",
    "anthropic": "full",
    "offline": "full",
}


def _default_providers() -> dict[str, ProviderSettings]:
    return {
        # the model shipped with caesar: a fresh install chats with no outside service
        "embedded": ProviderSettings(kind="gguf"),
        "local": ProviderSettings(
            kind="openai", base_url="http://127.0.0.1:11434/v1", api_key=SecretStr("ollama")
        ),
        "offline": ProviderSettings(kind="offline"),
    }


def _default_routes() -> dict[str, str]:
    # The memory tasks stay offline: the embedded 135M model summarises worse than TextRank.
    return {
        CHAT_TASK: "embedded:smollm2-135m-instruct",
        "memory_extract": "offline:patterns",
        "memory_summarise": "offline:textrank",
    }


# gguf: 256, not more: a 135M model that has not answered in 256 tokens is looping.
DEFAULT_REPLY_TOKENS = {"gguf": 256, "openai": 1024, "anthropic": 4096, "offline": 0}


def reply_limit(provider: ProviderSettings) -> int:
    """The provider's `max_tokens`, or its kind's default."""
    return provider.max_tokens or DEFAULT_REPLY_TOKENS[provider.kind]


class GenerationSettings(Section):
    """How one task's replies are generated (`gateway.generation.<task>`); unset: the
    provider's own. A client's values (the OpenAI endpoint's max_tokens, temperature, stop)
    go over these, and never past the provider's `max_tokens`."""

    max_tokens: int | None = Field(default=None, ge=1, le=131_072)
    temperature: float | None = Field(default=None, ge=0, le=2)
    stop: list[str] = Field(default_factory=list, max_length=4)


class GatewaySettings(Section):
    providers: dict[str, ProviderSettings] = Field(default_factory=_default_providers)
    routes: dict[str, str] = Field(default_factory=_default_routes)
    generation: dict[str, GenerationSettings] = Field(default_factory=dict)

    @model_validator(mode="after")
    def _check_routes(self) -> GatewaySettings:
        for task in self.generation:
            if task not in TASKS:
                raise ValueError(
                    f"gateway.generation.{task}: no such task{_did_you_mean(task, TASKS)}; "
                    f"tasks: {', '.join(TASKS)}"
                )
        # Built in: the memory tasks' default routes name it, so it is there whatever
        # providers the operator configures (it has no settings worth a table).
        self.providers.setdefault("offline", ProviderSettings(kind="offline"))
        defaulted = [task for task in TASKS if task not in self.routes]
        for task in defaulted:
            if task != BACKGROUND_TASK:
                self.routes[task] = _default_routes()[task]
        if BACKGROUND_TASK in defaulted:
            self.routes[BACKGROUND_TASK] = self._default_background()
        for task, target in self.routes.items():
            provider_name, sep, model = target.partition(":")
            if not sep or not provider_name or not model:
                raise ValueError(
                    f"gateway.routes.{task} = {target!r}: expected 'provider:model', "
                    f"e.g. 'local:llama3.2'"
                )
            provider = self.providers.get(provider_name)
            if provider is None:
                default = " (the default route)" if task in defaulted else ""
                raise ValueError(
                    f"gateway.routes.{task} = {target!r}{default} names provider "
                    f"{provider_name!r}, which is not configured; add "
                    f"[gateway.providers.{provider_name}] or route {task} to one of: "
                    f"{', '.join(sorted(self.providers)) or 'none'}"
                )
            if provider.kind == "offline" and task not in OFFLINE_TASKS:
                raise ValueError(
                    f"gateway.routes.{task} routes to the offline provider {provider_name!r}, "
                    f"which cannot chat: it only serves {', '.join(OFFLINE_TASKS)}. Route "
                    f"{task} to an LLM provider (kind 'openai' or 'anthropic')."
                )
        return self

    def _default_background(self) -> str:
        """A client's background tasks go to the chat route's model, unless that is the
        embedded one: the 135M model answers a title request with the template's placeholder
        and holds the CPU the chat needs for 1–22 s (issue #49), so they are answered offline."""
        chat = self.routes[CHAT_TASK]
        provider = self.providers.get(chat.partition(":")[0])
        if provider is not None and provider.kind == "gguf":
            return "offline:tasks"
        return chat


BUNDLED_EMBEDDER = "all-MiniLM-L6-v2"  # what kind = "minilm" runs (minilm.MODEL_ID)


class EmbedderSettings(Section):
    """`minilm` is the bundled all-MiniLM-L6-v2, run on ONNX Runtime (or torch)."""

    kind: Literal["minilm", "openai"] = "minilm"
    backend: Literal["onnx", "torch"] = "onnx"
    model: str = BUNDLED_EMBEDDER
    base_url: str | None = None
    api_key: SecretStr | None = None
    # where the ONNX export lives; default <home>/models if that exists (installs before issue
    # #25), else the cache every home shares, filled by `make install` (minilm.shared_cache_dir)
    cache_dir: Path | None = None
    # CPU threads per `minilm` inference. 1 in a server: on this 2-core machine a query took
    # 4.8 ms on one thread and 2.9 ms on two when nothing else ran, but 6.9 ms on two against
    # 4.8 ms on one with one other busy process (concurrent turns, workers). A bulk job alone
    # on the machine (the recall-quality harness's first run) gains.
    threads: int = Field(default=1, ge=1, le=64)

    @model_validator(mode="after")
    def _known_model(self) -> EmbedderSettings:
        if self.kind == "minilm" and self.model != BUNDLED_EMBEDDER:
            raise ValueError(
                f'embedder.model {self.model!r} is unknown to kind = "minilm", which runs the '
                f"bundled {BUNDLED_EMBEDDER} only: leave model unset, or for another model set "
                'kind = "openai" and base_url to a server that has it'
            )
        return self


class SemanticSettings(Section):
    enabled: bool = True  # the embedder; summarisation and recall need it (ADR-0034 §Neutral)
    index_enabled: bool = False  # the semantic.index worker over raw replies
    interval_seconds: float = 60.0
    batch_size: int = Field(default=32, ge=1)
    chunk_chars: int = Field(default=800, ge=100)


class FactsExtractSettings(Section):
    # On by default: the default route is offline:patterns (no LLM). With a paid route each
    # answered turn costs one call.
    enabled: bool = True
    interval_seconds: float = 60.0
    batch_size: int = Field(default=8, ge=1)


class FactsImportanceSettings(Section):
    halflife_days: float = Field(default=60.0, gt=0)
    edit_weight_scale: float = Field(default=0.5, ge=0)


class FactsInjectSettings(Section):
    max_facts: int = Field(default=30, ge=0)
    max_chars: int = Field(default=2048, ge=0)


class StandingSettings(Section):
    """What the person says about themselves that holds (issue #46, docs/standing.md): learned
    in the `memory.extract` pass, and injected into every prompt they bear on."""

    enabled: bool = True
    # The block's cap, header and fences included: instructions first, then what bears on the
    # message most (docs/standing.md, "Budget"). None: a third of the chat route's recall
    # budget (2,000 characters at 6,000; 833 for the embedded model's 2,500).
    max_chars: int | None = Field(default=None, ge=0)
    max_statements: int = Field(default=30, ge=0)


class EpisodesSummariseSettings(Section):
    # On by default since a conversation costs one summary, not one per turn (issue #13), and
    # the default route is offline:textrank (no LLM). The ADR made it opt-in for LLM cost:
    # with a paid route, a conversation costs one call. Off without the embedder.
    enabled: bool = True
    interval_seconds: float = 60.0
    batch_size: int = Field(default=4, ge=1)  # smaller than fact-extract; each is two calls
    # A conversation is summarised once it has had no turn for this long (and again if it
    # resumes): one summary for a conversation, not one per turn (issue #13).
    quiet_seconds: float = Field(default=300.0, ge=0)
    # Worker `memory.passages`: embed each summarised chat's 3-turn windows for recall
    # (memory/passages.py). Runs with the summariser, in its own worker: a long conversation's
    # windows cost far more embedding than its summary (docs/performance.md).
    passages: bool = True
    passages_batch_size: int = Field(default=8, ge=1)
    # Threads `memory.passages` embeds on; None: one per core this process may use. Once the
    # summaries and facts of a large import are written, the windows alone were left on one
    # of two cores (docs/import.md, "How long it takes").
    passages_threads: int | None = Field(default=None, ge=1, le=64)


class EpisodesRecallSettings(Section):
    enabled: bool = True
    # At most this many episodes are candidates for the prompt; how many fit is decided by
    # `prompt_chars` (issue #12: 3 fixed summaries held the answer for 4 % of questions).
    top_k: int = Field(default=8, ge=1, le=50)
    similarity_threshold: float = Field(default=0.45, ge=-1, le=1)
    # None (the default): no age window — age is a prior only (`ranking`), and a strong old
    # match still surfaces. The ADR's 90 days halved recall on LoCoMo (docs/episodes.md,
    # "Departure from the ADR: no age wall, opt-in retention"); an install may still set one.
    max_age_days: int | None = Field(default=None, ge=1, le=36_500)
    # "prior": rank by relevance alone, and among comparable matches (within
    # `comparable_within` of each other) the newest first — a strong old match still surfaces,
    # a newer statement beats the one it updates. "adr": ADR-0034's relevance × freshness ×
    # recall_weight, freshness halving every `halflife_days`. Measured in docs/episodes.md.
    ranking: Literal["prior", "adr"] = "prior"
    comparable_within: float = Field(default=0.03, ge=0, le=1)
    halflife_days: float = Field(default=30.0, gt=0)
    recall_weight_scale: float = Field(default=0.25, ge=0)
    # Issue #6: relevance = dense similarity (the summary's cosine, or the conversation's best
    # 3-turn window if higher) fused with keyword relevance over the summary and the
    # conversation (FTS5 / PostgreSQL full text), then × freshness × recall_weight. "hybrid":
    # dense + keyword_weight × keyword × (1 − dense), in cosine units, so similarity_threshold
    # applies to it; "dense": the ADR's summary cosine alone.
    # Chosen on the dev data: docs/recall-quality.md.
    fusion: Literal["hybrid", "dense"] = "hybrid"
    keyword_weight: float = Field(default=0.7, ge=0, le=1)
    # A conversation held on a day the message names by date ("on 1 February 2023", "in March
    # 2023": memory/recall/dates.py) is a candidate, and its relevance is lifted by
    # date_weight × (1 − relevance); 0 turns it off. Chosen on the dev data:
    # docs/recall-quality.md ("Dates").
    date_weight: float = Field(default=0.5, ge=0, le=1)
    # The past-conversations block, fences included, is at most this many characters: each
    # recalled episode's date and summary, and the verbatim excerpts of it that best match the
    # message (memory/recall/excerpts.py). Unset: the chat route's provider decides
    # (ProviderSettings.recall_chars, by kind). Chosen by measurement: docs/recall-quality.md.
    prompt_chars: int = Field(default=2500, ge=200, le=50_000)
    excerpts: bool = True  # false: the summary lines alone (ADR-0034 §3.5)
    # At most this share of `prompt_chars` goes to dated memories, one line each, nearest the
    # message across every conversation, one per conversation first; the excerpts get the
    # rest (memory/recall/said.py, docs/memories.md); 0 turns them off. Only when the message
    # recalls some conversation. Unset: the chat route's provider decides
    # (ProviderSettings.said_share, by kind).
    said_share: float = Field(default=0.17, ge=0, le=0.9)
    # One turn of an excerpt longer than this is cut to its sentences that match the message.
    excerpt_turn_chars: int = Field(default=600, ge=80, le=5_000)
    summary_chars: int = Field(default=200, ge=20, le=2_000)  # a summary line's length cap
    # Where the episodes' vectors are searched (issue #24): "auto" — on PostgreSQL, pgvector's
    # own HNSW index (nothing loaded per process, a forget gone for every process at once)
    # once the vectors are migrated, the in-process index until then, or for good where
    # pgvector cannot be used (a warning names the fix); on SQLite, the in-process index.
    # "pgvector" is "auto" that refuses to start without pgvector; "in_process" keeps the
    # index loaded by each process on PostgreSQL too.
    vector_search: Literal["auto", "in_process", "pgvector"] = "auto"


class MemorySettings(Section):
    facts_extract: FactsExtractSettings = Field(default_factory=FactsExtractSettings)
    facts_importance: FactsImportanceSettings = Field(default_factory=FactsImportanceSettings)
    facts_inject: FactsInjectSettings = Field(default_factory=FactsInjectSettings)
    standing: StandingSettings = Field(default_factory=StandingSettings)
    episodes_summarise: EpisodesSummariseSettings = Field(default_factory=EpisodesSummariseSettings)
    episodes_recall: EpisodesRecallSettings = Field(default_factory=EpisodesRecallSettings)


class RetentionSettings(Section):
    """Opt-in: nothing is deleted by age unless the operator sets `ttl_days` (the ADR-0020
    default of 90 days deleted every chat, and all learned from it, after three months). The
    operator forgets on purpose instead (memory/forget.py)."""

    enabled: bool = True
    ttl_days: int | None = Field(default=None, ge=1)  # None: no TTL, `retention.sweep` idle
    interval_seconds: float = 3600.0

    @property
    def active(self) -> bool:
        """Whether the sweep deletes anything: enabled, with a TTL set."""
        return self.enabled and self.ttl_days is not None


class AuthFailureSettings(Section):
    """Wrong API tokens per client address before it is locked out (api/auth_limit.py): a
    weak operator-chosen token must not be guessable at the speed the server answers."""

    max_failures: int = Field(default=10, ge=0, le=10_000)  # 0 turns the limit off
    # Whole seconds: the moving window of `limits` counts in them.
    window_seconds: int = Field(default=300, ge=1, le=86_400)


class ProactiveSettings(Section):
    name: str = Field(pattern=r"^[A-Za-z0-9_.-]+$")
    prompt: str = Field(min_length=1)
    interval_seconds: float | None = Field(default=None, gt=0)
    cron: str | None = None

    @model_validator(mode="after")
    def _one_schedule(self) -> ProactiveSettings:
        if (self.interval_seconds is None) == (self.cron is None):
            raise ValueError(f"proactive {self.name!r}: set exactly one of interval_seconds, cron")
        if self.cron is not None:
            from croniter import croniter

            if not croniter.is_valid(self.cron):
                raise ValueError(f"proactive {self.name!r}: invalid cron {self.cron!r}")
        return self


class McpSettings(Section):
    # The MCP server's streamable-HTTP transport at /mcp on `caesar serve` (behind the API
    # token); `caesar mcp` (stdio) runs whatever this says.
    enabled: bool = True


class ClientsSettings(Section):
    """What caesar knows of the clients in front of it (docs/clients.md, issue #26)."""

    # A request whose last user message starts with one of these is a client's background
    # request (a title, tags, follow-ups): answered without memory, never remembered. The
    # default is Open WebUI's task prompts.
    background_markers: list[Annotated[str, Field(min_length=1, max_length=200)]] = Field(
        default_factory=lambda: ["### Task:"], max_length=50
    )


HEADER_NAME = r"^[A-Za-z0-9-]{1,100}$"


class PeopleSettings(Section):
    """A trusted front-end (issue #23, docs/household.md "Open WebUI for a household"): a request
    carrying `frontend_token` acts as the person its `user_header` names. Any other token's
    person headers are ignored."""

    frontend_token: SecretStr | None = None
    user_header: str = Field(default="X-OpenWebUI-User-Id", pattern=HEADER_NAME)
    name_header: str = Field(default="X-OpenWebUI-User-Name", pattern=HEADER_NAME)
    email_header: str = Field(default="X-OpenWebUI-User-Email", pattern=HEADER_NAME)
    # An unknown user is made a person on first sight; else they get 403.
    auto_create: bool = False

    @field_validator("frontend_token")
    @classmethod
    def _token_strength(cls, value: SecretStr | None) -> SecretStr | None:
        if value is not None and len(value.get_secret_value()) < 16:
            raise ValueError("people.frontend_token must be at least 16 characters")
        return value


class Settings(BaseSettings):
    model_config = SettingsConfigDict(
        env_prefix="CAESAR_",
        env_nested_delimiter="__",
        extra="forbid",
    )

    home: Path = Field(default_factory=default_home)
    database_url: str | None = None  # default: sqlite file under `home`
    api_token: SecretStr | None = None
    host: str = "127.0.0.1"
    port: int = Field(default=8042, ge=1, le=65535)
    max_request_bytes: int = Field(default=1024 * 1024, ge=1024)
    # the dashboard's import page: a history export, streamed to a temporary file
    max_import_bytes: int = Field(default=1024**3, ge=1024)
    auth_failures: AuthFailureSettings = Field(default_factory=AuthFailureSettings)
    system_prompt: str = "You are caesar, the operator's personal assistant. Be direct and helpful."
    operator_prompt: str = ""
    # The operator's clock, for what "yesterday" or "this morning" means: an IANA zone name
    # ("Europe/Berlin"); None: the host's zone (clock.operator_zone). Storage stays naive UTC.
    timezone: str | None = None
    run_workers: bool = True  # `caesar serve` runs the enabled workers
    # ... in a child process at this nice value (0 = as the server), so they yield the cores
    # to chat turns (issue #16); false: as threads of the server process
    workers_process: bool = True
    workers_nice: int = Field(default=10, ge=0, le=19)
    gateway: GatewaySettings = Field(default_factory=GatewaySettings)
    embedder: EmbedderSettings = Field(default_factory=EmbedderSettings)
    semantic: SemanticSettings = Field(default_factory=SemanticSettings)
    memory: MemorySettings = Field(default_factory=MemorySettings)
    retention: RetentionSettings = Field(default_factory=RetentionSettings)
    mcp: McpSettings = Field(default_factory=McpSettings)
    clients: ClientsSettings = Field(default_factory=ClientsSettings)
    people: PeopleSettings = Field(default_factory=PeopleSettings)
    proactive: list[ProactiveSettings] = Field(default_factory=list)

    @classmethod
    def settings_customise_sources(
        cls,
        settings_cls: type[BaseSettings],
        init_settings: PydanticBaseSettingsSource,
        env_settings: PydanticBaseSettingsSource,
        dotenv_settings: PydanticBaseSettingsSource,
        file_secret_settings: PydanticBaseSettingsSource,
    ) -> tuple[PydanticBaseSettingsSource, ...]:
        sources: list[PydanticBaseSettingsSource] = [init_settings, env_settings]
        config_file = os.environ.get("CAESAR_CONFIG")
        if config_file:
            sources.append(TomlConfigSettingsSource(settings_cls, toml_file=Path(config_file)))
        return tuple(sources)

    @field_validator("api_token")
    @classmethod
    def _token_strength(cls, value: SecretStr | None) -> SecretStr | None:
        if value is not None and len(value.get_secret_value()) < 16:
            raise ValueError("api_token must be at least 16 characters")
        return value

    @field_validator("timezone")
    @classmethod
    def _known_zone(cls, value: str | None) -> str | None:
        if value is not None:
            from caesar.clock import check_zone_name

            check_zone_name(value)
        return value

    @model_validator(mode="after")
    def _refuse_unsafe(self) -> Settings:
        if self.api_token is None and not is_loopback(self.host):
            raise ValueError(
                f"host {self.host!r} is not loopback and no api_token is set: refusing to expose "
                "caesar unauthenticated. Set CAESAR_API_TOKEN (16+ characters) or bind 127.0.0.1."
            )
        frontend = self.people.frontend_token
        if frontend is not None:
            # Without api_token every request is the owner's (loopback mode): a front-end
            # token would guard nothing.
            if self.api_token is None:
                raise ValueError(
                    "people.frontend_token needs api_token set too: without it every request "
                    "is the owner's and the front-end token guards nothing. Set "
                    "CAESAR_API_TOKEN (16+ characters)."
                )
            if frontend.get_secret_value() == self.api_token.get_secret_value():
                raise ValueError(
                    "people.frontend_token must differ from api_token: the owner's token "
                    "must never act as someone else"
                )
        recall = self.memory.episodes_recall
        if "prompt_chars" not in recall.model_fields_set:
            recall.prompt_chars = self.chat_recall_chars()
        if "said_share" not in recall.model_fields_set:
            recall.said_share = self.chat_said_share()
        standing = self.memory.standing
        if standing.max_chars is None:
            standing.max_chars = self.chat_recall_chars() // STANDING_SHARE
        summarise = self.memory.episodes_summarise
        if summarise.enabled and not self.semantic.enabled:
            if "enabled" not in summarise.model_fields_set:
                summarise.enabled = False  # on by default, but summaries need the embedder
                return self._check_proactive()
            raise ValueError(
                "memory.episodes_summarise.enabled needs the embedder, but semantic.enabled is "
                "false; enable semantic (CAESAR_SEMANTIC__ENABLED=true) or turn summarising off"
            )
        return self._check_proactive()

    @model_validator(mode="after")
    def _check_vector_search(self) -> Settings:
        if (
            self.memory.episodes_recall.vector_search == "pgvector"
            and not self.sqlalchemy_url.startswith("postgresql")
        ):
            raise ValueError(
                'memory.episodes_recall.vector_search = "pgvector" needs PostgreSQL with '
                "pgvector; set database_url to postgresql+psycopg://… or unset vector_search"
            )
        return self

    def _check_proactive(self) -> Settings:
        names = [p.name for p in self.proactive]
        if len(names) != len(set(names)):
            raise ValueError("proactive run names must be unique")
        return self

    def chat_recall_chars(self) -> int:
        """The past-conversations budget the chat route's provider gets (its recall_chars, or
        its kind's)."""
        provider = self.gateway.providers.get(self.gateway.routes[CHAT_TASK].partition(":")[0])
        if provider is None:
            return RECALL_CHARS_BY_KIND["gguf"]
        return provider.recall_chars or RECALL_CHARS_BY_KIND[provider.kind]

    def chat_said_share(self) -> float:
        """The share of the recall budget dated memories get on the chat route's provider
        (its said_share, or its kind's)."""
        provider = self.gateway.providers.get(self.gateway.routes[CHAT_TASK].partition(":")[0])
        if provider is None:
            return SAID_SHARE_BY_KIND["gguf"]
        if provider.said_share is not None:
            return provider.said_share
        return SAID_SHARE_BY_KIND[provider.kind]

    def chat_prompt(self) -> Literal["full", "small"]:
        """The prompt a chat turn gets from the chat route's provider (its `prompt`, or its
        kind's)."""
        provider = self.gateway.providers.get(self.gateway.routes[CHAT_TASK].partition(":")[0])
        if provider is None:
            return PROMPT_BY_KIND["gguf"]
        return provider.prompt or PROMPT_BY_KIND[provider.kind]

    @property
    def sqlalchemy_url(self) -> str:
        return self.database_url or f"sqlite:///{self.home / 'caesar.db'}"

    @property
    def model_cache_dir(self) -> Path:
        if self.embedder.cache_dir is not None:
            return self.embedder.cache_dir
        if (self.home / "models").is_dir():
            return self.home / "models"
        from caesar.minilm import shared_cache_dir

        return shared_cache_dir()

    @cached_property
    def zone(self) -> tzinfo:
        """The operator's time zone: `timezone`, or the host's (read once)."""
        from caesar.clock import operator_zone

        return operator_zone(self.timezone)


def is_loopback(host: str) -> bool:
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False


ENV_PREFIX = "CAESAR_"
# CAESAR_ variables that are not settings: the config file's path, the test suite's PostgreSQL
# data folder (tests/pg.py).
NOT_SETTINGS = frozenset({"CAESAR_CONFIG", "CAESAR_PG_DATA_ROOT"})


def load_settings(**overrides: object) -> Settings:
    """Build the settings once, turning validation errors — and CAESAR_ variables that name no
    setting — into one readable ConfigError, with a "did you mean" where one is close."""
    from pydantic import ValidationError

    config_file = os.environ.get("CAESAR_CONFIG")
    if config_file and not Path(config_file).is_file():
        raise ConfigError(f"CAESAR_CONFIG={config_file} does not exist")
    unknown = unknown_variables(os.environ)
    lines = list(unknown.values())
    try:
        settings = Settings(**overrides)  # type: ignore[arg-type]
    except tomllib.TOMLDecodeError as exc:
        raise ConfigError(f"CAESAR_CONFIG={config_file} is not valid TOML: {exc}") from None
    except ValidationError as exc:
        for err in exc.errors():
            where = ".".join(str(p) for p in err["loc"]) or "settings"
            if where in unknown:
                continue  # already said, naming the variable
            hint = suggestion(err["loc"]) if err["type"] == "extra_forbidden" else ""
            lines.append(f"  {where}: {err['msg']}{hint}")
        settings = None
    if lines:
        raise ConfigError("invalid configuration:\n" + "\n".join(lines))
    assert settings is not None
    return settings


def unknown_variables(environ: Mapping[str, str]) -> dict[str, str]:
    """{dotted path: a line} for each CAESAR_ variable that names no setting (pydantic-settings
    ignores one at the top level), e.g. CAESAR_MEMORY__FACTS_EXTRACT__ENABELD."""
    out = {}
    for name in sorted(environ):
        upper = name.upper()
        if not upper.startswith(ENV_PREFIX) or upper in NOT_SETTINGS:
            continue
        parts = upper[len(ENV_PREFIX) :].lower().split("__")
        problem = _unknown_part(Settings, parts)
        if problem is not None:
            out[".".join(parts)] = f"  {name}: {problem}"
    return out


def _unknown_part(
    model: type[BaseModel], parts: list[str], above: tuple[str, ...] = ()
) -> str | None:
    """Why `parts` (a variable's names, lower-case, under `above`) is no setting of `model`,
    or None."""
    for i, part in enumerate(parts):
        fields = model.model_fields
        if part not in fields:
            where = ".".join([*above, *parts[: i + 1]])
            return f"no setting {where!r}{_did_you_mean(part, fields)}"
        rest = parts[i + 1 :]
        if not rest:
            return None
        annotation = fields[part].annotation
        inner = _model_in(annotation)
        if inner is not None:
            model = inner
            continue
        if get_origin(annotation) is dict:  # a free key (a provider's name), then its table
            value = _model_in(get_args(annotation)[1])
            if value is None or not rest[1:]:
                return None
            return _unknown_part(value, rest[1:], (*above, *parts[: i + 1], rest[0]))
        return None  # a list or a value given as JSON
    return None


def _model_in(annotation: object) -> type[BaseModel] | None:
    """The settings table an annotation holds (`X`, `X | None`), if any."""
    candidates = get_args(annotation) if get_origin(annotation) in (Union, UnionType) else ()
    for candidate in (annotation, *candidates):
        if isinstance(candidate, type) and issubclass(candidate, BaseModel):
            return candidate
    return None


def suggestion(loc: tuple[int | str, ...]) -> str:
    """', did you mean 'x'?' for an unknown key at `loc`, when a setting there is close."""
    model: type[BaseModel] | None = Settings
    for part in loc[:-1]:
        if model is None:
            return ""
        field = model.model_fields.get(str(part))
        if field is None:  # a dict key or a list index: the table of its values
            continue
        annotation = field.annotation
        inner = _model_in(annotation)
        if inner is None and get_origin(annotation) in (dict, list):
            inner = _model_in(get_args(annotation)[-1])
        model = inner
    if model is None:
        return ""
    return _did_you_mean(str(loc[-1]), model.model_fields)


def _did_you_mean(word: str, names: Iterable[str]) -> str:
    close = difflib.get_close_matches(word, list(names), n=1, cutoff=0.6)
    return f" (did you mean {close[0]!r}?)" if close else ""
