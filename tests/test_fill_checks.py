"""The chat-reply rule has two homes that must agree: magnet_model/prompts.py asks the prompted
baselines again when their reply is a chat turn, annotation_db/fills.py flags stored study
outputs (the two libraries never import each other; tests may import both)."""

from __future__ import annotations

from fill_cases import CHAT_REPLIES, FILLS

from annotation_db import fills
from magnet_model import prompts


def test_the_two_lists_of_chat_phrases_are_the_same():
    assert prompts.CHAT_PHRASES == fills.CHAT_PHRASES


def test_both_rules_read_replies_alike():
    context = "The Amazon is the largest rainforest on Earth. [blank] Scientists warn."
    for text in CHAT_REPLIES + FILLS:
        assert prompts.is_chat_reply(text, context) == fills.is_chat_reply(text, context), text
