"""Checkpoints of a run: adapter, role rows, optimizer, scheduler, every rank's RNG and the
step, written by rank 0 to a temporary folder and renamed; and resuming from one."""

from __future__ import annotations

import json
import shutil
import time
from dataclasses import MISSING, asdict, fields
from pathlib import Path

import torch

from ..adapter_meta import save_meta
from ..errors import ConfigError
from ..role_rows import RoleRows
from .config import RESUME_KEYS, STATE_FILE, TrainConfig
from .run import TrainingRun, run_meta

_DEFAULTS = {f.name: getattr(TrainConfig, f.name, None) for f in fields(TrainConfig)}
_DEFAULTS.update(
    {f.name: f.default_factory() for f in fields(TrainConfig) if f.default_factory is not MISSING}
)


def checkpoint_dir(cfg: TrainConfig) -> Path:
    return Path(cfg.output) / "checkpoints"


def rng_state() -> dict:
    state = {"torch": torch.get_rng_state()}
    if torch.cuda.is_available():
        state["cuda"] = torch.cuda.get_rng_state_all()
    return state


def set_rng_state(state: dict) -> None:
    torch.set_rng_state(state["torch"])
    if "cuda" in state and torch.cuda.is_available():
        torch.cuda.set_rng_state_all(state["cuda"])


def save_checkpoint(run: TrainingRun, step: int, optimizer, scheduler) -> Path:
    """Adapter + optimizer + scheduler + every rank's RNG + step, written by rank 0 to a temp
    dir then renamed (every rank calls it: the RNG states are gathered, and the others wait
    until the folder is there). The weights and the optimizer are the same on every rank."""
    ranks = run.ranks
    rngs = ranks.gather_objects(rng_state())
    root = checkpoint_dir(run.cfg)
    target = root / f"step-{step:07d}"
    if ranks.main:
        tmp = root / f".tmp-step-{step:07d}"
        shutil.rmtree(tmp, ignore_errors=True)
        tmp.mkdir(parents=True)
        run.model.save_pretrained(tmp, save_embedding_layers=False)
        (tmp / "README.md").unlink(missing_ok=True)  # peft's template card
        if run.role_rows is not None:
            run.role_rows.save(tmp)
        # a checkpoint is an adapter too: the evaluator and the app read its layout from here
        save_meta(tmp, run_meta(run, step, time.perf_counter() - run.started))
        state = {
            "step": step,
            "optimizer": optimizer.state_dict(),
            "scheduler": scheduler.state_dict(),
            "rng": rngs[0],
            "rng_ranks": rngs,
            "world_size": ranks.world,
            "config": asdict(run.cfg),
            "sscl_queue": None if run.queue is None else run.queue.cpu(),
        }
        torch.save(state, tmp / STATE_FILE)
        shutil.rmtree(target, ignore_errors=True)
        tmp.rename(target)
        if run.cfg.keep_checkpoints > 0:
            for old in sorted(root.glob("step-*"))[: -run.cfg.keep_checkpoints]:
                shutil.rmtree(old, ignore_errors=True)
    ranks.barrier()
    return target


def find_checkpoint(cfg: TrainConfig) -> Path:
    if cfg.resume not in (None, "latest"):
        path = Path(cfg.resume)
        if not (path / STATE_FILE).is_file():
            raise ConfigError(f"{path} is not a checkpoint (no {STATE_FILE}).")
        return path
    found = sorted(checkpoint_dir(cfg).glob("step-*"))
    found = [p for p in found if (p / STATE_FILE).is_file()]
    if not found:
        raise ConfigError(f"--resume: no checkpoint in {checkpoint_dir(cfg)}.")
    return found[-1]


def load_checkpoint(run: TrainingRun, path: Path, optimizer, scheduler) -> int:
    """Restore weights, optimizer, scheduler and RNG (each rank its own, when the checkpoint
    was written by as many ranks); returns the step to continue from. The global micro-batch
    (--batch-size x ranks) must be the one the checkpoint trained with: the texts of every
    draw then stay the same whatever the number of ranks."""
    from peft import set_peft_model_state_dict
    from peft.utils import load_peft_weights

    state = torch.load(path / STATE_FILE, map_location="cpu", weights_only=False)
    saved = state["config"]
    now = asdict(run.cfg)
    # a setting newer than the checkpoint was, for it, at its default (the feature was off)
    diff = [k for k in RESUME_KEYS if saved.get(k, _DEFAULTS.get(k)) != now.get(k)]
    saved_world = int(state.get("world_size", 1))
    if saved.get("batch_size", 0) * saved_world != run.cfg.batch_size * run.ranks.world:
        diff.append(
            f"global batch (batch_size {saved.get('batch_size')} x {saved_world} ranks, now "
            f"{run.cfg.batch_size} x {run.ranks.world})"
        )
    if diff:
        raise ConfigError(
            f"Checkpoint {path} was trained with different {', '.join(diff)}; resume with the "
            "same flags (see its trainer_state) or start a new --output."
        )
    set_peft_model_state_dict(run.model, load_peft_weights(str(path), device=str(run.device)))
    if run.role_rows is not None:
        _load_role_rows(run.role_rows, path, strict=True)
    optimizer.load_state_dict(state["optimizer"])
    scheduler.load_state_dict(state["scheduler"])
    step = int(state["step"])
    if state.get("sscl_queue") is not None:
        run.queue = state["sscl_queue"].to(run.device)
    rngs = state.get("rng_ranks") or [state["rng"]]
    if len(rngs) == run.ranks.world:
        set_rng_state(rngs[run.ranks.rank])
    elif run.ranks.main:
        set_rng_state(rngs[0])
    else:  # another number of ranks: this rank's dropout noise starts afresh
        torch.manual_seed(run.cfg.seed * 100_003 + run.ranks.rank * 1_009 + step)
    return step


def trim_log(path: Path, step: int) -> None:
    """Keep the log lines up to `step`, so a resumed run's log has each step once."""
    if not path.is_file():
        return
    lines = [ln for ln in path.read_text().splitlines() if ln.strip()]
    path.write_text("".join(ln + "\n" for ln in lines if json.loads(ln)["step"] <= step))


def _load_role_rows(rows: RoleRows, folder: Path, strict: bool) -> None:
    """Copy the rows saved in folder (an adapter or checkpoint) for the same tokens into rows;
    strict: the file must be there and hold exactly these tokens (a checkpoint of this run)."""
    saved = RoleRows.load(folder)
    if saved is None or saved.ids.tolist() != rows.ids.tolist():
        if strict:
            raise ConfigError(f"{folder} has no role rows for tokens {rows.ids.tolist()}.")
        return  # another adapter's roles: this run's rows start from the base model's
    with torch.no_grad():
        rows.rows.copy_(saved.rows.to(rows.rows.device))
