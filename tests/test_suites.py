"""The evaluator's unit suites: what a fill is (evaluation/fills.py), how a unit is cut out of
a passage (evaluation/suites.py), and how the suites' targets read (evaluation/report.py)."""

from __future__ import annotations

import random

import pytest

from magnet_model.evaluation import report as report_mod
from magnet_model.evaluation.fills import has_sentence_end, is_one_sentence, repeats_ngram
from magnet_model.evaluation.suites import MIN_LEFT, MIN_RIGHT, unit_case, unit_cases
from magnet_model.tokens import word_start_table

PASSAGE = (
    "the city was founded by traders from the north in the early years of the old kingdom . "
    "the river gave the city its wealth and its name . "
    "it is known for its markets , its bridges and its long history of trade with the south . "
    "today the city is the capital of the region and home to many people ."
)


@pytest.mark.parametrize(
    ("text", "one"),
    [
        ("The river gave the city its name.", True),
        ('"It is over," he said.', True),
        ("The Amazon is expected to", False),
        ("the river gave the city its name.", False),
        ("It rose. It fell.", False),
        ("", False),
    ],
)
def test_one_complete_sentence(text, one):
    assert is_one_sentence(text) is one


def test_a_sentence_end_inside_a_phrase_fill_is_seen():
    assert has_sentence_end("its bridges.") and has_sentence_end("a bridge. The end")
    assert not has_sentence_end("its bridges and its markets") and not has_sentence_end("")


def test_repeated_trigrams_are_the_loops_a_reader_sees():
    assert repeats_ngram("President McKinley, President McKinley, President McKinley")
    assert not repeats_ngram("the city of the river and the city")


@pytest.mark.parametrize("kind", ["sentence", "phrase", "word"])
def test_a_unit_case_removes_one_unit_of_its_kind_away_from_the_edges(tiny_tokenizer, kind):
    table = word_start_table(tiny_tokenizer)
    seen = set()
    for seed in range(20):
        case = unit_case(tiny_tokenizer, PASSAGE, kind, random.Random(seed), 256, table)
        assert case is not None
        assert len(case.left_ids) >= MIN_LEFT and len(case.right_ids) >= MIN_RIGHT
        assert case.left_text + case.span_text + case.right_text == PASSAGE
        span = case.span_text.strip()
        seen.add(span)
        if kind == "sentence":
            assert span.endswith(".") and span.count(" . ") == 0
        elif kind == "phrase":
            assert "," not in span and "." not in span and len(span.split()) >= 2
        else:
            assert len(span.split()) == 1 and len(span) >= 4
    assert len(seen) > 1, "the seed chooses among the units"


def test_unit_cases_are_seeded_and_skip_passages_without_the_unit(tiny_tokenizer):
    passages = ["too short .", PASSAGE, PASSAGE]
    a = unit_cases(tiny_tokenizer, passages, "sentence", 5, 0, 256)
    b = unit_cases(tiny_tokenizer, passages, "sentence", 5, 0, 256)
    assert len(a) == 2 and [c.span_text for c in a] == [c.span_text for c in b]


def _report(hybrid: float, one: float) -> dict:
    sentence = {
        "sizes": {"cases": 4, "span_tokens_mean": 12.0},
        "systems": {
            "zero-shot": {"completed_ppl_ratio": 1.4},
            "five-shot": {"completed_ppl_ratio": 1.3},
            "base": {"left_only_ppl": 30.0, "five_shot_ppl": 28.0, "zero_shot_ppl": 40.0},
            "magnet": {
                "hybrid_ppl": hybrid,
                "one_sentence_share": one,
                "completed_ppl_ratio": 1.1,
                "repeat_3gram_share": 0.0,
                "junk_share": 0.0,
            },
        },
    }
    units = {"systems": {}, "sizes": {}, "suites": {"wikipedia/sentence": sentence}}
    units["examples"] = {
        "wikipedia/sentence": [{"text": "a [blank] b", "truth": "x", "magnet": "y"}]
    }
    return {"tasks": {"units": units}}


def test_the_sentence_suite_targets_follow_the_measurements():
    good = {t.text: t.met for t in report_mod.unit_targets(_report(26.0, 0.9))}
    assert good["hybrid <= 0.9 x base left-only"] and good["hybrid < five-shot"]
    assert good[">= 85% one complete sentence"] and good["completed PPL below both prompted"]
    bad = {t.text: t.met for t in report_mod.unit_targets(_report(29.0, 0.8))}
    assert bad["hybrid <= 0.9 x base left-only"] is False  # 29 > 0.9 x 30
    assert bad[">= 85% one complete sentence"] is False and bad["hybrid < five-shot"] is False


def test_a_phrase_or_word_suite_is_judged_on_fills_without_a_sentence_end():
    report = _report(24.0, 0.9)
    suite = report["tasks"]["units"]["suites"].pop("wikipedia/sentence")
    suite["systems"]["magnet"].update(no_sentence_end_share=0.85, length_ratio=1.2)
    report["tasks"]["units"]["suites"]["news/word"] = suite
    met = {t.text: t.met for t in report_mod.unit_targets(report)}
    assert met[">= 80% with no sentence end inside"] and met["length ratio 0.7-1.5"]
    suite["systems"]["magnet"].update(no_sentence_end_share=0.7, length_ratio=8.9)
    met = {t.text: t.met for t in report_mod.unit_targets(report)}
    assert met[">= 80% with no sentence end inside"] is False
    assert met["length ratio 0.7-1.5"] is False


def test_the_suite_table_prints_its_fills():
    report = _report(24.0, 0.9)
    lines = "\n".join(report_mod.render_units(report, report_mod.unit_targets(report)))
    assert "### wikipedia/sentence" in lines and "| span PPL, hybrid (left + right) |" in lines
    assert "truth «x»; magnet «y»" in lines


def test_the_suite_table_gives_each_share_its_interval_and_the_paired_comparison():
    report = _report(24.0, 0.9)
    suite = report["tasks"]["units"]["suites"]["wikipedia/sentence"]
    suite["systems"]["magnet"]["intervals"] = {"one_sentence_share": [0.81, 0.95]}
    suite["paired"] = {
        "magnet vs units2": {
            "one_sentence_share": {"diff": 0.125, "lo": 0.02, "hi": 0.23, "p": 0.021, "n": 80},
            "hybrid_ppl": {"ppl_ratio": 0.95, "lo": 0.91, "hi": 0.99, "p": 0.003, "n": 100},
        }
    }
    lines = "\n".join(report_mod.render_units(report, report_mod.unit_targets(report)))
    row = next(ln for ln in lines.splitlines() if ln.startswith("| exactly one complete"))
    assert row.endswith("| 90% (81%–95%) |")
    assert (
        "Paired, magnet vs units2 (the same cases): exactly one complete sentence +12 points "
        "(+2 to +23; McNemar p = 0.021); hybrid span PPL x0.950 (0.910–0.990; Wilcoxon "
        "p = 0.003)." in lines
    )


def test_each_named_adapter_is_judged_on_the_suite_targets():
    """A run comparing adapters under their own names (v2, v3) judges each, not "magnet"."""
    report = _report(26.0, 0.9)
    systems = report["tasks"]["units"]["suites"]["wikipedia/sentence"]["systems"]
    systems["v3"] = {**systems.pop("magnet"), "one_sentence_share": 0.8}
    systems["v2"] = {**systems["v3"], "one_sentence_share": 0.9}
    lines = report_mod.render_units(report, report_mod.unit_targets(report))
    v3 = next(ln for ln in lines if ln.startswith("Targets, v3:"))
    v2 = next(ln for ln in lines if ln.startswith("Targets, v2:"))
    assert ">= 85% one complete sentence: no" in v3 and "n/a" not in v3
    assert ">= 85% one complete sentence: yes" in v2


def test_the_prompted_baselines_are_judged_on_chat_replies_copies_and_sentences():
    report = _report(24.0, 0.9)
    systems = report["tasks"]["units"]["suites"]["wikipedia/sentence"]["systems"]
    systems["zero-shot"].update(chat_share=0.04, copy_share=0.2, example_copy_share=0.0)
    systems["five-shot"].update(
        chat_share=0.1, copy_share=0.05, example_copy_share=0.01, one_sentence_share=0.65
    )
    lines = report_mod.render_units(report, report_mod.unit_targets(report))
    row = next(ln for ln in lines if ln.startswith("Targets, prompted baselines:"))
    zero, five = report_mod.table.title("zero-shot"), report_mod.table.title("five-shot")
    for text in (
        f"{zero}: <= 5% chat/meta: yes",
        f"{zero}: <= 10% copies of the passage: no",
        f"{zero}: no copy of an example: yes",
        f"{five}: <= 5% chat/meta: no",
        f"{five}: no copy of an example: no",
        f"{five}: >= 60% one sentence: yes",
    ):
        assert text in row
    assert f"{zero}: >= 60% one sentence" not in row  # five-shot's target only
    table = "\n".join(lines)
    assert "| chat or meta replies | " in table and "| copies of an example | " in table
