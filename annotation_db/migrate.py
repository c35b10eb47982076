"""Schema migrations with Alembic, run when a store opens its database.

- A new database is created at the newest revision (head).
- A database made before migrations existed (annotation_db tables, no ``alembic_version``)
  is checked against the first revision (``0001_baseline``), stamped with it, then upgraded:
  no table is rebuilt and no row is touched.
- A database at an older revision is upgraded; one at a revision this code does not know (made
  by a newer annotation_db) is refused with one sentence, before anything is changed.

Everything runs in one transaction (SQLite: ``BEGIN IMMEDIATE``; PostgreSQL: under an advisory
lock), so two processes opening a new database at once create it once. The migrations live in
``annotation_db/migrations`` and are configured in code: no alembic.ini is needed.
"""

from __future__ import annotations

from functools import cache
from pathlib import Path

from alembic import command
from alembic.config import Config
from alembic.runtime.migration import MigrationContext
from alembic.script import ScriptDirectory
from sqlalchemy import Connection, Engine, create_engine, inspect, text

from .errors import StorageError
from .schema import Base

MIGRATIONS = Path(__file__).with_name("migrations")
BASELINE = "0001_baseline"
# pg_advisory_xact_lock key: any constant shared by every process opening the database.
_PG_LOCK_KEY = 0x616E6E6F  # "anno"


def alembic_config(url: str | None = None) -> Config:
    """An Alembic ``Config`` for annotation_db's migrations, without an ini file.

    With ``url``, Alembic's commands can run on their own, e.g. to write a new revision::

        command.revision(alembic_config("sqlite:///dev.sqlite3"), "add x", autogenerate=True)
    """
    cfg = Config()
    cfg.set_main_option("script_location", str(MIGRATIONS))
    cfg.set_main_option("path_separator", "os")
    if url is not None:
        cfg.set_main_option("sqlalchemy.url", url.replace("%", "%%"))
    return cfg


@cache
def _script() -> ScriptDirectory:
    return ScriptDirectory.from_config(alembic_config())


def head_revision() -> str:
    """The newest revision this code knows."""
    head = _script().get_current_head()
    assert head is not None
    return head


def current_revision(conn: Connection) -> str | None:
    """The database's revision; ``None`` when it has no ``alembic_version`` table."""
    return MigrationContext.configure(conn).get_current_revision()


def upgrade(engine: Engine) -> None:
    """Bring the database to head (see the module docstring). ``StorageError`` if it cannot."""
    where = engine.url.render_as_string(hide_password=True)
    with engine.connect() as conn:
        sqlite = conn.dialect.name == "sqlite"
        if sqlite:
            # A batch migration copies a table and drops the old one: with foreign keys on,
            # the drop would cascade to the rows that point at it. The pragma only takes
            # effect outside a transaction, so it is set on the raw connection first.
            conn.connection.driver_connection.execute("PRAGMA foreign_keys=OFF")
        try:
            with conn.begin():
                _upgrade_in_transaction(conn, sqlite, where)
        finally:
            if sqlite:
                conn.connection.driver_connection.execute("PRAGMA foreign_keys=ON")


def _upgrade_in_transaction(conn: Connection, sqlite: bool, where: str) -> None:
    if conn.dialect.name == "postgresql":
        conn.execute(text("SELECT pg_advisory_xact_lock(:k)"), {"k": _PG_LOCK_KEY})
    head = head_revision()
    current = current_revision(conn)
    if current == head:
        return
    cfg = alembic_config()
    cfg.attributes["connection"] = conn
    if current is None:
        if inspect(conn).has_table("study"):
            _check_like_baseline(conn, where)
            command.stamp(cfg, BASELINE)
    elif current not in _known_revisions():
        raise StorageError(
            f"The database {where} is at schema revision {current!r}, which this version of "
            f"annotation_db does not know (its newest is {head!r}): it was made by a newer "
            "annotation_db. Upgrade annotation_db, or set MAGNET_DB_PATH or MAGNET_DB_URL to "
            "another database."
        )
    command.upgrade(cfg, "head")
    if sqlite:
        bad = conn.exec_driver_sql("PRAGMA foreign_key_check").fetchall()
        if bad:  # raising rolls the whole upgrade back
            raise StorageError(
                f"upgrading the schema of {where} would break {len(bad)} foreign key(s); "
                "nothing was changed"
            )


def _known_revisions() -> set[str]:
    return {s.revision for s in _script().walk_revisions()}


@cache
def _baseline_columns() -> dict[str, frozenset[str]]:
    """Tables and columns of the baseline revision, from running it on an in-memory SQLite."""
    engine = create_engine("sqlite://")
    try:
        with engine.begin() as conn:
            cfg = alembic_config()
            cfg.attributes["connection"] = conn
            command.upgrade(cfg, BASELINE)
            insp = inspect(conn)
            return {
                t: frozenset(c["name"] for c in insp.get_columns(t))
                for t in insp.get_table_names()
                if t != "alembic_version"
            }
    finally:
        engine.dispose()


def _check_like_baseline(conn: Connection, where: str) -> None:
    """A database without ``alembic_version`` is adopted only if it has every table and column
    of the baseline (made by annotation_db just before migrations); an older one is refused."""
    insp = inspect(conn)
    have = set(insp.get_table_names())
    missing = []
    for table, cols in sorted(_baseline_columns().items()):
        if table not in have:
            missing.append(table)
            continue
        present = {c["name"] for c in insp.get_columns(table)}
        missing += [f"{table}.{c}" for c in sorted(cols - present)]
    if missing:
        raise StorageError(
            f"The database {where} was made by an annotation_db older than its first migration and "
            f"lacks {', '.join(missing)}; export its ratings with the version that made it, "
            "or set MAGNET_DB_PATH or MAGNET_DB_URL to a new database."
        )


def drop_schema(engine: Engine) -> None:
    """Drop every annotation_db table and the revision stamp, so that the next store opening
    the database creates it afresh (tests and benchmarks on a shared PostgreSQL database)."""
    Base.metadata.drop_all(engine)
    with engine.begin() as conn:
        conn.execute(text("DROP TABLE IF EXISTS alembic_version"))
