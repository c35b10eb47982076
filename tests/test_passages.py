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
