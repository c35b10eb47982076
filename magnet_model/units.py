"""The blanks people make: the sentences, phrases, words and names of a text, as character spans.

A person who blanks part of a text removes a unit: a whole sentence (the paper's human study
removes one sentence from a story), a clause or phrase, a word or a name. MSG training
(training/views.py) and the evaluator's unit suites (evaluation/suites.py) both cut their spans
from these units, so the model learns to stop where a unit ends, and is measured on it.

- sentences: the sentence splitter chosen by measurement (docs/method.md): sentencex.
- phrases: the pieces of a sentence between punctuation (, ; : parentheses, dashes, quotes) of
  2 to PHRASE_MAX_WORDS words, when the piece is not the whole sentence.
- words: single words of WORD_MIN_CHARS letters or more (inner apostrophes or hyphens), and
  names (a run of 2 to 4 capitalised words, blanked as one unit: "Leon Czolgosz").

Spans are [start, end) character offsets into the text, without surrounding whitespace.
Nothing here needs torch; it runs on plain strings.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from functools import lru_cache

from textrules import ends_sentence as ends_sentence  # the blanks' modules read it here
from textrules.sentences import SENTENCE_END

KINDS = ("sentence", "phrase", "word")
PHRASE_MIN_WORDS = 2
PHRASE_MAX_WORDS = 12
WORD_MIN_CHARS = 4  # "of", "the", "and" are not what a person blanks
SPLITTER_LANGUAGE = "en"

_PHRASE_BREAK = re.compile(r"[,;:()\[\]\"“”—–]| - ")
_WORD = re.compile(r"[^\W\d_](?:[\w’'-]*\w)?")
_NAME = re.compile(r"[A-Z][\w’'.-]*(?:\s+(?:[A-Z][\w’'.-]*|of|de|von|van|da|del|la))*")
_END = SENTENCE_END  # final punctuation through closing quotes/brackets (textrules)


@dataclass(frozen=True)
class Unit:
    start: int
    end: int
    kind: str  # one of KINDS

    def text(self, source: str) -> str:
        return source[self.start : self.end]


@lru_cache(maxsize=1)
def _segmenter():
    from sentencex import segment

    return segment


def sentence_spans(text: str) -> list[tuple[int, int]]:
    """[start, end) of each sentence, whitespace trimmed, in order."""
    out, at = [], 0
    for sentence in _segmenter()(SPLITTER_LANGUAGE, text):
        piece = sentence.strip()
        if not piece:
            continue
        start = text.find(piece, at)
        if start < 0:  # the splitter changed the text (it should not): skip the piece
            continue
        out.append((start, start + len(piece)))
        at = start + len(piece)
    return out


_OPENS_SENTENCE = re.compile(r"""^["'“‘(\[]*[A-Z0-9]""")


def between_sentences(left: str, right: str) -> bool:
    """Whether a blank with this text around it stands where whole sentences go: the text
    before it is empty, ends a line or ends a sentence, and the text after it is empty or
    opens a sentence (a capital or a digit, after any opening quotes or brackets). A blank
    alone in the text is not: nothing says what it holds."""
    before, after = left.rstrip(" \t"), right.lstrip()
    if not before.strip() and not after:
        return False
    left_ok = not before.strip() or before.endswith("\n") or ends_sentence(before)
    return left_ok and (not after or bool(_OPENS_SENTENCE.match(after)))


def _trimmed(text: str, a: int, b: int) -> tuple[int, int]:
    while a < b and text[a].isspace():
        a += 1
    while b > a and text[b - 1].isspace():
        b -= 1
    return a, b


def phrase_spans(text: str, sentence: tuple[int, int]) -> list[tuple[int, int]]:
    """The pieces of one sentence between punctuation, of 2..PHRASE_MAX_WORDS words, that
    are not the whole sentence (its final punctuation stays outside the piece)."""
    s0, s1 = sentence
    body_end = s1
    m = _END.search(text[s0:s1])
    if m:
        body_end = s0 + m.start()
    cuts = [s0, *(s0 + m.start() for m in _PHRASE_BREAK.finditer(text[s0:body_end])), body_end]
    out = []
    for a, b in zip(cuts, cuts[1:], strict=False):
        if text[a : a + 1] and _PHRASE_BREAK.match(text, a):
            a += len(_PHRASE_BREAK.match(text, a).group())
        a, b = _trimmed(text, a, b)
        words = len(_WORD.findall(text[a:b]))
        whole = (a, b) in (_trimmed(text, s0, s1), _trimmed(text, s0, body_end))
        if PHRASE_MIN_WORDS <= words <= PHRASE_MAX_WORDS and not whole:
            out.append((a, b))
    return out


def word_spans(text: str, sentence: tuple[int, int]) -> list[tuple[int, int]]:
    """Words of WORD_MIN_CHARS letters or more, and names (2-4 capitalised words), of one
    sentence."""
    s0, s1 = sentence
    out = [(s0 + m.start(), s0 + m.end()) for m in _WORD.finditer(text[s0:s1])]
    out = [(a, b) for a, b in out if b - a >= WORD_MIN_CHARS]
    for m in _NAME.finditer(text[s0:s1]):
        a, b = s0 + m.start(), s0 + m.end()
        name = text[a:b].rstrip(".")
        b = a + len(name)
        n_words = len(name.split())
        if 2 <= n_words <= 4 and name.split()[-1][:1].isupper():
            out.append((a, b))
    return sorted(set(out))


def text_units(text: str) -> list[Unit]:
    """Every unit of a text, in order of start (a word inside a phrase inside a sentence
    appears three times, once per kind)."""
    units: list[Unit] = []
    for sentence in sentence_spans(text):
        units.append(Unit(*sentence, "sentence"))
        units.extend(Unit(a, b, "phrase") for a, b in phrase_spans(text, sentence))
        units.extend(Unit(a, b, "word") for a, b in word_spans(text, sentence))
    return sorted(units, key=lambda u: (u.start, -u.end))


def token_units(
    text: str,
    offsets: list[tuple[int, int]],
    starts: list[bool] | None = None,
    units: list[Unit] | None = None,
) -> list[tuple[int, int, str]]:
    """The text's units as token spans [a, b) with their kind: the tokens that hold exactly
    the unit (with the space before it, which byte-level BPE puts in the unit's first token).
    A unit whose edge falls inside a token is left out, and so is one whose first token may
    not begin a span (starts: tokens.word_edges)."""
    first: dict[int, int] = {}  # the character a token's word begins at -> the token
    after: dict[int, int] = {}  # the character a token ends at -> the token after it
    for i, (s, e) in enumerate(offsets):
        w = s
        while w < e and text[w].isspace():
            w += 1
        first.setdefault(w, i)
        after[e] = i + 1
    out = []
    for u in text_units(text) if units is None else units:
        a, b = first.get(u.start), after.get(u.end)
        if a is None or b is None or b <= a:
            continue
        s = offsets[a][0]
        if s < u.start and not text[s : u.start].isspace():
            continue
        if starts is not None and not starts[a]:
            continue
        out.append((a, b, u.kind))
    return out
