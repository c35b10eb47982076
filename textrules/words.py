"""The words every text rule counts (copies.is_copy and CopyGuard, loops.has_repeats and
loops.repeats_ngram): runs of letters and digits, joined by inner apostrophes ("farmer's"; the
forms ’ ´ ʼ ` read as '), case-folded. Every other mark separates words, hyphens and dashes
included, so "Anarcho-syndicalism" is two words, as a reader counts what the eye sees:
measured on hand-labelled outputs (tests/data/labelled_outputs.md), copies of 6+ words were
missed when a hyphenated compound counted as one word, or the passage wrote "anti war" where
the fill wrote "anti-war", or "Proudhon´s" for "Proudhon's"."""

from __future__ import annotations

import re
from collections.abc import Sequence

_WORD = re.compile(r"[^\W_]+(?:['’´ʼ`][^\W_]+)*")
_APOSTROPHES = str.maketrans({"’": "'", "´": "'", "ʼ": "'", "`": "'"})


def words(text: str) -> list[str]:
    """The text's words, case-folded, in order."""
    return [w.casefold().translate(_APOSTROPHES) for w in _WORD.findall(text)]


def ngrams(seq: Sequence[str], n: int) -> set[tuple[str, ...]]:
    """Every run of n consecutive words (none when there are fewer than n)."""
    return {tuple(seq[i : i + n]) for i in range(len(seq) - n + 1)}
