"""The training views of a text, as padded batches of token ids (no model here).

- Masked view x_m (MNTP + MSG, one hybrid forward): contiguous spans are cut out of the text
  and laid out after the context by layout.build_hybrid (the same layout infilling uses); then
  20% of the remaining context tokens are selected for MNTP: 80% become <mask>, 10% a random
  token, 10% stay. The output at i-1 predicts the original token i, so MNTP labels sit one
  position to the left of the selected tokens; MSG labels sit on the span tokens.
- Sentence view (SSCL): [bos] instruction + text + <sentence_end>. Rows come in pairs
  (x, x+): x+ is a paraphrase when the data has one, else x itself (SimCSE: dropout makes
  the two passes differ).

All randomness comes from the `random.Random` passed in, so a run is reproducible per step.
"""

from __future__ import annotations

import random
from dataclasses import dataclass, field

import torch

from ..adapter_meta import SENTENCE_INSTRUCTION
from ..layout import IGNORE, GapRule, build_hybrid
from ..tokens import TokenRoles


@dataclass
class ViewConfig:
    mntp_prob: float = 0.2  # share of context tokens selected for MNTP
    mask_share: float = 0.8  # of the selected: replaced by <mask>
    random_share: float = 0.1  # of the selected: replaced by a random token (rest: kept)
    max_spans: int = 3  # MSG: 1..max_spans spans per text
    span_min: int = 8  # span lengths for long texts (paper: 8..32 on Wikitext-103) ...
    span_max: int = 32
    span_budget: float = 0.5  # ... scaled down so spans cover at most this share of a text
    # MSG: share of texts that are one whole span, i.e. plain causal next-token LM, the mode
    # continuation runs in with the adapter on (the method's reason generation is kept)
    all_span_share: float = 0.0
    # MSG: what a span is, as shares of the spans drawn: a unit a person blanks (units.py:
    # sentence, phrase, word) or the paper's random window; a text without a unit of the
    # drawn kind gets a window. Only windows: the first adapters' recipe.
    unit_shares: dict[str, float] = field(default_factory=lambda: {"window": 1.0})
    # where the text after a blank sits (layout.GapRule: default gap, or the length as a hint)
    gap: GapRule = field(default_factory=GapRule)
    instruction: str = SENTENCE_INSTRUCTION


@dataclass
class MaskedBatch:
    """x_m for a batch: (B, T) tensors, right-padded."""

    input_ids: torch.Tensor
    attention_mask: torch.Tensor
    segments: torch.Tensor  # 0 = context, k = span k
    position_ids: torch.Tensor
    mntp_labels: torch.Tensor  # IGNORE except left of selected context tokens
    msg_labels: torch.Tensor  # IGNORE except on span tokens

    def to(self, device) -> MaskedBatch:
        return MaskedBatch(*(t.to(device) for t in self.__dict__.values()))


@dataclass
class SentenceBatch:
    """2B rows: x_1..x_B then their positives x+_1..x+_B, right-padded."""

    input_ids: torch.Tensor
    attention_mask: torch.Tensor
    pool_mask: torch.Tensor  # 1 on text + <sentence_end> (the instruction is not pooled)

    def to(self, device) -> SentenceBatch:
        return SentenceBatch(*(t.to(device) for t in self.__dict__.values()))


# ---------------------------------------------------------------- spans (MSG)


def span_length_range(n: int, cfg: ViewConfig) -> tuple[int, int]:
    """8..32 tokens for texts of 128+ tokens, proportionally shorter for shorter texts."""
    lo = max(1, min(cfg.span_min, n // 16))
    hi = max(lo, min(cfg.span_max, n // 4))
    return lo, hi


def sample_spans(
    n: int, cfg: ViewConfig, rng: random.Random, edges: list[bool] | None = None
) -> list[tuple[int, int]]:
    """Non-overlapping [start, end) spans of a text of n tokens, at least one token apart.

    edges[i] says whether a span may start or end before token i (tokens.word_edges); spans
    are moved to the next such edge (the end of the text always is one)."""
    if n < 2:
        return []
    spans = _place_spans(n, cfg, rng)
    return spans if edges is None else _snap_spans(spans, edges, n)


def _snap_spans(spans: list[tuple[int, int]], edges: list[bool], n: int) -> list:
    """Each span's start moved to the next edge (or, past the last one, back to the previous
    edge after the span before it), its end to the next edge at or after its length; a span
    with no edge left for it is dropped."""

    def next_edge(i: int) -> int:
        while i < n and not edges[i]:
            i += 1
        return min(i, n)

    out: list[tuple[int, int]] = []
    for start, end in spans:
        low = out[-1][1] + 1 if out else 0
        a = next_edge(max(start, low))
        if a >= n:
            a = next((i for i in range(min(start, n - 1), low - 1, -1) if edges[i]), n)
        if a >= n:
            break
        b = next_edge(max(a + (end - start), a + 1))
        out.append((a, b))
    return out


def _place_spans(n: int, cfg: ViewConfig, rng: random.Random) -> list[tuple[int, int]]:
    lo, hi = span_length_range(n, cfg)
    budget = max(1, int(n * cfg.span_budget))
    lengths: list[int] = []
    for _ in range(rng.randint(1, cfg.max_spans)):
        length = rng.randint(lo, hi)
        if sum(lengths) + length + len(lengths) > budget:
            break
        lengths.append(length)
    if not lengths:
        lengths = [min(lo, budget)]
    k = len(lengths)
    free = n - sum(lengths) - (k - 1)  # tokens left for gaps beyond the mandatory ones
    cuts = sorted(rng.randint(0, free) for _ in range(k))
    gaps = [b - a for a, b in zip([0, *cuts[:-1]], cuts, strict=True)]  # left gap, then k-1 inner
    spans, pos = [], 0
    for i, (gap, length) in enumerate(zip(gaps, lengths, strict=True)):
        pos += gap + (1 if i > 0 else 0)
        spans.append((pos, pos + length))
        pos += length
    return spans


TokenUnit = tuple[int, int, str]  # [start, end) in tokens, units.KINDS kind


def sample_unit_spans(
    n: int,
    units: list[TokenUnit] | tuple,
    cfg: ViewConfig,
    rng: random.Random,
    edges: list[bool] | None = None,
) -> list[tuple[int, int]]:
    """1..max_spans non-overlapping spans, at least one token apart, each a unit of the kind
    drawn from cfg.unit_shares (or a random window); at least a quarter of the text stays
    context, and a unit longer than half the text (or than 2 x span_max) is never a span."""
    kinds = list(cfg.unit_shares)
    weights = [cfg.unit_shares[k] for k in kinds]
    budget = max(1, min(int(n * cfg.span_budget), n - max(1, n // 4)))
    longest = min(2 * cfg.span_max, max(1, n // 2))
    chosen: list[tuple[int, int]] = []

    def free(a: int, b: int) -> bool:
        return all(b < x or a > y for x, y in chosen) and a >= 0 and b <= n

    for _ in range(rng.randint(1, cfg.max_spans)):
        kind = rng.choices(kinds, weights)[0]
        pool = [(a, b) for a, b, k in units if k == kind and b - a <= longest and free(a, b)]
        if kind == "window" or not pool:
            window = _place_spans(n, _one_span(cfg), rng)
            window = window if edges is None else _snap_spans(window, edges, n)
            pool = [(a, b) for a, b in window if b - a <= longest and free(a, b)]
        if not pool:
            continue
        a, b = rng.choice(pool)
        if sum(y - x for x, y in chosen) + (b - a) > budget:
            continue
        chosen.append((a, b))
    return sorted(chosen)


def _one_span(cfg: ViewConfig) -> ViewConfig:
    return ViewConfig(
        max_spans=1, span_min=cfg.span_min, span_max=cfg.span_max, span_budget=cfg.span_budget
    )


def cut_spans(ids: list[int], spans: list[tuple[int, int]]) -> tuple[list[list[int]], list]:
    """Text ids + spans -> (len(spans) + 1 context pieces, span token lists)."""
    pieces, out, prev = [], [], 0
    for start, end in spans:
        pieces.append(ids[prev:start])
        out.append(ids[start:end])
        prev = end
    pieces.append(ids[prev:])
    return pieces, out


# ---------------------------------------------------------------- MNTP


def mntp_corrupt(
    input_ids: list[int],
    candidates: list[int],
    roles: TokenRoles,
    vocab: list[int],
    cfg: ViewConfig,
    rng: random.Random,
) -> list[int]:
    """Select mntp_prob of the candidate positions, corrupt them 80/10/10 in place.

    Returns MNTP labels: label[i - 1] = original token i for each selected i (the decoder's
    shift is kept: the output before a token predicts it).
    """
    labels = [IGNORE] * len(input_ids)
    candidates = [i for i in candidates if i >= 1]
    if not candidates:
        return labels
    n_sel = max(1, round(cfg.mntp_prob * len(candidates)))
    for i in rng.sample(candidates, n_sel):
        labels[i - 1] = input_ids[i]
        r = rng.random()
        if r < cfg.mask_share:
            input_ids[i] = roles.mask
        elif r < cfg.mask_share + cfg.random_share:
            input_ids[i] = vocab[rng.randrange(len(vocab))]
    return labels


def replacement_vocab(vocab_size: int, roles: TokenRoles, extra: set[int]) -> list[int]:
    """Token ids a random MNTP replacement may take: never a role or special token."""
    banned = roles.special_ids() | {roles.pad, roles.sentence_end} | extra
    return [i for i in range(vocab_size) if i not in banned]


# ---------------------------------------------------------------- one text, then a batch


@dataclass
class MaskedExample:
    input_ids: list[int]
    segments: list[int]
    position_ids: list[int]
    mntp_labels: list[int]
    msg_labels: list[int]


def masked_example(
    ids: list[int],
    roles: TokenRoles,
    vocab: list[int],
    cfg: ViewConfig,
    rng: random.Random,
    bos: int | None = None,
    mntp: bool = True,
    msg: bool = True,
    edges: list[bool] | None = None,
    units: list[TokenUnit] | tuple = (),
) -> MaskedExample:
    """x_m of one text: spans cut out (if msg), context corrupted for MNTP (if mntp).

    With msg, a share cfg.all_span_share of texts is one whole span (causal_example). Spans
    are units of the text (units: its token units) or windows, as cfg.unit_shares says; each
    span's right context sits after the gap cfg.gap gives it."""
    if msg and cfg.all_span_share > 0 and rng.random() < cfg.all_span_share:
        return causal_example(ids, bos)
    if not msg:
        spans = []
    elif set(cfg.unit_shares) == {"window"}:  # the first recipe, its random stream unchanged
        spans = sample_spans(len(ids), cfg, rng, edges)
    else:
        spans = sample_unit_spans(len(ids), units, cfg, rng, edges)
    pieces, span_ids = cut_spans(ids, spans)
    gaps = [cfg.gap.training_gap(len(sp), rng) for sp in span_ids]
    seq = build_hybrid(pieces, span_ids, roles, bos=bos, with_end=True, gaps=gaps)
    input_ids = list(seq.input_ids)
    specials = set(seq.blank_positions) | ({0} if bos is not None else set())
    context = [i for i in range(seq.context_length) if i not in specials]
    if mntp:
        mntp_labels = mntp_corrupt(input_ids, context, roles, vocab, cfg, rng)
    else:
        mntp_labels = [IGNORE] * len(input_ids)
    return MaskedExample(input_ids, seq.segments, seq.position_ids, mntp_labels, seq.labels)


def causal_example(ids: list[int], bos: int | None = None) -> MaskedExample:
    """The all-span view: every token is a span token, so MSG is plain next-token LM under a
    causal mask, laid out exactly as continuation runs (no <blank> or <span_start>: generation
    with the adapter on never has them). Its last token has no target: a training text is a
    chunk, and its end is not an end of span."""
    prefix = [] if bos is None else [bos]
    input_ids = prefix + list(ids)
    segments = [0] * len(prefix) + [1] * len(ids)  # a BOS is context: every token sees it
    labels = [IGNORE] * len(prefix) + list(ids[1:]) + [IGNORE]
    if prefix and ids:
        labels[0] = ids[0]
    return MaskedExample(
        input_ids, segments, list(range(len(input_ids))), [IGNORE] * len(input_ids), labels
    )


def _pad(rows: list[list[int]], value: int) -> torch.Tensor:
    width = max(len(r) for r in rows)
    return torch.tensor([r + [value] * (width - len(r)) for r in rows], dtype=torch.long)


def collate_masked(examples: list[MaskedExample], pad: int) -> MaskedBatch:
    return MaskedBatch(
        input_ids=_pad([e.input_ids for e in examples], pad),
        attention_mask=_pad([[1] * len(e.input_ids) for e in examples], 0),
        segments=_pad([e.segments for e in examples], 0),
        position_ids=_pad([e.position_ids for e in examples], 0),
        mntp_labels=_pad([e.mntp_labels for e in examples], IGNORE),
        msg_labels=_pad([e.msg_labels for e in examples], IGNORE),
    )


def sentence_ids(
    text_ids: list[int], instruction_ids: list[int], roles: TokenRoles, bos: int | None = None
) -> tuple[list[int], int]:
    """[bos] instruction text <sentence_end> -> (ids, index where the pooled part starts).

    The instruction and the text are tokenized separately so the boundary is exact.
    """
    prefix = ([] if bos is None else [bos]) + list(instruction_ids)
    return prefix + list(text_ids) + [roles.sentence_end], len(prefix)


def collate_sentences(
    texts: list[list[int]],
    positives: list[list[int]],
    instruction_ids: list[int],
    roles: TokenRoles,
    bos: int | None = None,
) -> SentenceBatch:
    """Pairs (x, x+) -> one batch of 2B rows of mixed lengths (x rows first)."""
    rows, starts = [], []
    for t in [*texts, *positives]:
        ids, start = sentence_ids(t, instruction_ids, roles, bos)
        rows.append(ids)
        starts.append(start)
    pool = [[0] * s + [1] * (len(r) - s) for r, s in zip(rows, starts, strict=True)]
    return SentenceBatch(
        input_ids=_pad(rows, roles.pad),
        attention_mask=_pad([[1] * len(r) for r in rows], 0),
        pool_mask=_pad(pool, 0),
    )
