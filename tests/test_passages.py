"""Sentence-infilling passages (the paper's human-evaluation items) from held-out text."""

from __future__ import annotations

from magnet_model import data
from magnet_model.metrics import split_sentences
from magnet_model.passages import (
    MAX_SENTENCE_WORDS,
    MAX_SENTENCES,
    MIN_SENTENCES,
    sentence_gaps,
)

PARAS = [
    (f"T{t}", " ".join(f"Sentence {t}-{i} has exactly seven words here." for i in range(8)))
    for t in range(20)
] + [("short", "One sentence only, far too short for a passage of three.")]


def test_one_whole_middle_sentence_removed():
    gaps = sentence_gaps(15, seed=3, paragraphs=PARAS)
    assert len(gaps) == 15 and len({g.key for g in gaps}) == 15
    for g in gaps:
        before, after = split_sentences(g.before), split_sentences(g.after)
        assert before and after  # never the first or the last sentence
        assert MIN_SENTENCES <= len(before) + 1 + len(after) <= MAX_SENTENCES
        assert len(split_sentences(g.removed)) == 1 and g.removed.endswith(".")
        assert g.text("[blank]").replace("[blank]", g.removed) in dict(PARAS)[g.source]
        assert g.text("[blank]").count("[blank]") == 1
    assert sentence_gaps(15, seed=3, paragraphs=PARAS) == gaps  # seeded
    assert sentence_gaps(15, seed=4, paragraphs=PARAS) != gaps
    assert all(g.source != "short" for g in sentence_gaps(30, paragraphs=PARAS))


def test_default_passages_come_from_held_out_articles():
    gaps = sentence_gaps(40)
    heldout = {a.title for a in data.wikipedia_articles("heldout")}
    assert len(gaps) == 40 and {g.source for g in gaps} <= heldout
    assert all(len(g.removed.split()) <= MAX_SENTENCE_WORDS for g in gaps)
    assert not any(g.before.startswith((":", ";", "#")) for g in gaps)  # indented markup lines


def test_no_passage_removes_half_a_sentence_cut_at_an_abbreviation():
    # the splitter breaks after "U.S." and "ca."; a reader sees one sentence there
    text = (
        "The loom came first of all. Punch cards followed it soon after. Cards were used in the "
        "1890 U.S. census by the state. Then came the teleprinter (ca. 1870s) in the offices. "
        "It spread fast across the country. Offices filled with the new machines. Clerks "
        "learned to use them well."
    )
    gaps = sentence_gaps(40, seed=0, paragraphs=[(f"T{i}", text) for i in range(40)])
    assert gaps  # the paragraph still gives passages, only whole sentences removed
    for g in gaps:
        assert not g.removed.endswith(("U.S.", "(ca.")), g.removed
        assert not g.after.startswith(("census", "1870s")), g.after
