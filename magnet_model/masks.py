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
