"""Handler-level tests of the Infill and Continue tabs: the functions Gradio calls, tiny Llama."""

from __future__ import annotations

import dataclasses
import html
import re

import gradio as gr
import pytest
from app_fixtures import fake_request, free_port, make_app
from tiny_models import tiny_engine

from annotation_db import ItemIn, OutputIn
from app import render
from app.main import build_demo
from app.rater_page import RATER_PATH
from app.studies import INFILL_SYSTEMS
from magnet_model.inference.engine import END_REASONS
from magnet_model.systems import TITLES

TEXT = "the cat [blank] on the mat . the dog [blank] in the river ."


@pytest.fixture(scope="module")
def plain():
    return tiny_engine(adapters=False)


def plain_text(markup: str) -> str:
    """What a reader sees of filled_html: the text, without tags or blank numbers."""
    return html.unescape(re.sub(r"<[^>]+>", "", re.sub(r"<sup[^>]*>.*?</sup>", "", markup)))


# ---------------------------------------------------------------- Infill


def test_infill_shows_three_systems_with_highlighted_spans(app, engine):
    out = app.infill(TEXT, max_span=4)
    assert len(out.values()) == 12
    cols = out.columns
    assert [c.title for c in cols] == [f"### {TITLES[s]}" for s in INFILL_SYSTEMS]
    expected = engine.infill(TEXT, adapter="magnet", max_span_tokens=4)
    assert cols[0].filled == render.filled_html(expected.highlighted())
    assert plain_text(cols[0].filled) == expected.filled  # one flowing paragraph, fills inline
    for markup, info in ((c.filled, c.info) for c in cols):
        assert markup.count('<mark class="fill"') == 2 and markup.count("<p ") == 1
        assert 'title="blank 1"' in markup and 'title="blank 2"' in markup
        assert plain_text(markup).startswith("the cat ")
        spans, done = info.split(" · done after ")
        assert re.fullmatch(r"\d+\.\d\d s", done)
        # per blank: tokens and why it ended, in words (never a raw code such as "max")
        parts = spans.split("; ")
        assert [p.split(":")[0] for p in parts] == ["blank 1", "blank 2"]
        for part in parts:
            why = part.split(", ", 1)[1]
            assert any(why.startswith(w) for w in END_REASONS.values()), why
            assert re.match(r"blank \d: \d+ tokens?", part)
    assert out.state is None and out.vote_row["visible"] is False and out.reveal == ""


def test_a_removed_sentence_is_not_cut_at_the_span_slider(app, engine):
    """The slider caps a blank inside a sentence; a blank between sentences runs on until its
    sentence ends (here the tiny model never ends one: to a sentence's length, 64 tokens)."""
    text = "The dog ran home . [blank] The cat sat on the mat ."
    out = app.infill(text, max_span=3)
    (span,) = engine.infill(text, max_span_tokens=3).spans
    assert len(span.token_ids) > 3  # past the slider: to its sentence's end, or 64 tokens
    assert span.end_reason != "max" or len(span.token_ids) == 64
    assert out.columns[0].info.startswith(f"{len(span.token_ids)} tokens")
    capped = engine.infill(text, max_span_tokens=3, fill={"sentence_tokens": 0}).spans[0]
    assert len(capped.token_ids) <= 3  # the old behaviour: cut at the slider
    inside = engine.infill(
        "the cat [blank] on the mat .", max_span_tokens=3, fill={"stop": "model"}
    )
    assert len(inside.spans[0].token_ids) <= 3
    slider = next(
        b
        for b in build_demo(app).blocks.values()
        if isinstance(b, gr.Slider) and b.label == "Max span tokens"
    )
    assert "blank between sentences" in slider.info


def test_infill_sampled_with_seed_is_reproducible(app):
    a = app.infill(TEXT, "sampled", 0.9, 0.9, 7, 4)
    b = app.infill(TEXT, "sampled", 0.9, 0.9, 7, 4)
    assert a.columns[0].filled == b.columns[0].filled


@pytest.mark.parametrize(
    ("text", "span", "message"),
    [
        ("", 4, "empty"),
        ("   ", 4, "empty"),
        ("the cat sat on the mat .", 4, "no blank"),
        ("the cat " * 200 + "[blank]", 4, "at most 128 tokens"),
        ("the " + "[blank] cat " * 9, 4, "at most 8"),
        (TEXT, 99, "span length"),
    ],
)
def test_infill_bad_input_is_one_readable_error(app, text, span, message):
    with pytest.raises(gr.Error, match=message):
        app.infill(text, max_span=span)


def test_infill_without_magnet_adapter_says_why(plain, tmp_path):
    app = make_app(tmp_path, plain)
    cols = app.infill(TEXT, max_span=3).columns
    assert cols[0].filled == "" and cols[0].info.startswith("Unavailable: the 'magnet' adapter")
    assert all(c.filled for c in cols[1:])  # the base-model baselines still run


def test_user_text_stays_text(app):
    text = "<script>alert(1)</script> the cat [blank] ."
    for markup in (c.filled for c in app.infill(text, max_span=2).columns):
        assert "<script>" not in markup  # escaped: shown as text, never run
        assert plain_text(markup).startswith("<script>alert(1)</script> the cat ")


def test_blind_vote_hides_names_stores_vote_then_reveals(app):
    out = app.infill(TEXT, max_span=3, blind=True, request=fake_request())
    cols, state = out.columns, out.state
    assert [c.title for c in cols] == ["### A", "### B", "### C"]
    assert out.vote_row["visible"] is True and "Vote" in out.reveal
    assert sorted(o["system"] for o in state["shown"]) == sorted(INFILL_SYSTEMS)
    shown_texts = [plain_text(c.filled) for c in cols]
    assert shown_texts == [o["text"] for o in state["shown"]]
    voted = app.vote(state, "B", fake_request())
    message = voted.reveal
    chosen = state["shown"][1]["system"]
    assert f"B = {TITLES[chosen]}" in message and "vote stored" in message
    res = app.store.results("arena")
    assert res.preference_counts and res.n_judgments == 1
    with pytest.raises(gr.Error):
        app.vote(None, "A")


def test_after_a_blind_vote_the_columns_carry_the_names_and_a_second_vote_is_refused(app):
    """The tour (m9): after the vote the columns stayed A/B/C with "Time and length are shown
    after the vote."; a second vote said "Fill a text in blind mode first"."""
    state = app.infill(TEXT, max_span=3, blind=True, request=fake_request()).state
    voted = app.vote(state, "A", fake_request())
    names = [TITLES[o["system"]] for o in state["shown"]]
    assert voted.titles == [f"### {x} = {n}" for x, n in zip("ABC", names, strict=True)]
    assert voted.infos == [o["info"] for o in state["shown"]]
    assert all("done after" in i for i in voted.infos)  # the time and lengths, as unblinded
    with pytest.raises(gr.Error, match="already voted on this comparison"):
        app.vote(voted.state, "B", fake_request())
    assert app.store.results("arena").n_judgments == 1


def test_voting_with_nothing_picked_says_so_in_a_sentence(app):
    state = app.infill(TEXT, max_span=2, blind=True).state
    with pytest.raises(gr.Error, match="Pick an output"):
        app.vote(state, None)


def test_a_prompted_span_cut_at_the_limit_says_which_limit():
    from types import SimpleNamespace as NS

    from app.demo import _infill_info

    r = NS(seconds=1.5, spans=[NS(token_ids=[1, 2, 3], end_reason="max", written=12)])
    info = _infill_info(r, 12)
    assert (
        info
        == "3 tokens kept of 12 written, cut at the length limit (12 tokens) · done after 1.50 s"
    )
    r.spans = [NS(token_ids=[1], end_reason="joined", written=None)]
    assert _infill_info(r, 12).startswith("1 token, stopped where it ran into the text after")


def test_too_long_text_is_refused_with_its_length_not_cut(app):
    with pytest.raises(gr.Error, match=r"is 21,000 characters long.*Nothing was cut"):
        app.infill("x " * 10_000 + "[blank]" + " " * 993, max_span=2)


# ---------------------------------------------------------------- Continue


def test_continue_streams_three_systems_with_live_stats(app, engine):
    frames = list(app.continue_("the cat sat on the", 6))
    assert frames and all(len(f.values()) == 6 for f in frames)
    for col, adapter in enumerate(["magnet", None, "llm2vec"]):
        texts = [f.columns[col].text for f in frames]
        assert all(b.startswith(a) for a, b in zip(texts, texts[1:], strict=False))
        want = engine.generate("the cat sat on the", adapter, 6).text
        assert texts[-1] == want.lstrip() and not texts[-1][:1].isspace()  # the tour's p4
        stats = frames[-1].columns[col].stats
        assert stats.startswith("Rep-4 ") and "s into the shared batch" in stats
    first, last = frames[0].columns[0].text, frames[-1].columns[0].text
    assert len(frames) >= 2 and first != last  # streamed, not one block


def test_continue_offers_a_loop_guard_off_by_default_and_says_which_ran(app, engine):
    prompt = "the cat sat on the"  # the tiny MAGNET repeats 12 3-grams in 100 tokens
    raw = list(app.continue_(prompt, 100))[-1]
    guarded = list(app.continue_(prompt, 100, "greedy", 1.0, 1.0, None, True))[-1]
    for col, adapter in enumerate(["magnet", None, "llm2vec"]):
        assert raw.columns[col].text == engine.generate(prompt, adapter, 100).text.lstrip()
        want = engine.generate(prompt, adapter, 100, no_repeat=3).text.lstrip()
        assert guarded.columns[col].text == want
        assert "no loop guard" in raw.columns[col].stats
        assert "loop guard on (no 3-gram twice)" in guarded.columns[col].stats
    assert guarded.columns[0].text != raw.columns[0].text  # the tiny model loops; guarded not
    box = next(
        b for b in build_demo(app).blocks.values() if getattr(b, "label", None) == "Loop guard"
    )
    assert isinstance(box, gr.Checkbox) and box.value is False


def test_continue_stats_show_repetition():
    from app.model_calls import _stats

    assert _stats("a b c d a b c d a b c d").startswith("Rep-4 0.56")  # 4 unique of 9 4-grams
    assert "Rep-Sen 0.50" in _stats("It rains. It rains.")


def test_continue_without_adapters_streams_base_only(plain, tmp_path):
    frames = list(make_app(tmp_path, plain).continue_("the dog ran", 3))
    magnet, base, llm2vec = frames[-1].columns
    assert magnet.text == "" and magnet.stats.startswith("Unavailable")
    assert base.text and llm2vec.text == "" and llm2vec.stats.startswith("Unavailable")


@pytest.mark.parametrize(("prompt", "n"), [("", 4), ("the cat", 0), ("the cat", 999)])
def test_continue_bad_input(app, prompt, n):
    with pytest.raises(gr.Error):
        list(app.continue_(prompt, n))


# ---------------------------------------------------------------- layout


def _tab_labels(demo: gr.Blocks) -> list[str]:
    return [b.label for b in demo.blocks.values() if isinstance(b, gr.Tab)]


def test_demo_has_admin_tab_only_with_a_password(engine, tmp_path):
    with_pw = build_demo(make_app(tmp_path, engine))
    assert _tab_labels(with_pw) == ["Infill", "Continue", "Search", "Admin"]
    without = build_demo(make_app(tmp_path, engine, admin_password=None))
    assert _tab_labels(without) == ["Infill", "Continue", "Search"]


def test_the_rater_page_has_no_tabs_and_names_no_model_or_system(engine, tmp_path):
    demo = build_demo(make_app(tmp_path, engine))
    assert (RATER_PATH, "Rating", False) in demo.pages  # its own path, not in a navbar
    page = [b for b in demo.blocks.values() if getattr(b, "page", None) == RATER_PATH]
    assert page and not any(isinstance(b, gr.Tab) for b in page)
    words = " ".join(
        str(getattr(b, attr, "") or "") for b in page for attr in ("value", "label", "choices")
    ).lower()
    for name in ["magnet", "smollm", "llm2vec", "minilm", "zero-shot", "five-shot", "base model"]:
        assert name not in words, name
    assert "infill" not in words and "search" not in words


def test_rating_events_do_not_share_the_model_queue(engine, tmp_path, monkeypatch):
    asked = []  # what build_demo asks of Blocks.queue (public API; the queue object is not)
    queue = gr.Blocks.queue

    def spy(self, *args, **kwargs):
        asked.append(kwargs)
        return queue(self, *args, **kwargs)

    monkeypatch.setattr(gr.Blocks, "queue", spy)
    app = make_app(tmp_path, engine)
    demo = build_demo(app)
    groups, queued = {}, {}
    for dep in demo.fns.values():
        groups.setdefault(dep.name, set()).add(dep.concurrency_id)
        queued.setdefault(dep.name, set()).add(dep.queue)
    assert groups["infill"] == {"model"} and groups["continue_"] == {"model"}
    assert queued["infill"] == {True} and queued["admin_create"] == {True}
    # ratings and admin work skip the queue: demo calls filling it never refuse a rater
    for name in ("rate_submit", "rate_page_load", "rate_open", "admin_panel", "admin_backup"):
        assert queued[name] == {False}, name
    # the last call sets the queue (Gradio itself calls queue() with no arguments first)
    # api_open=False: queued events (the model calls) only through the queue (issue 29, N13)
    want = {"default_concurrency_limit": app.settings.concurrency, "max_size": 32}
    assert asked[-1] == want | {"api_open": False}


def _saved_engine(tmp_path):
    """The tiny engine's base and both adapters saved as folders -> (base, {adapter: folder})."""
    engine = tiny_engine()
    base = tmp_path / "base"
    engine.model.get_base_model().save_pretrained(base)
    engine.tokenizer.save_pretrained(base)
    folders = {}
    for name in ("magnet", "llm2vec"):
        engine.model.save_pretrained(tmp_path / name, selected_adapters=[name])
        folders[name] = next((tmp_path / name).rglob("adapter_config.json")).parent
    return base, folders


def test_app_starts_without_adapters_that_fail_to_load(tmp_path):
    """An adapter still being trained (config, no weights) or missing is reported, not fatal."""
    from app.main import load_engine
    from magnet_model.settings import ModelSpec

    base, folders = _saved_engine(tmp_path)
    for weights in folders["magnet"].glob("adapter_model.*"):
        weights.unlink()  # a save in progress
    spec = ModelSpec(base=str(base), device="cpu", cache_dir=tmp_path / "cache")
    spec = dataclasses.replace(
        spec, adapters={"magnet": str(folders["magnet"]), "llm2vec": "/nope/llm2vec"}
    )
    loaded, unavailable = load_engine(spec)
    assert loaded.runner.adapter_names == [] and set(unavailable) == {"magnet", "llm2vec"}
    assert all(e.adapter == name for name, e in unavailable.items())
    app = make_app(tmp_path, loaded)
    app.unavailable = unavailable
    magnet, llm2vec = app.availability("magnet"), app.availability("llm2vec")
    assert (magnet.system, llm2vec.system) == ("magnet", "llm2vec")
    assert "magnet" in magnet.reason and "/nope/llm2vec" in llm2vec.reason
    assert app.availability("zero-shot") is None


def test_one_broken_adapter_leaves_the_other_served(tmp_path):
    """magnet half-saved, llm2vec fine: llm2vec continues, magnet's column names it and why,
    and the page's header says which adapter is not loaded."""
    from app.main import load_engine
    from magnet_model.settings import ModelSpec

    base, folders = _saved_engine(tmp_path)
    for weights in folders["magnet"].glob("adapter_model.*"):
        weights.unlink()
    spec = ModelSpec(
        base=str(base),
        device="cpu",
        cache_dir=tmp_path / "cache",
        adapters={k: str(v) for k, v in folders.items()},
    )
    engine, unavailable = load_engine(spec)
    assert engine.runner.adapter_names == ["llm2vec"] and set(unavailable) == {"magnet"}
    app = make_app(tmp_path, engine)
    app.unavailable = unavailable
    *_, last = app.continue_("the cat sat on the", 3)
    magnet, base, llm2vec = last.columns
    assert magnet.stats.startswith("Unavailable: ") and "adapter 'magnet'" in magnet.stats
    assert str(folders["magnet"]) in magnet.stats
    assert base.text and llm2vec.text and "Unavailable" not in base.stats + llm2vec.stats
    header = next(b.value for b in build_demo(app).blocks.values() if isinstance(b, gr.Markdown))
    assert "Not loaded: magnet" in header


def test_broken_base_model_is_one_clear_error(tmp_path, capsys):
    from app.main import load_engine, main
    from magnet_model.errors import ModelLoadError
    from magnet_model.settings import ModelSpec

    _, folders = _saved_engine(tmp_path)
    spec = ModelSpec(base=str(tmp_path / "no-base"), adapters={"magnet": str(folders["magnet"])})
    with pytest.raises(ModelLoadError, match="does not exist on disk") as info:
        load_engine(spec)
    assert info.value.adapter is None
    db = str(tmp_path / "db.sqlite3")
    port = str(free_port())
    assert main(["--base-model", str(tmp_path / "no-base"), "--db-path", db, "--port", port]) == 2
    err = capsys.readouterr().err
    assert "error: The base model" in err and "Traceback" not in err


def test_named_results_fill_exactly_the_outputs_they_are_wired_to(engine, tmp_path):
    """Each handler with a named result gives one value per output component of its event,
    and the components sit where its fields say (a title on a Markdown, the fills on HTML)."""
    from app.outputs import as_values

    app = make_app(tmp_path, engine)
    results = {  # the demo first: it pauses once a study has raters
        "infill": app.infill(TEXT, max_span=2),
        "continue_": next(iter(app.continue_("the cat", 2))),
    }
    token = app.store.invite(
        app.store.create_study(
            "s",
            [ItemIn("i", "the cat [blank] on the mat .", ["sat"])],
            [OutputIn("i", s, "the cat sat on the mat .", ["sat"]) for s in ("magnet", "base")],
        ).name,
        "Ada",
    ).token
    demo = build_demo(app)
    deps = {dep.name: dep for dep in demo.fns.values()}
    results["rate_open"] = app.rate_open(token)
    extra = {"rate_open": 1}  # the rater page adds its inline message (rater_page._inline)
    for name, result in results.items():
        assert len(as_values(result)) + extra.get(name, 0) == len(deps[name].outputs), name
    infill = deps["infill"].outputs
    assert [type(b) for b in infill[:3]] == [gr.Markdown, gr.HTML, gr.Markdown]
    assert isinstance(infill[9], gr.State) and isinstance(infill[10], gr.Row)
    rate = deps["rate_open"].outputs
    assert isinstance(rate[4], gr.Group) and isinstance(rate[6], gr.HTML)
    # rate_page_load: the token, the view and its message, then the token row
    assert len(deps["rate_page_load"].outputs) == 1 + len(rate) + 1
    assert isinstance(deps["rate_page_load"].outputs[-1], gr.Row)


def test_search_shows_one_progress_bar_in_a_two_by_two_grid(engine, tmp_path):
    demo = build_demo(make_app(tmp_path, engine))
    (search,) = [dep for dep in demo.fns.values() if dep.name == "search"]
    assert [b.label for b in search.show_progress_on] == ["Corpus and timing"]
    tables = [b for b in search.outputs if isinstance(b, gr.Dataframe)][:4]
    assert [t.label for t in tables] == [TITLES[s] for s in ("magnet", "minilm", "base", "llm2vec")]
    assert all(t.headers == ["#", "cosine", "passage"] for t in tables)
    rows = {id(t.parent.parent) for t in tables}  # column -> row: two rows of two
    assert len(rows) == 2


def test_temperature_and_top_p_are_greyed_out_while_they_do_nothing(app):
    """Tour 4, p9: Temperature and Top-p looked active and movable under greedy."""
    demo = build_demo(app)
    sliders = [b for b in demo.blocks.values() if getattr(b, "label", None) == "Temperature"]
    assert sliders and all(s.interactive is False for s in sliders)  # greedy is the default
    (toggle,) = {d.fn for d in demo.fns.values() if d.name == "sampling_controls"}
    assert [u["interactive"] for u in toggle("sampled")] == [True, True]
    assert [u["interactive"] for u in toggle("greedy", True)] == [True, True]  # blind samples
    assert [u["interactive"] for u in toggle("greedy", False)] == [False, False]


def test_library_errors_become_one_sentence_for_the_visitor():
    """user_errors: AnnotationError and MagnetError -> gr.Error with the same sentence and no
    traceback; a gr.Error or any other exception passes unchanged."""
    from annotation_db import AnnotationError
    from app.services import user_errors
    from magnet_model.errors import InputError

    for error in (AnnotationError("No study named 'x'."), InputError("The text is empty.")):
        with pytest.raises(gr.Error) as info, user_errors():
            raise error
        assert info.value.message == str(error) and info.value.print_exception is False
        assert info.value.__cause__ is None and info.value.__suppress_context__
    with pytest.raises(gr.Error, match="mine"), user_errors():
        raise gr.Error("mine")
    with pytest.raises(KeyError), user_errors():
        raise KeyError("a bug stays a bug")

    @user_errors()
    def handler():
        raise AnnotationError("refused")

    with pytest.raises(gr.Error) as info:
        handler()
    assert info.value.message == "Refused"  # a sentence starts with a capital letter
