"""Teacher-forced log-likelihood scoring: how probable the engine finds a known text.

Three measurements, all one forward per sequence (batched), under the engine's lock with the
adapter of the call switched on (Engine.using), never through generation:

- hybrid_span_nll: MAGNET. A passage with one span removed is laid out as training lays it out
  (layout.build_hybrid): context with <blank>, then <span_start> + the TRUE span tokens + the
  learnt <span_end>. The loss is read on the span positions (and, separately, on <span_end>);
  the same forward gives log p(<span_end>) after every true span token (where does the model
  put the end?).
- prompted_span_nll: the paper's baseline. The zero-/five-shot prompt of prompts.py, then the
  true span as the answer, then the answer's end (<|im_end|> in the chat template, a line
  break in the plain one), adapter off, in the prompt format asked for (prompts.py).
- causal_span_nll (left context only, a reference every causal model has) and causal_nll
  (perplexity of whole held-out texts: "knowledge kept").

Spans are compared as strings: the prompted answer is tokenized on its own (no leading space in
a chat turn), so its token count can differ from the span's count inside the passage. Every span
perplexity therefore divides the summed NLL by the same count, the span's tokens in the passage
(SpanCase.n_tokens): exp(-log P(span text) / n) is comparable across systems.
"""

from __future__ import annotations

import math
import random
from collections.abc import Callable, Sequence
from dataclasses import dataclass

import numpy as np
import torch

from .. import prompts
from ..layout import IGNORE, build_hybrid
from ..masks import additive, allowed_mask, position_ids_for
from ..systems import shots_name
from ..tokens import word_edges, word_start_table
from ..units import between_sentences

LOGIT_CHUNK = 1024  # positions per LM-head call (49k-vocabulary logits are large)


# ---------------------------------------------------------------- data


@dataclass
class SpanCase:
    """One held-out passage with one span removed: token slices and the matching texts."""

    left_ids: list[int]
    span_ids: list[int]
    right_ids: list[int]
    left_text: str  # text[:span start], may end with the space before the span
    span_text: str
    right_text: str

    @property
    def n_tokens(self) -> int:
        return len(self.span_ids)

    def blanked(self, marker: str) -> str:
        """The passage with the span replaced by marker (as a user would type it).

        The span ends at a word start: the space before the next word is in right_text
        (byte-level BPE offsets) or in span_text (word-level ones; then one is put back, so the
        marker never glues onto a word). Punctuation that followed the span directly follows
        the marker directly ("came [blank], then"), as the original text had it: the right
        text the model reads is the original's, token for token."""
        right = self.right_text
        gap = " " if right and right[0].isalnum() else ""
        return f"{self.left_text.rstrip()} {marker}{gap}{right}"


@dataclass
class SpanNLL:
    """Summed NLL (nats) of one span, without and with its end token."""

    span: float
    end: float  # NLL of the end token alone
    n_tokens: int  # the span's token count in the passage (the common denominator)
    # hybrid only: log p(<span_end>) after each true span token (n_tokens values; the last is
    # at the true end), read as decoding reads it; the <span_start> output is left out, since
    # decoding never ends a span before its first token
    end_logp: np.ndarray | None = None


def _word_starts(text: str, offsets: Sequence[tuple[int, int]]) -> list[bool]:
    """Whether each token begins a word (its first char, or the char before it, is a space)."""
    out = []
    for s, _ in offsets:
        out.append(s == 0 or text[s].isspace() or text[s - 1].isspace())
    return out


def make_span_case(
    tokenizer,
    text: str,
    rng: random.Random,
    max_tokens: int = 192,
    span_range=(8, 32),
    table: list[bool] | None | str = "auto",
) -> SpanCase | None:
    """Cut one span (8-32 tokens, whole words) out of the middle third of a passage.

    The passage is cut to max_tokens first; returns None when it is too short for a span
    with context on both sides. Span edges are word starts that are also token boundaries
    typed text gives (tokens.word_start_table: never between a bare space and a digit);
    table is that table ("auto": computed here).
    """
    enc = tokenizer(text, add_special_tokens=False, return_offsets_mapping=True)
    ids, offsets = enc.input_ids[:max_tokens], enc.offset_mapping[:max_tokens]
    n = len(ids)
    if n < 4 * span_range[0]:
        return None
    text = text[: offsets[-1][1]]
    if table == "auto":
        table = word_start_table(tokenizer)
    edges = word_edges(ids, table)
    starts = [w and e for w, e in zip(_word_starts(text, offsets), edges, strict=True)]
    lo, hi = span_range[0], min(span_range[1], n // 4)
    length = rng.randint(lo, hi)
    begin = rng.randint(n // 3, max(n // 3, 2 * n // 3 - length))
    a = next((i for i in range(begin, n) if starts[i]), begin)
    b = next((i for i in range(a + length, n) if starts[i]), None)
    if b is None or b - a > span_range[1] + 8 or a < 1:
        return None
    cs, ce = offsets[a][0], offsets[b][0]
    return SpanCase(ids[:a], ids[a:b], ids[b:], text[:cs], text[cs:ce], text[ce:])


def span_cases(
    tokenizer, passages: Sequence[str], n: int, seed: int, max_tokens: int = 192
) -> list[SpanCase]:
    """The first n passages that take a span, each cut with its own seeded generator."""
    cases = []
    table = word_start_table(tokenizer)
    for i, text in enumerate(passages):
        rng = random.Random(f"{seed}-{i}")
        case = make_span_case(tokenizer, text, rng, max_tokens, table=table)
        if case is not None:
            cases.append(case)
        if len(cases) == n:
            break
    return cases


# ---------------------------------------------------------------- the one scoring primitive


@dataclass
class Row:
    """A sequence and its targets: labels[i] is what the output at position i should predict."""

    ids: list[int]
    labels: list[int]
    segments: list[int] | None = None  # hybrid mode only
    positions: list[int] | None = None  # None: 0.. over the row


def _pad(rows: list[list[int]], value: int, width: int) -> list[list[int]]:
    return [r + [value] * (width - len(r)) for r in rows]


def nll(logits: torch.Tensor, labels: torch.Tensor) -> torch.Tensor:
    """NLL (nats) of each label: the default score of row_scores."""
    return torch.nn.functional.cross_entropy(logits, labels, reduction="none")


def row_nlls(
    engine,
    rows: Sequence[Row],
    adapter: str | None,
    mode: str,
    batch_size: int = 8,
    read: Callable[[torch.Tensor], torch.Tensor] | None = None,
) -> list[np.ndarray]:
    """Per-row NLL (nats) of every labelled position, in label order (row_scores)."""
    return row_scores(engine, rows, adapter, mode, batch_size, read)


def row_scores(
    engine,
    rows: Sequence[Row],
    adapter: str | None,
    mode: str,
    batch_size: int = 8,
    read: Callable[[torch.Tensor], torch.Tensor] | None = None,
    score: Callable[[torch.Tensor, torch.Tensor], torch.Tensor] = nll,
) -> list[np.ndarray]:
    """Per-row score(logits, labels) of every labelled position, in label order: (n,) or
    (n, k) per row, as score returns per position (default: the NLL).

    Rows are sorted by length and right-padded; the 4-D mask of `mode` keeps padding out.
    Only labelled positions go through the LM head; read (if given) turns their logits into
    the ones decoding uses (span_end.SpanEnd.apply) before the score.
    """
    runner = engine.runner
    read = read or (lambda logits: logits)
    out: list[np.ndarray] = [np.zeros(0)] * len(rows)
    order = sorted(range(len(rows)), key=lambda i: -len(rows[i].ids))
    pad = engine.tokenizer.pad_token_id or 0
    for at in range(0, len(order), batch_size):
        batch = [rows[i] for i in order[at : at + batch_size]]
        width = max(len(r.ids) for r in batch)
        ids = runner.tensor(_pad([r.ids for r in batch], pad, width))
        real = runner.tensor(_pad([[1] * len(r.ids) for r in batch], 0, width))
        labels = runner.tensor(_pad([r.labels for r in batch], IGNORE, width))
        seg = None
        if mode == "hybrid":
            seg = runner.tensor(_pad([r.segments for r in batch], 0, width))
        if all(r.positions is not None for r in batch):
            pos = runner.tensor(_pad([r.positions for r in batch], 0, width))
        else:
            pos = position_ids_for(real)
        mask = additive(allowed_mask(mode, real, seg), runner.dtype)
        with runner.using(adapter):
            h = runner.hidden_states(ids, mask, pos)
            sel = labels != IGNORE
            hs, ys = h[sel], labels[sel]
            scores = torch.cat(
                [
                    score(
                        read(runner.logits(hs[i : i + LOGIT_CHUNK]).float()),
                        ys[i : i + LOGIT_CHUNK],
                    )
                    for i in range(0, len(ys), LOGIT_CHUNK)
                ]
            )
        counts = sel.sum(1).tolist()
        for j, part in zip(order[at : at + batch_size], scores.split(counts), strict=True):
            out[j] = part.cpu().numpy().astype(np.float64)
    return out


# ---------------------------------------------------------------- span scores


def hybrid_span_nll(
    engine,
    cases: Sequence[SpanCase],
    adapter: str,
    batch_size: int = 8,
    hint: bool = False,
    gap: int | None = None,
) -> list[SpanNLL]:
    """MAGNET: the true span after <span_start>, reading left AND right context (one forward);
    <span_end> read as decoding reads it (the adapter's SpanEnd: tie and calibration), and
    log p(<span_end>) kept at every span position (SpanNLL.end_logp). The right context sits
    where the adapter's layout.GapRule puts it for a blank of unknown length, or (hint=True)
    for a blank whose length the user gave (the true one), or `gap` positions after the blank
    for every case (a hint of that many tokens, to measure one)."""
    runner = engine.runner
    roles, bos = runner.roles(adapter), runner.bos(adapter)
    rule = runner.gap_rule(adapter)
    rows = []
    for c in cases:
        between = between_sentences(c.left_text, c.right_text)  # where decoding asks it too
        at = gap if gap is not None else rule.inference_gap(c.n_tokens if hint else None, between)
        seq = build_hybrid(
            [c.left_ids, c.right_ids], [c.span_ids], roles, bos, with_end=True, gaps=[at]
        )
        rows.append(Row(seq.input_ids, seq.labels, seq.segments, seq.position_ids))
    span_end = runner.span_end(adapter)
    end = span_end.token

    def nll_and_end(logits: torch.Tensor, labels: torch.Tensor) -> torch.Tensor:
        logp = torch.log_softmax(logits, dim=-1)
        return torch.stack([-logp.gather(1, labels[:, None])[:, 0], logp[:, end]], dim=1)

    scores = row_scores(engine, rows, adapter, "hybrid", batch_size, span_end.apply, nll_and_end)
    # labels: span tokens 1..n, then the end; outputs 1..n are those after each span token
    return [
        SpanNLL(float(x[:-1, 0].sum()), float(x[-1, 0]), c.n_tokens, x[1:, 1].copy())
        for x, c in zip(scores, cases, strict=True)
    ]


def _answer_end_ids(tokenizer, style: str) -> list[int]:
    """What closes an answer: the chat turn's end token, or the line break of plain style."""
    if style == "chat":
        end = tokenizer.convert_tokens_to_ids("<|im_end|>")
        if end is None or end == tokenizer.unk_token_id:
            end = tokenizer.eos_token_id
        return [end]
    newline = tokenizer("\n", add_special_tokens=False).input_ids[-1:]
    return newline or [tokenizer.eos_token_id]  # a tokenizer that drops line breaks


def prompted_rows(
    tokenizer, cases: Sequence[SpanCase], shots: int, fmt=None
) -> list[tuple[Row, int]]:
    """(row, answer length) per case: prompt + true answer + answer end, labels on the last
    two. fmt: the prompt format (prompts.get_format; None: the default of `shots`); in a
    -prefix format the truth follows the reply's opening."""
    fmt = prompts.get_format(fmt, shots, tokenizer)
    end = _answer_end_ids(tokenizer, fmt.template)
    out = []
    for c in cases:
        prompt = prompts.build_prompt(c.blanked(prompts.BLANK), shots, tokenizer, fmt)
        lead = prompts.answer_lead(fmt, c.left_text)
        p = tokenizer(prompt, add_special_tokens=False).input_ids
        a = tokenizer(lead + c.span_text.strip(), add_special_tokens=False).input_ids
        ids = p + a + end
        labels = [IGNORE] * (len(p) - 1) + a + end + [IGNORE]
        out.append((Row(ids, labels), len(a)))
    return out


def prompted_span_nll(
    engine, cases: Sequence[SpanCase], shots: int, batch_size: int = 4, fmt=None
) -> list[SpanNLL]:
    """The base model (adapter off) scoring the true span as its answer to the fill-in prompt
    (fmt: the prompt format; None: the engine's, Runner.prompted_fill)."""
    if fmt is None:
        fmt = engine.runner.prompted_fill.format_of(shots_name(shots))
    pairs = prompted_rows(engine.tokenizer, cases, shots, fmt)
    nlls = row_nlls(engine, [r for r, _ in pairs], None, "causal", batch_size)
    return [
        SpanNLL(float(x[:n].sum()), float(x[n:].sum()), c.n_tokens)
        for x, (_, n), c in zip(nlls, pairs, cases, strict=True)
    ]


def causal_span_nll(
    engine, cases: Sequence[SpanCase], adapter: str | None, batch_size: int = 8
) -> list[SpanNLL]:
    """Left context only (what any causal LM can do): the span after the text before it."""
    rows = []
    for c in cases:
        ids = c.left_ids + c.span_ids
        labels = [IGNORE] * (len(c.left_ids) - 1) + c.span_ids + [IGNORE]
        rows.append(Row(ids, labels))
    nlls = row_nlls(engine, rows, adapter, "causal", batch_size)
    return [SpanNLL(float(x.sum()), math.nan, c.n_tokens) for x, c in zip(nlls, cases, strict=True)]


def span_perplexity(scores: Sequence[SpanNLL], with_end: bool = False) -> float:
    """exp(total NLL / total span tokens) over all cases (+1 token per case with the end)."""
    total = sum(s.span + (s.end if with_end else 0.0) for s in scores)
    n = sum(s.n_tokens + (1 if with_end else 0) for s in scores)
    return math.exp(total / n) if n else math.nan


# ---------------------------------------------------------------- whole texts


def causal_nll(
    engine,
    texts: Sequence[str],
    adapter: str | None,
    max_tokens: int = 256,
    batch_size: int = 8,
) -> tuple[float, int]:
    """(summed NLL, predicted tokens) of texts cut to max_tokens, causal mask, adapter on.

    Each text is tokenized as generation tokenizes a prompt; its first token is not scored.
    """
    rows = []
    for t in texts:
        ids = engine.tokenizer(t).input_ids[:max_tokens]
        if len(ids) >= 2:
            rows.append(Row(ids, ids[1:] + [IGNORE]))
    nlls = row_nlls(engine, rows, adapter, "causal", batch_size)
    return float(sum(x.sum() for x in nlls)), int(sum(len(x) for x in nlls))


def perplexity(total_nll: float, n_tokens: int) -> float:
    return math.exp(total_nll / n_tokens) if n_tokens else math.nan
