"""An unexpected error in any Admin view is one sentence in that view, logged with its
traceback, never bare "Error" pills (issue 58 point 1; tour 6, M1: a plot that failed showed
three pills over Results and a traceback in the log, and nothing else).

Every admin event of the page is called as Gradio calls it, with the database gone: each
answers, in its own text, the one sentence that says what failed; nothing escapes."""

from __future__ import annotations

import inspect
import logging

import gradio as gr
import pytest
from app_fixtures import admin_request

from annotation_db import ItemIn, OutputIn
from app.main import build_demo

# what the admin would have typed or picked, by the handlers' parameter names
TYPED = {
    "study": "s",
    "name": "new-study",
    "names": "Ada",
    "problems": ["empty"],
    "status": "closed",
    "rater_id": "1",
    "fmt": "csv",
    "exclude": True,
    "on": True,
    "pending": "",
    "login_message": "Logged in.",
    "upload": None,
    "n_items": 4,
    "systems": ["magnet", "base-zero-shot"],
    "questions": ["appropriate"],
    "raters_per_item": 1,
    "n_gold": 0,
    "instructions": "",
}


class GoneDatabase:
    """A store whose every call fails as a database that went away would."""

    def __getattr__(self, name):
        raise RuntimeError("the database went away")


def _call(app, fn):
    """``fn`` called as Gradio calls it: the request of a logged-in admin, the typed values."""
    args = []
    for p in inspect.signature(fn).parameters.values():
        if p.name == "request":
            args.append(admin_request(app))
        elif p.name == "progress":
            args.append(lambda *a, **k: None)
        elif p.name in TYPED:
            args.append(TYPED[p.name])
        else:
            args.append(p.default)
    return fn(*args)


@pytest.fixture
def gone(app):
    items = [ItemIn(f"i{i}", f"Text {i} has a [blank] here.", ["w"]) for i in range(3)]
    outs = [
        OutputIn(it.key, s, it.text.replace("[blank]", s), [s]) for it in items for s in ("a", "b")
    ]
    app.store.create_study("s", items, outs, questions=["appropriate"])
    demo = build_demo(app)
    app.store = GoneDatabase()
    return app, demo


def test_an_unexpected_error_in_any_admin_view_is_one_sentence_in_that_view(gone, caplog):
    app, demo = gone
    events = [d for d in demo.fns.values() if d.fn and (d.name or "").startswith("admin_")]
    said = {}
    with caplog.at_level(logging.ERROR, logger="app"):
        for d in events:
            out = _call(app, d.fn)  # nothing escapes
            at = getattr(d.fn, "says_refusals_in", None)
            values = out if isinstance(out, tuple) else (out,)
            if at is not None and isinstance(values[at], str) and "unexpected" in values[at]:
                said[d.name] = values[at]
                others = [v for i, v in enumerate(values) if i != at]
                assert all(v == gr.skip() for v in others), d.name  # left as they were
    # every view that reads the database says what failed, in one sentence
    for name in (
        "admin_panel", "admin_studies", "admin_create", "admin_preset", "admin_check",
        "admin_regenerate", "admin_drop", "admin_invite", "admin_progress", "admin_results",
        "admin_status", "admin_keep_demo", "admin_revoke", "admin_new_link", "admin_export",
        "admin_report", "admin_backup",
    ):  # fmt: skip
        assert name in said, name
    assert said["admin_results"] == (
        "Showing the results failed on an unexpected error on the server (RuntimeError); the "
        "details are in the server's log."
    )
    assert all(s.count(".") == 1 and s.endswith(".") for s in said.values())  # one sentence
    # and the log has each one with its traceback
    logged = [r for r in caplog.records if r.exc_info and r.getMessage().startswith("Admin:")]
    assert {r.getMessage() for r in logged} >= {"Admin: showing the results failed"}
    assert all(r.exc_info[0] is RuntimeError for r in logged)


def test_a_refusal_still_reads_as_it_did(app):
    """The library's own sentences pass as they were: only the unforeseen is reworded."""
    results = build_demo(app)
    (d,) = [d for d in results.fns.values() if d.name == "admin_results"]
    out = d.fn(admin_request(app), "no-such-study")
    assert out[:3] == (gr.skip(),) * 3 and "no-such-study" in out[3]
    assert "unexpected" not in out[3]
