"""Handler-level tests of the Infill and Continue tabs: the functions Gradio calls, tiny Llama."""

from __future__ import annotations

import dataclasses
import html
import re

import gradio as gr
import pytest
from app_fixtures import fake_request, make_app
from tiny_models import tiny_engine

from app import render
from app.handlers import INFILL_SYSTEMS, TITLES
from app.main import build_demo
from app.rater_page import RATER_PATH
from magnet_model.engine import END_REASONS

TEXT = "the cat [blank] on the mat . the dog [blank] in the river ."


@pytest.fixture(scope="module")
def engine():
    return tiny_engine()


@pytest.fixture(scope="module")
def plain():
    return tiny_engine(adapters=False)


@pytest.fixture
def app(engine, tmp_path):
    return make_app(tmp_path, engine)


def columns(out: tuple) -> list[tuple]:
    return [tuple(out[i : i + 3]) for i in range(0, 9, 3)]


def plain_text(markup: str) -> str:
    """What a reader sees of filled_html: the text, without tags or blank numbers."""
    return html.unescape(re.sub(r"<[^>]+>", "", re.sub(r"<sup[^>]*>.*?</sup>", "", markup)))


# ---------------------------------------------------------------- Infill


def test_infill_shows_three_systems_with_highlighted_spans(app, engine):
    out = app.infill(TEXT, max_span=4)
    assert len(out) == 12
    cols = columns(out)
    assert [c[0] for c in cols] == [f"### {TITLES[s]}" for s in INFILL_SYSTEMS]
    expected = engine.infill(TEXT, adapter="magnet", max_span_tokens=4)
    assert cols[0][1] == render.filled_html(expected.highlighted())
    assert plain_text(cols[0][1]) == expected.filled  # one flowing paragraph, fills inline
    for _, markup, info in cols:
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
    state, vote_row, reveal = out[9:]
    assert state is None and vote_row["visible"] is False and reveal == ""


def test_infill_sampled_with_seed_is_reproducible(app):
    a = app.infill(TEXT, "sampled", 0.9, 0.9, 7, 4)
    b = app.infill(TEXT, "sampled", 0.9, 0.9, 7, 4)
    assert columns(a)[0][1] == columns(b)[0][1]


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
    cols = columns(app.infill(TEXT, max_span=3))
    assert cols[0][1] == "" and cols[0][2].startswith("Unavailable: the 'magnet' adapter")
    assert all(c[1] for c in cols[1:])  # the base-model baselines still run


def test_user_text_stays_text(app):
    text = "<script>alert(1)</script> the cat [blank] ."
    for _, markup, _ in columns(app.infill(text, max_span=2)):
        assert "<script>" not in markup  # escaped: shown as text, never run
        assert plain_text(markup).startswith("<script>alert(1)</script> the cat ")


def test_blind_vote_hides_names_stores_vote_then_reveals(app):
    out = app.infill(TEXT, max_span=3, blind=True, request=fake_request())
    cols, (state, vote_row, reveal) = columns(out), out[9:]
    assert [c[0] for c in cols] == ["### A", "### B", "### C"]
    assert vote_row["visible"] is True and "Vote" in reveal
    assert sorted(o["system"] for o in state["shown"]) == sorted(INFILL_SYSTEMS)
    shown_texts = [plain_text(c[1]) for c in cols]
    assert shown_texts == [o["text"] for o in state["shown"]]
    message, cleared = app.vote(state, "B", fake_request())
    assert cleared is None
    chosen = state["shown"][1]["system"]
    assert f"B = {TITLES[chosen]}" in message and "vote stored" in message
    res = app.store.results("arena")
    assert res.preference_counts and res.n_judgments == 1
    with pytest.raises(gr.Error):
        app.vote(None, "A")


def test_voting_with_nothing_picked_says_so_in_a_sentence(app):
    state = app.infill(TEXT, max_span=2, blind=True)[9]
    with pytest.raises(gr.Error, match="Pick an output"):
        app.vote(state, None)


def test_a_prompted_span_cut_at_the_limit_says_which_limit():
    from types import SimpleNamespace as NS

    from app.handlers import _infill_info

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
    assert frames and all(len(f) == 6 for f in frames)
    for col, adapter in zip(range(0, 6, 2), ["magnet", None, "llm2vec"], strict=True):
        texts = [f[col] for f in frames]
        assert all(b.startswith(a) for a, b in zip(texts, texts[1:], strict=False))
        assert texts[-1] == engine.generate("the cat sat on the", adapter, 6).text
        assert frames[-1][col + 1].startswith("Rep-4 ") and "done in" in frames[-1][col + 1]
    assert len(frames) >= 2 and frames[0][0] != frames[-1][0]  # streamed, not one block


def test_continue_stats_show_repetition():
    from app.handlers import _stats

    assert _stats("a b c d a b c d a b c d").startswith("Rep-4 0.56")  # 4 unique of 9 4-grams
    assert "Rep-Sen 0.50" in _stats("It rains. It rains.")


def test_continue_without_adapters_streams_base_only(plain, tmp_path):
    frames = list(make_app(tmp_path, plain).continue_("the dog ran", 3))
    last = frames[-1]
    assert last[0] == "" and last[1].startswith("Unavailable")
    assert last[2] and last[4] == "" and last[5].startswith("Unavailable")


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


def test_rating_events_do_not_share_the_model_queue(engine, tmp_path):
    demo = build_demo(make_app(tmp_path, engine))
    groups = {}
    for dep in demo.fns.values():
        groups.setdefault(dep.name, set()).add(dep.concurrency_id)
    assert groups["infill"] == {"model"} and groups["continue_"] == {"model"}
    assert groups["rate_submit"] == {"rating"} and groups["rate_page_load"] == {"rating"}
    assert groups["rate_open"] == {"rating"} and groups["admin_login"] == {"rating"}
    assert demo._queue.max_size == 32


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
    assert loaded.adapter_names == [] and set(unavailable) == {"magnet", "llm2vec"}
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
    assert engine.adapter_names == ["llm2vec"] and set(unavailable) == {"magnet"}
    app = make_app(tmp_path, engine)
    app.unavailable = unavailable
    *_, last = app.continue_("the cat sat on the", 3)
    texts, stats = last[0::2], last[1::2]
    assert stats[0].startswith("Unavailable: ") and "adapter 'magnet'" in stats[0]
    assert str(folders["magnet"]) in stats[0]
    assert texts[1] and texts[2] and "Unavailable" not in stats[1] + stats[2]
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
    assert main(["--base-model", str(tmp_path / "no-base"), "--db-path", db]) == 2
    err = capsys.readouterr().err
    assert "error: The base model" in err and "Traceback" not in err


def test_search_shows_one_progress_bar_in_a_two_by_two_grid(engine, tmp_path):
    demo = build_demo(make_app(tmp_path, engine))
    (search,) = [dep for dep in demo.fns.values() if dep.name == "search"]
    assert [b.label for b in search.show_progress_on] == ["Corpus and timing"]
    tables = [b for b in search.outputs if isinstance(b, gr.Dataframe)][:4]
    assert [t.label for t in tables] == [TITLES[s] for s in ("magnet", "minilm", "base", "llm2vec")]
    assert all(t.headers == ["#", "cosine", "passage"] for t in tables)
    rows = {id(t.parent.parent) for t in tables}  # column -> row: two rows of two
    assert len(rows) == 2


def test_library_errors_become_one_sentence_for_the_visitor():
    """user_errors: AnnotationError and MagnetError -> gr.Error with the same sentence and no
    traceback; a gr.Error or any other exception passes unchanged."""
    from annotation_db import AnnotationError
    from app.handlers import user_errors
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

    with pytest.raises(gr.Error, match="refused"):
        handler()
