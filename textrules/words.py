"""The words the copy and repeat rules count (copies.is_copy, loops.has_repeats): runs of
letters, digits, apostrophes and hyphens, lower-cased, with the apostrophes and hyphens at
either end stripped ("farmer's" and "farmer’s" alike, a quote or dash around a word ignored).
Used through those rules by annotation_db's study checks; magnet_model's evaluator counts its
loops with its own words (loops.repeats_ngram)."""

from __future__ import annotations

import re
from collections.abc import Sequence

_WORD = re.compile(r"[\w'’-]+")


def words(text: str) -> list[str]:
    """The text's words, lower-cased, in order."""
    return [w.lower().strip("'’-") for w in _WORD.findall(text)]


def ngrams(seq: Sequence[str], n: int) -> set[tuple[str, ...]]:
    """Every run of n consecutive words (none when there are fewer than n)."""
    return {tuple(seq[i : i + n]) for i in range(len(seq) - n + 1)}
