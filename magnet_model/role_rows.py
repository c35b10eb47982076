"""Trained rows of the (tied) embedding / LM head for an adapter's role tokens.

LoRA adapts the decoder's linear layers, never the embedding or the head, so the rows of the
reused role tokens (<mask>, <blank>, <span_start>, <span_end>) stay what pre-training left
them. The trainer (--train-role-rows) learns new rows for them; an adapter keeps them in its
own file (ROLE_ROWS_FILE, a few KB) beside the LoRA weights, and the base model's weights are
never changed, so other systems sharing the base see the rows they always saw.

With tied weights one row serves both sides: as input (the role token's embedding) and as
output (its logit is hidden . row). The runner applies an adapter's rows to that adapter's
rows of a batch only (a batch may mix adapters), in the input embeddings and in the logits;
the trainer applies them through forward hooks on the embedding and the head.
"""

from __future__ import annotations

from pathlib import Path

import torch

from .errors import ModelLoadError

ROLE_ROWS_FILE = "role_rows.safetensors"


class RoleRows(torch.nn.Module):
    """Rows (k, H) for token ids (k,): the embedding and head rows of those tokens."""

    def __init__(self, ids: list[int], rows: torch.Tensor):
        super().__init__()
        self.register_buffer("ids", torch.tensor(list(ids), dtype=torch.long))
        self.rows = torch.nn.Parameter(rows.detach().clone().float())

    @classmethod
    def from_weight(cls, ids: list[int], weight: torch.Tensor) -> RoleRows:
        """Rows initialised from the model's own (the tied embedding / head matrix)."""
        return cls(sorted(set(ids)), weight.detach()[sorted(set(ids))])

    def _slot(self, ids: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        """(where ids hold one of the tokens, which row each position takes)."""
        hit = ids[..., None] == self.ids.to(ids.device)
        return hit.any(-1), hit.float().argmax(-1)

    def embed(self, ids: torch.Tensor, embeds: torch.Tensor, rows=None) -> torch.Tensor:
        """embeds (..., H) of ids (...) with the tokens' rows in place of the base's; `rows`
        (a bool mask over the leading dimension) limits it to some rows of a batch."""
        hit, slot = self._slot(ids)
        if rows is not None:
            hit = hit & rows.view(-1, *([1] * (hit.dim() - 1))).to(hit.device)
        if not bool(hit.any()):
            return embeds
        new = self.rows.to(embeds.dtype)[slot]
        return torch.where(hit[..., None], new, embeds)

    def logits(self, hidden: torch.Tensor, logits: torch.Tensor, rows=None) -> torch.Tensor:
        """logits (..., V) with the tokens' columns read from the trained rows; `rows` (a bool
        mask over the first dimension) limits it to some rows."""
        ids = self.ids.to(logits.device)
        own = hidden.to(self.rows.dtype) @ self.rows.T.to(hidden.device)
        if rows is None:
            return logits.index_copy(-1, ids, own.to(logits.dtype))
        out = logits.clone()
        sel = rows.to(logits.device)
        out[sel] = out[sel].index_copy(-1, ids, own[sel].to(logits.dtype))
        return out

    def hook(self, embedding: torch.nn.Module, head: torch.nn.Module) -> list:
        """Forward hooks that apply the rows on a model (training); returns their handles."""
        return [
            embedding.register_forward_hook(lambda m, args, out: self.embed(args[0], out)),
            head.register_forward_hook(lambda m, args, out: self.logits(args[0], out)),
        ]

    def save(self, folder: str | Path) -> Path:
        from safetensors.torch import save_file

        path = Path(folder) / ROLE_ROWS_FILE
        save_file({"ids": self.ids.cpu(), "rows": self.rows.detach().float().cpu()}, str(path))
        return path

    @classmethod
    def load(cls, folder: str | Path) -> RoleRows | None:
        """The rows saved in an adapter folder, or None when it has none."""
        path = Path(folder).expanduser() / ROLE_ROWS_FILE
        if not path.is_file():
            return None
        from safetensors.torch import load_file

        try:
            state = load_file(str(path))
            return cls(state["ids"].tolist(), state["rows"])
        except (OSError, KeyError, ValueError, RuntimeError) as e:
            raise ModelLoadError(f"{path} is not a valid role-rows file ({e}).") from None
