"""Where a sentence ends, on the text alone: final punctuation (. ! ? or …) read through any
closing quotes or brackets. magnet_model's units (the blanks, the sentence rule of MAGNET's
fills, the prompted baselines' reply opening) and annotation_db's unfinished check both read
this one rule."""

from __future__ import annotations

import re

SENTENCE_END = re.compile(r"[.!?…][\"'”’)\]]*$")


# a title's full stop before a name ("Dr. Hollingworth") ends no sentence, nor one of the
# abbreviations that always introduce more ("i.e.", "e.g.", "cf.", "viz.")
TITLE_END = re.compile(
    r"(?:^|[\s(\"'“‘])(?:Mr|Mrs|Ms|Dr|Prof|Gen|Col|Capt|Lt|Sgt|Rev|Gov|Sen|Rep|Mt|St|vs"
    r"|(?i:i\.e|e\.g|cf|viz))\.$"
)


def ends_sentence(text: str) -> bool:
    """Whether a text ends as a sentence does: . ! ? or …, then any closing quotes/brackets;
    not after a title that stands before a name (Mr. Dr. Prof. St. ...) or after "i.e.",
    "e.g.", "cf.", "viz."."""
    text = text.rstrip()
    return bool(SENTENCE_END.search(text)) and not TITLE_END.search(text)


TRAILING_ELLIPSIS = re.compile(r"(?:\.\.\.|…)[\"'”’)\]]*$")


def trails_off(text: str) -> bool:
    """Whether a text ends in an ellipsis ("They are thought to have..."): it ends as a
    sentence may, but a reader who asked for a sentence reads it as one left unfinished."""
    return bool(TRAILING_ELLIPSIS.search(text.rstrip()))


_SENTENCE_BREAK = re.compile(r"[.!?…][\"'”’)\]]*\s+(?=[\"“‘(\[]?[A-Z0-9])|\n")
# a full stop after an initial ("T. J. Clark"), "et al." or a title continues the sentence
_NO_BREAK = re.compile(
    r"(?:(?<![A-Za-z])[A-Z]|\bet al|\b(?:Mr|Mrs|Ms|Dr|Prof|Gen|Col|Capt|Lt|Sgt|Rev|Gov|Sen|Rep"
    r"|Mt|St|vs))\.[\"'”’)\]]*\s*$"
)


# lower-case abbreviations that run on into the sentence ("(ca. 1870s)", "c. 1400", "fl. 1200")
_RUNS_ON = re.compile(r"(?:^|[\s(])(?:ca|c|fl|approx|cca|b|d|vol|pp|no)\.$")
_OPENS = re.compile(r"^[\"“‘(\[]?[A-Z0-9]")


def sentence_break(before: str, after: str) -> bool:
    """Whether a reader sees a sentence end between two texts split at a full stop: `before`
    ends as a sentence does (ends_sentence), not after an initial ("U.S.", "T. J."), "et al.",
    a title or a lower-case abbreviation ("ca."), and `after` opens as a sentence does (a
    capital, a digit, or an opening quote or bracket before one: "U.S. census" is one
    sentence)."""
    before, after = before.rstrip(), after.lstrip()
    if not ends_sentence(before) or _NO_BREAK.search(before) or _RUNS_ON.search(before):
        return False
    return bool(_OPENS.match(after))


def sentence_start(left: str) -> str:
    """The start of the sentence a blank sits in: what of `left` (the text before the blank)
    follows its last sentence end ("" when the blank starts a sentence). A full stop after an
    initial, "et al." or a title ends nothing here ("Fried, T. J." goes on)."""
    if not left.strip() or left.endswith("\n"):
        return ""
    if ends_sentence(left) and not _NO_BREAK.search(left):
        return ""
    start = 0
    for m in _SENTENCE_BREAK.finditer(left):
        if m.group(0) == "\n" or not _NO_BREAK.search(left[: m.end()]):
            start = m.end()
    return left[start:]
