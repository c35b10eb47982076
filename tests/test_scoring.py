"""Teacher-forced scoring on a tiny random Llama: every batched score equals the same score
computed the plain way (one unpadded sequence through the full model), spans are cut where
the docs say, and the hybrid score really reads the right context."""

from __future__ import annotations

import math
import random

import numpy as np
import pytest
import torch
from tiny_models import tiny_engine

from magnet_model import prompts
from magnet_model.evaluation import scoring
from magnet_model.layout import IGNORE, build_hybrid
from magnet_model.masks import build_mask

WORDS = "the cat sat on the mat . a dog ran to the old river and the bird flew over the sea".split()


def passage(seed: int, n: int = 90) -> str:
    rng = random.Random(seed)
    return " ".join(rng.choice(WORDS) for _ in range(n))


@pytest.fixture(scope="module")
def engine():
    return tiny_engine()


@pytest.fixture(scope="module")
def cases(engine):
    return scoring.span_cases(engine.tokenizer, [passage(i) for i in range(6)], 5, seed=0)


def plain_nll(model, ids, labels, mask=None, positions=None) -> np.ndarray:
    """NLL of labelled positions from one unbatched forward through the full LM (its head)."""
    with torch.inference_mode():
        logits = model(
            input_ids=torch.tensor([ids]), attention_mask=mask, position_ids=positions
        ).logits[0]
    y = torch.tensor(labels)
    keep = y != IGNORE
    return torch.nn.functional.cross_entropy(logits[keep], y[keep], reduction="none").numpy()


# ---------------------------------------------------------------- span cases


def test_span_cases_cut_whole_words_in_the_middle(engine, cases):
    tok = engine.tokenizer
    assert len(cases) == 5
    for i, c in enumerate(cases):
        full = tok(passage(i), add_special_tokens=False).input_ids[:192]
        assert c.left_ids + c.span_ids + c.right_ids == full
        assert 8 <= c.n_tokens <= 40  # 8..32, extended to the next word start by at most 8
        n = len(full)
        assert n // 3 <= len(c.left_ids) <= 2 * n // 3 + 8
        assert (c.left_text + c.span_text + c.right_text).split() == passage(i).split()
        for a, b in ((c.left_text, c.span_text), (c.span_text, c.right_text)):
            assert a[-1].isspace() or b[0].isspace()  # cut between words
        blanked = c.blanked("[blank]").split()
        assert (
            blanked.count("[blank]") == 1
            and len(blanked) == len(passage(i).split()) - len(c.span_text.split()) + 1
        )


def test_span_cases_are_seeded(engine, cases):
    again = scoring.span_cases(engine.tokenizer, [passage(i) for i in range(6)], 5, seed=0)
    other = scoring.span_cases(engine.tokenizer, [passage(i) for i in range(6)], 5, seed=1)
    assert [c.span_ids for c in again] == [c.span_ids for c in cases]
    assert [c.span_ids for c in other] != [c.span_ids for c in cases]


def test_short_passages_are_skipped(engine):
    assert scoring.make_span_case(engine.tokenizer, passage(0, n=20), random.Random(0)) is None


# ---------------------------------------------------------------- scores = plain computation


@pytest.mark.parametrize("adapter", [None, "magnet"])
def test_hybrid_span_nll_equals_one_plain_forward(engine, cases, adapter):
    got = scoring.hybrid_span_nll(engine, cases, adapter=adapter, batch_size=3)
    roles, bos = engine.runner.roles(adapter), engine.runner.bos(adapter)
    with engine.runner.using(adapter):  # the adapter on (or off) for the plain forward as well
        for c, g in zip(cases, got, strict=True):
            seq = build_hybrid([c.left_ids, c.right_ids], [c.span_ids], roles, bos, True)
            ones = torch.ones(1, len(seq.input_ids), dtype=torch.long)
            mask = build_mask("hybrid", ones, torch.tensor([seq.segments]))
            pos = torch.tensor([seq.position_ids])
            want = plain_nll(engine.model, seq.input_ids, seq.labels, mask, pos)
            assert len(want) == c.n_tokens + 1
            assert g.span == pytest.approx(want[:-1].sum(), rel=1e-4)
            assert g.end == pytest.approx(want[-1], rel=1e-4)


def test_hybrid_span_nll_keeps_log_p_end_at_every_span_position(engine, cases, monkeypatch):
    """end_logp: log p(<span_end>) after each true span token (the <span_start> output left
    out), through the same SpanEnd as decoding: here a bias, so the plain softmax must get it
    too."""
    from magnet_model.span_end import SpanEnd

    end = engine.runner.roles("magnet").span_end
    monkeypatch.setattr(engine.runner, "span_end", lambda adapter: SpanEnd(end, (end,), 1.5))
    got = scoring.hybrid_span_nll(engine, cases, adapter="magnet", batch_size=2)
    roles, bos = engine.runner.roles("magnet"), engine.runner.bos("magnet")
    with engine.runner.using("magnet"):
        for c, g in zip(cases, got, strict=True):
            seq = build_hybrid([c.left_ids, c.right_ids], [c.span_ids], roles, bos, True)
            ones = torch.ones(1, len(seq.input_ids), dtype=torch.long)
            mask = build_mask("hybrid", ones, torch.tensor([seq.segments]))
            logits = engine.model(
                input_ids=torch.tensor([seq.input_ids]),
                attention_mask=mask,
                position_ids=torch.tensor([seq.position_ids]),
            ).logits[0]
            logits[:, end] += 1.5
            keep = torch.tensor(seq.labels) != IGNORE
            want = torch.log_softmax(logits[keep], dim=-1)[1:, end].numpy()
            assert len(g.end_logp) == c.n_tokens
            assert g.end_logp == pytest.approx(want, rel=1e-4, abs=1e-5)
            assert -g.end_logp[-1] == pytest.approx(g.end, rel=1e-4)  # the last: the true end


def test_hybrid_span_nll_reads_the_right_context(engine, cases):
    c = cases[0]
    changed = scoring.SpanCase(
        c.left_ids, c.span_ids, c.right_ids[::-1], c.left_text, c.span_text, c.right_text
    )
    a, b = scoring.hybrid_span_nll(engine, [c, changed], adapter="magnet")
    assert a.span != pytest.approx(b.span, rel=1e-4)
    # the causal (left-only) score cannot see the right context at all
    x, y = scoring.causal_span_nll(engine, [c, changed], adapter="magnet")
    assert x.span == pytest.approx(y.span, rel=1e-5)


def test_adapter_changes_the_score(engine, cases):
    base = scoring.hybrid_span_nll(engine, cases[:2], adapter=None)
    magnet = scoring.hybrid_span_nll(engine, cases[:2], adapter="magnet")
    assert base[0].span != pytest.approx(magnet[0].span, rel=1e-4)


@pytest.mark.parametrize("shots", [0, 5])
def test_prompted_rows_label_exactly_the_answer_and_its_end(engine, cases, shots):
    tok = engine.tokenizer
    for c, (row, n) in zip(cases, scoring.prompted_rows(tok, cases, shots), strict=True):
        targets = [y for y in row.labels if y != IGNORE]
        answer = tok(" " + c.span_text.strip(), add_special_tokens=False).input_ids
        assert targets[:n] == answer and len(targets) == n + 1  # plain style: " " + words
        query = c.blanked(prompts.BLANK)
        prompt = tok(prompts.build_prompt(query, shots, tok), add_special_tokens=False).input_ids
        assert row.ids[: len(prompt)] == prompt
        assert row.labels.index(answer[0]) == len(prompt) - 1  # predicted by the prompt's end


def test_prompted_span_nll_equals_plain_forward(engine, cases):
    got = scoring.prompted_span_nll(engine, cases, shots=5, batch_size=2)
    rows = scoring.prompted_rows(engine.tokenizer, cases, 5)
    with engine.runner.using(None):
        for g, (row, n) in zip(got, rows, strict=True):
            want = plain_nll(engine.model, row.ids, row.labels)
            assert g.span == pytest.approx(want[:n].sum(), rel=1e-4)
            assert g.end == pytest.approx(want[n:].sum(), rel=1e-4)


def test_causal_nll_matches_the_models_own_loss(engine):
    texts = [passage(10, 40), passage(11, 70), passage(12, 15)]
    total, n = scoring.causal_nll(engine, texts, adapter="llm2vec", max_tokens=50, batch_size=2)
    want_total, want_n = 0.0, 0
    with engine.runner.using("llm2vec"):
        for t in texts:
            ids = torch.tensor([engine.tokenizer(t).input_ids[:50]])
            loss = engine.model(input_ids=ids, labels=ids).loss.item()  # mean over len - 1
            want_total += loss * (ids.shape[1] - 1)
            want_n += ids.shape[1] - 1
    assert n == want_n and total == pytest.approx(want_total, rel=1e-4)
    assert scoring.perplexity(total, n) == pytest.approx(math.exp(want_total / want_n), rel=1e-4)


def test_span_perplexity_uses_the_passage_token_count():
    scores = [scoring.SpanNLL(6.0, 1.0, 3), scoring.SpanNLL(2.0, 3.0, 1)]
    assert scoring.span_perplexity(scores) == pytest.approx(math.exp(8.0 / 4))
    assert scoring.span_perplexity(scores, with_end=True) == pytest.approx(math.exp(12.0 / 6))
    assert math.isnan(scoring.span_perplexity([]))


@pytest.mark.integration
def test_span_edges_never_fall_between_a_bare_space_and_its_digits():
    """SmolLM2 writes " 1887" as " " + "1" "8" "8" "7": no case may cut between the space and
    the digits, so the scored layout is the one typed text gives to generation."""
    from magnet_model.loading import load_base
    from magnet_model.settings import ModelSpec

    _, tok, _ = load_base(ModelSpec(adapters={}, device="cpu"))
    bare = tok.convert_tokens_to_ids("Ġ")
    years = " ".join(
        f"In {1800 + 7 * i} the town had {300 + i} houses and {2 * i + 5} mills." for i in range(40)
    )
    passages = [years] * 60
    cases = scoring.span_cases(tok, passages, 60, seed=0)
    assert len(cases) > 30
    for c in cases:
        assert c.left_ids[-1] != bare and c.span_ids[-1] != bare
        assert tok.convert_ids_to_tokens(c.span_ids[0]).startswith("Ġ")
        assert not c.right_ids or tok.convert_ids_to_tokens(c.right_ids[0]).startswith("Ġ")
        # the blanked text, as a user types it, gives the same left and right tokens
        left, right = c.blanked("[blank]").split(" [blank]")
        assert tok(left.rstrip(), add_special_tokens=False).input_ids == c.left_ids
        assert tok(right, add_special_tokens=False).input_ids == c.right_ids


def test_a_blank_keeps_the_punctuation_that_followed_the_span_attached():
    def case(left, span, right):
        return scoring.SpanCase([], [], [], left, span, right)

    assert case("He came ", "home", ", then left.").blanked("[blank]") == (
        "He came [blank], then left."
    )
    assert (
        case("He came", " home", " then left.").blanked("[blank]") == "He came [blank] then left."
    )
    # word-level offsets keep the space in the span: one is put back before the next word
    assert case("He came", " home ", "then left.").blanked("[blank]") == (
        "He came [blank] then left."
    )
    assert case("He came ", "home", "").blanked("[blank]") == "He came [blank]"
