"""Fixtures: a fresh store per test on SQLite, and on PostgreSQL when MAGNET_TEST_PG_URL is set
and the server answers (``.ci/postgres.sh`` sets it up); otherwise those tests skip."""

from __future__ import annotations

import fcntl
import os
import tempfile
from contextlib import contextmanager
from pathlib import Path

import pytest
from sqlalchemy import create_engine, text

from annotation_db import AnnotationStore, DBSettings, ItemIn, OutputIn
from annotation_db.migrate import drop_schema

PG_ENV = "MAGNET_TEST_PG_URL"
_pg_reason: str | None = None


def pg_url_or_skip() -> str:
    """The test server's URL, or skip with the reason it cannot be used."""
    global _pg_reason
    url = os.environ.get(PG_ENV)
    if not url:
        pytest.skip(f"{PG_ENV} is not set (run `source .ci/postgres.sh` to start a server)")
    if _pg_reason is None:
        try:
            eng = create_engine(url, connect_args={"connect_timeout": 3})
            with eng.connect() as c:
                c.execute(text("select 1"))
            eng.dispose()
            _pg_reason = ""
        except Exception as e:  # noqa: BLE001 - any failure means: not reachable
            _pg_reason = f"PostgreSQL at {PG_ENV} is not reachable: {type(e).__name__}: {e}"
    if _pg_reason:
        pytest.skip(_pg_reason)
    return url


def fresh_pg_store() -> AnnotationStore:
    url = pg_url_or_skip()
    eng = create_engine(url)
    drop_schema(eng)  # the store creates it again through its migrations
    eng.dispose()
    return AnnotationStore(settings=DBSettings(url=url))


@pytest.fixture
def sqlite_store(tmp_path):
    store = AnnotationStore(path=tmp_path / "annotations.sqlite3")
    yield store
    store.close()


@contextmanager
def pg_in_turn():
    """One test at a time on the shared PostgreSQL database, across pytest-xdist workers: each
    drops and recreates the schema, which another worker's test must not see mid-way."""
    path = Path(tempfile.gettempdir()) / "magnet-pg-tests.lock"
    with open(path, "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(lock, fcntl.LOCK_UN)


@pytest.fixture
def pg_store():
    pg_url_or_skip()
    with pg_in_turn():
        s = fresh_pg_store()
        yield s
        s.close()


@pytest.fixture(params=["sqlite", pytest.param("postgresql", marks=pytest.mark.postgres)])
def store(request, tmp_path):
    """The same tests on both backends."""
    if request.param == "sqlite":
        s = AnnotationStore(path=tmp_path / "annotations.sqlite3")
        yield s
        s.close()
        return
    pg_url_or_skip()
    with pg_in_turn():
        s = fresh_pg_store()
        yield s
        s.close()


SYSTEMS = ("magnet", "base-zero-shot", "base-five-shot")


def make_items(n: int, systems=SYSTEMS):
    items = [
        ItemIn(f"item-{i}", f"Text {i} with a ___ in it.", ["blank"], source=f"doc-{i}")
        for i in range(n)
    ]
    outputs = [
        OutputIn(
            f"item-{i}",
            sysname,
            f"Text {i} with a fill{j}x in it.",
            fills=[f"fill{j}x"],
            model="tiny-llama",
            adapter_revision="rev-1" if sysname == "magnet" else None,
            decoding={"temperature": 0.7, "top_p": 0.9},
            seed=987654321,
        )
        for i in range(n)
        for j, sysname in enumerate(systems)
    ]
    return items, outputs


def make_passages(n: int, prefix: str = "p") -> list[ItemIn]:
    """n passages with a ___ blank and a source each: donors for attention checks."""
    return [
        ItemIn(f"{prefix}{i}", f"Passage {prefix}{i} hides a ___ there.", [f"span{prefix}{i}"],
               source=f"doc-{prefix}{i}")
        for i in range(n)
    ]  # fmt: skip


def answer_all(item, appropriate=True, fluency=4):
    return {o.label: {"appropriate": appropriate, "fluency": fluency} for o in item.outputs}


@pytest.fixture
def adb():
    """Helpers for the tests (a fixture, so no test imports conftest by module name)."""
    import types

    return types.SimpleNamespace(
        SYSTEMS=SYSTEMS, make_items=make_items, make_passages=make_passages, answer_all=answer_all
    )
