"""Repetition and diversity of generated text, pure Python (used by the evaluator, the app and
passages.py's sentence split).

- Rep-n (Rep-4 in the paper): 1 - unique n-grams / all n-grams of one generation.
- Rep-Sen: share of the generation's sentences that repeat an earlier sentence of it.
- distinct-n: unique n-grams / all n-grams (the usual diversity score, 1 - Rep-n).

Tokens are whatever the caller passes (model token ids or words); a string is split into
words on whitespace, so scores are comparable across models with different tokenizers.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import asdict, dataclass

_SENTENCE_END = re.compile(r"(?<=[.!?])\s+|\n+")


def _tokens(tokens: str | Sequence) -> list:
    return tokens.split() if isinstance(tokens, str) else list(tokens)


def ngrams(tokens: str | Sequence, n: int) -> list[tuple]:
    toks = _tokens(tokens)
    return [tuple(toks[i : i + n]) for i in range(len(toks) - n + 1)]


def rep_n(tokens: str | Sequence, n: int = 4) -> float:
    """1 - unique/all n-grams; 0.0 when the text has no n-gram (nothing can repeat)."""
    grams = ngrams(tokens, n)
    return 1.0 - len(set(grams)) / len(grams) if grams else 0.0


def distinct_n(tokens: str | Sequence, n: int = 2) -> float:
    """unique/all n-grams; 0.0 when the text has no n-gram."""
    grams = ngrams(tokens, n)
    return len(set(grams)) / len(grams) if grams else 0.0


def split_sentences(text: str) -> list[str]:
    """Sentences end at . ! ? followed by whitespace, or at a line break."""
    return [s for s in (p.strip() for p in _SENTENCE_END.split(text)) if s]


def _normalise(sentence: str) -> str:
    return " ".join(sentence.lower().split())


def rep_sen(text: str) -> float:
    """Share of sentences equal (case and spacing aside) to an earlier sentence."""
    seen: set[str] = set()
    sentences = split_sentences(text)
    repeats = 0
    for s in map(_normalise, sentences):
        repeats += s in seen
        seen.add(s)
    return repeats / len(sentences) if sentences else 0.0


@dataclass
class RepetitionStats:
    rep_4: float
    rep_sen: float
    distinct_1: float
    distinct_2: float

    def to_dict(self) -> dict[str, float]:
        return asdict(self)


def repetition_stats(text: str) -> RepetitionStats:
    """All the scores of one generation, on whitespace words."""
    return RepetitionStats(
        rep_4=rep_n(text, 4),
        rep_sen=rep_sen(text),
        distinct_1=distinct_n(text, 1),
        distinct_2=distinct_n(text, 2),
    )
