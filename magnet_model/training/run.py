"""TrainingRun: everything a training step needs, built once (loop.build_run)."""

from __future__ import annotations

import time
from contextlib import nullcontext
from dataclasses import asdict, dataclass, field

import torch

from ..adapter_meta import AdapterMeta
from ..role_rows import RoleRows
from ..tokens import TokenRoles
from .config import TrainConfig
from .corpus import Draws, Example
from .distributed import Ranks
from .views import ViewConfig
from .watch import StsWatch


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
    started: float = field(default_factory=time.perf_counter)  # when this process built it
    watch: StsWatch | None = None  # --watch-sts: the STS-B dev pairs logged at checkpoints
    # --sscl-queue: earlier steps' positive vectors (newest first), extra SSCL negatives
    queue: torch.Tensor | None = None
    anchor: object | None = None  # --sscl-anchor: the frozen model whose sentence vectors hold

    def push_queue(self, positives: torch.Tensor) -> None:
        """The newest positives in front, the queue cut to --sscl-queue vectors."""
        old = self.queue if self.queue is not None else positives[:0]
        self.queue = torch.cat([positives.detach(), old.to(positives.device)])
        self.queue = self.queue[: self.cfg.sscl_queue]

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


def run_meta(run: TrainingRun, steps_done: int, seconds: float) -> AdapterMeta:
    """What magnet_config.json records of a run after `steps_done` steps: the token roles,
    attention, pooling, gap rule and the whole training config, so the adapter (or a
    checkpoint of it) reads its layout as training wrote it."""
    cfg = run.cfg
    training = asdict(cfg)
    training.update(
        bos=run.bos,
        steps_done=steps_done,
        complete=steps_done >= cfg.total_steps,
        train_seconds=round(seconds, 1),
        n_texts=len(run.examples),
        world_size=run.ranks.world,
        global_batch=cfg.batch_size * cfg.grad_accum * run.ranks.world,
    )
    return AdapterMeta(
        token_roles=run.roles,
        attention=cfg.attention,
        objectives=list(cfg.objectives),
        instruction=cfg.instruction,
        pooling=cfg.pooling,
        training=training,
        gap=cfg.gap_rule,
    )
