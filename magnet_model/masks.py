"""4-D attention masks for the three attention modes, passed unchanged to transformers models.

Shapes follow transformers: (batch, 1, query, key). `allowed` masks are boolean (True = may
attend); `additive` turns one into the float form (0 or the dtype's minimum) that both the sdpa
and the eager attention of Llama accept.

A sequence is described by
- attention_mask (batch, seq): 1 for real tokens, 0 for padding (anywhere: left or right);
- segments (batch, seq), hybrid mode only: 0 for context tokens, k >= 1 for the tokens of
  span k. Context tokens see all context tokens (never span tokens); a token of span k sees
  all context tokens and the earlier tokens of span k (not other spans).

Padding keys are never attended to. A padding query attends to itself only, so no row is
empty (an empty row would turn into NaN in softmax).
"""

from __future__ import annotations

import torch

MODES = ("causal", "bidirectional", "hybrid")


def _finish(allowed: torch.Tensor, attention_mask: torch.Tensor) -> torch.Tensor:
    real = attention_mask.bool()
    allowed = allowed & real[:, None, :]  # never attend to padding keys
    eye = torch.eye(allowed.shape[-1], dtype=torch.bool, device=allowed.device)
    pad_query = ~real[:, :, None]
    allowed = allowed | (pad_query & eye)  # padding queries see themselves only
    return allowed[:, None, :, :]


def causal_allowed(attention_mask: torch.Tensor) -> torch.Tensor:
    """Each real token sees the real tokens at or before it (positions, not padding)."""
    _, n = attention_mask.shape
    tri = torch.ones(n, n, dtype=torch.bool, device=attention_mask.device).tril()
    return _finish(tri[None].expand(attention_mask.shape[0], n, n), attention_mask)


def bidirectional_allowed(attention_mask: torch.Tensor) -> torch.Tensor:
    """Every real token sees every real token."""
    b, n = attention_mask.shape
    full = torch.ones(b, n, n, dtype=torch.bool, device=attention_mask.device)
    return _finish(full, attention_mask)


def hybrid_allowed(attention_mask: torch.Tensor, segments: torch.Tensor) -> torch.Tensor:
    """The MAGNET mask: bidirectional context, causal spans that read all context."""
    if segments.shape != attention_mask.shape:
        raise ValueError("segments must have the shape of attention_mask")
    n = attention_mask.shape[1]
    q_seg = segments[:, :, None]
    k_seg = segments[:, None, :]
    key_is_context = k_seg == 0
    same_span = (q_seg == k_seg) & (q_seg > 0)
    tri = torch.ones(n, n, dtype=torch.bool, device=segments.device).tril()[None]
    allowed = key_is_context | (same_span & tri)
    return _finish(allowed, attention_mask)


def allowed_mask(
    mode: str, attention_mask: torch.Tensor, segments: torch.Tensor | None = None
) -> torch.Tensor:
    if mode == "causal":
        return causal_allowed(attention_mask)
    if mode == "bidirectional":
        return bidirectional_allowed(attention_mask)
    if mode == "hybrid":
        if segments is None:
            raise ValueError("hybrid attention needs segments (0 = context, k = span k)")
        return hybrid_allowed(attention_mask, segments)
    raise ValueError(f"attention mode must be one of {', '.join(MODES)}, not {mode!r}")


def additive(allowed: torch.Tensor, dtype: torch.dtype = torch.float32) -> torch.Tensor:
    """Boolean (True = attend) -> float mask: 0 where allowed, dtype min elsewhere."""
    out = torch.zeros(allowed.shape, dtype=dtype, device=allowed.device)
    return out.masked_fill(~allowed, torch.finfo(dtype).min)


def build_mask(
    mode: str,
    attention_mask: torch.Tensor,
    segments: torch.Tensor | None = None,
    dtype: torch.dtype = torch.float32,
) -> torch.Tensor:
    """The 4-D float mask to pass as `attention_mask=` to a transformers decoder."""
    return additive(allowed_mask(mode, attention_mask, segments), dtype)


def position_ids_for(attention_mask: torch.Tensor) -> torch.Tensor:
    """Positions 0.. counted over real tokens only, so left padding does not shift them."""
    pos = attention_mask.long().cumsum(-1) - 1
    return pos.clamp(min=0)


# ---------------------------------------------------------------- incremental and packed forms
# The same rules for the inference paths: a decoding step's new tokens over the keys already in
# the KV cache (batching.Feed.see), and several sentences packed side by side in one row.


def causal_see(n_old_visible, n_new: int) -> torch.Tensor:
    """Causal attention of n_new tokens over the visible old keys and the new ones: bool
    (n_new, K + n_new). n_old_visible: a bool per old key, or an int K (all K visible)."""
    old = (
        torch.ones(n_new, n_old_visible, dtype=torch.bool)
        if isinstance(n_old_visible, int)
        else torch.tensor(list(n_old_visible), dtype=torch.bool)[None, :].expand(n_new, -1)
    )
    new = torch.ones(n_new, n_new, dtype=torch.bool).tril()
    return torch.cat([old, new], dim=1)


def hybrid_step_see(key_segments: torch.Tensor, query_segments: torch.Tensor) -> torch.Tensor:
    """The hybrid rule for one decoding step, one new token per span: bool (Q, K) where the
    keys (segment per key, the new tokens last) are the context (0) and the spans' tokens so
    far; span k's new token sees the context and span k's tokens (its own included)."""
    return (key_segments == 0)[None, :] | (key_segments[None, :] == query_segments[:, None])


def packed_allowed(segments: torch.Tensor, causal: bool) -> torch.Tensor:
    """(batch, 1, seq, seq) boolean mask of packed rows: segments (batch, seq) numbers the
    sentences of a row 1, 2, ... and padding 0. A token sees its own sentence (causal: up to
    itself); a padding query sees itself only, so no row of the softmax is empty."""
    q, k = segments[:, :, None], segments[:, None, :]
    allowed = (q == k) & (k > 0)
    n = segments.shape[1]
    eye = torch.eye(n, dtype=torch.bool, device=segments.device)
    if causal:
        allowed &= torch.ones(n, n, dtype=torch.bool, device=segments.device).tril()
    return (allowed | ((q == 0) & eye))[:, None]
