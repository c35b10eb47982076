"""Safe copy of a live SQLite database with SQLite's online backup API.

The copy is consistent even while raters are submitting: SQLite copies pages and restarts
if a writer changes the source mid-way. It is written to a temporary file, checked with
``PRAGMA integrity_check``, then renamed into place, so ``dest`` is never half-written.
The copy (and its journal while it is written) is readable by its owner only.
"""

from __future__ import annotations

import os
import sqlite3
from pathlib import Path

from sqlalchemy import Engine

from .errors import InvalidInputError, UnsupportedError


def backup_sqlite(engine: Engine, dest: Path, *, overwrite: bool = False) -> Path:
    if engine.dialect.name != "sqlite":
        raise UnsupportedError(
            f"backup copies SQLite files; for {engine.dialect.name} use its own tools"
            " (e.g. pg_dump)"
        )
    dest = Path(dest).expanduser().absolute()
    src_path = engine.url.database
    if src_path and Path(src_path).absolute() == dest:
        raise InvalidInputError("the backup destination is the live database itself")
    if dest.exists() and not overwrite:
        raise InvalidInputError(f"{dest} exists; pass overwrite=True (CLI: --overwrite)")
    dest.parent.mkdir(parents=True, exist_ok=True)
    tmp = dest.with_name(dest.name + ".partial")
    tmp.unlink(missing_ok=True)
    # SQLite takes an empty file as an empty database and gives its journal the same mode.
    os.close(os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600))
    raw = engine.raw_connection()
    try:
        target = sqlite3.connect(tmp)
        try:
            raw.driver_connection.backup(target, pages=1024)
            # The copy keeps WAL mode; fold it into one self-contained file.
            target.execute("PRAGMA journal_mode=DELETE")
            ok = target.execute("PRAGMA integrity_check").fetchone()[0]
        finally:
            target.close()
    finally:
        raw.close()
    if ok != "ok":
        tmp.unlink(missing_ok=True)
        raise RuntimeError(f"backup failed its integrity check: {ok}")
    tmp.replace(dest)
    return dest
