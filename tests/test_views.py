"""The training views: span sampling, MNTP corruption, MSG layout, sentence pairs, padding."""

from __future__ import annotations

import random
from collections import Counter

import pytest
import torch

from magnet_model.layout import IGNORE
from magnet_model.masks import build_mask
from magnet_model.tokens import choose_token_roles, word_edges, word_start_table
from magnet_model.training.views import (
    ViewConfig,
    causal_example,
    collate_masked,
    collate_sentences,
    masked_example,
    replacement_vocab,
    sample_spans,
    span_length_range,
)


@pytest.fixture
def roles(tiny_tokenizer):
    return choose_token_roles(tiny_tokenizer)


@pytest.fixture
def vocab(tiny_tokenizer, roles):
    return replacement_vocab(len(tiny_tokenizer), roles, set(tiny_tokenizer.all_special_ids))


def text(n: int, seed: int = 0) -> list[int]:
    rng = random.Random(seed)
    return [rng.randrange(11, 100) for _ in range(n)]


def test_span_lengths_follow_the_paper_for_long_texts_and_shrink_for_short_ones():
    cfg = ViewConfig()
    assert span_length_range(128, cfg) == (8, 32)
    assert span_length_range(512, cfg) == (8, 32)
    assert span_length_range(32, cfg) == (2, 8)
    assert span_length_range(6, cfg) == (1, 1)


@pytest.mark.parametrize("n", [2, 5, 17, 64, 128])
def test_spans_are_disjoint_separated_inside_the_text_and_within_budget(n):
    cfg = ViewConfig()
    lo, hi = span_length_range(n, cfg)
    seen_counts, touches_end = Counter(), False
    for seed in range(300):
        spans = sample_spans(n, cfg, random.Random(seed))
        assert 1 <= len(spans) <= cfg.max_spans
        seen_counts[len(spans)] += 1
        for a, b in spans:
            assert 0 <= a < b <= n
            assert b - a <= hi
        for (_, b1), (a2, _) in zip(spans, spans[1:], strict=False):
            assert a2 >= b1 + 1, "two blanks must not touch"
        assert sum(b - a for a, b in spans) <= max(1, int(n * cfg.span_budget))
        touches_end |= spans[-1][1] == n
    if n >= 64:
        assert len(seen_counts) == cfg.max_spans, "1, 2 and 3 spans all occur"
        assert touches_end, "a span may end the text (continuation-like)"


def test_without_mntp_the_masked_view_is_the_hybrid_layout_of_the_text(roles, vocab):
    ids = text(40)
    ex = masked_example(ids, roles, vocab, ViewConfig(), random.Random(3), mntp=False)
    assert all(label == IGNORE for label in ex.mntp_labels)
    # reassemble: replace each blank by its span -> the original text
    n_ctx = ex.segments.index(1)
    context = ex.input_ids[:n_ctx]
    spans = {}
    for tok, seg in zip(ex.input_ids[n_ctx:], ex.segments[n_ctx:], strict=True):
        spans.setdefault(seg, []).append(tok)
    rebuilt, k = [], 1
    for tok in context:
        if tok == roles.blank:
            assert spans[k][0] == roles.span_start
            rebuilt.extend(spans[k][1:])
            k += 1
        else:
            rebuilt.append(tok)
    assert rebuilt == ids
    # MSG labels: each span's tokens, then <span_end>; nothing on context
    assert all(label == IGNORE for label in ex.msg_labels[:n_ctx])
    for k, span in spans.items():
        labels = [lab for lab, s in zip(ex.msg_labels, ex.segments, strict=True) if s == k]
        assert labels == span[1:] + [roles.span_end]


def test_mntp_selects_a_fifth_of_context_and_labels_sit_one_to_the_left(roles, vocab):
    ids = text(60)
    ex = masked_example(ids, roles, vocab, ViewConfig(), random.Random(5), bos=1, msg=True)
    n_ctx = ex.segments.index(1)
    clean = masked_example(ids, roles, vocab, ViewConfig(), random.Random(5), bos=1, mntp=False)
    # the same spans were drawn (span sampling comes first from the same rng)
    assert clean.segments == ex.segments
    context = [i for i in range(1, n_ctx) if clean.input_ids[i] != roles.blank]
    selected = [i + 1 for i, lab in enumerate(ex.mntp_labels) if lab != IGNORE]
    assert len(selected) == round(0.2 * len(context))
    assert set(selected) <= set(context), "never bos, a blank or a span token"
    for i in selected:
        assert ex.mntp_labels[i - 1] == clean.input_ids[i]
    unselected = [i for i in range(len(ids)) if i not in selected]
    assert [ex.input_ids[i] for i in unselected] == [clean.input_ids[i] for i in unselected]
    assert ex.msg_labels == clean.msg_labels


def test_mntp_corruption_is_80_10_10_and_random_tokens_are_never_special(roles, vocab):
    counts = Counter()
    specials = roles.special_ids() | {roles.pad, roles.sentence_end}
    for seed in range(200):
        ids = text(50, seed)
        rng = random.Random(seed)
        ex = masked_example(ids, roles, vocab, ViewConfig(), rng, msg=False)
        for i, lab in enumerate(ex.mntp_labels):
            if lab == IGNORE:
                continue
            new = ex.input_ids[i + 1]
            if new == roles.mask:
                counts["mask"] += 1
            elif new == lab:
                counts["kept"] += 1  # includes random draws that hit the same token (rare)
            else:
                counts["random"] += 1
                assert new not in specials
    total = sum(counts.values())
    assert total == 200 * 10
    assert 0.77 < counts["mask"] / total < 0.83
    assert 0.07 < counts["random"] / total < 0.13
    assert 0.07 < counts["kept"] / total < 0.13


def test_without_msg_everything_is_context(roles, vocab):
    ex = masked_example(text(30), roles, vocab, ViewConfig(), random.Random(0), msg=False)
    assert set(ex.segments) == {0}
    assert all(label == IGNORE for label in ex.msg_labels)
    assert ex.position_ids == list(range(30))


def test_views_are_reproducible_from_the_seed(roles, vocab):
    a = masked_example(text(80), roles, vocab, ViewConfig(), random.Random(42))
    b = masked_example(text(80), roles, vocab, ViewConfig(), random.Random(42))
    c = masked_example(text(80), roles, vocab, ViewConfig(), random.Random(43))
    assert a == b
    assert a != c


def test_collate_masked_pads_right_with_ignored_labels(roles, vocab):
    rng = random.Random(0)
    exs = [masked_example(text(n, n), roles, vocab, ViewConfig(), rng) for n in (12, 40, 25)]
    batch = collate_masked(exs, roles.pad)
    width = max(len(e.input_ids) for e in exs)
    assert batch.input_ids.shape == (3, width)
    for row, ex in enumerate(exs):
        n = len(ex.input_ids)
        assert batch.attention_mask[row].tolist() == [1] * n + [0] * (width - n)
        assert batch.input_ids[row, :n].tolist() == ex.input_ids
        assert (batch.mntp_labels[row, n:] == IGNORE).all()
        assert (batch.msg_labels[row, n:] == IGNORE).all()
        assert batch.position_ids[row, :n].tolist() == ex.position_ids


def test_sentence_pairs_pool_the_text_and_end_token_but_not_the_instruction(roles):
    instruction = [40, 41, 42]
    texts = [[11, 12, 13], [14, 15, 16, 17, 18]]
    positives = [[20, 21], [22]]
    batch = collate_sentences(texts, positives, instruction, roles, bos=1)
    assert batch.input_ids.shape == (4, 1 + 3 + 5 + 1)
    for row, t in enumerate(texts + positives):
        n = 1 + 3 + len(t) + 1
        assert batch.input_ids[row, :n].tolist() == [1, 40, 41, 42, *t, roles.sentence_end]
        assert batch.attention_mask[row].sum() == n
        assert batch.pool_mask[row].tolist() == [0] * 4 + [1] * (len(t) + 1) + [0] * (10 - n)


# ---------------------------------------------------------------- word edges, all-span view


class _FakeBPE:
    """convert_ids_to_tokens of a byte-level vocabulary: Ġ marks a leading space."""

    tokens = ["Ġborn", "Ġin", "Ġ", "1", "8", ",", "Ġhe", "said", "Ġthe"]

    def __len__(self):
        return len(self.tokens)

    def convert_ids_to_tokens(self, ids):
        return [self.tokens[i] for i in ids]


def test_word_edges_never_split_a_bare_space_from_its_digits():
    table = word_start_table(_FakeBPE())
    # " born in 1887, he said": the word " 1887" starts at the bare space, not at "1"
    ids = [0, 1, 2, 3, 4, 4, 3, 5, 6, 7]
    assert word_edges(ids, table) == [
        True,
        True,
        True,
        False,
        False,
        False,
        False,
        False,
        True,
        False,
    ]
    # a vocabulary without space marks (word-level): every boundary is a word boundary
    assert word_edges([5, 6, 7], None) == [True, True, True]


def test_a_word_level_vocabulary_has_every_boundary(tiny_tokenizer):
    assert word_start_table(tiny_tokenizer) is None


@pytest.mark.parametrize("n", [17, 64, 128])
def test_spans_start_and_end_only_at_word_edges(n):
    cfg = ViewConfig()
    for seed in range(200):
        rng = random.Random(seed)
        edges = [i == 0 or rng.random() < 0.6 for i in range(n)]
        spans = sample_spans(n, cfg, random.Random(seed), edges)
        assert spans, "a span always fits when 60% of the tokens begin words"
        for a, b in spans:
            assert edges[a] and (b == n or edges[b]) and a < b
        for (_, b1), (a2, _) in zip(spans, spans[1:], strict=False):
            assert a2 >= b1 + 1


def test_all_span_view_is_plain_causal_language_modelling(roles, vocab):
    ids = text(20)
    cfg = ViewConfig(all_span_share=0.5)
    exs = [masked_example(ids, roles, vocab, cfg, random.Random(s)) for s in range(200)]
    causal = [e for e in exs if set(e.segments) == {1}]
    assert 60 < len(causal) < 140  # about half of the texts
    e = causal[0]
    assert e.input_ids == ids and e.position_ids == list(range(20))
    assert e.msg_labels == ids[1:] + [IGNORE]  # next token, no <span_end> at a chunk's end
    assert set(e.mntp_labels) == {IGNORE}  # no context, so nothing for MNTP
    # its hybrid mask is exactly the causal mask continuation runs with
    seg = torch.tensor([e.segments])
    real = torch.ones_like(seg)
    assert torch.equal(build_mask("hybrid", real, seg), build_mask("causal", real))
    # with a BOS: the BOS is context, every token sees it, and it predicts the first token
    b = causal_example(ids, bos=1)
    assert b.input_ids == [1, *ids] and b.segments == [0] + [1] * 20
    assert b.msg_labels == ids + [IGNORE]
    # the default share is 0 in ViewConfig (the trainer passes its own, 0.15 by default)
    assert all(
        set(e.segments) != {1}
        for s in range(50)
        for e in [masked_example(ids, roles, vocab, ViewConfig(), random.Random(s))]
    )
