"""Role tokens chosen by the weights, <span_end> read with its tie and calibration, no fill with
a never-trained token, and trained role rows in batches that mix adapters (tiny random Llama;
the embedded model's own rows in test_embedded_model.py)."""

from __future__ import annotations

import math

import numpy as np
import pytest
import torch
from test_engine import TEXT, ids_of, loaded, metas, peft_model
from tiny_models import make_tiny_llama, make_tiny_tokenizer

from magnet_model import head_rows
from magnet_model.errors import ConfigError
from magnet_model.evaluation import calibrate
from magnet_model.evaluation.scoring import SpanCase, hybrid_span_nll
from magnet_model.inference.engine import Engine
from magnet_model.role_rows import RoleRows
from magnet_model.span_end import SpanEnd
from magnet_model.tokens import CANDIDATES, choose_token_roles


@pytest.fixture(scope="module")
def tok():
    return make_tiny_tokenizer()


def fresh_engine(tok) -> Engine:
    """An engine of its own (tests here change its weights or its metadata)."""
    return Engine(loaded(peft_model(tok), tok), metas=metas(tok))


def copy_row(lm, src: int, dst: int, noise: float = 0.0) -> None:
    with torch.no_grad():
        w = lm.get_input_embeddings().weight
        w[dst] = w[src] + noise


# ---------------------------------------------------------------- rows of their own


def tiny_lm(tok, **kw):
    """Rows large enough for a hidden state to reach any token (as tiny_models.tiny_engine)."""
    return make_tiny_llama(len(tok), initializer_range=0.5, **kw)


def test_random_rows_keep_the_tokenizer_only_choice(tok):
    assert choose_token_roles(tok, tiny_lm(tok)) == choose_token_roles(tok)


def test_span_end_is_a_reachable_token(tok):
    lm = make_tiny_llama(len(tok))  # small rows: p of every role token stays low
    roles = choose_token_roles(tok, lm)
    vocab = tok.get_vocab()
    rest = [vocab[t] for t in ("<issue_comment>", "<repo_name>", "<|endoftext|>")]
    p = {t: head_rows.reachable(lm, t) for t in rest}
    assert roles.span_end == max(p, key=p.get)  # none reaches 0.5: the closest one
    with torch.no_grad():
        lm.get_input_embeddings().weight[rest[2]] *= 40.0
    assert choose_token_roles(tok, lm).span_end == rest[2]


def test_a_role_token_whose_row_has_twins_is_refused(tok):
    lm = tiny_lm(tok)
    first = choose_token_roles(tok)
    word = tok.get_vocab()["the"]
    copy_row(lm, first.span_end, word, noise=1e-3)  # a near twin (max-abs 1e-3)
    roles = choose_token_roles(tok, lm)
    assert first.span_end not in roles.special_ids()
    assert roles.span_end == tok.get_vocab()["<repo_name>"]  # the next candidate
    weight = lm.get_output_embeddings().weight
    for t in roles.special_ids():
        assert head_rows.near_duplicates(weight, t) == []


def test_an_input_row_twin_is_refused_when_the_head_is_untied(tok):
    lm = tiny_lm(tok, tie_word_embeddings=False)
    first = choose_token_roles(tok)
    copy_row(lm, first.mask, tok.get_vocab()["cat"])  # input embedding only
    assert head_rows.near_duplicates(lm.get_output_embeddings().weight, first.mask) == []
    assert first.mask not in choose_token_roles(tok, lm).special_ids()


def test_too_few_usable_candidates_say_which_were_refused(tok):
    lm = tiny_lm(tok)
    vocab = tok.get_vocab()
    present = [vocab[c] for c in CANDIDATES if c in vocab]
    for t in present[1:]:
        copy_row(lm, present[0], t)
    with pytest.raises(ConfigError, match="nearly duplicates"):
        choose_token_roles(tok, lm)


def test_near_duplicates_by_max_abs_and_by_cosine():
    gen = torch.Generator().manual_seed(0)
    w = torch.randn(50, 16, generator=gen)
    w[3] = w[1] + 5e-3  # every coordinate within 1e-2
    w[7] = 3.0 * w[1]  # the same direction
    w[9] = w[1] + 0.05  # neither
    assert head_rows.near_duplicates(w, 1) == [3, 7]
    assert head_rows.tie_of(w, 1) == [1, 3, 7]


def test_a_token_tied_with_k_rows_cannot_pass_one_over_k_plus_one(tok):
    lm = tiny_lm(tok)
    target = tok.get_vocab()["<gh_stars>"]
    assert head_rows.reachable(lm, target) > 0.5
    for t in (tok.get_vocab()[w] for w in ("dog", "bird", "fish")):
        copy_row(lm, target, t)
    assert head_rows.reachable(lm, target) <= 0.25 + 1e-3


DEVICES = ["cpu"] + (["cuda"] if torch.cuda.is_available() else [])


@pytest.mark.parametrize("device", DEVICES)
def test_reachable_searches_on_the_device_of_the_model(tok, device):
    """The trainer picks <span_end> with reachable() on the model it trains, on a GPU too (its
    random start is drawn on the CPU and must follow the head's device)."""
    lm = tiny_lm(tok).to(device)
    target = tok.get_vocab()["<gh_stars>"]
    assert head_rows.reachable(lm, target) > 0.5


def test_undertrained_rows_are_the_twin_cluster_and_its_neighbours():
    gen = torch.Generator().manual_seed(0)
    w = torch.randn(200, 32, generator=gen)
    assert head_rows.undertrained(w) == []  # no twins: nothing is known to be untrained
    centre = torch.randn(32, generator=gen)
    for i in (10, 11, 12):
        w[i] = centre  # exact twins: the never-trained cluster
    w[50] = centre + 0.05 * torch.randn(32, generator=gen)  # hardly trained
    assert head_rows.undertrained(w) == [10, 11, 12, 50]


# ---------------------------------------------------------------- the end with its tie


def test_span_end_gives_the_end_the_whole_tie_and_the_bias():
    gen = torch.Generator().manual_seed(0)
    logits = torch.randn(4, 30, generator=gen)
    p = logits.softmax(-1)
    merged = SpanEnd(5, (2, 5, 9)).apply(logits.clone()).softmax(-1)
    assert torch.allclose(merged[:, 5], p[:, [2, 5, 9]].sum(-1), atol=1e-6)
    assert (merged[:, [2, 9]] == 0).all()
    assert torch.allclose(merged[:, 0], p[:, 0], atol=1e-6)  # the rest unchanged
    biased = SpanEnd(5, (5,), bias=2.0).apply(logits.clone())
    assert torch.allclose(biased[:, 5], logits[:, 5] + 2.0)
    assert not SpanEnd(5, (5,)).changes_logits


def calibrated(engine, bias: float) -> Engine:
    engine.runner.metas["magnet"].calibration = {"span_end_bias": bias}
    return engine


def test_decoding_applies_the_calibration(tok):
    engine = fresh_engine(tok)
    plain = engine.infill(TEXT, adapter="magnet", max_span_tokens=6)
    assert {s.end_reason for s in plain.spans} != {"end"}
    stops = calibrated(engine, 60.0).infill(TEXT, adapter="magnet", max_span_tokens=6)
    assert [s.end_reason for s in stops.spans] == ["end"] * 3
    assert [len(s.token_ids) for s in stops.spans] == [1, 1, 1]  # the first token may not end


def test_scoring_reads_the_end_as_decoding_does(tok):
    engine = fresh_engine(tok)
    enc = engine.runner.encode
    left, span, right = "the cat sat on", "the mat and", "the dog ran ."
    cases = [SpanCase(enc(left), enc(span), enc(right), left, span, right)]
    base = hybrid_span_nll(engine, cases, "magnet")[0]
    shifted = hybrid_span_nll(calibrated(engine, 2.0), cases, "magnet")[0]
    assert shifted.end < base.end and shifted.span > base.span
    # what decoding reads: the same logits through the adapter's SpanEnd
    span_end = engine.runner.span_end("magnet")
    assert span_end.bias == 2.0
    p_end = math.exp(-base.end)
    expected = -math.log(p_end * math.e**2 / (1 - p_end + p_end * math.e**2))
    assert shifted.end == pytest.approx(expected, rel=1e-4)


def test_the_fitted_bias_is_the_nll_optimum():
    """Two-outcome case: the bias that minimises the NLL puts p(end) at the ends' share."""
    n, ends = 400, 60
    z_end, z_rest = np.zeros(n), np.zeros(n)
    is_end = np.arange(n) < ends
    z_target = np.where(is_end, 0.0, 0.0)
    from scipy.optimize import minimize_scalar

    best = minimize_scalar(
        lambda b: calibrate.nlls(b, z_end, z_rest, z_target, is_end)[0],
        bounds=(-20, 20),
        method="bounded",
    )
    assert best.x == pytest.approx(math.log(ends / (n - ends)), abs=1e-3)


# ---------------------------------------------------------------- never-trained tokens


def test_no_fill_contains_a_never_trained_or_tied_token(tok):
    engine = fresh_engine(tok)
    lm = engine.runner.lm
    vocab = tok.get_vocab()
    junk = [vocab[w] for w in ("fire", "earth", "air")]
    for t in junk[1:]:
        copy_row(lm, junk[0], t)  # a cluster of twins: never trained, by the weights
    with torch.no_grad():  # make the cluster the model's favourite everywhere
        w = lm.get_input_embeddings().weight
        for t in junk:
            w[t] *= 25.0
    assert set(junk) <= set(engine.runner.undertrained_ids)
    results = [
        engine.infill(TEXT, adapter="magnet", max_span_tokens=8),
        engine.infill_prompted(TEXT, shots=0, max_span_tokens=8),
        engine.infill(TEXT, adapter="magnet", max_span_tokens=8, do_sample=True, seed=3),
    ]
    for r in results:
        assert not {t for s in r.spans for t in s.token_ids} & set(junk)
    for adapter in (None, "magnet"):  # nor any continuation
        assert not set(engine.generate("the cat", adapter, max_new_tokens=8).token_ids) & set(junk)


def test_a_typed_role_token_name_is_text(tok):
    engine = fresh_engine(tok)
    roles = engine.runner.roles("magnet")
    assert not set(engine.runner.encode("the <filename> cat <issue_comment>")) & set(
        roles.special_ids()
    )


# ---------------------------------------------------------------- trained role rows


def with_role_rows(engine, scale: float = 2.0) -> Engine:
    roles = engine.runner.roles("magnet")
    weight = engine.runner.lm.get_input_embeddings().weight
    rows = RoleRows.from_weight(sorted(roles.special_ids()), weight)
    with torch.no_grad():
        rows.rows.mul_(scale).add_(torch.randn(rows.rows.shape, generator=torch.Generator()))
    engine.runner.role_rows["magnet"] = rows
    return engine


def test_role_rows_change_magnet_only_and_mixed_batches_equal_separate_calls(tok):
    engine = fresh_engine(tok)
    systems = ["magnet", "zero-shot", "five-shot"]
    before = engine.compare_infill(TEXT, systems, max_span_tokens=5)
    with_role_rows(engine)
    together = engine.compare_infill(TEXT, systems, max_span_tokens=5)
    alone = [
        engine.infill(TEXT, adapter="magnet", max_span_tokens=5),
        engine.infill_prompted(TEXT, shots=0, max_span_tokens=5),
        engine.infill_prompted(TEXT, shots=5, max_span_tokens=5),
    ]
    assert [ids_of(r) for r in together] == [ids_of(r) for r in alone]
    assert ids_of(together[0]) != ids_of(before[0])  # the rows are used by magnet...
    assert [ids_of(r) for r in together[1:]] == [ids_of(r) for r in before[1:]]  # ...alone


def test_role_rows_round_trip(tmp_path):
    rows = RoleRows([3, 1], torch.randn(2, 8))
    rows.save(tmp_path)
    back = RoleRows.load(tmp_path)
    assert back.ids.tolist() == [3, 1] and torch.equal(back.rows, rows.rows)
    assert RoleRows.load(tmp_path / "none") is None
