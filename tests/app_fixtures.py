"""Builders shared by the app tests: a MagnetApp over an engine (tiny_models.tiny_engine)
with a temporary annotation store and cache."""

from __future__ import annotations

import socket
from pathlib import Path
from types import SimpleNamespace

from annotation_db import AnnotationStore
from app.handlers import MagnetApp
from app.security import ADMIN_COOKIE
from app.settings import AppSettings
from magnet_model.inference.engine import Engine


def make_app(tmp: Path, engine: Engine, **settings) -> MagnetApp:
    defaults = {"admin_password": "s3cret", "max_input_tokens": 128, "max_span_tokens": 8}
    # tests call the demo tabs far faster than a visitor; the quota's own tests set it low
    defaults |= {"demo_calls_per_minute": 10_000, "demo_calls_per_minute_total": 10_000}
    defaults.update(settings)
    store = AnnotationStore(path=tmp / "db.sqlite3")
    return MagnetApp(engine, store, AppSettings(**defaults), tmp / "cache")


def fake_request(**query) -> SimpleNamespace:
    """What handlers read from gr.Request: query params, headers, the session hash."""
    return SimpleNamespace(
        query_params=query, headers={"host": "demo.test:7860"}, session_hash="visitor-1"
    )


def admin_request(app: MagnetApp, **query) -> SimpleNamespace:
    """A request of a logged-in admin: it carries the session cookie the login route sets."""
    req = fake_request(**query)
    req.cookies = {ADMIN_COOKIE: app.admin_sessions.start()}
    return req


class Clock:
    """A clock the test moves by hand (now = seconds), for throttles and session expiry."""

    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


def free_port() -> int:
    """A loopback port free now (tests run in parallel workers: never assume 7860 is)."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def invite(app: MagnetApp, study: str, names: str):
    """Invite raters as an admin who has read the outputs' check: the first invite to a study
    with flagged outputs asks first (admin_invite's question); this answers yes."""
    made = app.admin_invite(admin_request(app), study, names)
    if made.pending:  # asked, nobody invited yet
        made = app.admin_invite(admin_request(app), study, names, made.pending)
    return made
