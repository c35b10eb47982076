"""Settings come from MAGNET_* variables; explicit arguments win."""

from __future__ import annotations

import pytest

from annotation_db import DBSettings, InvalidInputError, default_db_path


def test_defaults_and_env(monkeypatch, tmp_path):
    for var in ("MAGNET_DB_URL", "MAGNET_DB_PATH", "MAGNET_DB_SYNCHRONOUS"):
        monkeypatch.delenv(var, raising=False)
    monkeypatch.setenv("MAGNET_DATA_DIR", str(tmp_path))
    assert default_db_path() == tmp_path / "annotations.sqlite3"
    s = DBSettings.from_env()
    assert s.url == f"sqlite:///{tmp_path / 'annotations.sqlite3'}"
    assert s.synchronous == "NORMAL"
    monkeypatch.setenv("MAGNET_DB_PATH", str(tmp_path / "x.db"))
    assert DBSettings.from_env().url.endswith("/x.db")
    monkeypatch.setenv("MAGNET_DB_URL", "postgresql+psycopg://u:p@h/db")
    assert DBSettings.from_env().url == "postgresql+psycopg://u:p@h/db"
    assert DBSettings.from_env(path=tmp_path / "y.db").url.endswith("/y.db")


def test_bad_settings_are_clear(monkeypatch):
    monkeypatch.setenv("MAGNET_DB_SYNCHRONOUS", "sometimes")
    with pytest.raises(InvalidInputError, match="MAGNET_DB_SYNCHRONOUS"):
        DBSettings.from_env(url="sqlite:///x")
    monkeypatch.delenv("MAGNET_DB_SYNCHRONOUS")
    monkeypatch.setenv("MAGNET_DB_BUSY_TIMEOUT_MS", "soon")
    with pytest.raises(InvalidInputError, match="BUSY_TIMEOUT"):
        DBSettings.from_env(url="sqlite:///x")
    with pytest.raises(InvalidInputError, match="memory"):
        DBSettings.from_env(path=":memory:")
