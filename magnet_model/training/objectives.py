"""The three MAGNET losses on an unmodified transformers decoder (plain or wrapped by peft).

Hidden states come from the inner decoder (model.get_decoder()), never through the LM head:
the head maps each position to the whole vocabulary (49k for SmolLM2), so we apply it only to
the positions that carry a label. Embeddings (SSCL) never touch it.

    MNTP, MSG:  cross-entropy of head(h[i]) against label[i], over labelled positions only
                (kept as sum and count, so that ranks can share one denominator)
    SSCL:       z = pool(h), InfoNCE(z_x, z_x+) = CE(cos(z_x, z_x+) / tau, diagonal)
"""

from __future__ import annotations

from collections.abc import Callable
from contextlib import contextmanager

import torch
import torch.nn.functional as F

from ..errors import ConfigError
from ..layout import IGNORE
from ..masks import build_mask, position_ids_for
from ..pooling import pool
from .views import MaskedBatch, SentenceBatch


def decoder_parts(model) -> tuple[torch.nn.Module, torch.nn.Module]:
    """(inner decoder that returns hidden states, LM head), through a peft wrapper if any."""
    base = model.get_base_model() if hasattr(model, "get_base_model") else model
    return base.get_decoder(), base.get_output_embeddings()


def encode(
    model,
    input_ids: torch.Tensor,
    attention_mask: torch.Tensor,
    mode: str,
    segments: torch.Tensor | None = None,
    position_ids: torch.Tensor | None = None,
    mask_dtype: torch.dtype | None = None,
) -> torch.Tensor:
    """Last hidden states (B, T, H) under one attention mode's 4-D mask."""
    decoder, _ = decoder_parts(model)
    if mask_dtype is None:
        mask_dtype = decoder.get_input_embeddings().weight.dtype
    mask = build_mask(mode, attention_mask, segments, mask_dtype)
    if position_ids is None:
        position_ids = position_ids_for(attention_mask)
    out = decoder(
        input_ids=input_ids, attention_mask=mask, position_ids=position_ids, use_cache=False
    )
    return out.last_hidden_state


def token_terms(
    hidden: torch.Tensor, labels: torch.Tensor, head, token: int | None = None, weight: float = 1.0
) -> dict[str, tuple[torch.Tensor, torch.Tensor]]:
    """Cross-entropy over labelled positions as (sum, count) pairs, so that the trainer can
    divide by the count of a whole global batch: "loss" (the target `token`, if given, counting
    `weight` times) and, with `token`, "end" (that target's own NLL). The head sees only
    labelled positions. Empty when nothing is labelled."""
    selected = labels != IGNORE
    if not selected.any():
        return {}
    target = labels[selected]
    ce = F.cross_entropy(head(hidden[selected]).float(), target, reduction="none")
    if token is None:
        return {"loss": (ce.sum(), ce.new_tensor(float(ce.numel())))}
    is_token = target == token
    w = torch.where(is_token, torch.full_like(ce, weight), torch.ones_like(ce))
    out = {"loss": ((ce * w).sum(), w.sum().detach())}
    if is_token.any():
        out["end"] = (ce[is_token].sum().detach(), is_token.sum().to(ce.dtype))
    return out


def token_loss(hidden: torch.Tensor, labels: torch.Tensor, head) -> torch.Tensor | None:
    """Mean cross-entropy over labelled positions; the head sees only those positions."""
    terms = token_terms(hidden, labels, head)
    return terms["loss"][0] / terms["loss"][1] if terms else None


def masked_view_terms(
    model,
    batch: MaskedBatch,
    mode: str = "hybrid",
    mask_dtype: torch.dtype | None = None,
    end_token: int | None = None,
    end_weight: float = 1.0,
) -> dict[str, tuple[torch.Tensor, torch.Tensor]]:
    """MNTP and MSG from ONE forward of x_m, as (sum over labelled tokens, their count or
    weight) pairs; a loss is absent when its labels are empty. The mean is sum / count; the
    trainer sums both over ranks (distributed.py) before dividing.

    With end_token, MSG weighs that target (<span_end>) end_weight times, and "msg_end" (its
    own NLL, for the log: how well the model knows where spans end) is added, detached."""
    hidden = encode(
        model,
        batch.input_ids,
        batch.attention_mask,
        mode,
        segments=batch.segments,
        position_ids=batch.position_ids,
        mask_dtype=mask_dtype,
    )
    _, head = decoder_parts(model)
    terms = {}
    mntp = token_terms(hidden, batch.mntp_labels, head)
    if mntp:
        terms["mntp"] = mntp["loss"]
    msg = token_terms(hidden, batch.msg_labels, head, end_token, end_weight)
    if msg:
        terms["msg"] = msg["loss"]
        if "end" in msg:
            terms["msg_end"] = msg["end"]
    return terms


def masked_view_losses(model, batch: MaskedBatch, *args, **kwargs) -> dict[str, torch.Tensor]:
    """MNTP and MSG means from ONE forward of x_m: masked_view_terms (same arguments), each
    sum / count. A loss is absent when its labels are empty; with end_token, "msg_end" (its
    own mean NLL, detached) is there too."""
    terms = masked_view_terms(model, batch, *args, **kwargs)
    return {k: total / count for k, (total, count) in terms.items()}


def info_nce(
    z1: torch.Tensor,
    z2: torch.Tensor,
    temperature: float = 0.05,
    gather: Callable[[torch.Tensor], torch.Tensor] | None = None,
    offset: int = 0,
    negatives: torch.Tensor | None = None,
    keep: dict | None = None,
) -> torch.Tensor:
    """SimCSE's loss: each x must pick its own x+ among the batch's positives.

    gather: the positives of every rank, in rank order (distributed.Ranks.gather_rows), whose
    rows `offset` .. `offset` + len(z1) are this rank's own z2: the negatives then span the
    global batch, as one process's batch of them all would.
    negatives: more candidates that are no one's positive (normalised vectors, no gradient:
    the queue of earlier steps' positives, --sscl-queue), after the batch's own.
    keep: if given, keep["positives"] gets the batch's normalised candidates, detached (what
    the queue takes in)."""
    z1 = F.normalize(z1.float(), dim=-1)
    z2 = F.normalize(z2.float(), dim=-1)
    candidates = z2 if gather is None else gather(z2)
    if keep is not None:
        keep["positives"] = candidates.detach()
    if negatives is not None and len(negatives):
        candidates = torch.cat([candidates, negatives.to(candidates.device, candidates.dtype)])
    logits = z1 @ candidates.T / temperature
    return F.cross_entropy(logits, offset + torch.arange(z1.shape[0], device=z1.device))


def sscl_loss(
    model,
    batch: SentenceBatch,
    mode: str = "bidirectional",
    pooling: str = "last",
    temperature: float = 0.05,
    mask_dtype: torch.dtype | None = None,
    gather: Callable[[torch.Tensor], torch.Tensor] | None = None,
    offset: int = 0,
    negatives: torch.Tensor | None = None,
    keep: dict | None = None,
) -> torch.Tensor:
    """InfoNCE between the first and second half of the batch (x rows, then x+ rows); gather
    and offset: the negatives of every rank; negatives, keep: the queue (info_nce).

    For SimCSE positives (x+ = x) run this under `attention_dropout(model, p)` and keep that
    context open through backward (gradient checkpointing recomputes the forward there).
    """
    z = sentence_vectors(model, batch, mode, pooling, mask_dtype)
    if keep is not None:
        keep["vectors"] = z  # every row's vector, with its graph (the anchor term reads them)
    half = z.shape[0] // 2
    return info_nce(z[:half], z[half:], temperature, gather, offset, negatives, keep)


def sentence_vectors(
    model,
    batch: SentenceBatch,
    mode: str = "bidirectional",
    pooling: str = "last",
    mask_dtype: torch.dtype | None = None,
) -> torch.Tensor:
    """The pooled vector of every row of a sentence batch (B, H)."""
    hidden = encode(model, batch.input_ids, batch.attention_mask, mode, mask_dtype=mask_dtype)
    return pool(hidden, batch.pool_mask, pooling)


def anchor_loss(vectors: torch.Tensor, anchor: torch.Tensor) -> torch.Tensor:
    """--sscl-anchor's term: the mean of 1 - cos(a row's vector, the anchor adapter's vector
    of the same row); 0 where the two point the same way, whatever their lengths."""
    cos = F.cosine_similarity(vectors.float(), anchor.float().to(vectors.device), dim=-1)
    return (1.0 - cos).mean()


def structure_loss(vectors: torch.Tensor, anchor: torch.Tensor, temperature: float) -> torch.Tensor:
    """--w-anchor-structure's term: how far the batch's similarity structure has moved from
    the anchor's. Each row's cosines to the other rows, divided by the temperature, make a
    distribution over those rows (softmax); the term is the mean over rows of KL(anchor's ||
    this run's). A softmax ignores what is added to a whole row, so the share of direction
    that all of a model's vectors have in common (which dominates 1 - cos) does not count:
    only which texts sit nearer which, what STS-B and retrieval read."""
    if vectors.shape[0] < 3:
        return vectors.sum() * 0.0  # with fewer than two other rows there is no structure
    eye = torch.eye(vectors.shape[0], dtype=torch.bool, device=vectors.device)

    def log_rows(v):
        v = F.normalize(v.float(), dim=-1)
        return F.log_softmax((v @ v.T / temperature).masked_fill(eye, float("-inf")), dim=-1)

    ours, theirs = log_rows(vectors), log_rows(anchor.to(vectors.device))
    # log(0) on the diagonal in both: count only the off-diagonal entries
    kl = (theirs.exp() * (theirs - ours)).masked_fill(eye, 0.0).sum(-1)
    return kl.mean()


@contextmanager
def attention_dropout(model, p: float):
    """Set dropout on the attention probabilities of every attention module, then restore.

    SmolLM2 and Llama ship with attention dropout 0; with it, SimCSE's two passes of the
    same text are identical and the contrastive loss teaches nothing (LLM2Vec uses 0.3).
    """
    modules = [
        m
        for m in model.modules()
        if isinstance(getattr(m, "attention_dropout", None), int | float)
        and not isinstance(m.attention_dropout, bool)
    ]
    if p > 0 and not modules:
        raise ConfigError(
            "No attention module of this model has an `attention_dropout` setting, so SimCSE's "
            "dropout noise cannot be applied and SSCL would learn nothing; use a model whose "
            "attention exposes it (Llama family), or give SSCL paraphrase positives with "
            "--sscl-dropout 0."
        )
    saved = [m.attention_dropout for m in modules]
    for m in modules:
        m.attention_dropout = p
    try:
        yield len(modules)
    finally:
        for m, value in zip(modules, saved, strict=True):
            m.attention_dropout = value
