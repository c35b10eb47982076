"""The rules on a fill's text that both libraries apply, written once: what a chat or meta reply
is (chat.py, with the fitted rule of meta.py), what a copy of the passage is (copies.py;
CopyGuard is the same rule at decode time), what a loop is (loops.py), where a sentence ends and
where the sentence of a blank starts (sentences.py), whether a text has a verb (clauses.py), and
the words these rules count (words.py).

magnet_model (the prompted baselines ask again after a chat reply and cannot copy; the
evaluator counts loops) and annotation_db (the checks of a study's outputs before raters meet
them) both import this package, so a rule changed here changes for both. Pure Python standard
library: no torch, no SQL, no import of magnet_model, annotation_db or app (tests/test_layout.py
checks it).
"""

from __future__ import annotations

from .chat import CHAT_PHRASES, is_chat_reply
from .clauses import has_verb
from .copies import COPY_WORDS, MARKER, CopyGuard, is_copy
from .loops import REPEAT_WORDS, has_repeats, repeats_ngram
from .sentences import ends_sentence, sentence_break, sentence_start, trails_off
from .words import ngrams, words

__all__ = [
    "CHAT_PHRASES",
    "COPY_WORDS",
    "CopyGuard",
    "MARKER",
    "REPEAT_WORDS",
    "ends_sentence",
    "trails_off",
    "has_repeats",
    "has_verb",
    "is_chat_reply",
    "is_copy",
    "ngrams",
    "repeats_ngram",
    "sentence_break",
    "sentence_start",
    "words",
]
