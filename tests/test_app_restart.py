"""Issue 22 point 6: an open rater page keeps working across a restart of the server, and the
answers ticked on it survive a reload (they are kept in the browser)."""

from __future__ import annotations

import gradio as gr
import pytest
from app_fixtures import make_app
from tiny_models import tiny_engine

from annotation_db import ItemIn, OutputIn
from app.main import build_demo, server_app_kwargs
from app.rater import MAX_LIKERT, MAX_OUTPUTS, RATER_PATH
from app.rater_page import SAVED_ANSWERS

QUESTIONS = ["appropriate", "likert:fluency", "preference", "comment"]


@pytest.fixture(scope="module")
def engine():
    return tiny_engine()


def study(app) -> str:
    items = [ItemIn(f"i{k}", f"the cat [blank] on the mat {k} .", ["sat"]) for k in range(2)]
    outputs = [
        OutputIn(it.key, system, it.text.replace("[blank]", fill), [fill])
        for it in items
        for system, fill in [("magnet", "sat"), ("zero-shot", "ran")]
    ]
    app.store.create_study("pilot", items, outputs, questions=QUESTIONS, raters_per_item=1)
    return app.store.invite("pilot", "Ada").token


def ticked() -> list:
    """Yes + fluency 4 on both outputs, the others empty; then preference A, a comment."""
    vals = []
    for i in range(MAX_OUTPUTS):
        vals += ["Yes", "4", None] if i < 2 else [None] * (1 + MAX_LIKERT)
    return [*vals, "A", "fine"]


def serve(app):
    from gradio_client import Client

    demo = build_demo(app)
    demo.launch(prevent_thread_lock=True, quiet=True, app_kwargs=server_app_kwargs(app))
    return demo, Client(demo.local_url, verbose=False)


def test_a_page_opened_before_a_restart_submits_after_it(engine, tmp_path):
    """The page was opened by the old process; the new one has no per-session state of it and
    checks the answers against the page's layout: 'A' and '4' must be among its choices."""
    app = make_app(tmp_path, engine)
    token = study(app)
    demo, client = serve(app)
    try:
        opened = client.predict(token, api_name="/rate_open")  # what the open page shows
    finally:
        demo.close()
    shown_item = opened[2]
    restarted = make_app(tmp_path, engine)  # a new process on the same database
    demo, client = serve(restarted)
    try:
        after = client.predict(token, shown_item, *ticked(), api_name="/rate_submit")
    finally:
        demo.close()
    assert "1 done, up to 1 more" in str(after[1])
    p = restarted.store.progress("pilot")
    assert p.judgments_done == 1 and p.raters[0].done == 1  # stored, once


def test_ticked_answers_come_back_after_a_reload(engine, tmp_path):
    app = make_app(tmp_path, engine)
    token = study(app)
    shown = app.rate_open(token).shown_item
    page = app.rate_load(token, None, {"item": shown, "values": ticked()}).view
    assert [s.appropriate["value"] for s in page.slots[:2]] == ["Yes", "Yes"]
    assert [s.likert[0]["value"] for s in page.slots[:2]] == ["4", "4"]
    assert page.preference["value"] == "A" and page.comment["value"] == "fine"
    # answers kept for another item, or values the item does not offer, are not put back
    other = app.rate_load(token, None, {"item": "1.beef", "values": ticked()}).view
    assert other.preference["value"] is None and other.slots[0].appropriate["value"] is None
    bad = ticked()
    bad[-2], bad[1] = "D", "99"  # no output D on this item; no 99 on a 1-5 scale
    odd = app.rate_load(token, None, {"item": shown, "values": bad}).view
    assert odd.preference["value"] is None and odd.slots[0].likert[0]["value"] is None
    assert odd.slots[0].appropriate["value"] == "Yes"
    assert app.rate_load(token, None, {"item": shown, "values": "junk"}).view.shown_item == shown


def test_the_page_keeps_every_answer_in_the_browser_as_it_is_ticked(engine, tmp_path):
    demo = build_demo(make_app(tmp_path, engine))
    page = {b._id: b for b in demo.blocks.values() if getattr(b, "page", None) == RATER_PATH}
    kept = [b for b in page.values() if isinstance(b, gr.BrowserState)]
    assert len(kept) == 1 and kept[0].storage_key == SAVED_ANSWERS["storage_key"]
    assert kept[0].secret == SAVED_ANSWERS["secret"]  # fixed: readable after a restart
    savers = [
        d
        for d in demo.fns.values()
        if d.fn is None and d.js and [o._id for o in d.outputs] == [kept[0]._id]
    ]
    saved_from = {t[0] for d in savers for t in d.targets}
    radios = [b for b in page.values() if isinstance(b, gr.Radio)]
    assert radios and all(r._id in saved_from for r in radios)
    loads = [d for d in demo.fns.values() if d.name == "rate_page_load"]
    assert loads and kept[0]._id in [i._id for i in loads[0].inputs]
