"""What the rows of the (tied) embedding / LM-head matrix say about each token.

Three questions, answered from the weights alone:

- near_duplicates: which rows are (almost) the same vector as a given row. Two tokens with the
  same head row get the same logit from every hidden state, so a role token with k twins can
  never be given more than p = 1/(k+1); LoRA, which does not touch the head, cannot change
  that. SmolLM2's `<issue_comment>` (MAGNET's first `<span_end>`) has 16 such twins.
- undertrained: rows the pre-training never (or hardly) moved. Tokens that never occur in the
  pre-training data all receive the same gradient (pushed down by every softmax), so they end
  up as one cluster of near-identical rows; the rows of tokens that were seen a handful of
  times sit close to that cluster. No fill may contain such a token: its row carries no
  meaning, and it is what hidden states aimed at the cluster ("end") land on instead.
- reachable: the largest probability any final hidden state can give a token (gradient ascent
  through the final norm and the head): an output role needs a row a hidden state can reach.
"""

from __future__ import annotations

import torch

# near-duplicate rows: every coordinate within MAX_ABS, or this cosine
MAX_ABS = 1e-2
COSINE = 0.999
# undertrained: cosine to the centroid of the rows that have an exact twin. On SmolLM2 the
# bulk of the vocabulary lies below 0.85 (90 rows in 0.80-0.85, 4,477 in 0.70-0.80); above it
# are 66 rows: the 17 twins, unfinished BPE pieces (" bicy", " lawsu") and the junk fills
# showed (LEGATO 0.957, InterfaceSelection 0.998, "||=||" 0.866, faiss 0.864).
UNDERTRAINED_COSINE = 0.85


def near_duplicates(
    weight: torch.Tensor, index: int, max_abs: float = MAX_ABS, cosine: float = COSINE
) -> list[int]:
    """Rows other than `index` within max_abs in every coordinate, or with cosine above
    `cosine` (rows (V, H) of the head or the input embedding)."""
    w = weight.detach().float()
    row = w[index]
    close = (w - row).abs().amax(dim=1) < max_abs
    cos = (w @ row) / (w.norm(dim=1) * row.norm()).clamp_min(1e-12)
    hits = (close | (cos > cosine)).nonzero().flatten().tolist()
    return [i for i in hits if i != index]


def tie_of(weight: torch.Tensor, index: int) -> list[int]:
    """The token and every near-duplicate of its row, sorted: the tokens that share its logit."""
    return sorted([index, *near_duplicates(weight, index)])


def twin_rows(weight: torch.Tensor) -> list[int]:
    """Rows that have at least one exactly identical row elsewhere in the matrix."""
    w = weight.detach()
    _, inverse, counts = torch.unique(w, dim=0, return_inverse=True, return_counts=True)
    return (counts[inverse] > 1).nonzero().flatten().tolist()


def undertrained(weight: torch.Tensor, cosine: float = UNDERTRAINED_COSINE) -> list[int]:
    """Rows never (or hardly) trained: those within `cosine` of the centroid of the rows that
    have an exact twin (the never-trained cluster), and the twins themselves. Empty when no
    row has a twin (a randomly initialised or fully trained matrix): then nothing is known
    to be untrained."""
    seeds = twin_rows(weight)
    if not seeds:
        return []
    w = weight.detach().float()
    centre = w[seeds].mean(dim=0)
    cos = (w @ centre) / (w.norm(dim=1) * centre.norm()).clamp_min(1e-12)
    return sorted(set(seeds) | set((cos > cosine).nonzero().flatten().tolist()))


def reachable(lm, index: int, steps: int = 150, lr: float = 0.1, enough: float = 1.0) -> float:
    """The largest p(token) found over final hidden states: gradient ascent on the input of
    the model's final norm (so only states the decoder can output are tried); stops early
    once `enough` is reached."""
    # autograd even when called under torch.inference_mode (the engine's calls are)
    with torch.inference_mode(False), torch.enable_grad():
        w = lm.get_output_embeddings().weight.detach().float().clone()
        norm = lm.get_decoder().norm  # RMSNorm: x / rms(x) * g
        g = norm.weight.detach().float().clone()
        eps = getattr(norm, "variance_epsilon", getattr(norm, "eps", 1e-6))
        gen = torch.Generator().manual_seed(0)
        x = w[index] + 0.1 * torch.randn(w.shape[1], generator=gen).to(w.device, w.dtype)
        x.requires_grad_(True)
        opt = torch.optim.Adam([x], lr=lr)
        best = 0.0
        for _ in range(steps):
            h = x * torch.rsqrt(x.pow(2).mean() + eps) * g
            logp = torch.log_softmax(w @ h, dim=-1)[index]
            best = max(best, float(logp.detach().exp()))
            if best >= enough:
                break
            opt.zero_grad()
            (-logp).backward()
            opt.step()
    return best
