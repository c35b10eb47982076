"""Sentence-infilling passages: the paper's human-evaluation protocol on held-out text.

The paper removed one whole sentence from the middle of each of 100 short stories and asked
raters whether each system's infill was contextually appropriate. Here a passage is 3-6
consecutive sentences of one held-out Wikipedia paragraph (an article no shipped adapter was
trained on, ``data.wikipedia_articles("heldout")``); one sentence that is neither the first
nor the last is removed.
"""

from __future__ import annotations

import random
from dataclasses import dataclass

from textrules import sentence_break

from .metrics import split_sentences

MIN_SENTENCES, MAX_SENTENCES = 3, 6
MIN_SENTENCE_WORDS, MAX_SENTENCE_WORDS = 5, 40  # the removed sentence
# A removed sentence has at most MAX_SENTENCE_WORDS words; English Wikipedia prose runs at about
# 1.3-1.5 tokens per word in Llama-family tokenizers, so 64 tokens leave room for one sentence.
SENTENCE_SPAN_TOKENS = 64
# Lines that cleaned MediaWiki leaves which are not running prose: headings, lists, tables,
# templates, and indented or definition lines (":", ";", "#").
NOT_PROSE = ("=", "*", "|", "{", ":", ";", "#")


@dataclass(frozen=True)
class SentenceGap:
    key: str
    before: str  # the sentences before the gap
    removed: str  # the hidden sentence
    after: str  # the sentences after it
    source: str  # the article's title

    def text(self, marker: str) -> str:
        """The passage with ``marker`` where the sentence was."""
        return f"{self.before} {marker} {self.after}"


def sentence_gaps(
    n: int,
    seed: int = 0,
    split: str = "heldout",
    paragraphs: list[tuple[str, str]] | None = None,
) -> list[SentenceGap]:
    """n passages of 3-6 sentences, each with one middle sentence removed, from different
    paragraphs in a seeded random order. ``paragraphs`` ((title, text) pairs) replaces the
    Wikipedia split, e.g. for tests."""
    if paragraphs is None:
        from .data import wikipedia_articles

        paragraphs = [
            (a.title, p.strip())
            for a in wikipedia_articles(split)
            for p in a.text.split("\n")
            if len(p.strip()) >= 200 and not p.lstrip().startswith(NOT_PROSE)
        ]
    rng = random.Random(seed)
    order = list(range(len(paragraphs)))
    rng.shuffle(order)
    out: list[SentenceGap] = []
    for idx in order:
        if len(out) >= n:
            break
        title, para = paragraphs[idx]
        gap = _gap_in(split_sentences(" ".join(para.split())), rng)
        if gap is not None:
            before, removed, after = gap
            out.append(SentenceGap(f"sent-{len(out) + 1}", before, removed, after, title))
    return out


def _gap_in(sentences: list[str], rng: random.Random) -> tuple[str, str, str] | None:
    if len(sentences) < MIN_SENTENCES:
        return None
    length = rng.randint(MIN_SENTENCES, min(MAX_SENTENCES, len(sentences)))
    start = rng.randint(0, len(sentences) - length)
    window = sentences[start : start + length]
    middle = [
        i
        for i in range(1, length - 1)
        if MIN_SENTENCE_WORDS <= len(window[i].split()) <= MAX_SENTENCE_WORDS
    ]
    if not middle:
        return None
    i = rng.choice(middle)
    # the splitter breaks at every full stop before a space; a reader does not ("in the 1890
    # U.S. census", "(ca. 1870s)"): a removed "sentence" cut there is half of one, so this
    # paragraph gives no passage (the draws made are the same, so later passages do not move)
    if not (sentence_break(window[i - 1], window[i]) and sentence_break(window[i], window[i + 1])):
        return None
    return " ".join(window[:i]), window[i], " ".join(window[i + 1 :])
