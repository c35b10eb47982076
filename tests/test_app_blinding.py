"""A running study stays blind whatever a rater types: the demo's model tabs pause while a
study is open and has invited raters (unless the admin keeps them on beside that study, said
on the Admin page), and texts close to an open study's passages are refused by their skeleton,
so look-alike letters, zero-width spaces and dropped words far from the blank do not get round
it; Search never shows such a passage. Real store, tiny Llama."""

from __future__ import annotations

import json

import gradio as gr
import numpy as np
import pytest
from app_fixtures import Clock, admin_request, admit_refusal, fake_request, make_app, visitor

from annotation_db import ItemIn, OutputIn
from app.blinding import DemoPolicy, StudyPassages, skeleton
from app.main import build_demo
from magnet_model.inference import search
from magnet_model.inference.search import Corpus

ITEM = (
    "The Great Wall of China is a series of fortifications that were built [blank] across "
    "the historical northern borders of ancient Chinese states."
)
OTHER = "The museum is closed on Mondays, so we [blank] on Tuesday morning instead."
PHOTOSYNTHESIS = (
    "Photosynthesis is the process by which green plants and some other organisms use "
    "sunlight to [blank] foods from carbon dioxide and water."
)


@pytest.fixture
def app(engine, tmp_path):
    a = make_app(tmp_path, engine)
    a.study_passages = StudyPassages(a.store, refresh_s=5.0, clock=Clock())
    a.demo_policy = DemoPolicy(tmp_path / "policy.json")
    return a


def _study(app, name="wall", invite=True, more=()):
    items = [ItemIn("i0", ITEM, ["centuries ago"]), ItemIn("i1", "A short [blank] item.", ["x"])]
    items += [ItemIn(f"i{k}", text, ["x"]) for k, text in enumerate(more, start=2)]
    outputs = [
        OutputIn(it.key, s, it.text.replace("[blank]", fill), [fill])
        for it in items
        for s, fill in [("magnet", "over centuries"), ("zero-shot", "make")]
    ]
    app.store.create_study(name, items, outputs, questions=["appropriate"], raters_per_item=1)
    if invite:
        app.store.invite(name, "Ann")
    app.study_passages.invalidate()


def _calls(app):
    """Each model tab's validator on an unrelated text: its refusal or None."""
    req = fake_request()
    return {
        "infill": admit_refusal(app.infill_admit(OTHER, max_span=2, request=req)),
        "continue": admit_refusal(app.continue_admit("The museum is closed", 4, request=req)),
        "search": admit_refusal(app.search_admit("museum opening hours", request=req)),
    }


def test_the_demo_pauses_while_a_study_has_raters_and_comes_back_when_it_closes(app):
    assert set(_calls(app).values()) == {None}
    _study(app, invite=False)  # open, nobody invited yet: the demo runs
    assert set(_calls(app).values()) == {None}
    assert "Demo tabs: on." in app.demo_rule()
    app.store.invite("wall", "Ann")
    app.study_passages.invalidate()
    for tab, why in _calls(app).items():
        assert why and "The demo is paused while a rating study runs" in why, tab
        assert "wall" not in why  # the visitor is not told which study
    with pytest.raises(gr.Error, match="paused"):  # the handlers too, not only at join
        app.infill(OTHER, max_span=2)
    rule = app.demo_rule()
    assert "Demo tabs: paused" in rule and "'wall'" in rule
    # the rater page and Admin stay
    assert app.admin_check(admin_request(app), "wall")
    app.store.set_status("wall", "closed")
    app.study_passages.invalidate()
    assert set(_calls(app).values()) == {None}


def test_the_admin_can_keep_the_demo_on_beside_a_study_knowing_the_cost(app, tmp_path):
    _study(app)
    assert _calls(app)["infill"]
    said = app.admin_keep_demo(admin_request(app), "wall", True)
    assert "Kept on beside 'wall'" in said and "could learn" in said
    assert set(_calls(app).values()) == {None}
    assert json.loads((tmp_path / "policy.json").read_text()) == ["wall"]
    assert DemoPolicy(tmp_path / "policy.json").allowed() == {"wall"}  # after a restart
    # the second line still holds: the study's own passage is refused
    why = admit_refusal(app.infill_admit(ITEM, max_span=2, request=fake_request()))
    assert why and "too close to a passage of a rating study" in why
    assert app.admin_demo_choice(admin_request(app), "wall") == (True, app.demo_rule())
    app.admin_keep_demo(admin_request(app), "wall", False)
    assert _calls(app)["infill"]
    with pytest.raises(gr.Error, match="Log in"):
        app.admin_keep_demo(fake_request(), "wall", True)
    with pytest.raises(gr.Error, match="Pick a rating study"):
        app.admin_keep_demo(admin_request(app), "", True)


def test_a_damaged_policy_file_pauses_the_demo_for_every_study(tmp_path):
    path = tmp_path / "policy.json"
    path.write_text("{not json")
    assert DemoPolicy(path).allowed() == frozenset()


def test_the_demo_refuses_passages_of_an_open_study_and_says_why(app):
    """Review 4, N15: 18 demo runs of study items reproduced 3 of 18 study outputs exactly,
    under their system names. Nobody is invited yet, so the demo runs: the texts decide."""
    clock = app.study_passages.clock
    _study(app, invite=False, more=[PHOTOSYNTHESIS])
    near = (  # another blank, other words around, and one run of 8 words kept
        "In my notes: a series of fortifications that were built across the [blank] borders."
    )
    refused = [
        ITEM,
        PHOTOSYNTHESIS.upper().replace("[BLANK]", "  [blank]"),  # case and spacing do not matter
        near,
        "A SHORT [blank] item!",  # a short passage, copied whole
    ]
    for text in refused:
        why = admit_refusal(app.infill_admit(text, max_span=2, request=visitor("10.0.0.1")))
        assert why and "rating study that is running now" in why, text
        with pytest.raises(gr.Error, match="does not fill, continue or show"):  # the handler too
            app.infill(text, max_span=2)
    fine = "The Great Wall of China is long, and [blank] visit it every year."  # 6 shared words
    assert admit_refusal(app.infill_admit("This is a short [blank] item.", max_span=2)) is None
    assert admit_refusal(app.infill_admit(fine, max_span=2)) is None
    app.infill(fine, max_span=2)
    app.store.set_status("wall", "closed")
    clock.now += 5  # looked at again within seconds
    assert admit_refusal(app.infill_admit(ITEM, max_span=2)) is None


def _spelt(text: str, change) -> str:
    """``change`` applied to the text around its blanks (the marker itself kept)."""
    return "[blank]".join(change(part) for part in text.split("[blank]"))


EVASIONS = {
    # Cyrillic a, Greek o
    "look-alike letters": _spelt(ITEM, lambda t: t.replace("a", "\u0430").replace("o", "\u03bf")),
    "zero-width spaces": _spelt(
        ITEM,
        lambda t: " ".join(w[:2] + "\u200b" + w[2:] if len(w) > 3 else w for w in t.split(" ")),
    ),
    "full-width letters": ITEM.replace("Great Wall", "Ｇｒｅａｔ Ｗａｌｌ"),
    # a word dropped in every 8-word run, the words around the blank kept
    "dropped words": (
        "The Great Wall China is a series fortifications that were built [blank] across the "
        "historical borders of ancient Chinese states."
    ),
    "its own continuation": "The Great Wall of China is a series of fortifications that were",
}


@pytest.mark.parametrize("how", list(EVASIONS))
def test_texts_close_to_a_study_passage_are_refused_however_they_are_spelt(app, how):
    """The evasions of security review 5 (D2, D3): served before, refused now, by every tab;
    the refusal does not say how close a text may come."""
    _study(app)
    app.demo_policy.allow("wall", True)  # the demo runs beside it: the second line decides
    text = EVASIONS[how]
    if "[blank]" in text:
        why = admit_refusal(app.infill_admit(text, max_span=2, request=fake_request()))
        assert why and "too close to a passage" in why, how
        assert "8" not in why and "words" not in why
    if how != "dropped words":  # a prompt has no blank to be recognised by
        prompt = text.split("[blank]")[0]
        why = admit_refusal(app.continue_admit(prompt, 4, request=fake_request()))
        assert why and "too close to a passage" in why, how


def test_unrelated_texts_with_common_words_are_served(app):
    _study(app)
    app.demo_policy.allow("wall", True)
    for text in (
        OTHER,
        "The Great Wall of China is long, and [blank] visit it every year.",
        "Walls were built [blank] across many borders.",
    ):
        why = admit_refusal(app.infill_admit(text, max_span=2, request=fake_request()))
        assert why is None, text


def test_skeleton_maps_look_alikes_and_drops_format_characters():
    assert skeleton("р\u0430r\u200bis") == "paris"  # Cyrillic r and a, a zero-width space
    assert skeleton("ＷＡＬＬ") == "wall"


class _Letters(search.Encoder):
    """Letter counts: a cheap stand-in for all-MiniLM-L6-v2 (not bundled with the tiny model)."""

    key = "letters"

    def encode(self, texts, batch_size=16):
        v = np.array([[t.lower().count(c) for c in "abcdefghijklmnopqrstuvwxyz"] for t in texts])
        v = v.astype(np.float32) + 1e-3
        return v / np.linalg.norm(v, axis=1, keepdims=True)


def test_search_never_shows_a_passage_of_a_running_study(app, monkeypatch):
    _study(app)
    app.demo_policy.allow("wall", True)
    app.encoders["minilm"] = _Letters()
    corpus = Corpus("mixed", (ITEM.replace("[blank]", "centuries ago"), OTHER, "Cats sleep a lot."))
    monkeypatch.setattr(app, "corpus", lambda upload: corpus)
    view = app.search("fortifications in China", None, 3, lambda *a, **k: None)
    ranked = [t for t in view.tables if t and t[0][0] is not None]  # encoders that ran
    shown = [row[2] for table in ranked for row in table]
    assert ranked and shown and not any("Great Wall" in t for t in shown)
    assert all([row[0] for row in table] == list(range(1, len(table) + 1)) for table in ranked)
    assert "1 passage of a rating study running now is left out" in view.note
    assert "between the top-2 lists" in view.overlap  # what the lists show, not the k asked


def test_an_invite_pauses_the_demo_at_once_without_waiting_for_the_next_look(app):
    _study(app, invite=False)
    app.study_passages.refresh_s = 3600.0  # the list of live studies would be an hour old
    assert set(_calls(app).values()) == {None} and app.demo_notice() == ""
    got = app.admin_invite(admin_request(app), "wall", "Ann")
    assert len(got.rows) == 1
    assert all(why and "paused" in why for why in _calls(app).values())
    # the page says so when it opens (a load event), before anyone types
    assert "The demo is paused" in app.demo_notice()
    loads = [
        d
        for d in build_demo(app).fns.values()
        if d.fn is not None and "load" in str([t[1] for t in d.targets])
    ]
    assert any(getattr(d.fn, "__name__", "") == "demo_notice" for d in loads)
