"""Handler-level tests of the Rate and Admin tabs: invite link -> blind items -> ratings in the
database; admin login, study creation with outputs made ahead, invites, progress, results,
export and backup."""

from __future__ import annotations

import json
import re
from pathlib import Path

import gradio as gr
import pytest
from app_fixtures import fake_request, make_app
from tiny_models import tiny_engine

from annotation_db import ItemIn, OutputIn
from app.handlers import MAX_LIKERT, MAX_OUTPUTS

SLOT = 4 + MAX_LIKERT  # group, title, highlighted, appropriate, Likert...
HEAD = 4  # head, status, assignment id, item text


@pytest.fixture(scope="module")
def engine():
    return tiny_engine()


@pytest.fixture
def app(engine, tmp_path):
    return make_app(tmp_path, engine)


def small_study(app, questions=("appropriate", "likert:fluency", "preference", "comment")):
    items = [ItemIn(f"i{k}", f"the cat [blank] on the mat {k} .", ["sat"]) for k in range(2)]
    outputs = [
        OutputIn(it.key, system, it.text.replace("[blank]", fill), [fill])
        for it in items
        for system, fill in [("magnet", "sat"), ("zero-shot", "ran")]
    ]
    app.store.create_study("pilot", items, outputs, questions=list(questions), raters_per_item=1)
    return app.store.invite("pilot", "Ada").token


def view_of(out: tuple) -> dict:
    slots = [out[HEAD + i * SLOT : HEAD + (i + 1) * SLOT] for i in range(MAX_OUTPUTS)]
    pref, comment, submit = out[HEAD + MAX_OUTPUTS * SLOT :]
    return dict(head=out[0], status=out[1], aid=out[2], text=out[3], slots=slots, pref=pref,
                comment=comment, submit=submit)  # fmt: skip


def downloaded(app, link: str) -> Path:
    """The private file behind an admin download link (what its route would send)."""
    ticket = re.search(r"\]\(admin-files/([\w-]+)\)", link).group(1)
    return app.downloads.take(ticket)


def answers(n_out: int, appropriate=("Yes", "No"), fluency=("4", "2")) -> list:
    vals = []
    for i in range(MAX_OUTPUTS):
        vals += [appropriate[i], fluency[i], None] if i < n_out else [None] * (1 + MAX_LIKERT)
    return vals


def test_invite_link_opens_blind_item_and_rating_lands_in_db(app):
    token = small_study(app)
    token_out, *rest = app.rate_load("", fake_request(token=token))
    v = view_of(tuple(rest))
    assert token_out == token and "Ada" in v["head"] and v["status"].startswith("0 of 2")
    assert "[blank]" in v["text"] and v["submit"]["visible"] is True
    shown = [s for s in v["slots"] if s[0]["visible"]]
    assert [s[1] for s in shown] == ["Output A", "Output B"]
    assert all(s[3]["visible"] and s[4]["visible"] and not s[5]["visible"] for s in shown)
    assert v["pref"]["choices"] == ["A", "B", "tie", "all_bad"]
    blob = json.dumps(rest, default=str)
    assert "magnet" not in blob and "zero-shot" not in blob  # nothing names a system
    fills = [p for s in shown for p, lab in s[2] if lab]
    assert sorted(fills) == ["ran", "sat"]

    nxt = view_of(app.rate_submit(token, v["aid"], *answers(2), "A", "  looks fine "))
    assert nxt["status"].startswith("1 of 2") and nxt["aid"] != v["aid"]
    rows = app.store.progress("pilot").raters
    assert rows[0].done == 1
    done = view_of(app.rate_submit(token, nxt["aid"], *answers(2), "tie", ""))
    assert "all done" in done["status"] and done["submit"]["visible"] is False
    res, plot = app.admin_results(True, "pilot")
    shares = {r["system"]: r["appropriate"]["share"] for r in res["systems"]}
    assert set(shares) == {"magnet", "zero-shot"} and sum(shares.values()) == 1.0  # A yes, B no
    assert plot.axes[0].get_ylim() == (0, 1)
    out = downloaded(app, app.admin_export(True, "pilot", "jsonl"))
    lines = [json.loads(x) for x in out.read_text(encoding="utf-8").splitlines()]
    assert len(lines) == 4 and {r["comment"] for r in lines} == {"looks fine", None}


def test_resume_shows_the_same_unanswered_item(app):
    token = small_study(app)
    first = view_of(app.rate_open(token))
    again = view_of(app.rate_load(token, None)[1:])
    assert again["aid"] == first["aid"] and again["text"] == first["text"]


def test_rate_errors_are_readable(app):
    token = small_study(app)
    with pytest.raises(gr.Error, match="token|invite"):
        app.rate_open("not-a-token")
    with pytest.raises(gr.Error):
        app.rate_open("")
    v = view_of(app.rate_open(token))
    missing = answers(2, appropriate=(None, "No"))
    with pytest.raises(gr.Error, match="output A"):
        app.rate_submit(token, v["aid"], *missing, "A", "")
    with pytest.raises(gr.Error):
        app.rate_submit(token, v["aid"], *answers(2), "A", "x" * 3000)  # comment too long
    assert app.store.progress("pilot").judgments_done == 0


def test_rate_load_without_token_asks_for_one(app):
    token, *rest = app.rate_load("", fake_request())
    assert token == "" and "invite link" in view_of(tuple(rest))["status"]


# ---------------------------------------------------------------- Admin


def test_admin_login_and_every_admin_call_needs_it(app):
    ok, panel, msg = app.admin_login("wrong")
    assert ok is False and panel["visible"] is False and msg == "Wrong password."
    ok, panel, _ = app.admin_login("s3cret")
    assert ok is True and panel["visible"] is True
    for call in (
        lambda: app.admin_studies(False),
        lambda: app.admin_progress(False, "pilot"),
        lambda: app.admin_backup(False),
        lambda: app.admin_export(False, "pilot", "csv"),
    ):
        with pytest.raises(gr.Error, match="Log in"):
            call()


def test_admin_without_password_setting_refuses_even_true(engine, tmp_path):
    app = make_app(tmp_path, engine, admin_password=None)
    assert app.admin_login("")[0] is False
    with pytest.raises(gr.Error):
        app.admin_backup(True)


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
        True, "study1", str(items), 3, ["magnet", "zero-shot"], ["appropriate"], 2, 1, "Be kind", 3
    )
    assert msg.startswith("Created study 'study1': 3 items (1 attention checks)")
    assert dropdown["value"] == "study1"
    created, outputs = app.store.items("study1")
    regular = [o for o in outputs if not o.gold_role]
    assert {o.system for o in regular} == {"magnet", "zero-shot"} and len(regular) == 6
    auto = next(i for i in created if i.key == "b")
    assert "[blank]" in auto.text and auto.original  # a span was blanked automatically
    assert any(i.is_gold for i in created)

    links = app.admin_invite(True, "study1", "Ann\n\nBob\n", fake_request())
    assert [r[0] for r in links] == ["Ann", "Bob"]
    assert all(r[1].startswith("http://demo.test:7860/?token=") for r in links)
    token = links[0][1].split("token=")[1]
    for n in (1, 2):  # two items: at least one is not the (single) attention check
        v = view_of(app.rate_open(token))
        n_shown = len([s for s in v["slots"] if s[0]["visible"]])
        app.rate_submit(token, v["aid"], *answers(n_shown), None, "")
        summary, raters = app.admin_progress(True, "study1")
        assert "judgments" in summary and raters[0][1:3] == ["Ann", n]
    regular_rated = raters[0][2] - raters[0][5]  # done minus attention checks done
    res, plot = app.admin_results(True, "study1")
    assert res["study"] == "study1" and res["progress"]["judgments_done"] == regular_rated >= 1
    assert {r["system"] for r in res["systems"]} == {"magnet", "zero-shot"}
    csv_path = downloaded(app, app.admin_export(True, "study1", "csv"))
    assert csv_path.read_text(encoding="utf-8").count("\n") >= 2
    backup = downloaded(app, app.admin_backup(True))
    assert backup.name.endswith(".sqlite3") and (tmp_path / "db.sqlite3").exists()


def test_admin_create_rejects_bad_requests(app, engine, tmp_path):
    with pytest.raises(gr.Error, match="name"):
        app.admin_create(True, "", None, 2, ["magnet"], ["appropriate"], 1, 0, "", 3)
    with pytest.raises(gr.Error, match="system"):
        app.admin_create(True, "x", None, 2, [], ["appropriate"], 1, 0, "", 3)
    bad = tmp_path / "bad.jsonl"
    bad.write_text("{not json\n")
    with pytest.raises(gr.Error):
        app.admin_create(True, "x", str(bad), 2, ["magnet"], ["appropriate"], 1, 0, "", 3)
    plain = make_app(tmp_path / "p", tiny_engine(adapters=False))
    with pytest.raises(gr.Error, match="unavailable"):
        plain.admin_create(True, "x", None, 2, ["magnet"], ["appropriate"], 1, 0, "", 3)


def test_builtin_items_blank_a_span_of_held_out_wikipedia():
    from app.studies import MARKER, builtin_items

    items = builtin_items(3, seed=1)
    assert len(items) == 3 and len({i.key for i in items}) == 3
    for it in items:
        assert it.text.count(MARKER) == 1 and 2 <= len(it.original[0].split()) <= 5


def test_a_study_wider_than_the_page_says_so_instead_of_hiding_outputs(app):
    items = [ItemIn("i0", "the cat [blank] on the mat .", ["sat"])]
    systems = [f"s{k}" for k in range(MAX_OUTPUTS + 1)]
    outputs = [OutputIn("i0", s, f"the cat {s} on the mat .", [s]) for s in systems]
    app.store.create_study("wide", items, outputs, raters_per_item=1)
    token = app.store.invite("wide", "Bo").token
    with pytest.raises(gr.Error, match=f"at most {MAX_OUTPUTS}"):
        app.rate_open(token)
