"""Data parallelism for the trainer: the same command as one process, or as N under
`torchrun --nproc-per-node N` / `accelerate launch --num_processes N`.

Both launchers start N copies with RANK, WORLD_SIZE and LOCAL_RANK set; Accelerate's
PartialState then opens the process group (NCCL on GPUs, one per LOCAL_RANK; gloo on CPUs).
Each rank trains the same LoRA on its own slice of every global micro-batch
(`--batch-size` x ranks texts), and the trainer makes one step of N ranks compute what one
process computes on the whole global micro-batch:

- token losses (MNTP, MSG) are sums over a rank's labelled tokens divided by the labelled
  tokens of all ranks (one all-reduce of the counts before backward), not per-rank means;
- SSCL gathers every rank's x+ embeddings (with their gradients: torch.distributed.nn's
  all_gather), so each x has the whole global batch as in-batch negatives;
- after the step's backward passes the gradients are summed over ranks in one all-reduce
  (the LoRA weights and the role rows: a few MB), then clipped and applied on every rank.

Why not DistributedDataParallel: a step runs two forwards with their own backward (the masked
view, then SSCL under attention dropout) through the inner decoder rather than the wrapped
model's forward (the LM head sees only labelled positions), the role rows live outside the
peft model, and the SSCL forward leaves them unused; DDP's reducer would need
find_unused_parameters and leaves globally unused parameters unreduced. Summing the few LoRA
gradients once per step is exact and simple; it gives up DDP's overlap of communication with
backward, which matters little for adapters of a few MB.

--fsdp (a base that does not fit on one device) shards the frozen weights of every decoder
layer with torch's FSDP2 (`fully_shard`) and leaves the LoRA weights out of it
(`ignored_params`): the base is what is large, and the adapter, whole on every rank, is then
reduced, clipped, saved and resumed exactly as without sharding. Calling the inner decoder
directly works with it because FSDP2 gathers a layer's weights in that layer's own forward
hook; Accelerate's FSDP would shard the wrapped model's root too, whose hooks that call
skips, so it is not used here.
"""

from __future__ import annotations

import gc
import os
from dataclasses import dataclass

import torch

from ..errors import ConfigError


def launched_world() -> int:
    """How many processes the launcher started (1 when run as a plain command)."""
    try:
        return max(1, int(os.environ.get("WORLD_SIZE", "1")))
    except ValueError:
        raise ConfigError(f"WORLD_SIZE={os.environ['WORLD_SIZE']!r} is not a number.") from None


@dataclass
class Ranks:
    """This process's place among the training processes; world 1: no communication."""

    rank: int = 0
    world: int = 1
    local_rank: int = 0
    device: torch.device | None = None  # the launcher's device for this rank, if distributed

    @property
    def main(self) -> bool:
        """Rank 0: the one process that writes files and prints."""
        return self.rank == 0

    @property
    def distributed(self) -> bool:
        return self.world > 1

    def all_sum(self, t: torch.Tensor) -> torch.Tensor:
        """The sum of `t` over ranks, in place (on one process `t` as it is)."""
        if self.distributed:
            torch.distributed.all_reduce(t, op=torch.distributed.ReduceOp.SUM)
        return t

    def mean(self, t: torch.Tensor) -> float:
        """A scalar's mean over ranks, detached, as a float (the value a step logs)."""
        return (self.all_sum(t.detach().double().reshape(1)) / self.world).item()

    def gather_rows(self, z: torch.Tensor) -> torch.Tensor:
        """Every rank's rows of `z`, in rank order, with gradients flowing back to each rank's
        own rows from every rank's loss (all ranks must hold the same number of rows)."""
        if not self.distributed:
            return z
        from torch.distributed.nn.functional import all_gather

        return torch.cat(all_gather(z), dim=0)

    def sum_grads(self, params: list[torch.nn.Parameter]) -> None:
        """Sum the parameters' gradients over ranks, in one flat all-reduce."""
        if not self.distributed:
            return
        grads = [p.grad if p.grad is not None else torch.zeros_like(p) for p in params]
        flat = torch.cat([g.reshape(-1) for g in grads])
        self.all_sum(flat)
        offset = 0
        for p in params:
            n = p.numel()
            p.grad = flat[offset : offset + n].view_as(p).clone()
            offset += n

    def broadcast_params(self, params: list[torch.nn.Parameter]) -> None:
        """Start every rank from rank 0's weights (the same seed already gives them; this makes
        it so whatever a rank's RNG did)."""
        if not self.distributed:
            return
        with torch.no_grad():
            for p in params:
                torch.distributed.broadcast(p.data, src=0)

    def shard(self, model, layers) -> tuple[int, int]:
        """FSDP2: shard each of `layers`' frozen weights over the ranks (dim 0, the shards on
        this rank's device; a layer's weights are gathered for its forward and backward and
        freed after), keeping the trained parameters (LoRA) whole and plain on every rank, so
        that they are reduced, clipped, saved and resumed as without sharding; then move what
        stays whole (embeddings, head, norms, LoRA, buffers) to this rank's device. Returns
        (parameters sharded, all parameters)."""
        from torch.distributed.device_mesh import init_device_mesh
        from torch.distributed.fsdp import fully_shard
        from torch.distributed.tensor import DTensor

        mesh = init_device_mesh(self.device.type, (self.world,))
        for layer in layers:
            trained = {p for p in layer.parameters() if p.requires_grad}
            fully_shard(layer, mesh=mesh, ignored_params=trained)
        sharded = total = 0
        with torch.no_grad():
            for p in model.parameters():
                total += p.numel()
                if isinstance(p, DTensor):
                    sharded += p.numel()
                elif p.device != self.device:
                    p.data = p.data.to(self.device)
            for module in model.modules():
                for name, buf in module.named_buffers(recurse=False):
                    if buf is not None and buf.device != self.device:
                        setattr(module, name, buf.to(self.device))
        return sharded, total

    def agree(self, flag: bool) -> bool:
        """Rank 0's decision, on every rank (e.g. "the time is up")."""
        if not self.distributed:
            return flag
        t = torch.tensor([1.0 if flag else 0.0], device=self.device)
        torch.distributed.broadcast(t, src=0)
        return bool(t.item())

    def gather_objects(self, obj) -> list:
        """Every rank's `obj` (picklable), in rank order, on every rank."""
        if not self.distributed:
            return [obj]
        out: list = [None] * self.world
        torch.distributed.all_gather_object(out, obj)
        return out

    def barrier(self) -> None:
        if self.distributed:
            torch.distributed.barrier()


def setup(device: str) -> Ranks:
    """The Ranks of this process. Under a launcher (WORLD_SIZE > 1) Accelerate's PartialState
    opens the process group: gloo when `device` is the CPU, else the launcher's accelerator
    for this LOCAL_RANK (NCCL on CUDA)."""
    world = launched_world()
    if world == 1:
        return Ranks()
    if device not in ("auto", "cpu", "cuda"):
        raise ConfigError(
            f"--device {device} names one device, but {world} processes were launched: give "
            "--device cuda (each rank takes the GPU of its LOCAL_RANK) or --device cpu."
        )
    from accelerate import PartialState

    cpu = device == "cpu" or (device == "auto" and not torch.cuda.is_available())
    state = PartialState(cpu=cpu)
    if state.num_processes != world:
        raise ConfigError(
            f"WORLD_SIZE is {world} but the process group has {state.num_processes} ranks."
        )
    dev = torch.device("cpu") if cpu else state.device  # Accelerate names the CPU "cpu:0"
    return Ranks(state.process_index, state.num_processes, state.local_process_index, dev)


def teardown(ranks: Ranks) -> None:
    """Close the process group (the launcher then sees each rank end cleanly). Graphs still
    holding the group (SSCL's all_gather saves it for backward) are freed first, while the
    interpreter is whole."""
    if ranks.distributed and torch.distributed.is_initialized():
        gc.collect()
        torch.distributed.barrier()
        torch.distributed.destroy_process_group()
