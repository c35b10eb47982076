"""Admin: the paper-protocol preset, resumable output generation, the planner, the report."""

from __future__ import annotations

import json
import re
from dataclasses import replace
from pathlib import Path
from urllib.parse import parse_qs, urlparse

import gradio as gr
import pytest
from app_fixtures import admin_request, component, fake_request, invite, make_app

from annotation_db import PROBLEM_NAMES, ItemIn, OutputIn, revise_outputs, start_draft
from app import studies, study_outputs
from app.main import build_demo
from magnet_model.errors import MagnetError
from magnet_model.passages import SENTENCE_SPAN_TOKENS

VERBS = ("sat", "ran", "flew", "swam")
SPARE = ("red", "blue", "green", "old")  # originals of passages beyond the first four


def _items_file(tmp_path: Path, n: int) -> str:
    path = tmp_path / "items.jsonl"
    rows = [
        {
            "key": f"k{i}",
            "text": f"the cat [blank] on the mat {i} .",
            "original": [(VERBS if i < 4 else SPARE)[i % 4]],
        }
        for i in range(n)
    ]
    path.write_text("\n".join(json.dumps(r) for r in rows))
    return str(path)


def test_paper_preset_fills_the_form(engine, tmp_path):
    app = make_app(tmp_path, engine)
    form = app.admin_preset(admin_request(app))
    assert (form.item_kind, form.n_items, form.raters_per_item) == ("sentence", 100, 3)
    assert form.systems == ["magnet", "zero-shot", "five-shot"]
    assert form.questions == ["appropriate"]
    assert form.n_gold > 0 and form.max_span_tokens == SENTENCE_SPAN_TOKENS >= 48
    assert "contextually appropriate" in form.instructions
    assert "contextually appropriate" in studies.PAPER_QUESTION
    with pytest.raises(gr.Error):
        app.admin_preset(fake_request())
    # the name too (tour p5): a free "paper-N" unless the admin typed one
    assert form.name == "paper-1"
    app.store.create_study(
        "paper-1", [ItemIn("i", "a [blank] b", ["x"])], [OutputIn("i", "magnet", "a x b", ["x"])]
    )
    assert app.admin_preset(admin_request(app), "  ").name == "paper-2"
    assert app.admin_preset(admin_request(app), " mine ").name == "mine"


def test_sentence_study_from_held_out_passages(engine, tmp_path):
    app = make_app(tmp_path, engine)
    msg, _ = app.admin_create(
        admin_request(app),
        "paper",
        None,
        3,
        ["magnet", "five-shot"],
        ["appropriate"],
        3,
        2,
        "",
        4,
        "sentence",
    )
    assert msg.startswith("Created study 'paper': 3 items plus 2 attention checks; systems:")
    items, outputs = app.store.items("paper")
    regular = [i for i in items if not i.is_gold]
    assert all(i.text.count("[blank]") == 1 and i.source.startswith("wikipedia:") for i in regular)
    assert all(len(i.original[0].split()) >= 5 and i.original[0][-1] in ".!?" for i in regular)
    made = [o for o in outputs if not o.gold_role]
    assert len(made) == 6 and all(o.decoding["max_span_tokens"] == 4 for o in made)
    assert app.store.study("paper").raters_per_item == 3


def test_generation_resumes_after_a_restart(engine, tmp_path, monkeypatch):
    upload = _items_file(tmp_path, 6)  # 4 rated, 2 held out: the check's two fills
    app = make_app(tmp_path, engine)
    calls, made = [], []
    real = engine.compare_infill_many

    def dies_mid_batch(requests, *args, **kw):
        """The process stops in the middle of a batch, after its fifth output."""
        calls.append([(text, list(systems)) for text, systems, _ in requests])
        for out in real(requests, *args, **kw):
            if len(made) == 5:
                raise MagnetError("the process was stopped")
            made.append(out)
            yield out

    monkeypatch.setattr(engine, "compare_infill_many", dies_mid_batch)
    args = (["magnet", "zero-shot"], ["appropriate"], 2, 1, "Be kind", 3)
    with pytest.raises(gr.Error, match="stopped"):
        app.admin_create(admin_request(app), "long", upload, 4, *args)
    assert "long" in app.admin_unfinished(admin_request(app))
    assert [s.name for s in app.store.list_studies()] == []  # no half-made study
    assert len(calls) == 1 and len(calls[0]) == 4  # the four items in one batch

    restarted = make_app(tmp_path, engine)  # same database, a new process
    calls.clear()
    made.append(None)  # no more deaths
    msg, _ = restarted.admin_create(
        admin_request(restarted), "long", None, 2, ["magnet"], ["appropriate"], 1, 0, "", 3
    )
    # what was made before the stop is kept; only the 3 missing outputs are made
    assert "Resumed: 5 outputs" in msg and "4 items plus 1 attention check" in msg
    assert sum(len(systems) for _, systems in calls[0]) == 3 and len(calls) == 1
    info = restarted.store.study("long")
    assert info.raters_per_item == 2 and info.instructions == "Be kind"  # settings kept
    assert restarted.admin_unfinished(admin_request(restarted)) == ""


def test_planner_in_the_form(engine, tmp_path):
    app = make_app(tmp_path, engine)
    text = app.admin_plan(0.62, 0.54, 3, 0.3)
    assert "318 items x 3 raters" in text and "80% power" in text
    assert "This form's 100 items: power 35%" in app.admin_plan(0.62, 0.54, 3, 0.3, 100)
    assert "between 0 and 1" in app.admin_plan(0.62, 1.5, 3, 0.3)


def test_a_planner_rate_out_of_range_is_said_in_the_planners_line(app):
    """p11: Gradio's "Value 1.5 is greater than maximum value 1." and a stale planner line."""
    assert component(build_demo(app), "Expected rate, system 1").maximum is None
    assert app.admin_plan(1.5, 0.5, 3).startswith("Planner: expected rate 1 must be between")


def test_the_forms_attention_checks_are_the_rules_and_fewer_are_costed(engine, tmp_path):
    """The form starts with the checks the exclusion rule needs per rater (not 2, with which
    most raters are undecided), and a smaller number says what it catches."""
    from app.studies import FORM_CHECKS, FORM_PLAN

    app = make_app(tmp_path, engine)
    assert FORM_CHECKS == FORM_PLAN.checks_per_rater >= 3 and FORM_PLAN.reached
    assert "attention checks: each" not in app.admin_plan(0.62, 0.54, 3, 0.3, 100, FORM_CHECKS)
    two = app.admin_plan(0.62, 0.54, 3, 0.3, 100, 2)
    rule = FORM_PLAN.rule
    assert (
        f"This form's 2 attention checks: each rater meets 2, catching "
        f"{rule.detection(2):.0%} of careless raters" in two
    )
    assert rule.detection(2) < rule.power and "undecided" in two
    assert "nobody can be excluded" in app.admin_plan(0.62, 0.54, 3, 0.3, 100, 0)


def test_report_download(engine, tmp_path):
    app = make_app(tmp_path, engine)
    app.admin_create(admin_request(app), "rep-1", _items_file(tmp_path, 2), 2, ["magnet"],
                     ["appropriate"], 1, 0, "", 3)  # fmt: skip
    link = app.admin_report(admin_request(app), "rep-1", True)
    assert "Download rep-1.html" in link and "works once" in link
    ticket = re.search(r"\]\(admin-files/([\w-]+)\)", link).group(1)
    page = app.downloads.take(ticket).read_text(encoding="utf-8")
    assert "Study report: rep-1" in page and "Example items" in page
    with pytest.raises(gr.Error, match="No study"):
        app.admin_report(admin_request(app), "nope", True)


def test_admin_says_how_many_outputs_are_empty_or_overlong(engine, tmp_path, monkeypatch):
    """An empty fill is stored (it is the system's output) but never silently: the creation
    message and the study's progress count them per system."""
    app = make_app(tmp_path, engine)

    def zero_shot_says_nothing(system, r):
        return (
            replace(r, spans=[replace(s, text="") for s in r.spans]) if system == "zero-shot" else r
        )

    _each_output(app, monkeypatch, zero_shot_says_nothing)
    msg, _ = app.admin_create(admin_request(app), "empties", _items_file(tmp_path, 2), 2,
                              ["magnet", "zero-shot"], ["appropriate"], 1, 0, "", 3)  # fmt: skip
    assert "zero-shot: 2 of 2 flagged (empty 2)" in msg and "magnet: " in msg
    assert "Check them below" in msg
    summary = app.admin_progress(admin_request(app), "empties").summary
    assert "zero-shot: 2 of 2 flagged (empty 2)" in summary


def _each_output(app, monkeypatch, change):
    """Every output a study makes (or makes again) passes through change(system, result)."""
    real = app.compare_infill_many

    def compare(requests):
        for i, j, r in real(requests):
            yield i, j, change(requests[i][1][j], r)

    monkeypatch.setattr(app, "compare_infill_many", compare)


def _chatty(app, monkeypatch, replies: list[str]):
    """zero-shot answers each output with the next of replies, in the order they are made."""
    calls = iter(replies)

    def change(system, r):
        if system == "zero-shot":
            r = replace(r, spans=[replace(s, text=next(calls)) for s in r.spans])
        return r

    _each_output(app, monkeypatch, change)


def test_flagged_outputs_are_shown_made_again_or_dropped_before_raters(engine, tmp_path,
                                                                       monkeypatch):  # fmt: skip
    """Before inviting, the admin sees per system the outputs' problems with examples (here
    chat replies), makes them again, drops what is still flagged; once a rater is invited
    the outputs no longer change (browser tour s4, N-M2)."""
    app = make_app(tmp_path, engine)
    chat = "I'm ready to help. What's your next question?"
    _chatty(app, monkeypatch, [chat, "SmolLM.", chat, "a fine fill", "SmolLM.", "a fill"])
    app.admin_create(admin_request(app), "chatty", _items_file(tmp_path, 3), 3,
                     ["magnet", "zero-shot"], ["appropriate"], 1, 0, "", 3)  # fmt: skip
    report = app.admin_check(admin_request(app), "chatty")
    assert "| Base, zero-shot prompt | 3 | 3 |" in report  # 3 outputs, 3 flagged
    assert "**chat** (3)" in report and "SmolLM." in report and "I'm ready to help" in report
    assert app.admin_check(fake_request(), "chatty") == ""  # nothing without the login

    done = app.admin_regenerate(admin_request(app), "chatty", ["chat"])
    assert "Made 3 flagged outputs again; 1 of them still" in done.message
    chats = study_outputs.flagged(app.store, "chatty", ["chat"])
    assert [f.fill for f in chats] == ["SmolLM."]
    assert "**chat** (1)" in done.report
    asked = app.admin_drop(admin_request(app), "chatty", ["chat"])
    assert asked.message.startswith("Dropping would remove 1 of 3 items, leaving 2 items")
    assert asked.button["value"] == "Yes, drop 1 item" and asked.pending
    dropped = app.admin_drop(admin_request(app), "chatty", ["chat"], asked.pending)
    assert f"Dropped 1 item ({chats[0].item_key}); 2 items to rate left." == dropped.message
    assert study_outputs.flagged(app.store, "chatty", ["chat"]) == []
    assert dropped.pending == "" and dropped.button["value"] == "Drop items with flagged outputs"

    invite(app, "chatty", "Ann")
    for act in (app.admin_drop, app.admin_regenerate):
        with pytest.raises(gr.Error, match="1 invited rater"):
            act(admin_request(app), "chatty", ["empty"])


def test_dropping_flagged_items_says_what_would_go_and_asks_first(engine, tmp_path,
                                                                  monkeypatch):  # fmt: skip
    """The first click says how many items would go of how many, per problem and system, and
    drops nothing; only the same click again, with what was shown, drops them. If the flagged
    set changed meanwhile, the new one is shown and asked about (browser tour s5, M1: 97 of 100
    items went in one click)."""
    app = make_app(tmp_path, engine)
    _chatty(app, monkeypatch, ["SmolLM.", "a fill", "I'm ready to help.", "a fill", "fine"])
    app.admin_create(admin_request(app), "drops", _items_file(tmp_path, 4), 4,
                     ["magnet", "zero-shot"], ["appropriate"], 1, 0, "", 3)  # fmt: skip
    before = app.store.study("drops").n_items
    asked = app.admin_drop(admin_request(app), "drops", ["chat"])
    assert asked.message.startswith(f"Dropping would remove 2 of {before} items")
    assert (
        "chat: Base, zero-shot prompt 2" in asked.message and "Nothing was dropped" in asked.message
    )
    assert asked.button["value"] == "Yes, drop 2 items"
    assert app.store.study("drops").n_items == before  # nothing dropped yet
    # a made-up or stale answer is a new question, not a drop
    again = app.admin_drop(admin_request(app), "drops", ["chat"], "made-up")
    assert again.pending == asked.pending and app.store.study("drops").n_items == before
    wider = app.admin_drop(admin_request(app), "drops", ["chat", "empty"], asked.pending)
    assert wider.message.startswith("Dropping would remove") and wider.pending != asked.pending
    assert app.store.study("drops").n_items == before
    done = app.admin_drop(admin_request(app), "drops", ["chat"], asked.pending)
    assert done.message.startswith("Dropped 2 items") and app.store.study("drops").n_items == 2
    assert app.drop_reset() == (
        "",
        {"value": "Drop items with flagged outputs", "__type__": "update"},
    )


def test_a_drop_waits_for_no_remake_and_never_acts_on_a_stale_preview(engine, tmp_path,
                                                                    monkeypatch):  # fmt: skip
    """A drop confirmed while the flagged outputs are being made again is refused (the remake
    would then fail on dropped items); a preview of outputs made again since asks again; two
    admins confirming the same drop get one drop and one sentence saying nothing was dropped."""
    app = make_app(tmp_path, engine)
    _chatty(app, monkeypatch, ["SmolLM.", "a fill", "I'm ready to help.", "a fill"] + ["ok."] * 9)
    app.admin_create(admin_request(app), "busy", _items_file(tmp_path, 4), 4,
                     ["magnet", "zero-shot"], ["appropriate"], 1, 0, "", 3)  # fmt: skip
    before = app.store.study("busy").n_items
    asked = app.admin_drop(admin_request(app), "busy", ["chat"])
    app.remaking.add("busy")  # a remake of this study runs now
    with pytest.raises(gr.Error, match="making its flagged outputs again"):
        app.admin_drop(admin_request(app), "busy", ["chat"], asked.pending)
    app.remaking.discard("busy")
    assert app.store.study("busy").n_items == before
    # the flagged outputs are made again (still flagged, other texts): the preview is stale
    _, outputs = app.store.items("busy")
    flagged = {(f.item_key, f.system) for f in study_outputs.flagged(app.store, "busy", ["chat"])}
    remade = [
        replace(o, text=o.text + " ", fills=["I'm ready to help you."])
        for o in outputs
        if (o.item_key, o.system) in flagged
    ]
    revise_outputs(app.store, "busy", replace=remade)
    stale = app.admin_drop(admin_request(app), "busy", ["chat"], asked.pending)
    assert stale.message.startswith("Dropping would remove 2") and stale.pending != asked.pending
    assert app.store.study("busy").n_items == before
    # two admins confirm the same preview: one drop, then one clear sentence
    first = app.admin_drop(admin_request(app), "busy", ["chat"], stale.pending)
    second = app.admin_drop(admin_request(app), "busy", ["chat"], stale.pending)
    assert first.message.startswith("Dropped 2 items") and app.store.study("busy").n_items == 2
    assert "nothing was dropped" in second.message and "Dropped" not in second.message


def test_the_first_invite_to_a_study_with_flagged_outputs_asks_first(engine, tmp_path,
                                                                     monkeypatch):  # fmt: skip
    """Inviting freezes a study's outputs: with outputs flagged, the first invite says how
    many and of which problems and invites nobody; the same click again invites (security
    review s5, L2). A study with nothing flagged invites at once."""
    app = make_app(tmp_path, engine)
    _chatty(app, monkeypatch, ["SmolLM.", "a fill", "a fill"])
    app.admin_create(admin_request(app), "flag", _items_file(tmp_path, 3), 3,
                     ["magnet", "zero-shot"], ["appropriate"], 1, 0, "", 3)  # fmt: skip
    asked = app.admin_invite(admin_request(app), "flag", "Ann")
    n = len(study_outputs.flagged(app.store, "flag", PROBLEM_NAMES))
    assert (
        asked.pending
        and f"{n} output" in asked.message
        and "chat: Base, zero-shot" in asked.message
    )
    assert "Nobody was invited yet" in asked.message
    assert asked.button["value"] == f"Invite anyway ({n} flagged outputs)"
    assert app.store.study("flag").n_raters == 0
    made = app.admin_invite(admin_request(app), "flag", "Ann", asked.pending)
    assert [r[0] for r in made.rows] == ["Ann"] and made.pending == ""
    assert made.button["value"] == "Create invite links for 'flag'"
    more = app.admin_invite(admin_request(app), "flag", "Bob")  # frozen now: no question
    assert [r[0] for r in more.rows] == ["Bob"]
    assert app.invite_reset("flag") == ("", app.invite_label("flag"))


def test_a_remake_and_an_invite_of_one_study_exclude_each_other(engine, tmp_path, monkeypatch):
    """While a study's flagged outputs are made again, an invite to it is refused with why
    (it would freeze the outputs and throw the remake away), and a second remake is refused;
    other studies are not held up (browser tour s5, n3)."""
    app = make_app(tmp_path, engine)
    _chatty(app, monkeypatch, ["SmolLM."] * 2 + ["a fill"] * 10)
    app.admin_create(admin_request(app), "busy", _items_file(tmp_path, 2), 2,
                     ["magnet", "zero-shot"], ["appropriate"], 1, 0, "", 3)  # fmt: skip
    app.remaking.add("busy")  # as admin_regenerate holds it while it runs
    with pytest.raises(gr.Error, match="making its flagged outputs again: invite raters once"):
        app.admin_invite(admin_request(app), "busy", "Ann")
    with pytest.raises(gr.Error, match="already making its flagged outputs again"):
        app.admin_regenerate(admin_request(app), "busy", ["chat"])
    assert app.store.study("busy").n_raters == 0
    app.remaking.discard("busy")
    done = app.admin_regenerate(admin_request(app), "busy", ["chat"])
    assert "Made 2 flagged outputs again" in done.message and app.remaking == set()
    assert invite(app, "busy", "Ann").rows


def test_invites_name_their_study_and_every_link_opens(engine, tmp_path):
    """Invites are refused for the demo's vote store and for a study still generating; the
    links made name their study, and each one opens that study's rater page (browser tour s4,
    N-M3: links made for the covered dropdown's "arena" never opened)."""
    app = make_app(tmp_path, engine)
    app.admin_create(admin_request(app), "real", _items_file(tmp_path, 2), 2, ["magnet"],
                     ["appropriate"], 3, 0, "", 3)  # fmt: skip
    outs = [OutputIn("", "magnet", "The cat sat."), OutputIn("", "zero-shot", "The cat ran.")]
    app.store.record_blind_vote("The cat ___.", outs, "A")  # the arena exists from now on
    assert app.admin_studies(admin_request(app))["value"] == "real"  # never the arena
    with pytest.raises(gr.Error, match="demo's blind votes"):
        app.admin_invite(admin_request(app), "arena", "Zed")
    assert "No invite links for 'arena'" in app.invite_label("arena")["value"]
    assert app.invite_label("real")["value"] == "Create invite links for 'real'"
    start_draft(app.store, "busy", [ItemIn("b", "x [blank] y", ["w"])], ["magnet"], {})
    with pytest.raises(gr.Error, match="still generating"):
        app.admin_invite(admin_request(app), "busy", "Amy")

    made = invite(app, "real", "Ann\nBob\nCy")
    assert "3 invite links for the study **real**" in made.message
    assert [r[0] for r in made.rows] == ["Ann", "Bob", "Cy"]
    for name, link in made.rows:  # open each link as the rater's browser does
        query = parse_qs(urlparse(link).query)
        page = app.rate_load(None, fake_request(**{k: v[0] for k, v in query.items()}))
        assert page.view.title == "real" and f"rater: {name}" in page.view.head["value"]
        assert page.view.shown_item  # an item to rate, not "not valid"


def test_while_a_study_generates_the_study_list_and_invites_stay_usable(engine, tmp_path):
    """The create's progress bar covered the Study list, so invites went to whatever it held
    (browser tour s4, N-M3): the bar covers the create's message alone, and the invite button
    follows the picked study."""
    demo = build_demo(make_app(tmp_path, engine))
    (create,) = [d for d in demo.fns.values() if d.name == "admin_create"]
    assert [c.elem_id for c in create.show_progress_on] == ["admin-create-msg"]
    labels = [d for d in demo.fns.values() if d.name == "invite_reset"]
    assert labels and {d.outputs[1].elem_id for d in labels} == {"admin-invite"}
    assert all([c.elem_id for c in d.inputs] == ["admin-study"] for d in labels)
    (invite,) = [d for d in demo.fns.values() if d.name == "admin_invite"]
    assert invite.inputs[0].elem_id == "admin-study"


def test_an_upload_says_before_create_what_plan_it_allows_and_sets_the_form(app, tmp_path):
    """8 uploaded items and the form's 7 checks: the form said nothing until Create refused
    (browser tour s6, n3). Now the upload itself says what it allows and sets the form to the
    largest valid plan, which Create then makes."""
    path = tmp_path / "eight.jsonl"
    words = ["sat", "slept", "ran", "sang", "jumped", "waited", "ate", "hid"]
    rows = [
        {"key": f"u{i}", "text": f"Item {i}: the cat [blank] by the door {i} .", "original": [w]}
        for i, w in enumerate(words)
    ]
    path.write_text("\n".join(json.dumps(r) for r in rows))
    systems = ["magnet", "zero-shot", "five-shot"]
    n_items, n_gold, said = app.admin_upload(admin_request(app), str(path), systems, 7)
    assert (n_items["value"], n_gold["value"]) == (2, 2)  # 2 rated + 2 checks x 3 fills
    assert "The file gives 8 usable items" in said and "2 items and 2 checks" in said
    assert "or rate all 8 with 0 checks" in said
    assert studies.upload_plan(
        [ItemIn(r["key"], r["text"], r["original"]) for r in rows], 1, 3
    ) == studies.UploadPlan(8, 5, 1, 1)  # enough for the checks asked: kept
    # what the form now holds is a study Create makes
    msg, _ = app.admin_create(admin_request(app), "up", str(path), 2, systems,
                              ["appropriate"], 1, 2, "", 3)  # fmt: skip
    assert msg.startswith("Created study 'up': 2 items plus 2 attention checks")
    # not an admin: nothing read, nothing said
    assert app.admin_upload(fake_request(), str(path), systems, 7)[2] == ""
