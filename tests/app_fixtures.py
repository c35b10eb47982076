"""Builders shared by the app tests: a MagnetApp over an engine (tiny_models.tiny_engine)
with a temporary annotation store and cache, the requests its handlers read, a small study,
the rating form's values, and the app served in-process, on a port or as `python -m app`.
(The `engine` and `app` fixtures themselves are in conftest.py.)"""

from __future__ import annotations

import re
import socket
import subprocess
import time
import urllib.request
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from pathlib import Path
from types import SimpleNamespace

import gradio as gr
import pytest
from starlette.testclient import TestClient

from annotation_db import AnnotationStore, ItemIn, OutputIn
from app.handlers import MagnetApp
from app.main import build_demo, server_app_kwargs
from app.rater import MAX_LIKERT, MAX_OUTPUTS
from app.security import ADMIN_COOKIE
from app.settings import AppSettings
from magnet_model.inference.engine import Engine

ROOT = Path(__file__).resolve().parent.parent
TEXT = "the cat [blank] on the mat . the dog [blank] in the river ."  # a demo input, two blanks


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


def visitor(host: str) -> SimpleNamespace:
    """A request from the client address host (what the quotas and the login throttle count)."""
    req = fake_request()
    req.client = SimpleNamespace(host=host)
    return req


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


def admit_refusal(validation: list[dict]) -> str | None:
    """The sentence of a model call's validator (infill_admit, ...) refusing it; None: admitted."""
    return next((v["message"] for v in validation if not v["is_valid"]), None)


def small_study(
    app: MagnetApp,
    n: int = 2,
    questions: Sequence[str] = ("appropriate",),
    systems: tuple[str, str] = ("magnet", "zero-shot"),
) -> str:
    """Study "pilot": n items "the cat [blank] on the mat k .", the first system filling "sat"
    and the second "ran", one rater per item; the invite token of its rater, Ada."""
    items = [ItemIn(f"i{k}", f"the cat [blank] on the mat {k} .", ["sat"]) for k in range(n)]
    outputs = [
        OutputIn(it.key, system, it.text.replace("[blank]", fill), [fill])
        for it in items
        for system, fill in zip(systems, ("sat", "ran"), strict=True)
    ]
    app.store.create_study("pilot", items, outputs, questions=list(questions), raters_per_item=1)
    return app.store.invite("pilot", "Ada").token


def form_answers(appropriate: Sequence = ("Yes", "No"), fluency: Sequence = ()) -> list:
    """The rating form's values as the page sends them: per output slot, its "appropriate"
    answer and its MAX_LIKERT Likert answers (fluency first), None where nothing is picked."""
    vals: list = []
    for i in range(MAX_OUTPUTS):
        vals.append(appropriate[i] if i < len(appropriate) else None)
        vals += [fluency[i] if i < len(fluency) else None] + [None] * (MAX_LIKERT - 1)
    return vals


def downloaded(app: MagnetApp, link: str) -> Path:
    """The private file behind an admin download link (what its route would send)."""
    ticket = re.search(r"\]\(admin-files/([\w-]+)\)", link).group(1)
    return app.downloads.take(ticket)


def events(demo: gr.Blocks, name: str) -> list:
    """The page's events whose handler is named name."""
    return [d for d in demo.fns.values() if d.name == name]


def component(demo: gr.Blocks, label: str):
    """The one component of the page with this label."""
    (c,) = [b for b in demo.blocks.values() if getattr(b, "label", None) == label]
    return c


@contextmanager
def in_process(app: MagnetApp, **client) -> Iterator[TestClient]:
    """The FastAPI app under Gradio, with this project's middleware and routes, in-process."""
    fastapi_app = gr.routes.App.create_app(build_demo(app), app_kwargs=server_app_kwargs(app))
    with TestClient(fastapi_app, **client) as http:
        yield http


@contextmanager
def serving(app: MagnetApp) -> Iterator[str]:
    """The real Gradio server on a free port, as `python -m app` configures it: its URL."""
    demo = build_demo(app)
    demo.launch(
        prevent_thread_lock=True, quiet=True, app_kwargs=server_app_kwargs(app),
        enable_monitoring=False,
    )  # fmt: skip
    try:
        yield demo.local_url.rstrip("/")
    finally:
        demo.close()


@contextmanager
def app_process(cmd: list[str], env: dict, log_path: Path, port: int) -> Iterator[str]:
    """cmd (`python -m app ...`, a Space's launcher) run from the repository with its output
    in log_path: the URL of its page once that answers (the test fails with the log's end if
    the process exits first or is not ready in 180 s); stopped by its PID at the end."""
    with open(log_path, "w") as log:
        proc = subprocess.Popen(cmd, cwd=ROOT, env=env, stdout=log, stderr=subprocess.STDOUT)
        url = f"http://127.0.0.1:{port}"
        t0 = time.perf_counter()
        try:
            while True:
                if proc.poll() is not None:
                    pytest.fail(f"the app exited: {log_path.read_text()[-3000:]}")
                try:
                    urllib.request.urlopen(url, timeout=2).read()
                    break
                except OSError:
                    if time.perf_counter() - t0 > 180:
                        pytest.fail(f"the app was not ready in 180 s: {log_path.read_text()}")
                    time.sleep(0.5)
            yield url
        finally:
            proc.terminate()
            try:
                proc.wait(timeout=20)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait(timeout=20)
