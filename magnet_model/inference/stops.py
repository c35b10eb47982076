"""Where a MAGNET fill ends: where the model ended it, or the stop under which the whole
completed text reads likeliest ("join", the default).

Greedy decoding ends a span where <span_end> is the single likeliest next token. The adapter's
end is weak (it ran phrase and word blanks on into whole sentences, 2-7x the true length,
bench/bench_stop_rules.py), yet along the path it decoded there are word boundaries where the
end was nearly as likely and where the text after the blank follows well. Under "join" each
such boundary t (one where a rule of the decoder allowed the end, and the model's own end) is
a candidate, scored by the log-probability of the completed text it makes:

    log P(fill[:t]) + log P(<span_end> after it)            the span, read by the decoder
    + log P(first RIGHT_TOKENS tokens after the blank       the join, read causally by the
            | the text before the blank, fill[:t])           same adapter
    + LENGTH_BONUS * t                                      a length prior

and the span is cut at the best one (reason "best" when that is before the model's end). A
blank decoded from several first tokens (infill.py, `fill_branches`) has the stops of all its
paths as candidates, under BRANCH_LENGTH_BONUS, and keeps the best path's. The
causal reading is one extra forward per blank: the text before the blank once, each path's
tokens once, and per candidate the right tokens, each seeing the shared text before it and its
own fill (a packed tree, packed_join).
"""

from __future__ import annotations

import math
from collections.abc import Generator

import torch

from ..tokens import SPACE_MARKS, word_start_table

RIGHT_TOKENS = 8  # tokens after the blank that the join reads
# nats per token of the cut fill: every token costs log-probability, so the sum alone favours
# short fills (phrase blanks cut to 0.43-0.53x the truth on the training split's passages).
# Chosen on those passages, never the held-out ones (bench/bench_stop_rules.py --split dev
# --length-bonus ...: the most fills within 0.5-2x the truth over the phrase and word suites
# of both domains, 249 of 320 with none, 264 at 0.3, 268 at 0.5, 258 at 0.8)
LENGTH_BONUS = 0.5
# the same prior where a blank was filled from several first tokens (infill.py, branches):
# among more paths one that runs on finds a high sum of bonuses more often (the training
# split's news word blanks at 0.5: 2.96x the truth; the greedy path alone 1.70). Chosen on its
# passages like LENGTH_BONUS (bench/bench_first_branches.py --split dev --fills 80 --suites
# word,phrase --length-bonus 0.35,0.4,0.45,0.5,0.8, bench/results/first_branches_dev_v6.json:
# phrase and word fills within 0.5-2x the truth, of 320: 237 at 0.3, 236 at 0.35, 235 at
# 0.4 and 0.45, 234 at 0.5, 223 at 0.8; the greedy path's best stop alone 230)
BRANCH_LENGTH_BONUS = 0.3
# a fill may be cut before a token that opens a word (a space mark, or a line break) or before
# punctuation that closes one; never inside a word, a hyphenated one included ("anarcho" of
# "anarcho-syndicalism"), nor between a word and its "'s"
CLOSING = tuple(',.;:!?)]}"”')
LINE_BREAK = "Ċ"


def cut_points(tokenizer) -> list[bool]:
    """Per vocabulary id: whether a fill may be cut right before this token (CLOSING, read in
    the token's decoded text: a byte-level vocabulary writes "”" as "âĢĿ"). Every token may,
    where the vocabulary marks no spaces (a word-level tokenizer)."""
    tokens = tokenizer.convert_ids_to_tokens(list(range(len(tokenizer))))
    if word_start_table(tokenizer) is None:
        return [True] * len(tokens)
    opens = (*SPACE_MARKS, LINE_BREAK)
    return [
        bool(t)
        and (t.startswith(opens) or tokenizer.convert_tokens_to_string([t]).startswith(CLOSING))
        for t in tokens
    ]


def candidates(trace, ids, reason: str, cuts, min_tokens: int = 1) -> list[tuple]:
    """(t, log P of the first t tokens, log P of the end after them) for each stop the rule may
    pick: word boundaries (cuts: cut_points, whether the token after t may follow a cut) at
    which the end was allowed (trace: per step, the log P of the token picked and of
    <span_end>, infill.InfillJob), and the span as decoded (a span cut at its cap or joined to
    the right context keeps its own end: 0)."""
    out, total = [], 0.0
    for t, (tok_lp, end_lp) in enumerate(trace):
        if t > len(ids):
            break
        boundary = t == len(ids) or cuts[ids[t]]
        if t >= max(1, min_tokens) and math.isfinite(end_lp) and boundary:
            out.append((t, total, end_lp))
        total += tok_lp
    if reason != "end" or not out or out[-1][0] != len(ids):
        out.append((len(ids), sum(lp for lp, _ in trace[: len(ids)]), 0.0))
    return out


def packed_join(left: list[int], fills: list[list[int]], right: list[int]) -> tuple:
    """The causal reading of several cut fills after one shared left text, as one sequence:
    (ids, positions, see (Q, Q) bool, want: per fill the indices whose logits predict the
    right tokens). The fills are laid out as a tree: a token that two fills share with all
    that comes before it (the cuts of one path are prefixes of it, and paths of one blank
    may share their start) is encoded once, seeing the left text and the tokens before it
    on its own fill. Each fill then adds its own copy of `right` but its last token (the
    last one is only predicted), which sees the left text, that fill's tokens and itself
    causally, never another fill's. So the reading holds the left text, each path's tokens
    once and len(right) - 1 tokens per fill, where a copy of every cut fill would hold the
    sum of their lengths (a news word blank's 4 paths with 77 stops: 657 tokens, not 1633)."""
    n_left = len(left)
    ids, pos = list(left), list(range(n_left))
    chains: list[list[int]] = []  # per row after the left text: the rows it sees past it
    node: dict[tuple[int, int], int] = {}  # (parent row or -1, token) -> its row
    lasts = []
    for fill in fills:
        parent = -1
        for i, tok in enumerate(fill):
            row = node.get((parent, tok))
            if row is None:
                row = node[(parent, tok)] = len(ids)
                ids.append(tok)
                pos.append(n_left + i)
                chains.append((chains[parent - n_left] if parent >= 0 else []) + [row])
            parent = row
        lasts.append(parent)
    want = []
    for fill, last in zip(fills, lasts, strict=True):
        seen = chains[last - n_left] if last >= 0 else []
        # the last fill token predicts the first right token; each right token the next
        w = [last if last >= 0 else n_left - 1]
        for j, tok in enumerate(right[:-1]):
            row = len(ids)
            ids.append(tok)
            pos.append(n_left + len(fill) + j)
            seen = seen + [row]
            chains.append(seen)
            w.append(row)
        want.append(w)
    q = len(ids)
    see = torch.zeros(q, q, dtype=torch.bool)
    see[:n_left, :n_left] = torch.ones(n_left, n_left, dtype=torch.bool).tril()
    see[n_left:, :n_left] = True
    rows = [n_left + r for r, chain in enumerate(chains) for _ in chain]
    cols = [c for chain in chains for c in chain]
    see[rows, cols] = True
    return ids, pos, see, want


def choose(cands: list[tuple], right_lps: list[float], bonus: float | None = None) -> int:
    """The index of the best candidate: the highest span + end + join log-probability, plus
    `bonus` (None: LENGTH_BONUS) per token of the cut fill."""
    bonus = LENGTH_BONUS if bonus is None else bonus
    scores = [a + e + q + bonus * t for (t, a, e), q in zip(cands, right_lps, strict=True)]
    return max(range(len(cands)), key=scores.__getitem__)


def stop_steps(runner, job, generated: list[list[int]], reasons: list[str]) -> Generator:
    """Cut each free span at its best stop (module doc): yields (ids, positions, see, want) of
    a causal reading, receives the logits of the wanted positions (len(want), vocab); returns
    (generated, reasons), one per blank. Blanks are read in order, each after the earlier ones
    as cut. A blank that branched (infill.span_steps: job.blank_of) has the stops of all its
    paths as candidates, and the best one is kept (its whole path: its own reason). A span of
    fixed length or before no text, and any span with one candidate, are left as they are;
    so is every span under the rule "model". A span that ran into the right context (joined)
    is a candidate as it stands, beside its earlier stops: a word blank that ran on through a
    whole sentence before it met the text after it is cut back too. job.trace is left with
    the kept path's trace per blank."""
    n = len(job.piece_ids) - 1
    blank_of = getattr(job, "blank_of", None) or list(range(n))
    paths = [[j for j, b in enumerate(blank_of) if b == k] for k in range(n)]
    traces = job.trace or []
    kept = list(range(n))  # per blank: the path kept (its greedy one unless another wins)
    out, why = [list(g) for g in generated[:n]], list(reasons[:n])
    cuts = runner.cut_points
    left: list[int] = [] if job.bos is None else [job.bos]
    for k in range(n):
        left += job.piece_ids[k]
        right = job.piece_ids[k + 1][:RIGHT_TOKENS]
        cands, owner = [], []
        if job.fill.stop == "join" and not job.fixed[k] and right:
            for j in paths[k]:
                trace = traces[j] if j < len(traces) else []
                if reasons[j] in ("end", "max", "joined") and trace:
                    got = candidates(trace, generated[j], reasons[j], cuts, job.min_tokens)
                    cands += got
                    owner += [j] * len(got)
        longest = max(len(generated[j]) for j in paths[k])
        too_long = len(left) + longest + len(right) > runner.max_input_tokens
        if len(cands) > 1 and not too_long:
            fills = [generated[j][:t] for j, (t, _, _) in zip(owner, cands, strict=True)]
            ids, pos, see, want = packed_join(left, fills, right)
            flat = [i for w in want for i in w]
            logits = yield ids, pos, see, flat
            logp = torch.log_softmax(logits.float(), dim=-1)
            at = torch.tensor(right * len(fills), device=logp.device)[:, None]
            per = logp.gather(1, at)[:, 0].view(len(fills), len(right)).sum(-1).tolist()
            i = choose(cands, per, BRANCH_LENGTH_BONUS if len(paths[k]) > 1 else None)
            j, t = owner[i], cands[i][0]
            kept[k] = j
            out[k] = generated[j][:t]
            why[k] = "best" if t < len(generated[j]) else reasons[j]
        left += out[k]
    if traces:
        job.trace = [traces[j] for j in kept]
    return out, why
