"""The paper's baselines: the base LLM prompted (zero- or N-shot) per blank, with a prefix cache.

Each request is a lane; the fixed head of its prompt (instruction, examples) comes from the
cache of its KV, so only the query is encoded."""

from __future__ import annotations

import time
from collections.abc import Generator, Sequence
from dataclasses import dataclass

from textrules import CopyGuard

from .. import prompts
from ..decoding import PromptedFill
from ..errors import InputError
from ..masks import causal_see
from ..systems import shots_name
from .batching import Feed, Lane, Prefix
from .blanks import FilledSpan, InfillResult, assemble, split_blanks, strip_gaps
from .runner import BASE, Runner
from .sampling import Sampling


def common_length(a: Sequence[int], b: Sequence[int]) -> int:
    """How many leading tokens two id lists share."""
    n = 0
    for x, y in zip(a, b, strict=False):
        if x != y:
            break
        n += 1
    return n


class PromptPrefixes:
    """The KV of the fixed head of the prompted baseline's prompt (instruction, examples),
    computed once per (shots, format) with the adapter off; requests reuse it. A -nearest
    format's examples differ per passage: its head is what all its prompts share."""

    def __init__(self, runner: Runner):
        self.runner = runner
        self.cached: dict[tuple, Prefix] = {}

    def __len__(self) -> int:
        return len(self.cached)

    def clear(self) -> None:
        """Forget every head (after the model moved to another device)."""
        self.cached.clear()

    def get(self, shots: int, fmt: str | prompts.PromptFormat | None = None) -> Prefix:
        runner, tok = self.runner, self.runner.tokenizer
        fmt = prompts.get_format(fmt, shots, tok)
        key = (shots, fmt.name)
        with runner.lock:
            if key not in self.cached:
                # the head is what two prompts share (a -nearest format's examples differ
                # per passage: its head ends before them)
                none = [] if fmt.nearest else None
                heads = [
                    tok(
                        prompts.build_prompt(q, shots, tok, fmt, none), add_special_tokens=False
                    ).input_ids
                    for q in ("A ___ B.", "Zebra ___ quilt?")
                ]
                ids = heads[0][: common_length(*heads)]
                cache = runner.new_cache()
                if ids:
                    t = runner.tensor([ids])
                    with runner.using(BASE):
                        runner.hidden_states(t, None, None, cache)
                keys = [layer.keys for layer in cache.layers] if ids else []
                values = [layer.values for layer in cache.layers] if ids else []
                self.cached[key] = Prefix(tuple(ids), keys, values)
            return self.cached[key]


def resolve_format(fmt: str | prompts.PromptFormat, shots: int, tokenizer) -> prompts.PromptFormat:
    """prompts.get_format, its refusal (a chat format for a tokenizer without one) as an
    InputError."""
    try:
        return prompts.get_format(fmt, shots, tokenizer)
    except ValueError as e:
        raise InputError(f"{str(e)[:1].upper()}{str(e)[1:]}.") from None


def prompted_lane(
    runner: Runner,
    prefixes: PromptPrefixes,
    text: str,
    shots: int,
    marker: str,
    max_span_tokens: int | None,
    sampling: Sampling,
    rules: PromptedFill | None = None,
) -> Lane:
    """A prompted infill as a lane (validated now). The fixed head of its prompt (the
    instruction and the examples) comes from the prefix cache, so only the query is encoded.
    rules: the prompt format and the copy guard (a reply may not copy a run of that many
    words of the passage, an example or the instruction); None: the engine's,
    Runner.prompted_fill."""
    t0 = time.perf_counter()
    if shots not in range(len(prompts.EXAMPLES) + 1):
        raise InputError(f"shots must be 0 to {len(prompts.EXAMPLES)}, not {shots}.")
    tok = runner.tokenizer
    rules = runner.prompted_fill if rules is None else rules
    system = shots_name(shots)
    fmt = resolve_format(rules.format_of(system), shots, tok)
    no_copy = rules.no_copy
    pieces = split_blanks(text, marker, runner.config.max_blanks)
    limit = max_span_tokens or runner.config.max_span_tokens
    s = sampling.start()
    stop = {tok.eos_token_id, tok.convert_tokens_to_ids("<|im_end|>")}
    stop -= {None, tok.unk_token_id}  # <|im_end|> ends a chat turn where it exists
    prefix = prefixes.get(shots, fmt)
    lane = Lane(BASE, None, prefix)

    def steps():
        answers: list[str] = []
        reasons: list[str] = []
        written: list[list[int]] = []
        capped: list[bool] = []
        blocked: list[int] = []
        n_prompt = 0
        visible = [True] * len(prefix)  # one flag per key of this lane's row
        for k in range(len(pieces) - 1):
            query = prompts.render_query(pieces, answers, k)
            examples = prompts.prompt_examples(query, shots, fmt)
            ids = tok(
                prompts.build_prompt(query, shots, tok, fmt, examples), add_special_tokens=False
            )
            ids = ids.input_ids
            rules = ReplyRules(
                CopyGuard(prompts.copy_sources(query, examples), no_copy) if no_copy else None,
                fmt.prefix and bool(prompts.reply_opening(query.partition(prompts.BLANK)[0])),
            )
            runner.check_length(len(ids), limit)
            n_prompt = max(n_prompt, len(ids))
            # reuse the cached head where the tokens agree (at least one token is fed)
            common = min(common_length(prefix.ids, ids), len(ids) - 1)
            visible = [i < common for i in range(len(visible))]  # earlier blanks: hidden
            new = ids[common:]
            logits = yield Feed(
                new,
                list(range(common, len(ids))),
                causal_see(visible, len(new)),
                [len(new) - 1],
            )
            visible += [True] * len(new)
            out, reason, out_ids = yield from answer_steps(
                runner, logits, len(ids), limit, s, stop, visible, pieces[k], pieces[k + 1], rules
            )
            answer, joined = prompts.read_answer(out, pieces[k], pieces[k + 1])
            answers.append(answer)
            reasons.append("joined" if joined else reason)
            written.append(out_ids)
            capped.append(reason == "max")
            blocked.append(rules.blocked)
        stripped, gaps = strip_gaps(pieces)
        filled, offsets = assemble(stripped, gaps, answers)
        spans = [
            FilledSpan(a, runner.encode(a) if a else [], x, y, r, len(w), w, c, copy_blocks=b)
            for a, (x, y), r, w, c, b in zip(
                answers, offsets, reasons, written, capped, blocked, strict=True
            )
        ]
        seconds = time.perf_counter() - t0
        enc = lane.first_logits or 0.0
        return InfillResult(
            text, filled, spans, system, BASE, n_prompt, seconds, enc, seconds - enc, s.seed
        )

    lane.steps = steps()
    return lane


MAX_REFUSED_ENDS = 32  # an answer that has not begun refuses at most this many ends per step
MAX_REFUSED_COPIES = 32  # the copy guard refuses at most this many tokens per step


@dataclass
class ReplyRules:
    """What one blank's reply is held to beyond answer_steps' own rules."""

    guard: CopyGuard | None = None  # the runs of the prompt a reply may not copy
    opened: bool = False  # the reply opens with the blank's sentence (a -prefix format)
    blocked: int = 0  # tokens the guard refused, counted over the reply's attempts


def answer_steps(
    runner: Runner,
    logits,
    pos: int,
    limit: int,
    s: Sampling,
    stop: set[int],
    visible: list,
    left: str = "",
    right: str = "",
    rules: ReplyRules | None = None,
) -> Generator:
    """Generate an answer until a stop token or a line break -> (text, reason, the ids
    written): reason 'end' when the model stopped, 'max' when the limit cut it, 'joined' when
    the reply ran into the text after the blank (left/right: the text around the blank).

    Two rules keep a reply from ending with nothing to fill the blank (prompts.read_answer
    reads the answer from the reply so far):
    - an answer may not end before it has begun: a preamble ("The text is:") or a copy of
      the text before the blank, followed by a line break or the end of the turn, would leave
      the blank empty, so that end is refused and the model's next choice is taken;
    - a reply that still leaves the blank empty (it skipped the blank, running into the text
      after it, or spent the whole limit copying the text before it), or that is a chat turn
      instead of the missing words ("I'm ready to help...", "SmolLM."; prompts.is_chat_reply),
      is written again from the start (up to ASKS attempts in all; the last one is kept),
      where the answer may not begin with the first token of the text after the blank or of
      the text before it (the tokens that begin such a skip or copy); after a chat reply the
      new attempt may not begin with a token that began an earlier chat reply either, and its
      reply starts with the last words before the blank (fed as prompt), so that the model
      goes on with the text instead of talking about it (unless the reply already opened with
      them: rules.opened).
    rules.guard (textrules.CopyGuard): no token may begin the last word of a run the answer
    (as read_answer reads it from the reply: a copy of the text before the blank that the
    reply opens with is no part of it) would copy from the prompt; each refusal is counted in
    rules.blocked.

    limit counts every generated token of one attempt (leading blank lines and spaces too:
    they cost a step each); visible: the lane's keys this answer may attend to (grown in
    place; a discarded attempt's keys are hidden)."""
    rules = rules or ReplyRules()
    first = logits.clone()
    start_pos, start_keys = pos, len(visible)
    not_first: set[int] = set()
    text, reason, ids = yield from _attempt(
        runner, logits, pos, limit, s, stop, visible, left, right, (), rules
    )
    for _ in range(ASKS - 1):
        answer = prompts.read_answer(text, left, right)[0]
        chat = bool(answer) and prompts.is_chat_reply(answer, left + right)
        if answer and not chat:
            break
        visible[start_keys:] = [False] * (len(visible) - start_keys)
        tok = runner.tokenizer
        not_first.update(_first_tokens(tok, right), _first_tokens(tok, left))
        logits, pos, attempt_limit = first, start_pos, limit
        if chat:  # nor with the token that began a chat reply ("I", "SmolLM", "Here")
            not_first.update(ids[:1])
            # and the reply starts where the text breaks off: the last words before the blank
            # are written into the reply ahead of the answer (they are prompt, not answer)
            pre = [] if rules.opened else _reply_start(tok, left, limit)
            if pre:
                logits = yield Feed(
                    pre, list(range(pos, pos + len(pre))), causal_see(visible, len(pre)),
                    [len(pre) - 1],
                )  # fmt: skip
                visible += [True] * len(pre)
                pos, attempt_limit = pos + len(pre), limit - len(pre)
        text, reason, ids = yield from _attempt(
            runner, logits, pos, attempt_limit, s, stop, visible, left, right,
            sorted(not_first), rules,
        )  # fmt: skip
    return text, reason, ids


# a reply that leaves the blank empty or is a chat turn is asked again, this many in all: on 100
# Paper-protocol items (bench_fill_checks.py --asks 3,6, same seeds) the checks flagged 9
# zero-shot chat replies after 3 attempts and 2 after 6, for 6% more time
ASKS = 6
REPLY_START_WORDS = 6  # words of the text before the blank that begin a re-asked chat reply


def _reply_start(tokenizer, left: str, limit: int) -> list[int]:
    """The ids of the last REPLY_START_WORDS words before the blank (at most half the limit,
    so that the re-asked answer keeps room and the prompt's length check still holds)."""
    words = left.split()[-REPLY_START_WORDS:]
    if not words:
        return []
    ids = tokenizer(" ".join(words), add_special_tokens=False).input_ids
    return ids[-(limit // 2) :] if limit >= 2 else []


def _first_tokens(tokenizer, text: str) -> list[int]:
    """The first token of text, as it is tokenized at the start of a reply and after a space."""
    text = text.strip()
    if not text:
        return []
    firsts = (tokenizer(t, add_special_tokens=False).input_ids[:1] for t in (text, " " + text))
    return sorted({ids[0] for ids in firsts if ids})


def _attempt(
    runner: Runner,
    logits,
    pos: int,
    limit: int,
    s: Sampling,
    stop: set[int],
    visible: list,
    left: str,
    right: str,
    not_first: Sequence[int] = (),
    rules: ReplyRules | None = None,
) -> Generator:
    """One reply (see answer_steps); not_first: tokens the answer may not begin with."""
    guard = rules.guard if rules else None
    tok = runner.tokenizer
    out: list[int] = []
    count = 0
    roles = runner.roles(None)
    # never text: the special ids, and MAGNET's <span_end> (which special_ids leaves to MAGNET)
    banned = sorted((set(runner.special_ids(roles)) | {roles.span_end}) - set(stop))
    while True:
        logits = logits.float().clone()
        logits[..., banned] = float("-inf")  # no special token is answer text
        begun = bool(prompts.read_answer(tok.decode(out), left, right)[0])
        if not begun and not_first:
            logits[..., list(not_first)] = float("-inf")
        for _ in range(MAX_REFUSED_ENDS):
            t = int(s.pick(logits)[0])
            piece = tok.decode([t])
            ends = t in stop or (bool(out) and "\n" in piece)
            if begun or not ends:
                break
            logits[..., t] = float("-inf")  # an answer may not end before it has begun
        for _ in range(MAX_REFUSED_COPIES):
            if (
                guard is None
                or t in stop
                or "\n" in piece
                or not guard.copies(prompts.read_answer(tok.decode([*out, t]), left, right)[0])
            ):
                break
            rules.blocked += 1
            logits[..., t] = float("-inf")  # it would begin the last word of a copied run
            t = int(s.pick(logits)[0])
            piece = tok.decode([t])
        if t in stop:
            reason = "end"
            break
        count += 1
        # leading blank lines or spaces: the answer has not started yet
        if out or piece.strip():
            if "\n" in piece:
                reason = "end"
                break
            out.append(t)
            if right.strip() and prompts.read_answer(tok.decode(out), left, right)[1]:
                reason = "joined"
                break
        if count >= limit:
            reason = "max"
            break
        logits = yield Feed([t], [pos], causal_see(visible, 1), [0])
        visible.append(True)
        pos += 1
    return tok.decode(out), reason, out
