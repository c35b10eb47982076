"""MAGNET infilling as a lane: the context encoded once, every blank's span decoded side by side.

The context (with one <blank> per blank) is encoded ONCE with the hybrid mask, then every
blank's span is decoded token by token from a KV cache, all spans side by side (one query row
per unfinished span per step). Per-step 4-D masks let span k see the context and its own
earlier tokens, never another span's; positions come from the layout (layout.build_hybrid, the
contract shared with MSG training). A span stops by itself when the model predicts
<span_end>, or is cut at a maximum / fixed length; then, under the stop rule "join" (the
default, stops.py), each free span is cut where the completed text reads likeliest along the
path it decoded. A free blank inside a sentence (not between sentences, not of fixed length,
with text after it) is decoded from several first tokens under "join" (`fill_branches`, 4 by
default): at its first step the next likeliest first tokens open spans of their own, decoded
beside the first in the same row (each reads its own copy of the blank's <span_start>), and
the stop rule keeps the best stop of all of them. Greedy decoding commits to its first token:
a word blank whose likeliest first token opens a clause ("The term was used by" for "There")
could only be cut inside the clause. infill_reference() does the same re-encoding everything
at each step (tests and benchmarks).
"""

from __future__ import annotations

import math
import time
from collections.abc import Callable, Generator
from dataclasses import dataclass

import torch

from ..decoding import MagnetFill
from ..errors import InputError, InputTooLongError
from ..layout import HybridSequence, build_hybrid
from ..masks import additive, allowed_mask, hybrid_step_see
from ..span_end import SpanEnd
from ..tokens import TokenRoles
from ..units import between_sentences, ends_sentence
from .batching import Feed, Lane
from .blanks import FilledSpan, InfillResult, assemble, per_blank, split_blanks, strip_gaps
from .guard import repeat_bans
from .runner import Runner
from .sampling import Sampling
from .stops import stop_steps

# A span stops when its last tokens repeat the first tokens of the text after its blank: it
# has run into the right context. This many tokens (or the whole right piece, if shorter).
JOIN_TOKENS = 2


@dataclass
class InfillJob:
    pieces: list[str]  # the text between blanks, as typed (n + 1 pieces)
    gaps: list[str]  # whitespace typed right before each blank (not given to the model)
    piece_ids: list[list[int]]
    seq: HybridSequence  # context + one <span_start> per blank
    position_gaps: list[int]  # positions left free after each blank (layout.GapRule)
    limits: list[int]  # max tokens per span
    fixed: list[bool]  # whether the limit is a fixed length
    roles: TokenRoles
    span_end: SpanEnd
    bos: int | None
    fill: MagnetFill  # the rules it is decoded under (decoding.py)
    text: str = ""  # as given (the result keeps it)
    started: float = 0.0  # time.perf_counter() when the request came
    min_tokens: int = 1
    # per blank: it stands between sentences, so its fill may end only where a sentence ends
    close: list[bool] | None = None
    # per blank, filled while it is decoded: for each step, the log-probability (under the
    # logits the pick was made from, every rule applied) of the token picked and of
    # <span_end> there (-inf where a rule forbade the end)
    trace: list[list[tuple[float, float]]] | None = None
    # per blank: whether it branches (free, inside a sentence, text after it, stop "join")
    branch_at: list[bool] | None = None
    # per decoded span, filled while decoding: its blank, and which of the blank's branches
    # it is (0: the greedy path; spans 0..n-1 are the blanks' greedy paths, in order)
    blank_of: list[int] | None = None
    layer: list[int] | None = None


def infill_job(
    runner: Runner,
    text,
    marker,
    adapter,
    max_span_tokens,
    fixed_lengths,
    fill: MagnetFill | None = None,
    length_hints=None,
) -> InfillJob:
    """A validated request: pieces, span limits, the hybrid layout of the context, the rules
    it is decoded under (fill; None: the engine's, Runner.magnet_fill), and per blank an
    expected length in tokens (length_hints; None: unknown) that a model trained to read gaps
    as lengths is given as one, without fixing the length (a fixed length is one too). A free
    blank between sentences under the sentence rule may run to fill.sentence_tokens whatever
    its cap: the cap is for blanks inside a sentence, a removed sentence comes back whole."""
    started = time.perf_counter()
    fill = runner.magnet_fill if fill is None else fill
    pieces = split_blanks(text, marker, runner.config.max_blanks)
    n = len(pieces) - 1
    maxes = per_blank(max_span_tokens, n, "max_span_tokens")
    fixed = per_blank(fixed_lengths, n, "fixed_lengths")
    hints = per_blank(length_hints, n, "length_hints")
    for h in hints:
        if h is not None and (isinstance(h, bool) or not isinstance(h, int) or h < 1):
            raise InputError(f"A length hint must be a whole number of at least 1, not {h!r}.")
    limits = []
    for m, f in zip(maxes, fixed, strict=True):
        lim = f if f is not None else (m if m is not None else runner.config.max_span_tokens)
        if not isinstance(lim, int) or lim < 1:
            raise InputError(f"A span length must be a whole number of at least 1, not {lim}.")
        limits.append(lim)
    is_fixed = [f is not None for f in fixed]
    roles = runner.roles(adapter)
    stripped, typed_gaps = strip_gaps(pieces)
    piece_ids = [runner.encode(p) for p in stripped]
    bos = runner.bos(adapter)
    rule = runner.gap_rule(adapter)
    between = [between_sentences(pieces[k], pieces[k + 1]) for k in range(n)]
    # a fixed length is a length hint; a hint without one leaves the span free to end; a blank
    # between sentences may have a gap of its own (layout.GapRule.sentence)
    gaps = [
        rule.inference_gap(f if f is not None else h, between[k])
        for k, (f, h) in enumerate(zip(fixed, hints, strict=True))
    ]
    close = [fill.close_sentences and not is_fixed[k] and between[k] for k in range(n)]
    limits = [max(lim, fill.sentence_tokens) if close[k] else lim for k, lim in enumerate(limits)]
    seq = build_hybrid(piece_ids, [[] for _ in range(n)], roles, bos, False, gaps)
    last = max(seq.span_position(k, lim) for k, lim in enumerate(limits))
    need = max(seq.context_length + max(limits), max(seq.position_ids) + 1, last + 1)
    if need > runner.max_input_tokens:
        raise InputTooLongError(
            f"The text is {seq.context_length} tokens long; with spans of up to "
            f"{max(limits)} tokens it needs {need} positions, more than the limit of "
            f"{runner.max_input_tokens}. Shorten the text or the span length."
        )
    # a free blank inside a sentence tries other first tokens; its stop rule picks among them
    branch_at = [
        fill.branches > 1
        and fill.stop == "join"
        and not is_fixed[k]
        and bool(piece_ids[k + 1])
        and not between[k]
        for k in range(n)
    ]
    span_end = runner.span_end(adapter)
    return InfillJob(
        stripped,
        typed_gaps,
        piece_ids,
        seq,
        gaps,
        limits,
        is_fixed,
        roles,
        span_end,
        bos,
        fill,
        text,
        started,
        close=close,
        branch_at=branch_at,
    )


def span_steps(runner: Runner, job: InfillJob, s: Sampling) -> Generator:
    """Decode all spans side by side: yields (active, generated), receives the logits of
    the active spans' next tokens; returns (generated, reasons), one per decoded span.

    A span ends when the model predicts <span_end> ("end"), when its last tokens repeat
    the start of the text after its blank ("joined": it ran into the right context; the
    repeated tokens are removed), or at its maximum ("max") / fixed length ("fixed"). With
    the loop guard on (job.fill.no_repeat = n > 0) no span completes an n-gram of tokens it
    already holds (guard.py). A span whose blank stands between sentences (job.close) may
    end only where its text ends a sentence; else it goes on to its maximum. No span ends
    while it holds only white space. Spans 0..n-1 are the blanks' greedy paths; at its first
    step a blank that branches (job.branch_at) opens one more span per next likeliest first
    token besides the one picked (job.fill.branches - 1 of them, every rule applied), each decoded
    on as the request decodes (greedy or sampled) beside the others (job.blank_of and
    job.layer say whose they are)."""
    n = len(job.limits)
    end = job.roles.span_end
    span_end = job.span_end
    banned = runner.special_ids(job.roles)
    join = runner.config.stop_at_right_context
    rights = [job.piece_ids[k + 1][:JOIN_TOKENS] if join else [] for k in range(n)]
    no_repeat = job.fill.no_repeat
    exempt = runner.word_continuations if no_repeat > 0 else None
    close = job.close or [False] * n
    branch_at = job.branch_at or [False] * n
    branching = job.fill.branches > 1
    decode = runner.tokenizer.decode
    blank_of = job.blank_of = list(range(n))
    layer = job.layer = [0] * n
    generated: list[list[int]] = [[] for _ in range(n)]
    # whether the span holds more than white space: a span of a bare " " token and its end
    # would fill the blank with nothing (met: "the [blank] controller" -> "the  controller")
    written = [False] * n
    reasons = [""] * n
    trace = job.trace = [[] for _ in range(n)]

    def advance(j: int, tok: int, tok_lp: float, end_lp: float) -> bool:
        """Span j takes tok: whether it goes on."""
        k = blank_of[j]
        trace[j].append((tok_lp, end_lp))
        if tok == end:
            reasons[j] = "end"
            return False
        generated[j].append(tok)
        written[j] = written[j] or bool(decode([tok]).strip())
        right = rights[k]
        if right and not job.fixed[k] and generated[j][-len(right) :] == right:
            del generated[j][-len(right) :]
            reasons[j] = "joined"
        elif len(generated[j]) >= job.limits[k]:
            reasons[j] = "fixed" if job.fixed[k] else "max"
        else:
            return True
        return False

    active = list(range(n))
    while active:
        logits = span_end.apply((yield active, generated).float())
        logits[:, banned] = float("-inf")
        for row, j in enumerate(active):
            k = blank_of[j]
            if len(generated[j]) < job.min_tokens or job.fixed[k] or not written[j]:
                logits[row, end] = float("-inf")  # the span may not end yet
            elif close[k] and not ends_sentence(decode(generated[j][-4:])):
                logits[row, end] = float("-inf")  # not before its sentence ends
            if not generated[j] and rights[k] and not job.fixed[k]:
                # a span that began with the text after its blank would be trimmed to
                # nothing: the blank is there because something is missing
                logits[row, rights[k][0]] = float("-inf")
            if no_repeat > 0:
                bans = repeat_bans(generated[j], no_repeat, exempt)
                if bans:
                    logits[row, bans] = float("-inf")
        picks = s.pick(logits).tolist()
        logp = torch.log_softmax(logits, dim=-1)
        chosen = logp.gather(1, torch.tensor(picks, device=logp.device)[:, None])[:, 0].tolist()
        at_end = logp[:, end].tolist()
        still = []
        for row, (j, tok) in enumerate(zip(active, picks, strict=True)):
            if advance(j, tok, chosen[row], at_end[row]):
                still.append(j)
            k = blank_of[j]
            if not (branching and branch_at[k] and j < n and len(trace[j]) == 1):
                continue
            top = logp[row].topk(min(job.fill.branches, logp.shape[-1]))
            others = [
                (t, lp)
                for t, lp in zip(top.indices.tolist(), top.values.tolist(), strict=True)
                if t != tok and t != end and math.isfinite(lp)
            ][: job.fill.branches - 1]
            for b, (t, lp) in enumerate(others, start=1):
                blank_of.append(k)
                layer.append(b)
                generated.append([])
                written.append(False)
                reasons.append("")
                trace.append([])
                if advance(len(generated) - 1, t, lp, at_end[row]):
                    still.append(len(generated) - 1)
        active = still
    return generated, reasons


def span_loop(runner: Runner, job: InfillJob, s: Sampling, step: Callable) -> tuple:
    """Drive span_steps with step(active, generated) -> logits (the reference path, or a
    stand-in model in tests) -> (generated, reasons, encode seconds, decode seconds)."""
    steps = span_steps(runner, job, s)
    t0 = time.perf_counter()
    encode_seconds = None
    try:
        active, generated = next(steps)
        while True:
            logits = step(active, generated)
            if encode_seconds is None:  # the first step encodes the context
                encode_seconds = time.perf_counter() - t0
            active, generated = steps.send(logits)
    except StopIteration as stop:
        generated, reasons = stop.value
    decode_seconds = time.perf_counter() - t0 - encode_seconds
    return generated, reasons, encode_seconds, decode_seconds


def _magnet_steps(runner: Runner, job: InfillJob, s: Sampling) -> Generator:
    """The cached infill as lane steps: context + <span_start>s encoded once (hybrid mask);
    then one new token per active span per step, each seeing the context and its span."""
    seq = job.seq
    n_ctx = seq.context_length
    segments = torch.tensor(seq.segments)
    see = allowed_mask("hybrid", torch.ones_like(segments)[None], segments[None])[0, 0]
    want = list(range(n_ctx, len(seq.input_ids)))
    key_seg = list(seq.segments)
    n = len(job.limits)
    steps = span_steps(runner, job, s)
    try:
        next(steps)
        logits = yield Feed(seq.input_ids, seq.position_ids, see, want)
        while True:
            active, generated = steps.send(logits)
            ids, pos, seg, last = [], [], [], []
            for j in active:
                k = job.blank_of[j]
                if j >= n and len(generated[j]) == 1:
                    # a branch's first token: the branch reads its own copy of the blank's
                    # <span_start> (the same key: same token, position and visible context)
                    ids.append(seq.input_ids[n_ctx + k])
                    pos.append(seq.position_ids[n_ctx + k])
                    seg.append(j + 1)
                ids.append(generated[j][-1])
                pos.append(seq.span_position(k, len(generated[j])))
                seg.append(j + 1)
                last.append(len(ids) - 1)
            see = hybrid_step_see(torch.tensor(key_seg + seg), torch.tensor(seg))
            # two new tokens of one span (a branch's start): the first does not see the second
            see[:, len(key_seg) :] &= torch.ones(len(seg), len(seg), dtype=torch.bool).tril()
            key_seg += seg
            logits = yield Feed(ids, pos, see, last)
    except StopIteration as stop:
        generated, reasons = stop.value
    # the stop rule's causal readings, appended to the lane's row, seeing none of its keys
    keys = len(key_seg)
    choosing = stop_steps(runner, job, generated, reasons)
    try:
        ids, pos, see, want = next(choosing)
        while True:
            wide = torch.zeros(len(ids), keys + len(ids), dtype=torch.bool)
            wide[:, keys:] = see
            keys += len(ids)
            logits = yield Feed(ids, pos, wide, want)
            ids, pos, see, want = choosing.send(logits)
    except StopIteration as stop:
        return stop.value


def _reference_step(runner: Runner, job: InfillJob) -> Callable:
    """The slow path: the whole layout (context + all spans so far) re-encoded every step."""

    def step(active: list[int], generated: list[list[int]]) -> torch.Tensor:
        # one layout per layer of branches (each blank's b-th path): spans never see each other
        blank_of = job.blank_of or list(range(len(generated)))
        layer = job.layer or [0] * len(generated)
        rows: dict[int, torch.Tensor] = {}
        for b in sorted({layer[j] for j in active}):
            spans = [[] for _ in job.piece_ids[1:]]
            for j, g in enumerate(generated):
                if layer[j] == b:
                    spans[blank_of[j]] = g
            seq = build_hybrid(
                job.piece_ids, spans, job.roles, job.bos, with_end=False, gaps=job.position_gaps
            )
            ids = runner.tensor([seq.input_ids])
            seg = runner.tensor([seq.segments])
            mask = additive(allowed_mask("hybrid", torch.ones_like(ids), seg), runner.dtype)
            h = runner.hidden_states(ids, mask, runner.tensor([seq.position_ids]))[0]
            for j in active:
                if layer[j] == b:
                    k = blank_of[j]
                    rows[j] = h[max(i for i, g in enumerate(seq.segments) if g == k + 1)]
        return runner.logits(torch.stack([rows[j] for j in active]))

    return step


def _reference_stops(runner: Runner, job: InfillJob, generated, reasons) -> tuple:
    """stop_steps driven by plain forwards of each causal reading (the adapter now on)."""
    choosing = stop_steps(runner, job, generated, reasons)
    try:
        ids, pos, see, want = next(choosing)
        while True:
            mask = additive(see[None, None], runner.dtype).to(runner.device)
            h = runner.hidden_states(runner.tensor([ids]), mask, runner.tensor([pos]))[0]
            ids, pos, see, want = choosing.send(runner.logits(h[want]))
    except StopIteration as stop:
        return stop.value


def _result(runner: Runner, job: InfillJob, name, generated, reasons, s, enc, dec):
    texts = [runner.tokenizer.decode(g) for g in generated]
    filled, offsets = assemble(job.pieces, job.gaps, texts)
    trace = job.trace or [None] * len(generated)
    spans = [
        FilledSpan(t, g, a, b, r, capped=r == "max", trace=tr)
        for t, g, (a, b), r, tr in zip(texts, generated, offsets, reasons, trace, strict=True)
    ]
    seconds = time.perf_counter() - job.started
    ctx = job.seq.context_length
    return InfillResult(job.text, filled, spans, "magnet", name, ctx, seconds, enc, dec, s.seed)


def infill_lane(runner: Runner, job: InfillJob, adapter, sampling: Sampling) -> Lane:
    """A MAGNET infill of a validated request (infill_job) as a lane; its result is an
    InfillResult."""
    s = sampling.start()
    name = runner.resolve_adapter(adapter)
    lane = Lane(name, None)

    def steps():
        generated, reasons = yield from _magnet_steps(runner, job, s)
        enc = lane.first_logits or 0.0
        dec = time.perf_counter() - job.started - enc
        return _result(runner, job, name, generated, reasons, s, enc, dec)

    lane.steps = steps()
    return lane


def infill_reference(runner: Runner, job: InfillJob, adapter, sampling: Sampling) -> InfillResult:
    """The same infill, the whole sequence re-encoded at every step (slow; tests, bench)."""
    s = sampling.start()
    with runner.using(adapter) as name:
        generated, reasons, enc, dec = span_loop(runner, job, s, _reference_step(runner, job))
        generated, reasons = _reference_stops(runner, job, generated, reasons)
    return _result(runner, job, name, generated, reasons, s, enc, dec)
