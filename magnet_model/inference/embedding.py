"""Sentence and token vectors from the decoder's hidden states, sentences packed side by side.

Per docs/method.md: the layout and pooling each adapter was trained with, the LM head never
run; sentences share rows so that nearly every token computed is a real one."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field, replace

import numpy as np
import torch

from ..errors import EmptyInputError, InputError
from ..masks import additive, allowed_mask, packed_allowed
from ..pooling import POOLINGS, pool_spans
from .runner import Runner


@dataclass
class TokenVectors:
    tokens: list[str]
    token_ids: list[int]
    offsets: list[tuple[int, int]]  # character span of each token in the text
    vectors: np.ndarray  # (n_tokens, hidden)


@dataclass
class SentencePlan:
    """How one adapter turns a sentence into a vector (see embed_sentences)."""

    mode: str
    pooling: str
    prefix: list[int] = field(default_factory=list)  # [bos] + instruction tokens
    end: list[int] = field(default_factory=list)  # [<sentence_end>] or nothing


def sentence_plan(runner: Runner, name: str, pooling: str | None = None) -> SentencePlan:
    """MAGNET: [bos] instruction text <sentence_end>, bidirectional, last token.
    Other trained adapters: their recorded pooling and mode. Base: causal mean pooling.
    pooling: 'last' or 'mean' overrides the adapter's own."""
    meta = runner.meta(name)
    if meta is None:
        plan = SentencePlan("causal", "mean")
    else:
        bos = runner.bos(name)
        prefix = ([] if bos is None else [bos]) + runner.encode(meta.instruction)
        mode = "bidirectional" if meta.attention == "hybrid" else meta.attention
        plan = SentencePlan(mode, meta.pooling, prefix, [meta.token_roles.sentence_end])
    if pooling is not None:
        if pooling not in POOLINGS:
            raise InputError(f"Pooling must be one of {', '.join(POOLINGS)}, not {pooling!r}.")
        plan = replace(plan, pooling=pooling)
    return plan


def sentence_rows(
    runner: Runner, texts: list[str], plan: SentencePlan
) -> list[tuple[list[int], int]]:
    """(prefix + body + end token ids, where the body starts) per text. One tokenizer call
    for all texts: the fast tokenizer encodes a list in one go, several times faster than
    text by text."""
    if not texts:
        return []
    cap = runner.config.embed_max_tokens
    empty = [] if plan.end else [runner.tokenizer.eos_token_id]
    bodies = runner.tokenizer(texts, add_special_tokens=False).input_ids
    start = len(plan.prefix)
    return [(plan.prefix + (b[:cap] or empty) + plan.end, start) for b in bodies]


def embed_sentences(
    runner: Runner,
    texts: list[str],
    name: str,
    plan: SentencePlan,
    batch_size: int,
    normalize_embeddings: bool,
    show_progress_bar: bool,
) -> np.ndarray:
    """Sentence vectors (n, hidden) in input order."""
    rows = sentence_rows(runner, texts, plan)
    out = np.zeros((len(texts), runner.hidden_size), dtype=np.float32)
    batches = pack_rows([len(r) for r, _ in rows], batch_size)
    if show_progress_bar:
        from tqdm.auto import tqdm

        batches = tqdm(batches, desc=f"Embedding ({name})")
    for batch in batches:
        vecs = embed_batch(runner, name, plan, [[rows[i] for i in row] for row in batch])
        if normalize_embeddings:
            vecs = torch.nn.functional.normalize(vecs, dim=-1)
        out[[i for row in batch for i in row]] = vecs.float().cpu().numpy()
    return out


def embed_batch(
    runner: Runner, name: str, plan: SentencePlan, packed: list[list[tuple]]
) -> torch.Tensor:
    """Pooled vectors of one batch, row by row and left to right in each row.

    packed: rows, each one or more (ids, body start) sentences side by side (pack_rows).
    A sentence attends within itself only and its positions start at 0, so its vector is
    what it would get alone in a row; the padding that would have filled the row is real
    work instead. Causal rows of one sentence need no mask (right padding: a real token
    never sees a later pad; sdpa's causal kernel then also runs grouped-query attention
    without copying keys and values per head). LoRA runs fused (multi_lora.RowLora)."""
    if plan.mode not in ("causal", "bidirectional"):
        raise ValueError(
            f"sentence embeddings need causal or bidirectional attention, not {plan.mode!r}"
        )
    width = max(sum(len(ids) for ids, _ in row) for row in packed)
    pad = runner.tokenizer.pad_token_id or 0
    ids, segments, positions, spans = [], [], [], []
    for r, row in enumerate(packed):
        flat, seg, pos = [], [], []
        for k, (toks, start) in enumerate(row, 1):
            spans.append((r, len(flat) + start, len(flat) + len(toks)))  # pooled columns
            flat += toks
            seg += [k] * len(toks)
            pos += range(len(toks))
        fill = width - len(flat)
        ids.append(flat + [pad] * fill)
        segments.append(seg + [0] * fill)
        positions.append(pos + [0] * fill)
    ids = runner.tensor(ids)
    if plan.mode == "causal" and all(len(row) == 1 for row in packed):
        mask, pos_ids = None, None  # positions 0.. in every row
    else:
        allowed = packed_allowed(runner.tensor(segments), plan.mode == "causal")
        mask, pos_ids = additive(allowed, runner.dtype), runner.tensor(positions)
    h = runner.forward_rows(ids, pos_ids, mask, None, [name] * len(packed))
    return pool_spans(h, spans, plan.pooling)


def token_layout(runner: Runner, name: str) -> tuple[list[int], str]:
    """(tokens put before a text, attention mode) for token vectors: exactly what training
    used. The prefix is the BOS the trainer recorded (none for SmolLM2: `bos: null`), or,
    without a record, the one the tokenizer itself adds; never a token training lacked."""
    meta = runner.meta(name)
    mode = "causal" if meta is None or meta.attention == "causal" else "bidirectional"
    bos = runner.bos(name)
    return ([] if bos is None else [bos]), mode


def embed_tokens(runner: Runner, text: str, name: str) -> TokenVectors:
    """One vector per token, in the layout training used (token_layout). Bidirectional
    adapters: token i's vector is the output at i - 1 (the MNTP convention); the first
    token, with nothing before it, takes its own output. Causal (base, adapters trained
    causally): the token's own output."""
    if not text or not text.strip():
        raise EmptyInputError("The text is empty.")
    prefix, mode = token_layout(runner, name)
    enc = runner.tokenizer(text, add_special_tokens=False, return_offsets_mapping=True)
    ids = enc.input_ids[: runner.max_input_tokens - len(prefix)]
    t = runner.tensor([prefix + ids])
    mask = additive(allowed_mask(mode, torch.ones_like(t)), runner.dtype)
    with runner.using(name):
        h = runner.hidden_states(t, mask, None)[0]
    vecs = h[token_vector_index(len(prefix), len(ids), mode)]
    tokens = runner.tokenizer.convert_ids_to_tokens(ids)
    offsets = [tuple(o) for o in enc.offset_mapping[: len(ids)]]
    return TokenVectors(tokens, list(ids), offsets, vecs.float().cpu().numpy())


def token_vector_index(n_prefix: int, n: int, mode: str) -> list[int]:
    """Which output position gives the vector of each of n tokens laid out after n_prefix
    tokens: its own (causal), or the one before it (bidirectional, MNTP: the output at i - 1
    was trained to predict token i), the very first token of a row taking its own."""
    if mode == "causal":
        return list(range(n_prefix, n_prefix + n))
    return [max(n_prefix + j - 1, 0) for j in range(n)]


def pack_rows(lengths: Sequence[int], batch_size: int) -> list[list[list[int]]]:
    """Sentence indices as batches of at most batch_size rows, sentences side by side in a row.

    Longest first: a batch is as wide as its longest sentence, and shorter ones fill the rest
    of its rows (first fit, in decreasing length), so the tokens computed are nearly all real
    ones, where one sentence per row pads every row to the longest (STS-B, 48 sentences:
    1.8 padded tokens per real one). Attention per row costs no more than the padded row."""
    remaining = sorted(range(len(lengths)), key=lambda i: -lengths[i])
    batches = []
    while remaining:
        width = lengths[remaining[0]]
        rows: list[list[int]] = []
        free: list[int] = []
        left = []
        for i in remaining:
            n = lengths[i]
            r = next((r for r, f in enumerate(free) if n <= f), None)
            if r is None and len(rows) < batch_size:
                rows.append([])
                free.append(width)
                r = len(rows) - 1
            if r is None:
                left.append(i)
            else:
                rows[r].append(i)
                free[r] -= n
        batches.append(rows)
        remaining = left
    return batches
