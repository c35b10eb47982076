"""Engines and units of work.

SQLite is set up for many writers in one or several processes: WAL (readers never block the
writer), ``busy_timeout`` (wait for the lock instead of failing), foreign keys on, and write
transactions opened with ``BEGIN IMMEDIATE`` so that the lock is taken up front (a deferred
transaction that reads, then writes, can fail with SQLITE_BUSY without waiting). What is left of
"database is locked" after the timeout is retried here, so callers never see it.
"""

from __future__ import annotations

import random
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import TypeVar

from sqlalchemy import Engine, create_engine, event
from sqlalchemy.engine import make_url
from sqlalchemy.exc import DBAPIError, OperationalError
from sqlalchemy.orm import Session, sessionmaker

from .schema import Base
from .settings import DBSettings

T = TypeVar("T")

_READONLY = "annotation_db_readonly"
# Postgres SQLSTATEs worth retrying: serialization failure, deadlock.
_PG_RETRY_CODES = {"40001", "40P01"}


def make_engine(settings: DBSettings) -> Engine:
    url = make_url(settings.url)
    if url.get_backend_name() != "sqlite":
        return create_engine(url, pool_pre_ping=True, pool_size=20, max_overflow=20)
    if url.database and url.database != ":memory:":
        Path(url.database).expanduser().parent.mkdir(parents=True, exist_ok=True)
    engine = create_engine(
        url,
        connect_args={"timeout": settings.busy_timeout_ms / 1000, "check_same_thread": False},
        pool_size=32,
        max_overflow=32,
    )

    @event.listens_for(engine, "connect")
    def _on_connect(dbapi_conn, _record):  # noqa: ANN001
        # Let SQLAlchemy, not the sqlite3 module, decide when a transaction begins.
        dbapi_conn.isolation_level = None
        cur = dbapi_conn.cursor()
        cur.execute("PRAGMA journal_mode=WAL")
        cur.execute(f"PRAGMA busy_timeout={int(settings.busy_timeout_ms)}")
        cur.execute("PRAGMA foreign_keys=ON")
        cur.execute(f"PRAGMA synchronous={settings.synchronous}")
        cur.close()

    @event.listens_for(engine, "begin")
    def _on_begin(conn):  # noqa: ANN001
        readonly = conn.get_execution_options().get(_READONLY, False)
        conn.exec_driver_sql("BEGIN" if readonly else "BEGIN IMMEDIATE")

    return engine


def is_sqlite(engine: Engine) -> bool:
    return engine.dialect.name == "sqlite"


def _retryable(exc: BaseException) -> bool:
    if isinstance(exc, OperationalError):
        msg = str(exc.orig).lower() if exc.orig is not None else str(exc).lower()
        if "database is locked" in msg or "database is busy" in msg or "busy" in msg:
            return True
    if isinstance(exc, DBAPIError) and exc.orig is not None:
        code = getattr(exc.orig, "sqlstate", None) or getattr(exc.orig, "pgcode", None)
        if code in _PG_RETRY_CODES:
            return True
    return False


class Database:
    """An engine plus session factories; ``write``/``read`` run one unit of work each."""

    def __init__(self, settings: DBSettings, *, create: bool = True) -> None:
        self.settings = settings
        self.engine = make_engine(settings)
        self._write_sessions = sessionmaker(self.engine, expire_on_commit=False)
        self._read_sessions = sessionmaker(
            self.engine.execution_options(**{_READONLY: True}), expire_on_commit=False
        )
        # SQLite has one writer at a time. Queueing this process's writers on a mutex hands
        # the lock over at once; leaving it to SQLite's busy handler makes waiters sleep and
        # poll (1, 2, 5, 10... ms), which wastes most of the time under contention. Other
        # processes are still handled by busy_timeout and the retry below.
        self._write_lock: threading.Lock | None = (
            threading.Lock() if is_sqlite(self.engine) else None
        )
        if create:
            self.create_all()

    def create_all(self) -> None:
        def run() -> None:
            Base.metadata.create_all(self.engine)

        retry(run, deadline_s=60)

    def dispose(self) -> None:
        self.engine.dispose()

    @contextmanager
    def _session(self, factory: sessionmaker[Session]) -> Iterator[Session]:
        with factory.begin() as session:
            yield session

    def write(self, fn: Callable[[Session], T], *, deadline_s: float = 120.0) -> T:
        """Run ``fn`` in one write transaction; retried as a whole while the database is busy."""
        if self._write_lock is None:
            return retry(lambda: self._run(self._write_sessions, fn), deadline_s=deadline_s)

        def locked() -> T:
            with self._write_lock:
                return self._run(self._write_sessions, fn)

        return retry(locked, deadline_s=deadline_s)

    def read(self, fn: Callable[[Session], T], *, deadline_s: float = 120.0) -> T:
        """Run ``fn`` in one read transaction (a consistent snapshot)."""
        return retry(lambda: self._run(self._read_sessions, fn), deadline_s=deadline_s)

    def _run(self, factory: sessionmaker[Session], fn: Callable[[Session], T]) -> T:
        with self._session(factory) as session:
            return fn(session)


def retry(fn: Callable[[], T], *, deadline_s: float = 120.0) -> T:
    """Call ``fn`` until it stops failing with a lock/serialization error, with jittered backoff.

    Past the deadline the last error is raised: a database locked for minutes is a real fault.
    """
    start = time.monotonic()
    delay = 0.005
    while True:
        try:
            return fn()
        except DBAPIError as e:
            if not _retryable(e) or time.monotonic() - start > deadline_s:
                raise
        time.sleep(delay * (0.5 + random.random()))
        delay = min(delay * 2, 0.5)
