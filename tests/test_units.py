"""The blanks people make (magnet_model/units.py), the gap after a blank (layout.GapRule), and
MSG views cut from units (training/views.py)."""

from __future__ import annotations

import random
from collections import Counter

import pytest

from magnet_model.adapter_meta import AdapterMeta
from magnet_model.layout import GapRule, build_hybrid
from magnet_model.tokens import TokenRoles, choose_token_roles
from magnet_model.training.views import ViewConfig, masked_example, sample_unit_spans
from magnet_model.units import (
    Unit,
    ends_sentence,
    phrase_spans,
    sentence_spans,
    text_units,
    token_units,
)

TEXT = (
    "Dr. Smith moved to Paris in 1887. He opened a small shop, which sold maps and books; "
    "it closed in 1901. Leon Czolgosz was arrested."
)
ROLES = TokenRoles(mask=1, blank=2, span_start=3, span_end=4, sentence_end=5, pad=0)


def pieces(text: str, spans) -> list[str]:
    return [text[a:b] for a, b in spans]


# ---------------------------------------------------------------- units


def test_sentences_are_whole_and_an_abbreviation_does_not_end_one():
    assert pieces(TEXT, sentence_spans(TEXT)) == [
        "Dr. Smith moved to Paris in 1887.",
        "He opened a small shop, which sold maps and books; it closed in 1901.",
        "Leon Czolgosz was arrested.",
    ]


def test_phrases_lie_between_punctuation_and_never_hold_the_whole_sentence():
    second = sentence_spans(TEXT)[1]
    got = pieces(TEXT, phrase_spans(TEXT, second))
    assert got == ["He opened a small shop", "which sold maps and books", "it closed in 1901"]
    one = "A short plain sentence."
    assert phrase_spans(one, sentence_spans(one)[0]) == []


def test_words_skip_short_function_words_and_names_come_as_one_unit():
    units = text_units(TEXT)
    words = {u.text(TEXT) for u in units if u.kind == "word"}
    assert {"Smith", "moved", "Paris", "Leon Czolgosz", "arrested"} <= words
    assert not {"to", "in", "He", "a"} & words


def test_ends_sentence_reads_final_punctuation_through_closing_quotes():
    assert ends_sentence("It closed.") and ends_sentence('He said "no."') and ends_sentence("Why?")
    assert not ends_sentence("The city is also the") and not ends_sentence("maps, and")
    # a title before a name ends no sentence; a word that happens to end like one does
    assert (
        not ends_sentence("Dr.") and not ends_sentence("said Mr.") and not ends_sentence("(Prof.")
    )
    assert ends_sentence("It was his Dr.") is False and ends_sentence("They drove fast.")
    assert ends_sentence("He was born in Mt. Vernon.") and ends_sentence("Beyond the First.")


def test_token_units_hold_exactly_their_unit_or_are_left_out():
    # offsets of a byte-level-BPE-like split: the space sits in the token after it
    text = "He opened shops. It closed."
    words = ["He", " opened", " shop", "s", ".", " It", " closed", "."]
    offsets, at = [], 0
    for w in words:
        offsets.append((at, at + len(w)))
        at += len(w)
    got = {(a, b, k) for a, b, k in token_units(text, offsets)}
    assert (0, 5, "sentence") in got and (5, 8, "sentence") in got
    assert (1, 2, "word") in got  # " opened": the space before the word travels with it
    # "shops" ends inside no token but starts a token that is not a word start -> kept whole
    assert (2, 4, "word") in got
    # with word starts given, a unit may not begin on a token that starts no word
    starts = [True, True, True, False, False, True, True, False]
    cut = Unit(text.index("s."), text.index("s.") + 1, "word")
    assert token_units(text, offsets, starts, [cut]) == []


# ---------------------------------------------------------------- the gap


def test_gap_zero_is_the_first_layout_and_a_gap_moves_only_the_text_after_its_blank():
    pieces_ = [[10, 11], [12, 13], [14]]
    spans = [[20, 21], [22]]
    old = build_hybrid(pieces_, spans, ROLES, bos=9)
    assert old.position_ids == build_hybrid(pieces_, spans, ROLES, bos=9, gaps=[0, 0]).position_ids
    seq = build_hybrid(pieces_, spans, ROLES, bos=9, gaps=[5, 2])
    # bos 0, c0 1-2, blank 3, (gap 5) c1 9-10, blank 11, (gap 2) c2 14; spans from their blank
    assert seq.position_ids[: seq.context_length] == [0, 1, 2, 3, 9, 10, 11, 14]
    assert seq.position_ids[seq.context_length :] == [3, 4, 5, 11, 12]
    span_pos = set(seq.position_ids[seq.context_length :])
    assert not span_pos & set(seq.position_ids[4:6]), "no right-context token on a span position"
    assert seq.span_position(1, 0) == 11


def test_adjacent_blanks_each_keep_their_gap():
    seq = build_hybrid([[10], [], [11]], [[], []], ROLES, gaps=[4, 4])
    assert seq.position_ids == [0, 1, 6, 11, 1, 6]


def test_the_gap_rule_is_recorded_and_an_old_config_reads_as_gap_zero():
    rule = GapRule(default=32, hint_share=0.5, hint_noise=0.2)
    meta = AdapterMeta(token_roles=ROLES, gap=rule)
    assert AdapterMeta.from_dict(meta.to_dict()).gap == rule
    old = AdapterMeta(token_roles=ROLES).to_dict()
    assert "layout" not in old and AdapterMeta.from_dict(old).gap == GapRule()
    assert GapRule().inference_gap(12) == 0  # no hints trained: a length changes nothing
    assert rule.inference_gap(None) == 32 and rule.inference_gap(12) == 12
    assert "sentence" not in rule.to_dict()  # written as before the sentence gap existed
    with pytest.raises(ValueError):
        GapRule(default=-1)


def test_a_blank_between_sentences_gets_the_rules_sentence_gap_and_nothing_else_does():
    rule = GapRule(default=32, hint_share=0.5, hint_noise=0.2, sentence=56)
    assert AdapterMeta.from_dict(AdapterMeta(token_roles=ROLES, gap=rule).to_dict()).gap == rule
    assert rule.inference_gap(None, between_sentences=True) == 56
    assert rule.inference_gap(None) == 32  # inside a sentence: the default
    assert rule.inference_gap(12, between_sentences=True) == 12  # a length given wins
    # a model that never learnt to read gaps as lengths keeps its one gap
    assert GapRule(default=32, sentence=56).inference_gap(None, between_sentences=True) == 32
    for bad in (0, -3, 2.5, True, "56"):
        with pytest.raises(ValueError, match="sentence gap"):
            GapRule(default=32, hint_share=0.5, sentence=bad)


def test_training_gaps_are_the_default_or_a_noisy_true_length_in_the_stated_share():
    rule = GapRule(default=32, hint_share=0.5, hint_noise=0.2)
    rng = random.Random(0)
    gaps = [rule.training_gap(20, rng) for _ in range(2000)]
    hinted = [g for g in gaps if g != 32]
    assert 0.45 < len(hinted) / len(gaps) < 0.55
    assert min(hinted) >= 16 and max(hinted) <= 24 and len(set(hinted)) > 3


# ---------------------------------------------------------------- views from units


def test_unit_spans_are_units_of_the_drawn_kind_disjoint_and_leave_context():
    n = 60
    units = [(0, 12, "sentence"), (13, 30, "sentence"), (31, 60, "sentence")]
    units += [(2, 5, "phrase"), (15, 19, "phrase"), (40, 44, "phrase")]
    units += [(i, i + 1, "word") for i in range(0, 60, 3)]
    cfg = ViewConfig(unit_shares={"sentence": 1, "phrase": 1, "word": 1}, max_spans=3)
    seen = Counter()
    for seed in range(300):
        spans = sample_unit_spans(n, units, cfg, random.Random(seed))
        assert spans and spans == sorted(spans)
        for (_, b1), (a2, _) in zip(spans, spans[1:], strict=False):
            assert a2 > b1, "blanks never touch"
        assert sum(b - a for a, b in spans) <= n - n // 4
        for a, b in spans:
            kind = next((k for x, y, k in units if (x, y) == (a, b)), "window")
            seen[kind] += 1
    # a window only where every unit of the drawn kind was taken or too close to another
    assert min(seen[k] for k in ("sentence", "phrase", "word")) > 100
    assert seen["window"] < sum(seen.values()) / 10, seen


def test_a_kind_the_text_lacks_becomes_a_random_window():
    cfg = ViewConfig(unit_shares={"sentence": 1})
    spans = sample_unit_spans(64, [], cfg, random.Random(1))
    assert spans and all(8 <= b - a <= 32 for a, b in spans)


def test_the_masked_view_blanks_a_sentence_and_puts_its_right_context_after_the_gap(
    tiny_tokenizer,
):
    roles = choose_token_roles(tiny_tokenizer)
    ids = list(range(20, 60))
    units = [(10, 20, "sentence")]
    cfg = ViewConfig(unit_shares={"sentence": 1}, max_spans=1, gap=GapRule(default=16))
    ex = masked_example(ids, roles, [30], cfg, random.Random(0), mntp=False, units=units)
    span = [t for t, s in zip(ex.input_ids, ex.segments, strict=True) if s == 1]
    assert span == [roles.span_start, *ids[10:20]]
    blank = ex.input_ids.index(roles.blank)
    assert ex.position_ids[blank] == 10 and ex.position_ids[blank + 1] == 10 + 1 + 16
    assert ex.msg_labels[-1] == roles.span_end


# ---------------------------------------------------------------- decoding with a gap


def test_decoding_with_a_gap_is_the_layout_it_was_trained_on(monkeypatch):
    """Cached decoding equals re-encoding the layout at every step with the adapter's gap,
    the gap changes what is written (the right context moved), and a fixed length is read as
    a length hint by a model trained with hints."""
    from dataclasses import replace

    from tiny_models import tiny_engine

    from magnet_model.inference.infill import infill_job

    engine = tiny_engine()
    text = "the river [blank] the old town and the river [blank] the sea"
    kw = dict(adapter="magnet", max_span_tokens=[5, 4])
    before = engine.infill(text, **kw)
    meta = engine.runner.metas["magnet"]
    monkeypatch.setitem(
        engine.runner.metas, "magnet", replace(meta, gap=GapRule(16, hint_share=0.5))
    )
    fast = engine.infill(text, **kw)
    slow = engine.infill_reference(text, **kw)
    ids = [s.token_ids for s in fast.spans]
    assert ids == [s.token_ids for s in slow.spans]
    assert ids != [s.token_ids for s in before.spans]
    job = infill_job(engine.runner, text, "[blank]", "magnet", None, [None, 3])
    assert job.position_gaps == [16, 3]
    blank = job.seq.blank_positions[0]
    assert job.seq.position_ids[blank + 1] == job.seq.position_ids[blank] + 17


def test_a_length_hint_sets_a_blanks_gap_but_leaves_the_span_free_to_end(monkeypatch):
    from dataclasses import replace

    from tiny_models import tiny_engine

    from magnet_model.errors import InputError
    from magnet_model.inference.infill import infill_job

    engine = tiny_engine()
    text = "the river [blank] the old town and the river [blank] the sea"
    meta = engine.runner.metas["magnet"]
    monkeypatch.setitem(
        engine.runner.metas, "magnet", replace(meta, gap=GapRule(16, hint_share=0.5))
    )
    job = infill_job(engine.runner, text, "[blank]", "magnet", None, None, length_hints=[5, None])
    assert job.position_gaps == [5, 16]
    assert job.fixed == [False, False]  # a hint is no fixed length: <span_end> stays allowed
    both = infill_job(engine.runner, text, "[blank]", "magnet", None, [3, None], length_hints=7)
    assert both.position_gaps == [3, 7]  # a fixed length is the hint where one is given
    kw = dict(adapter="magnet", max_span_tokens=[5, 4])
    hinted = engine.infill(text, length_hints=[5, None], **kw)
    slow = engine.infill_reference(text, length_hints=[5, None], **kw)
    assert [s.token_ids for s in hinted.spans] == [s.token_ids for s in slow.spans]
    assert hinted.spans[0].token_ids != engine.infill(text, **kw).spans[0].token_ids
    with pytest.raises(InputError, match="length hint"):
        engine.infill(text, length_hints=[0, None], **kw)
    # an adapter that never learnt to read gaps as lengths keeps its one gap
    monkeypatch.setitem(engine.runner.metas, "magnet", replace(meta, gap=GapRule(16)))
    plain = infill_job(engine.runner, text, "[blank]", "magnet", None, None, length_hints=5)
    assert plain.position_gaps == [16, 16]


def test_decoding_and_scoring_lay_out_a_blank_between_sentences_with_the_sentence_gap(
    monkeypatch,
):
    from dataclasses import replace

    from tiny_models import tiny_engine

    from magnet_model.evaluation.scoring import SpanCase, hybrid_span_nll
    from magnet_model.inference.infill import infill_job

    engine = tiny_engine()
    meta = engine.runner.metas["magnet"]
    rule = GapRule(16, hint_share=0.5, sentence=40)
    monkeypatch.setitem(engine.runner.metas, "magnet", replace(meta, gap=rule))
    # the first blank stands between sentences, the second inside one
    text = "The river ran. [blank] The old town and the river [blank] the sea."
    job = infill_job(engine.runner, text, "[blank]", "magnet", None, None)
    assert job.position_gaps == [40, 16]
    fast = engine.infill(text, adapter="magnet", max_span_tokens=4)
    slow = engine.infill_reference(text, adapter="magnet", max_span_tokens=4)
    assert [s.token_ids for s in fast.spans] == [s.token_ids for s in slow.spans]
    # the evaluator scores a removed sentence in the layout decoding fills it in
    enc = engine.runner.encode
    case = SpanCase(
        enc("The river ran."),
        enc(" It was cold."),
        enc(" The town slept."),
        "The river ran.",
        " It was cold.",
        " The town slept.",
    )
    scored = hybrid_span_nll(engine, [case], "magnet")[0].span
    assert scored == pytest.approx(hybrid_span_nll(engine, [case], "magnet", gap=40)[0].span)
    assert scored != pytest.approx(hybrid_span_nll(engine, [case], "magnet", gap=16)[0].span)
    monkeypatch.setitem(
        engine.runner.metas, "magnet", replace(meta, gap=replace(rule, sentence=None))
    )
    assert infill_job(engine.runner, text, "[blank]", "magnet", None, None).position_gaps == [
        16,
        16,
    ]
