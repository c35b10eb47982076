"""Where a sentence ends, on the text alone: final punctuation (. ! ? or …) read through any
closing quotes or brackets. magnet_model's units (the blanks, the sentence rule of MAGNET's
fills, the prompted baselines' reply opening) and annotation_db's unfinished check both read
this one rule."""

from __future__ import annotations

import re

SENTENCE_END = re.compile(r"[.!?…][\"'”’)\]]*$")


def ends_sentence(text: str) -> bool:
    """Whether a text ends as a sentence does: . ! ? or …, then any closing quotes/brackets."""
    return bool(SENTENCE_END.search(text.rstrip()))


TRAILING_ELLIPSIS = re.compile(r"(?:\.\.\.|…)[\"'”’)\]]*$")


def trails_off(text: str) -> bool:
    """Whether a text ends in an ellipsis ("They are thought to have..."): it ends as a
    sentence may, but a reader who asked for a sentence reads it as one left unfinished."""
    return bool(TRAILING_ELLIPSIS.search(text.rstrip()))
