"""Where a sentence ends, on the text alone: final punctuation (. ! ? or …) read through any
closing quotes or brackets. magnet_model's units (the blanks, the sentence rule of MAGNET's
fills, the prompted baselines' reply opening) and annotation_db's unfinished check both read
this one rule."""

from __future__ import annotations

import re

SENTENCE_END = re.compile(r"[.!?…][\"'”’)\]]*$")


# a title's full stop before a name ("Dr. Hollingworth") ends no sentence
TITLE_END = re.compile(
    r"(?:^|[\s(\"'“‘])(?:Mr|Mrs|Ms|Dr|Prof|Gen|Col|Capt|Lt|Sgt|Rev|Gov|Sen|Rep|Mt|St|vs)\.$"
)


def ends_sentence(text: str) -> bool:
    """Whether a text ends as a sentence does: . ! ? or …, then any closing quotes/brackets;
    not after a title that stands before a name (Mr. Dr. Prof. St. ...)."""
    text = text.rstrip()
    return bool(SENTENCE_END.search(text)) and not TITLE_END.search(text)


TRAILING_ELLIPSIS = re.compile(r"(?:\.\.\.|…)[\"'”’)\]]*$")


def trails_off(text: str) -> bool:
    """Whether a text ends in an ellipsis ("They are thought to have..."): it ends as a
    sentence may, but a reader who asked for a sentence reads it as one left unfinished."""
    return bool(TRAILING_ELLIPSIS.search(text.rstrip()))
