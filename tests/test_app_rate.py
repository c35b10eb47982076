"""Handler-level tests of the Rate and Admin tabs: invite link -> blind items -> ratings in the
database; admin login, study creation with outputs made ahead, invites, progress, results,
export and backup."""

from __future__ import annotations

import json
import re
from functools import partial

import app_fixtures
import gradio as gr
import pytest
from app_fixtures import (
    admin_request,
    component,
    downloaded,
    events,
    fake_request,
    form_answers,
    invite,
    make_app,
)
from tiny_models import tiny_engine

from annotation_db import ItemIn, OutputIn
from annotation_db.questions import parse_questions
from app import rater_page
from app.main import build_demo
from app.rater import MAX_LIKERT, MAX_OUTPUTS
from app.rating_form import missing_answers

QUESTIONS = ("appropriate", "likert:fluency", "preference", "comment")
small_study = partial(app_fixtures.small_study, questions=QUESTIONS)


def fills_of(markup: str) -> list[str]:
    return re.findall(r'<mark class="fill"[^>]*>([^<]*)', markup)


def answers(n_out: int, appropriate=("Yes", "No"), fluency=("4", "2")) -> list:
    """The form's values with its first n_out outputs answered (appropriate, fluency)."""
    return form_answers(appropriate[:n_out], fluency[:n_out])


def test_invite_link_opens_blind_item_and_rating_lands_in_db(app):
    token = small_study(app)
    page = app.rate_load("", fake_request(token=token))
    v = page.view
    assert (
        page.token == token
        and "Ada" in v.head["value"]
        and v.status.startswith("0 done, up to 2 more")
    )
    assert "[blank]" in v.item_text["value"] and v.submit["visible"] is True
    assert len(v.slots) == MAX_OUTPUTS and all(len(s.likert) == MAX_LIKERT for s in v.slots)
    shown = [s for s in v.slots if s.visible["visible"]]
    assert [s.title for s in shown] == ["Output A", "Output B"]
    assert all(
        s.appropriate["visible"] and s.likert[0]["visible"] and not s.likert[1]["visible"]
        for s in shown
    )
    assert v.preference["choices"] == [
        ("Output A", "A"),
        ("Output B", "B"),
        ("A tie", "tie"),
        ("All are bad", "all_bad"),
    ]  # people read words, the store gets the codes
    blob = json.dumps(v.values(), default=str)
    assert "magnet" not in blob and "zero-shot" not in blob  # nothing names a system
    fills = [f for s in shown for f in fills_of(s.shown)]
    assert sorted(fills) == ["ran", "sat"]

    nxt = app.rate_submit(token, v.shown_item, *answers(2), "A", "  looks fine ")
    assert nxt.status.startswith("1 done, up to 1 more") and nxt.shown_item != v.shown_item
    rows = app.store.progress("pilot").raters
    assert rows[0].done == 1
    done = app.rate_submit(token, nxt.shown_item, *answers(2), "tie", "")
    assert "all done" in done.status and done.submit["visible"] is False
    assert done.item_text["visible"] is False and done.comment["visible"] is False  # no empty box
    results = app.admin_results(admin_request(app), "pilot")
    table, res, plot = results.table, results.results, results.plot
    shares = {r["system"]: r["appropriate"]["share"] for r in res["systems"]}
    assert set(shares) == {"magnet", "zero-shot"} and sum(shares.values()) == 1.0  # A yes, B no
    assert plot.axes[0].get_ylim() == (0, 1)
    rows = {r[0]: r[1:] for r in table}  # n on every row; two votes: no interval
    assert [rows[f"{t}: judged appropriate"][0] for t in ("MAGNET", "Base, zero-shot prompt")] == [
        2,
        2,
    ]
    n, won, interval = rows["MAGNET beats Base, zero-shot prompt (ties count half)"]
    assert n == 2.0 and won in ("75%", "25%")  # A chosen once, then a tie
    assert interval == "not enough votes for an interval (n = 2, need 10)"
    assert rows["MAGNET: fluency (mean)"][2].startswith("not enough votes")
    out = downloaded(app, app.admin_export(admin_request(app), "pilot", "jsonl"))
    lines = [json.loads(x) for x in out.read_text(encoding="utf-8").splitlines()]
    assert len(lines) == 4 and {r["comment"] for r in lines} == {"looks fine", None}


def test_resume_shows_the_same_unanswered_item(app):
    token = small_study(app)
    first = app.rate_open(token)
    again = app.rate_load(token, None).view
    assert again.shown_item == first.shown_item
    assert again.item_text["value"] == first.item_text["value"]


def test_rate_errors_are_readable(app):
    token = small_study(app)
    with pytest.raises(gr.Error, match="token|invite"):
        app.rate_open("not-a-token")
    with pytest.raises(gr.Error):
        app.rate_open("")
    aid = app.rate_open(token).shown_item
    missing = answers(2, appropriate=(None, "No"))
    with pytest.raises(gr.Error, match=r"Please answer: output A \(appropriate\?\)\."):
        app.rate_submit(token, aid, *missing, "A", "")
    with pytest.raises(gr.Error, match=r"output B \(fluency\) and which output is best\."):
        app.rate_submit(token, aid, *answers(2, fluency=("3", None)), None, "")
    with pytest.raises(gr.Error):
        app.rate_submit(token, aid, *answers(2), "A", "x" * 3000)  # comment too long
    assert app.store.progress("pilot").judgments_done == 0


def test_a_bad_link_gets_one_capitalised_sentence_and_no_empty_boxes(app):
    demo = build_demo(app)
    for label in ("Study and instructions", "Text with a blank"):
        assert component(demo, label).visible is False  # until a link opens
    with pytest.raises(gr.Error) as e:
        app.rate_open("not-a-token")
    assert e.value.message.startswith("This invite token is not valid")
    assert app.rate_open(small_study(app)).head["visible"] is True


def test_submit_shows_its_progress_on_the_button_only(app):
    """p7: each "Submit and next" covered every block with a spinner and a "0.1s" timer."""
    demo = build_demo(app)
    (submit,) = events(demo, "rate_submit")
    (button,) = [b for b in demo.blocks.values() if getattr(b, "elem_id", None) == "rate-submit"]
    assert [c._id for c in submit.show_progress_on] == [button._id]


def test_missing_answers_names_what_is_missing_in_one_sentence():
    qs = parse_questions(["appropriate", "likert:fluency", "preference", "comment"])
    full = {"A": {"appropriate": True, "fluency": 4}, "B": {"appropriate": False, "fluency": 2}}
    assert missing_answers(qs, full, "A") is None
    gaps = {"A": {"appropriate": None, "fluency": None}, "B": {"appropriate": True, "fluency": 1}}
    assert missing_answers(qs, gaps, None) == (
        "Please answer: output A (appropriate? and fluency) and which output is best."
    )
    assert missing_answers(parse_questions(["comment"]), {"A": {}}, None) is None


def test_rater_page_shows_a_refusal_inline_and_keeps_every_answer(app):
    token = small_study(app)
    aid = app.rate_open(token).shown_item
    n_view = len(app.rate_open(token).values())
    submit = rater_page._inline(app.rate_submit, n_view)
    out = submit(token, aid, *answers(2, appropriate=("Yes", None)), "A", "my note")
    message, rest = out[-1], out[:-1]
    assert message.count("Please answer") == 1 and "output B (appropriate?)" in message
    assert 'role="alert"' in message and len(rest) == n_view
    assert all(x == gr.skip() for x in rest)  # nothing the rater entered is reset
    assert app.store.progress("pilot").judgments_done == 0
    ok = submit(token, aid, *answers(2), "A", "")
    assert ok[:-1] == app.rate_load(token, None).view.values() and ok[-1] == ""
    assert app.rate_open(token).status.startswith("1 done, up to 1 more")
    assert submit.__name__ == "rate_submit"


def test_rate_load_without_token_asks_for_one(app):
    page = app.rate_load("", fake_request())
    assert page.token == "" and "invite link" in page.view.status


# ---------------------------------------------------------------- Admin


def test_admin_login_and_every_admin_call_needs_it(app):
    login = app.admin_login("wrong")
    assert login.authorized is False and login.session is None
    assert login.message == "Wrong password."
    out = app.admin_panel(login.message, fake_request())
    assert out.panel["visible"] is False and out.logout["visible"] is False  # no "Log out" yet
    small_study(app)
    login = app.admin_login("s3cret")
    assert login.authorized is True and login.session
    req = fake_request()
    req.cookies = {"magnet_admin": login.session}
    panel = app.admin_panel(login.message, req)
    assert panel.panel["visible"] is True and panel.studies["choices"] == ["pilot"]
    assert panel.logout["visible"] is True
    for call in (
        lambda: app.admin_studies(fake_request()),
        lambda: app.admin_progress(fake_request(), "pilot"),
        lambda: app.admin_backup(fake_request()),
        lambda: app.admin_export(fake_request(), "pilot", "csv"),
    ):
        with pytest.raises(gr.Error, match="Log in"):
            call()


def test_admin_without_password_setting_refuses_even_true(engine, tmp_path):
    app = make_app(tmp_path, engine, admin_password=None)
    assert app.admin_login("").authorized is False
    with pytest.raises(gr.Error):
        app.admin_backup(admin_request(app))


def test_admin_creates_study_from_upload_invites_and_reports(app, tmp_path):
    items = tmp_path / "items.jsonl"
    rows = [
        {"key": "a", "text": "the cat [blank] on the mat .", "original": ["sat"]},
        {"key": "b", "text": "the dog ran to the river and the bird flew over the old tree ."},
        {"key": "c", "text": "the king [blank] in the city .", "original": ["was"]},
        # beyond the 3 rated items: passages for the attention check
        {"key": "d", "text": "a bird [blank] over the old tree .", "original": ["flew"]},
        {"key": "e", "text": "the sun [blank] behind the hill .", "original": ["set"]},
    ]
    items.write_text("\n".join(json.dumps(r) for r in rows))
    msg, dropdown = app.admin_create(
        admin_request(app),
        "study1",
        str(items),
        3,
        ["magnet", "zero-shot"],
        ["appropriate"],
        2,
        1,
        "Be kind",
        3,
    )
    assert msg.startswith("Created study 'study1': 3 items plus 1 attention check; systems: MAGNET")
    assert dropdown["value"] == "study1"
    created, outputs = app.store.items("study1")
    regular = [o for o in outputs if not o.gold_role]
    assert {o.system for o in regular} == {"magnet", "zero-shot"} and len(regular) == 6
    auto = next(i for i in created if i.key == "b")
    assert "[blank]" in auto.text and auto.original  # a span was blanked automatically
    assert any(i.is_gold for i in created)

    links = invite(app, "study1", "Ann\n\nBob\n").rows
    assert [r[0] for r in links] == ["Ann", "Bob"]
    assert all(r[1].startswith("http://demo.test:7860/rate?token=") for r in links)
    token = links[0][1].split("token=")[1]
    for n in (1, 2):  # two items: at least one is not the (single) attention check
        v = app.rate_open(token)
        n_shown = len([s for s in v.slots if s.visible["visible"]])
        app.rate_submit(token, v.shown_item, *answers(n_shown), None, "")
        progress = app.admin_progress(admin_request(app), "study1")
        summary, raters = progress.summary, progress.rows
        assert "judgments" in summary and raters[0][1:3] == ["Ann", n]
    regular_rated = raters[0][2] - raters[0][5]  # done minus attention checks done
    res = app.admin_results(admin_request(app), "study1").results
    assert res["study"] == "study1" and res["progress"]["judgments_done"] == regular_rated >= 1
    assert {r["system"] for r in res["systems"]} == {"magnet", "zero-shot"}
    csv_path = downloaded(app, app.admin_export(admin_request(app), "study1", "csv"))
    assert csv_path.read_text(encoding="utf-8").count("\n") >= 2
    backup = downloaded(app, app.admin_backup(admin_request(app)))
    assert backup.name.endswith(".sqlite3") and (tmp_path / "db.sqlite3").exists()


def test_admin_create_rejects_bad_requests(app, engine, tmp_path):
    with pytest.raises(gr.Error, match="name"):
        app.admin_create(admin_request(app), "", None, 2, ["magnet"], ["appropriate"], 1, 0, "", 3)
    with pytest.raises(gr.Error, match="system"):
        app.admin_create(admin_request(app), "x", None, 2, [], ["appropriate"], 1, 0, "", 3)
    bad = tmp_path / "bad.jsonl"
    bad.write_text("{not json\n")
    with pytest.raises(gr.Error):
        app.admin_create(
            admin_request(app), "x", str(bad), 2, ["magnet"], ["appropriate"], 1, 0, "", 3
        )
    plain = make_app(tmp_path / "p", tiny_engine(adapters=False))
    with pytest.raises(gr.Error, match="unavailable"):
        plain.admin_create(
            admin_request(plain), "x", None, 2, ["magnet"], ["appropriate"], 1, 0, "", 3
        )


def test_a_duplicate_study_name_is_refused_before_any_output_is_generated(app, monkeypatch):
    from app import studies

    small_study(app)

    def no_generation(*a, **k):
        raise AssertionError("outputs were generated for a name that is taken")

    monkeypatch.setattr(studies, "build_study", no_generation)
    monkeypatch.setattr(app, "compare_infill_many", no_generation)
    with pytest.raises(gr.Error, match="named 'pilot' already exists"):
        app.admin_create(
            admin_request(app), " pilot ", None, 2, ["magnet"], ["appropriate"], 1, 0, "", 3
        )


def test_builtin_items_blank_a_span_of_held_out_wikipedia():
    from app.studies import MARKER, builtin_items

    items = builtin_items(3, seed=1)
    assert len(items) == 3 and len({i.key for i in items}) == 3
    for it in items:
        assert it.text.count(MARKER) == 1 and 2 <= len(it.original[0].split()) <= 5


def test_builtin_items_are_whole_sentences():
    """No item starts with ': ' or stops after an initial such as 'C. S.'."""
    from app.studies import builtin_items
    from magnet_model.inference.search import cut_passage

    for it in builtin_items(40):
        assert re.match(r"[\"'(A-Z0-9]", it.text), it.text[:40]
        assert re.search(r"[.!?][\"')]?$", it.text) and not re.search(r" [A-Z]\.$", it.text)
    text = "He read a book by C. S. Lewis on the train. Then he slept for a long time."
    assert cut_passage(text, 50) == "He read a book by C. S. Lewis on the train."


def test_export_names_the_rater_the_model_and_a_hash_of_the_adapter(app, tmp_path, monkeypatch):
    import csv
    import hashlib

    adapter = tmp_path / "adapter"
    adapter.mkdir()
    (adapter / "adapter_model.safetensors").write_bytes(b"weights")
    monkeypatch.setitem(app.engine.loaded.adapters, "magnet", str(adapter))
    items = tmp_path / "items.jsonl"
    items.write_text(json.dumps({"key": "a", "text": "the cat [blank] on the mat ."}))
    app.admin_create(admin_request(app), "prov", str(items), 1, ["magnet", "zero-shot"],
                     ["appropriate"], 1, 0, "", 2)  # fmt: skip
    (link,) = invite(app, "prov", "Grace Hopper").rows
    token = link[1].split("token=")[1]
    app.rate_submit(token, app.rate_open(token).shown_item, *answers(2), None, "")
    exported = downloaded(app, app.admin_export(admin_request(app), "prov", "csv")).read_text(
        encoding="utf-8"
    )
    rows = list(csv.DictReader(exported.splitlines()))
    digest = hashlib.sha256(b"weights").hexdigest()[:12]
    assert {r["rater"] for r in rows} == {"Grace Hopper"}
    assert {r["system"]: r["adapter_revision"] for r in rows} == {
        "magnet": f"magnet sha256:{digest}",
        "zero-shot": "base",
    }
    assert all("/" not in r["model"] and r["model"] for r in rows)  # a name, not a path


def test_a_study_wider_than_the_page_says_so_instead_of_hiding_outputs(app):
    items = [ItemIn("i0", "the cat [blank] on the mat .", ["sat"])]
    systems = [f"s{k}" for k in range(MAX_OUTPUTS + 1)]
    outputs = [OutputIn("i0", s, f"the cat {s} on the mat .", [s]) for s in systems]
    app.store.create_study("wide", items, outputs, raters_per_item=1)
    token = app.store.invite("wide", "Bo").token
    with pytest.raises(gr.Error, match=f"at most {MAX_OUTPUTS}"):
        app.rate_open(token)
