"""The database: one ``Database`` owns the engine, and every unit of work runs through it.

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
from contextlib import contextmanager, suppress
from pathlib import Path
from typing import TypeVar
from urllib.parse import unquote, urlsplit

from sqlalchemy import Engine, create_engine, event, text
from sqlalchemy.engine import URL, make_url
from sqlalchemy.exc import DBAPIError, IntegrityError, OperationalError
from sqlalchemy.orm import Session, sessionmaker

from .errors import AnnotationError, StorageError
from .migrate import upgrade
from .settings import DBSettings

T = TypeVar("T")

_READONLY = "annotation_db_readonly"
# Postgres SQLSTATEs worth retrying: serialization failure, deadlock.
_PG_RETRY_CODES = {"40001", "40P01"}


def sqlite_file(url: URL) -> Path | None:
    """The file a SQLite URL names; None for another backend or an in-memory database.

    With ``?uri=true`` the database part is an SQLite URI (``file:/path?mode=ro``), not a
    path: read as one, ``file:`` was taken for a folder and made in the working directory.
    """
    if url.get_backend_name() != "sqlite" or not url.database or url.database == ":memory:":
        return None
    if not _is_uri(url):
        return Path(url.database).expanduser()
    uri = urlsplit(url.database)
    if uri.scheme != "file":
        return Path(url.database).expanduser()  # SQLite reads a URI without file: as a name
    mode = dict(p.split("=", 1) for p in uri.query.split("&") if "=" in p).get("mode")
    path = unquote(uri.path)
    if mode == "memory" or not path or path == ":memory:":
        return None
    return Path(path).expanduser()


def _is_uri(url: URL) -> bool:
    """``?uri=true``: pysqlite opens the database part as an SQLite URI."""
    return str(url.query.get("uri", "")).lower() in ("true", "1")


def make_engine(settings: DBSettings) -> Engine:
    url = make_url(settings.url)
    if url.get_backend_name() != "sqlite":
        return create_engine(url, pool_pre_ping=True, pool_size=20, max_overflow=20)
    path = sqlite_file(url)
    if path is not None and not _is_uri(url):
        # A plain path gets its folder; an SQLite URI is opened as given (it may be read-only).
        path.parent.mkdir(parents=True, exist_ok=True)
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


class _RolledBack(Exception):
    """Raised inside the write check so that its transaction is rolled back."""


def _where(settings: DBSettings) -> str:
    return make_url(settings.url).render_as_string(hide_password=True)


def _reason(exc: BaseException) -> str:
    orig = getattr(exc, "orig", None)
    return str(orig if orig is not None else exc).strip().splitlines()[0] or type(exc).__name__


class Database:
    """An engine plus session factories; ``write``/``read`` run one unit of work each.

    Opening checks that the database can be written (a write transaction that is rolled back),
    so a read-only file or folder stops at start with one sentence instead of losing the first
    rating. A storage failure later (disk full, file made read-only) raises ``StorageError``.
    """

    def __init__(self, settings: DBSettings, *, create: bool = True) -> None:
        self.settings = settings
        try:
            self._open(create)
        except AnnotationError:
            self._dispose_if_open()
            raise
        except (OSError, DBAPIError) as e:
            self._dispose_if_open()
            raise StorageError(
                f"The database {_where(settings)} cannot be opened for writing ({_reason(e)}); "
                "check that its folder exists and is writable, or set MAGNET_DB_PATH or "
                "MAGNET_DB_URL."
            ) from e

    def _dispose_if_open(self) -> None:
        """A store that failed to open keeps no connection (a server's slots are few)."""
        engine = getattr(self, "engine", None)
        if engine is not None:
            engine.dispose()

    def _open(self, create: bool) -> None:
        settings = self.settings
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
            self.migrate()
        self.check_writable()

    def check_writable(self) -> None:
        """A write in a transaction that is rolled back: fails on a read-only database (SQLite
        opens a read-only file without complaint and fails only at the first real write, so
        it creates a table; PostgreSQL refuses any UPDATE in a read-only transaction or
        without the privilege, so no table-creation right is needed there)."""
        sql = (
            "CREATE TABLE annotation_db_write_check (x INTEGER)"
            if is_sqlite(self.engine)
            else "UPDATE rater SET seed = seed WHERE 1 = 0"
        )

        def probe(s: Session) -> None:
            s.execute(text(sql))
            raise _RolledBack

        with suppress(_RolledBack):
            self.write(probe, _wrap=False)

    def migrate(self) -> None:
        """Create a new database, or upgrade an existing one, to the newest schema revision."""
        retry(lambda: upgrade(self.engine), deadline_s=60)

    def dispose(self) -> None:
        self.engine.dispose()

    @property
    def file(self) -> Path | None:
        """The SQLite file the data lives in; None for a server database or in-memory."""
        return sqlite_file(self.engine.url)

    @property
    def location(self) -> str:
        """Where the data lives, safe to print: the SQLite file, or the URL with its password
        hidden."""
        path = self.file
        return str(path) if path is not None else _where(self.settings)

    @contextmanager
    def _session(self, factory: sessionmaker[Session]) -> Iterator[Session]:
        with factory.begin() as session:
            yield session

    def write(
        self, fn: Callable[[Session], T], *, deadline_s: float = 120.0, _wrap: bool = True
    ) -> T:
        """Run ``fn`` in one write transaction; retried as a whole while the database is busy.

        A failure of the database itself becomes ``StorageError`` (nothing was written);
        ``IntegrityError`` is left to the caller, which may rerun ``fn`` after losing a race.
        """
        if self._write_lock is None:

            def run() -> T:
                return retry(lambda: self._run(self._write_sessions, fn), deadline_s=deadline_s)
        else:

            def locked() -> T:
                with self._write_lock:
                    return self._run(self._write_sessions, fn)

            def run() -> T:
                return retry(locked, deadline_s=deadline_s)

        if not _wrap:
            return run()
        try:
            return run()
        except (IntegrityError, AnnotationError):
            raise
        except (DBAPIError, OSError) as e:
            raise StorageError(
                f"the database could not be written ({_reason(e)}); nothing was saved"
            ) from e

    def read(self, fn: Callable[[Session], T], *, deadline_s: float = 120.0) -> T:
        """Run ``fn`` in one read transaction (a consistent snapshot)."""
        try:
            return retry(lambda: self._run(self._read_sessions, fn), deadline_s=deadline_s)
        except (IntegrityError, AnnotationError):
            raise
        except (DBAPIError, OSError) as e:
            raise StorageError(f"the database could not be read ({_reason(e)})") from e

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
