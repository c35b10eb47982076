"""Settings read from ``MAGNET_*`` environment variables (CLI flags override).

``MAGNET_DB_URL``       any SQLAlchemy URL (wins over the path), e.g. ``postgresql+psycopg://...``
``MAGNET_DB_PATH``      SQLite file; default ``$MAGNET_DATA_DIR/annotations.sqlite3``
``MAGNET_DATA_DIR``     default ``~/.local/share/magnet``
``MAGNET_DB_BUSY_TIMEOUT_MS``  how long SQLite waits for a lock before retrying (default 10000)
``MAGNET_DB_SYNCHRONOUS``      SQLite ``PRAGMA synchronous``. NORMAL (default): with WAL every
                               committed rating survives a killed or crashed process, and the file
                               is never corrupted, but a power cut or OS crash can drop the last
                               commits. FULL: also survives power loss; one fsync per rating,
                               about 3x slower on this project's machines (see bench/).
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path

from .errors import InvalidInputError

_SYNC_MODES = ("OFF", "NORMAL", "FULL", "EXTRA")


def default_db_path() -> Path:
    data_dir = os.environ.get("MAGNET_DATA_DIR") or str(Path.home() / ".local/share/magnet")
    return Path(data_dir).expanduser() / "annotations.sqlite3"


@dataclass(frozen=True)
class DBSettings:
    """Where the store lives and how SQLite behaves."""

    url: str
    busy_timeout_ms: int = 10_000
    synchronous: str = "NORMAL"

    @classmethod
    def from_env(cls, url: str | None = None, path: str | os.PathLike[str] | None = None):
        """Build settings from the environment; explicit ``url``/``path`` arguments win."""
        if url is None and path is None:
            url = os.environ.get("MAGNET_DB_URL") or None
            path = os.environ.get("MAGNET_DB_PATH") or None
        if url is None:
            url = sqlite_url(path if path is not None else default_db_path())
        try:
            busy = int(os.environ.get("MAGNET_DB_BUSY_TIMEOUT_MS", "10000"))
        except ValueError as e:
            raise InvalidInputError("MAGNET_DB_BUSY_TIMEOUT_MS must be an integer") from e
        sync = os.environ.get("MAGNET_DB_SYNCHRONOUS", "NORMAL").upper()
        if sync not in _SYNC_MODES:
            raise InvalidInputError(f"MAGNET_DB_SYNCHRONOUS must be one of {_SYNC_MODES}")
        return cls(url=url, busy_timeout_ms=busy, synchronous=sync)


def sqlite_url(path: str | os.PathLike[str]) -> str:
    """SQLAlchemy URL of a SQLite file (``:memory:`` is refused: each connection would differ)."""
    p = Path(path).expanduser()
    if str(path) == ":memory:":
        raise InvalidInputError(
            "use a file path for SQLite; ':memory:' is not shared between threads"
        )
    return f"sqlite:///{p.absolute()}"
