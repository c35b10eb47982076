"""Handler-level tests of the Infill and Continue tabs: the functions Gradio calls, tiny Llama."""

from __future__ import annotations

import gradio as gr
import pytest
from app_fixtures import fake_request, make_app
from tiny_models import tiny_engine

from app.handlers import INFILL_SYSTEMS, TITLES
from app.main import build_demo
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


# ---------------------------------------------------------------- Infill


def test_infill_shows_three_systems_with_highlighted_spans(app, engine):
    out = app.infill(TEXT, max_span=4)
    assert len(out) == 12
    cols = columns(out)
    assert [c[0] for c in cols] == [f"### {TITLES[s]}" for s in INFILL_SYSTEMS]
    expected = engine.infill(TEXT, adapter="magnet", max_span_tokens=4).highlighted()
    assert cols[0][1] == expected
    for _, pieces, info in cols:
        assert {lab for _, lab in pieces if lab} == {"blank 1", "blank 2"}
        assert "".join(p for p, _ in pieces).startswith("the cat ")
        assert " s · " in info and " tokens · " in info
        # why each span ended, in words (never a raw code such as "max")
        reasons = info.split(" tokens · ")[1].split("; ")
        assert len(reasons) == 2 and set(reasons) <= set(END_REASONS.values())
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
    assert cols[0][1] == [] and cols[0][2].startswith("Unavailable: the 'magnet' adapter")
    assert all(c[1] for c in cols[1:])  # the base-model baselines still run


def test_user_text_stays_text(app):
    text = "<script>alert(1)</script> the cat [blank] ."
    pieces = columns(app.infill(text, max_span=2))[0][1]
    assert pieces[0][0].startswith("<script>alert(1)</script>")  # a value, not markup


def test_blind_vote_hides_names_stores_vote_then_reveals(app):
    out = app.infill(TEXT, max_span=3, blind=True, request=fake_request())
    cols, (state, vote_row, reveal) = columns(out), out[9:]
    assert [c[0] for c in cols] == ["### A", "### B", "### C"]
    assert vote_row["visible"] is True and "Vote" in reveal
    assert sorted(o["system"] for o in state["shown"]) == sorted(INFILL_SYSTEMS)
    shown_texts = ["".join(p for p, _ in c[1]) for c in cols]
    assert shown_texts == [o["text"] for o in state["shown"]]
    message, cleared = app.vote(state, "B", fake_request())
    assert cleared is None
    chosen = state["shown"][1]["system"]
    assert f"B = {TITLES[chosen]}" in message and "vote stored" in message
    res = app.store.results("arena")
    assert res.preference_counts and res.n_judgments == 1
    with pytest.raises(gr.Error):
        app.vote(None, "A")


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
    assert _tab_labels(with_pw) == ["Infill", "Continue", "Search", "Rate", "Admin"]
    without = build_demo(make_app(tmp_path, engine, admin_password=None))
    assert _tab_labels(without) == ["Infill", "Continue", "Search", "Rate"]


def test_rating_events_do_not_share_the_model_queue(engine, tmp_path):
    demo = build_demo(make_app(tmp_path, engine))
    groups = {}
    for dep in demo.fns.values():
        groups.setdefault(dep.name, set()).add(dep.concurrency_id)
    assert groups["infill"] == {"model"} and groups["continue_"] == {"model"}
    assert groups["rate_submit"] == {"rating"} and groups["rate_load"] == {"rating"}
    assert demo._queue.max_size == 32


def test_app_starts_without_adapters_that_fail_to_load(tmp_path):
    """An adapter still being trained (config, no weights) or missing is reported, not fatal."""
    import dataclasses

    from app.main import load_engine
    from magnet_model.settings import ModelSpec

    engine = tiny_engine()
    base = tmp_path / "base"
    engine.model.get_base_model().save_pretrained(base)
    engine.tokenizer.save_pretrained(base)
    engine.model.save_pretrained(tmp_path / "ad", selected_adapters=["magnet"])
    half = next((tmp_path / "ad").rglob("adapter_config.json")).parent
    for weights in half.glob("adapter_model.*"):
        weights.unlink()  # a save in progress
    spec = ModelSpec(base=str(base), device="cpu", cache_dir=tmp_path / "cache")
    spec = dataclasses.replace(spec, adapters={"magnet": str(half), "llm2vec": "/nope/llm2vec"})
    loaded, unavailable = load_engine(spec)
    assert loaded.adapter_names == [] and set(unavailable) == {"magnet", "llm2vec"}
    app = make_app(tmp_path, loaded)
    app.unavailable = unavailable
    assert "magnet" in app.availability("magnet") and "/nope/llm2vec" in app.availability("llm2vec")
