"""Settings read from ``MAGNET_*`` environment variables (CLI flags override).

``StoreSettings`` declares them, typed, each with its default and description (pydantic-settings
reads the environment); ``DBSettings.from_env`` resolves them in one place: an explicit
``url``/``path`` (the CLIs' ``--db-url``/``--db-path``) > ``MAGNET_DB_URL`` > ``MAGNET_DB_PATH`` >
``$MAGNET_DATA_DIR/annotations.sqlite3``. A bad value stops with one sentence naming the
variable. magnet_model.settings declares the model's settings the same way; this package keeps
its own small copy of the mechanism (``load_store_settings``) because it raises this package's
``InvalidInputError`` and must not import the model library.

``MAGNET_DB_SYNCHRONOUS``: NORMAL (default): with WAL every committed rating survives a killed
or crashed process, and the file is never corrupted, but a power cut or OS crash can drop the
last commits. FULL: also survives power loss; one fsync per rating, about 3x slower on this
project's machines (see bench/).
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal

from pydantic import Field, ValidationError, field_validator
from pydantic_core import PydanticUseDefault
from pydantic_settings import BaseSettings, SettingsConfigDict

from .errors import InvalidInputError


class StoreSettings(BaseSettings):
    """Where the rating store lives and how SQLite behaves."""

    model_config = SettingsConfigDict(env_prefix="MAGNET_", str_strip_whitespace=True)

    db_url: str | None = Field(
        None,
        description="rating studies in any SQLAlchemy URL, e.g. "
        "`postgresql+psycopg://user:pw@host/db` (wins over `MAGNET_DB_PATH`); also `--db-url`",
    )
    db_path: Path | None = Field(
        None,
        description="rating studies in this SQLite file; also `--db-path`",
        json_schema_extra={"shown_default": "`$MAGNET_DATA_DIR/annotations.sqlite3`"},
    )
    data_dir: Path = Field(
        default_factory=lambda: Path.home() / ".local/share/magnet",
        description="folder of the default SQLite file",
        json_schema_extra={"shown_default": "`~/.local/share/magnet`"},
    )
    db_busy_timeout_ms: int = Field(
        10_000, ge=0, description="how long SQLite waits for a lock before retrying"
    )
    db_synchronous: Literal["OFF", "NORMAL", "FULL", "EXTRA"] = Field(
        "NORMAL",
        description="SQLite `PRAGMA synchronous`: `NORMAL` survives a killed process, `FULL` "
        "also a power cut (about 3x slower per rating)",
    )

    @field_validator("*", mode="before")
    @classmethod
    def _blank_is_default(cls, value: Any) -> Any:
        if isinstance(value, str) and not value.strip():
            raise PydanticUseDefault()
        return value

    @field_validator("db_synchronous", mode="before")
    @classmethod
    def _upper(cls, value: Any) -> Any:
        return value.strip().upper() if isinstance(value, str) else value

    @field_validator("data_dir", "db_path")
    @classmethod
    def _expand(cls, value: Path | None) -> Path | None:
        return value.expanduser() if value is not None else None


def load_store_settings() -> StoreSettings:
    """StoreSettings from the environment; a bad value is one sentence naming the variable."""
    try:
        return StoreSettings()
    except ValidationError as e:
        first = e.errors()[0]
        name = f"MAGNET_{str(first['loc'][0]).upper()}"
        ctx = first.get("ctx") or {}
        if first["type"] == "literal_error":
            what = f"must be one of {ctx['expected']}"
        elif first["type"].startswith("int"):
            what = "must be a whole number"
        elif first["type"] == "greater_than_equal":
            what = f"must be at least {ctx['ge']}"
        else:
            what = str(first["msg"]).removeprefix("Value error, ")
        raise InvalidInputError(f"{name} {what}, not {first['input']!r}.") from None


def default_db_path() -> Path:
    return load_store_settings().data_dir / "annotations.sqlite3"


@dataclass(frozen=True)
class DBSettings:
    """Where the store lives and how SQLite behaves."""

    url: str
    busy_timeout_ms: int = 10_000
    synchronous: str = "NORMAL"

    @classmethod
    def from_env(cls, url: str | None = None, path: str | os.PathLike[str] | None = None):
        """Build settings from the environment; explicit ``url``/``path`` arguments win."""
        if url is None and path is not None:
            url = sqlite_url(path)
        env = load_store_settings()
        if url is None:
            url = env.db_url or sqlite_url(env.db_path or env.data_dir / "annotations.sqlite3")
        return cls(url=url, busy_timeout_ms=env.db_busy_timeout_ms, synchronous=env.db_synchronous)


def sqlite_url(path: str | os.PathLike[str]) -> str:
    """SQLAlchemy URL of a SQLite file (``:memory:`` is refused: each connection would differ)."""
    p = Path(path).expanduser()
    if str(path) == ":memory:":
        raise InvalidInputError(
            "use a file path for SQLite; ':memory:' is not shared between threads"
        )
    return f"sqlite:///{p.absolute()}"
