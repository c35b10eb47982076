"""The paper's baselines: the base LLM prompted (zero- or N-shot) per blank, with a prefix cache.

Each request is a lane; the fixed head of its prompt (instruction, examples) comes from the
cache of its KV, so only the query is encoded."""

from __future__ import annotations

import time
from collections.abc import Generator, Sequence

from . import prompts
from .batching import Feed, Lane, Prefix
from .blanks import FilledSpan, InfillResult, assemble, split_blanks, strip_gaps
from .errors import InputError
from .masks import causal_see
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


def system_shots(system: str) -> int | None:
    """'zero-shot' -> 0, 'five-shot' -> 5, 'N-shot' -> N; None for anything else (an adapter).
    A name ending in '-shot' that is none of these is an InputError."""
    if not system.endswith("-shot"):
        return None
    shots = {"zero": 0, "five": 5}.get(system[:-5])
    shots = int(system[:-5]) if shots is None and system[:-5].isdigit() else shots
    if shots is None:
        raise InputError(f"Unknown system {system!r}; say e.g. 'five-shot'.")
    return shots


class PromptPrefixes:
    """The KV of the fixed head of the prompted baseline's prompt (instruction, examples),
    computed once per (shots, style) with the adapter off; requests reuse it."""

    def __init__(self, runner: Runner):
        self.runner = runner
        self.cached: dict[tuple, Prefix] = {}

    def __len__(self) -> int:
        return len(self.cached)

    def clear(self) -> None:
        """Forget every head (after the model moved to another device)."""
        self.cached.clear()

    def get(self, shots: int, style: str | None = None) -> Prefix:
        runner, tok = self.runner, self.runner.tokenizer
        style = style or prompts.default_style(tok)
        key = (shots, style)
        with runner.lock:
            if key not in self.cached:
                heads = [
                    tok(
                        prompts.build_prompt(q, shots, tok, style), add_special_tokens=False
                    ).input_ids
                    for q in ("A ___ B.", "Zebra ___ quilt?")  # the head is what they share
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


def prompted_lane(
    runner: Runner,
    prefixes: PromptPrefixes,
    text: str,
    shots: int,
    marker: str,
    max_span_tokens: int | None,
    sampling: Sampling,
    style: str | None,
) -> Lane:
    """A prompted infill as a lane (validated now). The fixed head of its prompt (the
    instruction and the examples) comes from the prefix cache, so only the query is encoded."""
    t0 = time.perf_counter()
    if shots not in range(len(prompts.EXAMPLES) + 1):
        raise InputError(f"shots must be 0 to {len(prompts.EXAMPLES)}, not {shots}.")
    pieces = split_blanks(text, marker, runner.config.max_blanks)
    limit = max_span_tokens or runner.config.max_span_tokens
    s = sampling.start()
    tok = runner.tokenizer
    stop = {tok.eos_token_id, tok.convert_tokens_to_ids("<|im_end|>")}
    stop -= {None, tok.unk_token_id}  # <|im_end|> ends a chat turn where it exists
    prefix = prefixes.get(shots, style)
    system = {0: "zero-shot", 5: "five-shot"}.get(shots, f"{shots}-shot")
    lane = Lane(BASE, None, prefix)

    def steps():
        answers: list[str] = []
        reasons: list[str] = []
        written: list[list[int]] = []
        capped: list[bool] = []
        n_prompt = 0
        visible = [True] * len(prefix)  # one flag per key of this lane's row
        for k in range(len(pieces) - 1):
            query = prompts.render_query(pieces, answers, k)
            ids = tok(prompts.build_prompt(query, shots, tok, style), add_special_tokens=False)
            ids = ids.input_ids
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
                runner, logits, len(ids), limit, s, stop, visible
            )
            answer, joined = prompts.read_answer(out, pieces[k], pieces[k + 1])
            answers.append(answer)
            reasons.append("joined" if joined else reason)
            written.append(out_ids)
            capped.append(reason == "max")
        stripped, gaps = strip_gaps(pieces)
        filled, offsets = assemble(stripped, gaps, answers)
        spans = [
            FilledSpan(a, runner.encode(a) if a else [], x, y, r, len(w), w, c)
            for a, (x, y), r, w, c in zip(answers, offsets, reasons, written, capped, strict=True)
        ]
        seconds = time.perf_counter() - t0
        enc = lane.first_logits or 0.0
        return InfillResult(
            text, filled, spans, system, BASE, n_prompt, seconds, enc, seconds - enc, s.seed
        )

    lane.steps = steps()
    return lane


def answer_steps(
    runner: Runner, logits, pos: int, limit: int, s: Sampling, stop: set[int], visible: list
) -> Generator:
    """Generate an answer until a stop token or a line break -> (text, reason, the ids
    written): reason 'end' when the model stopped, 'max' when the limit cut it.

    limit counts every generated token (leading blank lines and spaces too: they cost a
    step each); visible: the lane's keys this answer may attend to (grown in place)."""
    out: list[int] = []
    count = 0
    banned = [i for i in runner.special_ids(runner.roles(None)) if i not in stop]
    while True:
        logits = logits.float()
        logits[..., banned] = float("-inf")  # no special token is answer text
        tok = int(s.pick(logits)[0])
        if tok in stop:
            reason = "end"
            break
        count += 1
        piece = runner.tokenizer.decode([tok])
        # leading blank lines or spaces: the answer has not started yet
        if out or piece.strip():
            if "\n" in piece:
                reason = "end"
                break
            out.append(tok)
        if count >= limit:
            reason = "max"
            break
        logits = yield Feed([tok], [pos], causal_see(visible, 1), [0])
        visible.append(True)
        pos += 1
    return runner.tokenizer.decode(out), reason, out
