"""Pooling token states into one sentence vector: the rule training (SSCL) learns and serving
(sentence embeddings) applies, so both read it from here.

    'last'  the state of the last pooled token (the sentence-end token)
    'mean'  the average of the pooled tokens' states
"""

from __future__ import annotations

import torch

POOLINGS = ("last", "mean")


def pool(hidden: torch.Tensor, pool_mask: torch.Tensor, pooling: str = "last") -> torch.Tensor:
    """'last': state of the last pooled token (<sentence_end>); 'mean': average of pooled ones."""
    if pooling == "last":
        index = torch.arange(pool_mask.shape[1], device=pool_mask.device)
        last = (pool_mask.long() * index).argmax(dim=1)
        return hidden[torch.arange(hidden.shape[0], device=hidden.device), last]
    if pooling == "mean":
        m = pool_mask.to(hidden.dtype).unsqueeze(-1)
        return (hidden * m).sum(1) / m.sum(1).clamp(min=1)
    raise ValueError(f"pooling must be one of {', '.join(POOLINGS)}, not {pooling!r}")


def pool_spans(hidden: torch.Tensor, spans: list[tuple[int, int, int]], pooling: str = "last"):
    """pool() for sentences packed side by side in rows: spans (row, start, end) mark each
    sentence's pooled columns. The same rule as pool (last pooled token, or their mean), one
    vector per span, without a (sentences, width, hidden) copy of the states."""
    if pooling == "last":
        rows = torch.tensor([r for r, _, _ in spans], device=hidden.device)
        cols = torch.tensor([e - 1 for *_, e in spans], device=hidden.device)
        return hidden[rows, cols]
    if pooling == "mean":
        return torch.stack([hidden[r, a:e].mean(0) for r, a, e in spans])
    raise ValueError(f"pooling must be one of {', '.join(POOLINGS)}, not {pooling!r}")
