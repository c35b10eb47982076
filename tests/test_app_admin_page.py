"""The Admin page as Gradio wires it: every admin and vote event says its refusal in a text of
the page (off the queue Gradio shows no toast), the rater id field, the status radio, the
Results table, the login by Enter or by the button, and revoking, which asks first. Handlers
and the page's wiring, tiny Llama; what only a browser shows is in test_browser.py."""

from __future__ import annotations

import gradio as gr
import pytest
from app_fixtures import admin_request, component, events

from annotation_db import ItemIn, OutputIn
from app.admin import NOT_CONFIRMED
from app.main import build_demo
from app.outputs import said_in

SYSTEMS = ["magnet", "zero-shot"]


@pytest.fixture
def demo(app):
    return build_demo(app)


def _study(app, name="s", n_items=5):
    items = [ItemIn(f"i{i}", f"text {i} [blank] here .", ["w"]) for i in range(n_items)]
    outs = [
        OutputIn(it.key, s, it.text.replace("[blank]", s), [s]) for it in items for s in SYSTEMS
    ]
    app.store.create_study(name, items, outs, questions=["appropriate", "preference"])


# ------------------------------------------------ refusals off the queue


def test_a_refusal_is_said_in_an_output_and_leaves_the_others_as_they_were():
    def refuse(x):
        raise gr.Error("Pick a study.", print_exception=False)

    out = said_in(refuse, 2, 0)(1)
    assert out[0] == "Pick a study." and out[1] == gr.skip()
    assert said_in(lambda x: [[x]], 1, 1)(1) == ([[1]], "")  # an extra output, emptied
    assert said_in(refuse, 1, 1)(1) == (gr.skip(), "Pick a study.")


def test_every_admin_and_vote_event_says_its_refusal_in_a_text_not_a_bare_error(demo):
    """Off the queue, Gradio shows no toast for a gr.Error and puts a red "Error" pill on each
    output (the tour: the Study list hidden under one, m4; the vote note under one, m9)."""
    never_refuse = {"admin_panel", "admin_plan", "admin_study_status", "admin_demo_choice"}
    admin_and_vote = [
        d
        for d in demo.fns.values()
        if d.fn is not None and (d.name or "").startswith(("admin_", "vote"))
    ]
    assert len(admin_and_vote) > 10
    for d in admin_and_vote:
        if d.name not in never_refuse:
            assert hasattr(d.fn, "says_refusals_in"), d.name
    (create,) = events(demo, "admin_create")
    study_list = component(demo, "Study")
    assert create.fn.says_refusals_in == 0 and create.outputs[1] is study_list


def test_the_rater_id_starts_empty_and_a_missing_one_gets_the_apps_sentence(app, demo):
    """m6: the field showed "0" in a red frame, and Revoke answered Gradio's raw "Value 0 is
    less than minimum value 1."."""
    box = component(demo, "Rater id (see Progress)")
    assert isinstance(box, gr.Textbox) and not box.value
    _study(app)
    app.store.invite("s", "Ada")
    revoke = said_in(app.admin_revoke, 1, 0)
    for typed in (None, "", "0", "x", "1.5"):
        assert revoke(admin_request(app), "s", typed) == (
            "Pick a study and type the rater's id (see Progress)."
        )
    assert "rater 1 (Ada) no longer works" in revoke(admin_request(app), "s", " 1 ")


# ------------------------------------------------ the status radio


def test_the_status_radio_shows_the_picked_studys_status(app, demo):
    radio = component(demo, "Study status")
    assert radio.value is None  # not "closed" whatever the study
    (change,) = events(demo, "admin_study_status")
    assert change.outputs == [radio]
    _study(app, "a")
    _study(app, "b")
    app.store.set_status("b", "closed")
    req = admin_request(app)
    assert app.admin_study_status(req, "a")["value"] == "open"
    assert app.admin_study_status(req, "b")["value"] == "closed"
    assert app.admin_study_status(req, None)["value"] is None
    assert app.admin_study_status(req, "gone")["value"] is None
    assert app.admin_study_status(None, "a") == gr.skip()  # not logged in: nothing shown


# ------------------------------------------------ the Results table


def _rows(app, study):
    return {r[0]: r[1:] for r in app.admin_results(admin_request(app), study).table}


def test_results_follow_their_own_ten_judgment_rule_and_never_show_nan(app):
    _study(app, "none")
    for row in _rows(app, "none").values():
        assert "nan" not in " ".join(map(str, row)).lower(), row
    _study(app, "five")
    for i in range(5):
        token = app.store.invite("five", f"r{i}").token
        item = app.store.next_item(token)
        ans = {o.label: {"appropriate": True} for o in item.outputs}
        app.store.submit(token, item.assignment_id, ans, preference="A")
    rows = _rows(app, "five")
    n, share, interval = rows["MAGNET: judged appropriate"]
    assert n == 5 and share == "100%"
    assert interval == "not enough votes for an interval (n = 5, need 10)"


# ------------------------------------------------ logging in, revoking


def test_enter_and_the_button_log_in_through_the_same_steps(demo):
    """m3: Enter skipped the unfinished-study notice; both now run the login, then the panel
    (which carries the notice)."""
    panels = events(demo, "admin_panel")
    assert len(panels) == 3  # the button, Enter, Log out
    unfinished = panels[0].outputs[-1]
    assert all(p.outputs[-1] is unfinished for p in panels)


def test_revoking_asks_first_and_no_revokes_nothing(app, demo):
    """Tour 4, p10: "Revoke this rater's invite link" acted at once."""
    (revoke,) = events(demo, "admin_revoke")
    assert "window.confirm(" in revoke.js and repr(NOT_CONFIRMED) in revoke.js
    _study(app, "pilot")
    rater = app.store.invite("pilot", "Ada")
    assert app.admin_revoke(admin_request(app), "pilot", NOT_CONFIRMED) == "Nothing was revoked."
    assert app.store.open_session(rater.token)  # the link still works
    assert "no longer works" in app.admin_revoke(admin_request(app), "pilot", str(rater.rater_id))
