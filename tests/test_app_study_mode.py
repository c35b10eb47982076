"""Issue 22 point 1: a study's outputs cannot be reproduced in the public demo (they are
sampled with a hidden per-study seed), a study deployment can serve no demo at all, and the
rater page's title names the study, never the model."""

from __future__ import annotations

import gradio as gr
import pytest
from app_fixtures import admin_request, make_app
from tiny_models import tiny_engine

from annotation_db.fills import PROBLEM_NAMES
from app import studies, study_outputs
from app.main import build_demo
from magnet_model.decoding import FillSettings, MagnetFill, PromptedFill

SYSTEMS = ["magnet", "zero-shot", "five-shot"]


@pytest.fixture(scope="module")
def engine():
    return tiny_engine()


def test_pasting_an_item_into_the_demo_does_not_reproduce_its_outputs(engine, tmp_path):
    app = make_app(tmp_path, engine)
    app.admin_create(admin_request(app), "s", None, 6, SYSTEMS, ["appropriate"], 1, 0, "", 8)
    items, outputs = app.store.items("s")
    assert all(o.decoding["do_sample"] for o in outputs)
    assert all(o.decoding["temperature"] >= 0.7 and o.decoding["top_p"] >= 0.9 for o in outputs)
    assert "seed" not in outputs[0].decoding  # the study's seed is not written anywhere
    seeds = {o.item_key: o.seed for o in outputs}
    assert len(set(seeds.values())) == len(items)  # one seed per item
    same = 0
    for it in items:  # what a rater who pastes the item into the demo gets (greedy)
        demo = app._infill_all(it.text, FillSettings(8))
        for system, r in zip(studies.INFILL_SYSTEMS, demo, strict=True):
            mine = next(o for o in outputs if o.item_key == it.key and o.system == system)
            same += [s.text.strip() for s in r.spans] == list(mine.fills)
    assert same <= len(outputs) // 3, same


def test_a_study_deployment_serves_only_the_rater_page_and_admin(engine, tmp_path):
    demo = build_demo(make_app(tmp_path, engine, demo=False))
    assert [b.label for b in demo.blocks.values() if isinstance(b, gr.Tab)] == ["Admin"]
    names = {d.name for d in demo.fns.values()}
    assert not names & {"infill", "continue_", "search", "vote"}
    assert "rate_submit" in names and "admin_create" in names
    assert "magnet" not in demo.title.lower()
    words = " ".join(
        str(getattr(b, "value", "") or "") for b in demo.blocks.values() if not b.page
    ).lower()
    assert "infill" not in words and "smollm" not in words
    assert build_demo(make_app(tmp_path, engine)).title == "MAGNET"  # the default: the demo


def test_the_rater_pages_title_is_the_studys_name(engine, tmp_path):
    app = make_app(tmp_path, engine)
    app.admin_create(
        admin_request(app), "pilot study", None, 2, SYSTEMS[:2], ["appropriate"], 1, 0, "", 3
    )
    token = app.store.invite("pilot study", "Ada").token
    assert app.rate_open(token).title == "pilot study"
    assert app.rate_load("", None).view.title == "Rating"
    demo = build_demo(app)
    titled = [d for d in demo.fns.values() if d.fn is None and d.js and "document.title" in d.js]
    assert len(titled) == 1


def test_a_study_keeps_the_fill_and_prompt_rules_it_was_made_with(engine, tmp_path):
    app = make_app(tmp_path, engine)
    seen = []
    real = engine.compare_infill_many

    def spy(requests, **kw):
        seen.extend((settings.magnet, settings.prompted) for _, _, settings in requests)
        return real(requests, **kw)

    made_with = MagnetFill(no_repeat=2, close_sentences=False, stop="model", branches=2)
    engine.config.fill = made_with
    engine.config.prompted = PromptedFill("plain-prefix", 4)
    formats = {s: "plain-prefix" for s in SYSTEMS if s.endswith("-shot")}
    rules = (made_with, PromptedFill(formats, 4))
    try:
        engine.compare_infill_many = spy
        app.admin_create(admin_request(app), "g", None, 4, SYSTEMS, ["appropriate"], 1, 0, "", 8)
        _, outputs = app.store.items("g")
        assert outputs and all(o.decoding["fill_no_repeat"] == 2 for o in outputs)
        assert all(o.decoding["fill_close_sentences"] is False for o in outputs)
        assert formats and all(o.decoding["prompt_format"] == formats for o in outputs)
        assert all(o.decoding["prompt_no_copy"] == 4 for o in outputs)
        assert all(o.decoding["fill_stop"] == "model" for o in outputs)
        assert all(o.decoding["fill_branches"] == 2 for o in outputs)
        assert all(o.decoding["fill_sentence_tokens"] == 64 for o in outputs)
        assert seen and set(seen) == {rules}
        # the server's settings change; remaking flagged outputs keeps the study's rules
        engine.config.fill = MagnetFill(no_repeat=0, sentence_tokens=12)
        engine.config.prompted = PromptedFill("plain", 0)
        seen.clear()
        n, _ = study_outputs.regenerate_flagged(
            engine, app._study_compare, app.store, "g", list(PROBLEM_NAMES)
        )
        assert n > 0 and set(seen) == {rules}  # the tiny model's fills are flagged
    finally:
        engine.compare_infill_many = real
        engine.config.fill = engine.config.prompted = None


def test_a_study_from_before_a_fill_rule_is_remade_as_it_was_made(engine):
    old = {"do_sample": True, "temperature": 0.7, "fill_no_repeat": 3, "fill_stop": "join"}
    run = studies.replay(engine, old)
    # before branching: the greedy path; before the sentence rule: none; before a sentence's
    # length: the span cap
    assert run.magnet == MagnetFill(3, False, "join", 1, 0) and "fill_branches" not in old
    assert studies.replay(engine, {**old, "fill_branches": 4}).magnet.branches == 4
    assert (run.do_sample, run.temperature) == (True, 0.7)
    # a draft from before any fill rule was recorded runs with the server's, as before
    plain = studies.replay(engine, {"do_sample": False, "max_span_tokens": 24})
    assert plain.magnet == engine.magnet_fill() and plain.max_span_tokens == 24
