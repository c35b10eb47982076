"""Left-to-right continuation of a prompt as lanes, streamed as text pieces.

Causal mask and KV cache; an incremental detokenizer turns tokens into text as they come."""

from __future__ import annotations

import time
from collections.abc import Generator, Iterator, Sequence
from dataclasses import dataclass

from ..decoding import ContinueSettings
from ..errors import EmptyInputError
from ..masks import causal_see
from .batching import Feed, Lane
from .guard import repeat_bans
from .runner import Runner
from .sampling import Sampling


@dataclass
class Continuation:
    prompt: str
    text: str  # the generated text only
    token_ids: list[int]
    adapter: str
    prompt_tokens: int
    seconds: float
    first_token_seconds: float  # prompt encoding + first token
    stop_reason: str  # "eos" or "max"
    seed: int | None = None

    @property
    def tokens_per_second(self) -> float:
        """Decoding speed after the first token (the prompt encoding excluded)."""
        rest = self.seconds - self.first_token_seconds
        return (len(self.token_ids) - 1) / rest if len(self.token_ids) > 1 and rest > 0 else 0.0


def decode_after(tokenizer, context: list[int], ids: list[int]) -> str:
    """Text of ids as it reads after context (spaces and merged bytes at the seam right)."""
    return tokenizer.decode(context + ids)[len(tokenizer.decode(context)) :]


class TextStream:
    """Incremental detokenizer: O(1) work per token, correct across merged bytes and spaces."""

    def __init__(self, tokenizer, context_ids: list[int]):
        self.tok = tokenizer
        self.ids = list(context_ids[-4:])
        self.prefix = 0
        self.read = len(self.ids)

    def push(self, token: int) -> str:
        self.ids.append(token)
        before = self.tok.decode(self.ids[self.prefix : self.read])
        now = self.tok.decode(self.ids[self.prefix :])
        if len(now) > len(before) and not now.endswith("\ufffd"):
            self.prefix, self.read = self.read, len(self.ids)
            return now[len(before) :]
        return ""

    def flush(self) -> str:
        before = self.tok.decode(self.ids[self.prefix : self.read])
        now = self.tok.decode(self.ids[self.prefix :])
        self.prefix = self.read = len(self.ids)
        return now[len(before) :]


def continue_steps(
    ids: list[int],
    max_new: int,
    s: Sampling,
    stop: set[int],
    out: list[int],
    banned: list[int] = (),
    no_repeat: int = 0,
    exempt: list[bool] | None = None,
) -> Generator:
    """Causal generation from a prompt as lane steps; appends tokens to out; returns 'eos' or
    'max'. banned: tokens never generated (Runner.never_text_ids); no_repeat: the loop guard's
    n (no n-gram of tokens twice in the continuation, guard.py; 0: off), exempt: the tokens it
    never forbids (Runner.word_continuations)."""
    n = len(ids)
    banned = list(banned)
    logits = yield Feed(ids, list(range(n)), causal_see(0, n), [n - 1])
    for i in range(max_new):
        if banned:
            logits[..., banned] = float("-inf")
        if no_repeat and (bans := repeat_bans(out, no_repeat, exempt)):
            logits[..., bans] = float("-inf")
        tok = int(s.pick(logits)[0])
        if tok in stop:
            return "eos"
        out.append(tok)
        if i + 1 == max_new:
            break
        logits = yield Feed([tok], [n], causal_see(n, 1), [0])
        n += 1
    return "max"


def prompt_ids(runner: Runner, prompt: str) -> list[int]:
    if not prompt or not prompt.strip():
        raise EmptyInputError("The prompt is empty; type the beginning of a text.")
    return runner.tokenizer(prompt).input_ids  # the tokenizer's own BOS, if it adds one


def _stop_ids(runner: Runner) -> set[int]:
    return {t for t in [runner.tokenizer.eos_token_id] if t is not None}


def _lane_steps(runner: Runner, ids: list[int], c: ContinueSettings, s, out: list[int]):
    """One continuation's steps under settings c (length checked now), s a started Sampling."""
    max_new = c.max_new_tokens or runner.config.max_new_tokens
    runner.check_length(len(ids), max_new)
    exempt = runner.word_continuations if c.no_repeat else None
    never = runner.never_text_ids
    return continue_steps(ids, max_new, s, _stop_ids(runner), out, never, c.no_repeat, exempt)


def continuation_lanes(
    runner: Runner, prompt, adapters: Sequence, c: ContinueSettings
) -> tuple[list[Lane], list[list[int]], list[int]]:
    """Validated lanes for one prompt and several adapters; their token lists; prompt ids."""
    names = [runner.resolve_adapter(a) for a in adapters]
    ids = prompt_ids(runner, prompt)
    outs: list[list[int]] = [[] for _ in names]
    sampling = Sampling(**c.sampling())
    # each lane its own generator: the same seed, the same stream
    lanes = [
        Lane(name, _lane_steps(runner, ids, c, sampling.start(), out))
        for name, out in zip(names, outs, strict=True)
    ]
    return lanes, outs, ids


def compare_events(runner: Runner, lanes: list[Lane], outs, ids) -> Iterator[list[tuple]]:
    """After every batched step, (text so far, stop reason or None) per lane."""
    streams = [TextStream(runner.tokenizer, ids) for _ in lanes]
    texts = [""] * len(lanes)
    fed = [0] * len(lanes)
    for _ in runner.steps(lanes):
        for i, lane in enumerate(lanes):
            for tok in outs[i][fed[i] :]:
                texts[i] += streams[i].push(tok)
            fed[i] = len(outs[i])
            if lane.done and streams[i] is not None:
                texts[i] += streams[i].flush()
                streams[i] = None
                if lane.error is not None:
                    raise lane.error
        yield [
            (t, lane.result if lane.done else None) for t, lane in zip(texts, lanes, strict=True)
        ]


def continue_events(runner: Runner, prompt, adapter, c: ContinueSettings, s: Sampling) -> Iterator:
    """Eagerly validated; yields (token id or None, text piece, stop reason or None).
    s: a started Sampling."""
    name = runner.resolve_adapter(adapter)
    ids = prompt_ids(runner, prompt)
    out: list[int] = []
    lane = Lane(name, _lane_steps(runner, ids, c, s, out))

    def events():
        stream = TextStream(runner.tokenizer, ids)
        n = 0
        for _ in runner.steps([lane]):
            for tok in out[n:]:
                yield tok, stream.push(tok), None
            n = len(out)
        if lane.error is not None:
            raise lane.error
        yield None, stream.flush(), lane.result

    return events()


def generate(runner: Runner, prompt, adapter, c: ContinueSettings) -> Continuation:
    """The whole continuation, its tokens and timing."""
    s = Sampling(**c.sampling()).start()
    t0 = time.perf_counter()
    events = continue_events(runner, prompt, adapter, c, s)
    ids: list[int] = []
    first = 0.0
    reason = "eos"
    for tok, _, stop in events:
        if tok is not None:
            ids.append(tok)
            first = first or time.perf_counter() - t0
        reason = stop or reason
    seconds = time.perf_counter() - t0
    p_ids = prompt_ids(runner, prompt)
    text = decode_after(runner.tokenizer, p_ids[-4:], ids)
    name = runner.resolve_adapter(adapter)
    return Continuation(prompt, text, ids, name, len(p_ids), seconds, first, reason, s.seed)
