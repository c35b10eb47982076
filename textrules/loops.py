"""What a loop is: a fill that repeats itself. Two rules live here, each kept as its caller has
used it until a measurement decides between them (issue 36):
- has_repeats, annotation_db's check of a study's outputs ("repeats"): a run of REPEAT_WORDS
  words twice, or one word three times in a row;
- repeats_ngram, magnet_model's evaluator (evaluation/suites.py, the "repeat_3gram" share): a
  run of n words (3 by default) twice.
Both count words.words.
"""

from __future__ import annotations

from .words import words

REPEAT_WORDS = 4  # has_repeats: a run of this many words occurring twice in one fill


def has_repeats(text: str, run_words: int = REPEAT_WORDS) -> bool:
    """A run of run_words words twice, or one word three times in a row."""
    w = words(text)
    if any(w[i] == w[i + 1] == w[i + 2] for i in range(len(w) - 2)):
        return True
    grams = [tuple(w[i : i + run_words]) for i in range(len(w) - run_words + 1)]
    return len(grams) != len(set(grams))


def repeats_ngram(text: str, n: int = 3) -> bool:
    """Some run of n words occurs twice in the text (case-folded): the loop a reader sees."""
    seq = words(text)
    grams = [tuple(seq[i : i + n]) for i in range(len(seq) - n + 1)]
    return len(grams) != len(set(grams))
