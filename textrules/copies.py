"""What a copy of the passage is: a fill that repeats the text around its blank instead of
filling it. A run of COPY_WORDS words of the passage in the fill, or a shorter fill of at least
MIN_COPY_WORDS words that is wholly a run of the passage, counted in words.words.

annotation_db flags such fills among a study's outputs ("copy"); the rule lives here, below both
libraries, so that magnet_model reads the same rule when it needs one.
"""

from __future__ import annotations

from .words import ngrams, words

COPY_WORDS = 6  # a run of this many words of the passage, copied into a fill
MIN_COPY_WORDS = 3  # a fill this long or longer that is wholly a run of the passage
MARKER = "[blank]"  # the app's blank; removed from the passage before the copy check


def is_copy(
    fill: str, context: str, run_words: int = COPY_WORDS, min_copy_words: int = MIN_COPY_WORDS
) -> bool:
    """A run of run_words words of the context in the fill, or a fill of min_copy_words or
    more words (and fewer than run_words) that is wholly a run of the context. MARKER in the
    context is no word of it."""
    fw, cw = words(fill), words(context.replace(MARKER, " "))
    if len(fw) < min_copy_words:
        return False
    n = min(run_words, len(fw))
    return bool(ngrams(fw, n) & ngrams(cw, n))
