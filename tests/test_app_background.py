"""Issue 22 point 5: long jobs do not block visitors. Input checks run at once, when a call
joins the queue (issue 29: in Gradio's validator of each model call); a study generates in
the background, letting demo calls through between its items; an admin who comes back sees
it generating, never "stopped ... resume"."""

from __future__ import annotations

import json
import threading
import time

import gradio as gr
import pytest
from app_fixtures import admin_request, make_app
from tiny_models import tiny_engine

from app.jobs import ModelGate
from app.main import build_demo


@pytest.fixture(scope="module")
def engine():
    return tiny_engine()


def test_input_checks_run_at_join_in_the_model_calls_validators(engine, tmp_path):
    app = make_app(tmp_path, engine)
    demo = build_demo(app)
    deps = {d._id: d for d in demo.fns.values()}
    for model_call in ("infill", "continue_", "search"):
        (dep,) = [d for d in deps.values() if d.name == model_call]
        # Gradio runs the validator when the call joins the queue: its checks never wait for
        # the model, and its sentence is said on the input (no "Error" pill: tour m13)
        assert dep.validator.__name__ == f"{model_call.rstrip('_')}_admit"
        assert dep.concurrency_id == "model" and dep.queue is not False
    (create,) = [d for d in deps.values() if d.name == "admin_create"]
    assert create.concurrency_id != "model"  # a study is not generated in the model's queue
    with engine.runner.lock:  # the model busy in another call: the checks do not wait for it
        done = []
        worker = threading.Thread(target=lambda: done.append(_refused(app.infill_admit, "")))
        worker.start()
        worker.join(5)
        assert done == ["The text is empty."]
        assert _refused(app.continue_admit, "  ") == "The prompt is empty."
        assert _refused(app.search_admit, "") == "The query is empty."


def _refused(validator, *args) -> str | None:
    bad = [v["message"] for v in validator(*args) if not v["is_valid"]]
    return bad[0] if bad else None


def _items(tmp_path, n: int) -> str:
    path = tmp_path / "items.jsonl"
    rows = [{"key": f"k{i}", "text": f"the cat [blank] on the mat {i} .", "original": ["sat"]}
            for i in range(n)]  # fmt: skip
    path.write_text("\n".join(json.dumps(r) for r in rows))
    return str(path)


def test_a_study_generates_in_the_background_and_lets_demo_calls_through(
    engine, tmp_path, monkeypatch
):
    app = make_app(tmp_path, engine)
    release, stuck = threading.Event(), threading.Event()
    real = engine.compare_infill_many

    def slow_study_items(requests, **kw):  # the study's first batch takes "minutes"
        if any("mat" in text for text, _, _ in requests) and not release.is_set():
            stuck.set()
            assert release.wait(60)
        yield from real(requests, **kw)

    monkeypatch.setattr(engine, "compare_infill_many", slow_study_items)
    args = (
        admin_request(app),
        "big",
        _items(tmp_path, 4),
        4,
        ["magnet", "zero-shot"],
        ["appropriate"],
        1,
        0,
    )
    results = []

    def admin_tab():
        results.append(app.admin_create(*args, "", 3))

    first = threading.Thread(target=admin_tab)  # the admin clicks create, then closes the tab
    first.start()
    assert stuck.wait(60)
    note = app.admin_unfinished(admin_request(app))
    assert note == "big: generating in the background, 0/8 outputs." and "Stopped" not in note
    t0 = time.perf_counter()
    view = app.infill("the dog [blank] in the river .", max_span=3)  # a visitor meanwhile
    assert time.perf_counter() - t0 < 30 and "Unavailable" not in str(view.columns[0])
    second = threading.Thread(target=admin_tab)  # create again while it runs: attaches to it
    second.start()
    time.sleep(0.3)
    assert app.study_jobs.running("big") and second.is_alive()
    release.set()
    first.join(120)
    second.join(120)
    assert len(results) == 2 and results[0][0] == results[1][0]
    assert results[0][0].startswith("Created study 'big': 4 items")
    assert [s.name for s in app.store.list_studies()] == ["big"]
    assert app.admin_unfinished(admin_request(app)) == ""


def test_a_stopped_generation_says_why_and_how_to_resume(engine, tmp_path, monkeypatch):
    app = make_app(tmp_path, engine)

    def fails(requests, **kw):
        raise RuntimeError("CUDA out of memory")

    monkeypatch.setattr(engine, "compare_infill_many", fails)
    args = (
        admin_request(app),
        "oom",
        _items(tmp_path, 2),
        2,
        ["magnet"],
        ["appropriate"],
        1,
        0,
        "",
        3,
    )
    with pytest.raises(gr.Error, match=r"stopped: CUDA out of memory\. .* to resume"):
        app.admin_create(*args)
    note = app.admin_unfinished(admin_request(app))
    assert (
        note.startswith("Stopped while generating") and "oom (stopped: CUDA out of memory)" in note
    )


def test_a_background_step_waits_while_a_visitor_call_runs():
    gate, order = ModelGate(max_wait_s=10), []
    with gate.interactive():
        step = threading.Thread(target=lambda: (gate.background_turn(), order.append("study")))
        step.start()
        time.sleep(0.2)
        order.append("visitor done")
    step.join(5)
    assert order == ["visitor done", "study"]
    ModelGate(max_wait_s=0.05).background_turn()  # nobody there: no wait
