"""The chat-reply, copy and repeat rules have one home, textrules, under both libraries:
magnet_model/prompts.py asks the prompted baselines again when their reply is a chat turn,
magnet_model's evaluator counts loops, annotation_db/fills.py flags stored study outputs. Each
reads the one rule, never a copy of it."""

from __future__ import annotations

import textrules
from annotation_db import fills
from magnet_model import prompts
from magnet_model.evaluation import fills as eval_fills
from textrules import chat, copies, loops


def test_both_libraries_call_the_one_chat_rule():
    assert prompts.is_chat_reply is textrules.is_chat_reply is chat.is_chat_reply
    assert fills.is_chat_reply is textrules.is_chat_reply


def test_no_library_keeps_a_list_of_chat_phrases_of_its_own():
    # the rule is defined in textrules.chat and nowhere else: no second list to drift apart
    for module in (prompts, fills, eval_fills):
        assert "CHAT_PHRASES" not in vars(module), module.__name__
        assert not any(
            isinstance(v, tuple) and set(v) & set(chat.CHAT_PHRASES) for v in vars(module).values()
        ), module.__name__
    assert chat.is_chat_reply.__module__ == "textrules.chat"


def test_the_copy_and_repeat_rules_are_the_shared_ones():
    assert fills.is_copy is copies.is_copy and fills.has_repeats is loops.has_repeats
    assert fills.MARKER == copies.MARKER and fills.COPY_WORDS == copies.COPY_WORDS
    assert fills.REPEAT_NGRAM == loops.REPEAT_WORDS
    assert eval_fills.repeats_ngram is loops.repeats_ngram
    for f in (copies.is_copy, loops.has_repeats, loops.repeats_ngram):
        assert f.__module__.startswith("textrules."), f
