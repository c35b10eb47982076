"""TrainingRun: everything a training step needs, built once (loop.build_run)."""

from __future__ import annotations

from contextlib import nullcontext
from dataclasses import dataclass, field

import torch

from ..role_rows import RoleRows
from ..tokens import TokenRoles
from .config import TrainConfig
from .corpus import Draws, Example
from .distributed import Ranks
from .views import ViewConfig


def trained_params(model, role_rows: RoleRows | None) -> list[torch.nn.Parameter]:
    """What the optimizer trains: the LoRA weights, and the role rows if any."""
    params = [p for p in model.parameters() if p.requires_grad]
    return params + (list(role_rows.parameters()) if role_rows else [])


@dataclass
class TrainingRun:
    """Everything a step needs, built once."""

    cfg: TrainConfig
    model: object
    roles: TokenRoles
    bos: int | None
    examples: list[Example]
    draws: Draws  # which texts each global micro-batch holds
    vocab: list[int]
    instruction_ids: list[int]
    view: ViewConfig
    device: torch.device
    autocast_dtype: torch.dtype | None  # bf16 on CUDA (--bf16) or a bf16 CPU (--cpu-bf16)
    word_starts: list[bool] | None = None  # tokens.word_start_table: where spans may begin
    role_rows: RoleRows | None = None  # trained role-token rows (--train-role-rows)
    ranks: Ranks = field(default_factory=Ranks)  # this process among the training processes

    @property
    def params(self) -> list[torch.nn.Parameter]:
        """What the optimizer trains: the LoRA weights, and the role rows if any."""
        return trained_params(self.model, self.role_rows)

    def autocast(self):
        if self.autocast_dtype is None:
            return nullcontext()
        return torch.autocast(self.device.type, dtype=self.autocast_dtype)

    @property
    def mask_dtype(self) -> torch.dtype:
        if self.autocast_dtype is not None:
            return self.autocast_dtype
        return next(self.model.parameters()).dtype
