"""Where a MAGNET fill ends (inference/stops.py): the stop rule "join" cuts a decoded span at
the word boundary where the span, its end and the text after the blank read likeliest."""

from __future__ import annotations

import math
from types import SimpleNamespace

import pytest
import torch
from test_engine import loaded, metas, peft_model
from tiny_models import make_tiny_tokenizer

from magnet_model.decoding import MagnetFill
from magnet_model.errors import InputError
from magnet_model.inference.engine import Engine
from magnet_model.inference.stops import (
    LENGTH_BONUS,
    candidates,
    choose,
    packed_join,
    stop_steps,
)
from magnet_model.masks import additive

VOCAB = 50
RIGHT = [40, 41, 42]


@pytest.fixture(scope="module")
def engine():
    tok = make_tiny_tokenizer()
    return Engine(loaded(peft_model(tok), tok), metas=metas(tok))


def test_the_packed_reading_equals_each_cut_fill_read_on_its_own(engine):
    runner = engine.runner
    left, right = [5, 9, 14, 3], [7, 8, 21]
    # three cuts of one path and two of another path (a second first token)
    fills = [[30], [30, 31], [30, 31, 32, 33], [12], [12, 31, 30]]
    ids, pos, see, want = packed_join(left, fills, right)
    with runner.using("magnet"):
        h = runner.hidden_states(
            runner.tensor([ids]), additive(see[None, None], runner.dtype), runner.tensor([pos])
        )[0]
        for fill, w in zip(fills, want, strict=True):
            alone = runner.hidden_states(runner.tensor([left + fill + right]))[0]
            at = [len(left) + len(fill) - 1 + j for j in range(len(right))]
            assert torch.allclose(h[w], alone[at], atol=1e-5)
    # each path's tokens once (30 31 32 33 and 12 31 30), then all but the last right token
    # per fill: 4 + 7 + 5 * 2 rows, not the 4 + 11 + 5 * 3 of a copy of every cut fill
    assert len(ids) == len(left) + 7 + len(fills) * (len(right) - 1)
    # a fill never sees another fill's tokens: the right text after [30] sees the left text
    # and its 30, not the 31 that [30, 31] goes on with, nor the other path's 12
    after_30 = want[0][1]
    row = {tok: ids.index(tok, len(left)) for tok in (30, 31, 12)}
    assert see[after_30, : len(left)].all() and see[after_30, row[30]]
    assert not see[after_30, row[31]] and not see[after_30, row[12]]
    # nor another fill's copy of the right text
    assert not see[want[1][2], want[0][1]]


def _job(generated, trace, right=RIGHT, fixed=False, stop="join"):
    return SimpleNamespace(
        fill=SimpleNamespace(stop=stop),
        bos=None,
        piece_ids=[[1, 2, 3], right],
        trace=[trace],
        fixed=[fixed],
        min_tokens=1,
    )


def _runner(inside=()):
    """A stand-in runner: a fill may be cut before any token but those in `inside`."""
    cuts = [t not in inside for t in range(VOCAB)]
    return SimpleNamespace(cut_points=cuts, max_input_tokens=1000)


def _drive(runner, job, generated, reasons, best_cut: int | None):
    """Run stop_steps, answering each reading with logits under which the right text follows
    the cut of length best_cut far better than any other; -> (generated, reasons, readings)."""
    steps = stop_steps(runner, job, generated, reasons)
    readings = []
    try:
        ids, pos, see, want = next(steps)
        while True:
            readings.append(ids)
            logits = torch.zeros(len(want), VOCAB)
            # which fill each wanted row belongs to: rows come per fill, len(right) each
            n_right = len(job.piece_ids[1][:8])
            fills = [
                t
                for t, _, _ in candidates(job.trace[0], generated[0], reasons[0], runner.cut_points)
            ]
            for i, t in enumerate(fills):
                if t == best_cut:
                    for j in range(n_right):
                        logits[i * n_right + j, job.piece_ids[1][j]] = 20.0
            ids, pos, see, want = steps.send(logits)
    except StopIteration as stop:
        return (*stop.value, readings)


def test_a_run_on_span_is_cut_where_the_text_after_the_blank_follows_best():
    # the model ended after 4 tokens; the text after the blank follows the first 2 best
    trace = [(-0.1, -3.0), (-0.1, -2.0), (-0.1, -2.0), (-0.1, -2.0), (-2.0, -2.0)]
    gen, reasons, readings = _drive(
        _runner(), _job([[10, 11, 12, 13]], trace), [[10, 11, 12, 13]], ["end"], 2
    )
    assert gen == [[10, 11]] and reasons == ["best"]
    assert len(readings) == 1  # one causal reading for all candidates
    # the model's own end is kept when the right text follows it best
    gen, reasons, _ = _drive(
        _runner(), _job([[10, 11, 12, 13]], trace), [[10, 11, 12, 13]], ["end"], 4
    )
    assert gen == [[10, 11, 12, 13]] and reasons == ["end"]


def test_a_span_that_ran_into_the_right_text_late_is_cut_back_too():
    # joined after 4 tokens (the repeat of the right text already removed from the trace's
    # tokens, its steps still in the trace); the right text follows the first token best
    trace = [(-0.1, -3.0), (-0.1, -2.0), (-0.1, -2.0), (-0.1, -2.0), (-0.1, -2.0), (-0.1, -2.0)]
    job = _job([[10, 11, 12, 13]], trace)
    gen, reasons, _ = _drive(_runner(), job, [[10, 11, 12, 13]], ["joined"], 1)
    assert gen == [[10]] and reasons == ["best"]
    gen, reasons, _ = _drive(_runner(), job, [[10, 11, 12, 13]], ["joined"], 4)
    assert gen == [[10, 11, 12, 13]] and reasons == ["joined"]


def test_no_cut_where_the_end_was_forbidden_or_inside_a_word():
    # after 1 token the end was forbidden (a rule of the decoder); token 12 continues a word
    trace = [(-0.1, -3.0), (-0.1, -math.inf), (-0.1, -5.0), (-0.1, -5.0), (-0.5, -0.5)]
    cands = candidates(trace, [10, 11, 12, 13], "end", _runner({12}).cut_points)
    assert [t for t, _, _ in cands] == [3, 4]
    gen, reasons, _ = _drive(
        _runner({12}), _job([[10, 11, 12, 13]], trace), [[10, 11, 12, 13]], ["end"], 1
    )
    assert gen == [[10, 11, 12, 13]] and reasons == ["end"]  # 1 is no candidate: none wins


def test_the_candidates_score_the_span_and_its_end():
    trace = [(-0.5, -9.0), (-1.0, -2.0), (-0.25, -0.5)]
    # picked tokens' log-probabilities sum up to each cut; the end's is the one there
    assert candidates(trace, [10, 11], "end", [True] * VOCAB) == [(1, -0.5, -2.0), (2, -1.5, -0.5)]
    # a span cut at its cap keeps its cap as a candidate (its end: none asked, 0)
    trace = [(-0.5, -9.0), (-1.0, -2.0)]
    assert candidates(trace, [10, 11], "max", [True] * VOCAB) == [(1, -0.5, -2.0), (2, -1.5, 0.0)]


def test_the_length_prior_keeps_a_longer_fill_that_costs_little_more():
    # (t, log P of the first t tokens, log P of the end there); the text after reads the same
    cands = [(1, -1.0, -1.0), (3, -1.8, -1.0)]
    assert choose(cands, [0.0, 0.0], bonus=0.0) == 0  # the sum alone: the shorter wins
    assert LENGTH_BONUS > 0 and choose(cands, [0.0, 0.0]) == 1  # 0.8 nats for two more tokens
    # a longer fill that costs more than the prior gives is still cut
    assert choose([(1, -1.0, -1.0), (3, -4.0, -1.0)], [0.0, 0.0]) == 0


@pytest.mark.parametrize(
    "job_kw, reason",
    [
        (dict(fixed=True), "fixed"),  # a fixed length is the user's
        (dict(right=[]), "end"),  # no text after the blank to read
        (dict(stop="model"), "end"),  # the rule off: the model's own end
    ],
)
def test_spans_the_rule_leaves_alone(job_kw, reason):
    trace = [(-0.1, -3.0), (-0.1, -2.0), (-0.1, -2.0), (-0.1, -2.0), (-2.0, -2.0)]
    job = _job([[10, 11, 12, 13]], trace, **job_kw)
    gen, reasons, readings = _drive(_runner(), job, [[10, 11, 12, 13]], [reason], 2)
    assert gen == [[10, 11, 12, 13]] and reasons == [reason] and readings == []


def test_a_fill_cut_by_the_rule_still_fits_its_blank_and_says_why(engine):
    from magnet_model.inference.blanks import END_REASONS, FilledSpan

    s = FilledSpan("a b", [1, 2], 0, 3, "best")
    assert s.fits and not s.stopped and "text after the blank" in END_REASONS["best"]


def test_an_unknown_stop_rule_is_refused_with_the_choices(engine):
    with pytest.raises(InputError, match="fill_stop must be one of join, model"):
        engine.infill("the cat [blank] on the mat .", fill={"stop": "nearest"})


def test_a_fill_is_cut_between_words_and_before_closing_punctuation_never_inside_a_word():
    from magnet_model.inference.stops import cut_points
    from magnet_model.loading import load_base
    from magnet_model.settings import ModelSpec

    _, tok, _ = load_base(ModelSpec(adapters={}, device="cpu"))
    cuts = cut_points(tok)
    ids = tok("anarcho-syndicalism spread, the government's power.", add_special_tokens=False)
    pieces = tok.convert_ids_to_tokens(ids.input_ids)
    may = {p: cuts[i] for p, i in zip(pieces, ids.input_ids, strict=True)}
    assert may["Ġspread"] and may[","] and may["Ġthe"] and may["."]
    assert not may["-"] and not may["'s"]
    assert not may["ism"] and not may["arch"]
    # a closing curly quote closes like '"', though its byte-level string reads "âĢĿ"
    ids = tok("He said “no” to it.", add_special_tokens=False).input_ids
    pieces = tok.convert_ids_to_tokens(ids)
    assert "âĢĿ" in pieces and cuts[ids[pieces.index("âĢĿ")]]
    assert not cuts[ids[pieces.index("no")]]


def test_a_span_does_not_end_while_it_holds_only_white_space():
    """A bare " " token and then the end would fill the blank with nothing."""
    import torch

    from magnet_model.inference.infill import span_steps

    words = {1: " ", 2: " word", 3: " more"}
    runner = SimpleNamespace(
        special_ids=lambda roles: [],
        config=SimpleNamespace(stop_at_right_context=False),
        word_continuations=[False] * 4,
        tokenizer=SimpleNamespace(decode=lambda ids: "".join(words[i] for i in ids)),
    )
    job = SimpleNamespace(
        limits=[8], roles=SimpleNamespace(span_end=0), span_end=SimpleNamespace(apply=lambda x: x),
        piece_ids=[[], []], fill=MagnetFill(no_repeat=0, branches=1), close=None,
        fixed=[False], min_tokens=1, branch_at=None,
    )  # fmt: skip
    # the model wants " " first, then its end; after a word, the end again
    wants = [[0.0, 5.0, 1.0, 0.0], [5.0, 0.0, 4.0, 1.0], [5.0, 0.0, 1.0, 4.0]]
    steps = span_steps(runner, job, SimpleNamespace(pick=lambda logits: logits.argmax(-1)))
    active, generated = next(steps)
    i = 0
    try:
        while True:
            active, generated = steps.send(torch.tensor([wants[min(i, 2)]]))
            i += 1
    except StopIteration as done:
        generated, reasons = done.value
    assert generated == [[1, 2]] and reasons == ["end"]  # " word", not " "
