"""Drive a prompted reply (inference.prompted.answer_steps) token by token from planned logits,
so that a test states which token the "model" ranks first after each fed token."""

from __future__ import annotations

import torch

from magnet_model.inference.prompted import answer_steps
from magnet_model.inference.sampling import Sampling


def ranked(vocab: int, ts: list[int]) -> torch.Tensor:
    """(1, vocab) logits that rank the tokens ts first, in that order."""
    x = torch.zeros(1, vocab)
    for rank, t in enumerate(ts):
        x[0, t] = 10.0 - rank
    return x


def drive_reply(engine, first, plan, left, right, visible, rules=None, limit=8):
    """answer_steps (greedy) from logits ranking `first`; after each fed token, the logits
    ranking plan[(position, token)]. -> answer_steps' (text, reason, written)."""
    vocab = len(engine.tokenizer)
    eos = engine.tokenizer.eos_token_id
    logits = ranked(vocab, first)
    steps = answer_steps(
        engine.runner, logits, 5, limit, Sampling().start(), {eos}, visible, left, right, rules
    )
    try:
        feed = next(steps)
        while True:
            feed = steps.send(ranked(vocab, plan[(feed.positions[0], feed.ids[0])]))
    except StopIteration as done:
        return done.value
