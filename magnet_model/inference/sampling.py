"""How the next token is chosen: greedy, or temperature + top-p sampling from a seeded CPU draw."""

from __future__ import annotations

import os
from dataclasses import dataclass, field, replace

import torch

from ..errors import InputError


@dataclass
class Sampling:
    """The decoding settings of one request. `start()` checks them and makes the generator;
    a started Sampling's `seed` is what a result reports to reproduce it."""

    do_sample: bool = False
    temperature: float = 1.0
    top_p: float = 1.0
    seed: int | None = None
    generator: torch.Generator | None = field(default=None, repr=False, compare=False)

    def start(self) -> Sampling:
        """The settings checked, with the request's own CPU generator (a seed drawn if none
        was given): what `pick` draws from. Each request (each lane) starts its own."""
        if self.do_sample and not self.temperature > 0:
            raise InputError(f"temperature must be above 0 for sampling, not {self.temperature}.")
        if not 0 < self.top_p <= 1:
            raise InputError(f"top_p must be in (0, 1], not {self.top_p}.")
        if not self.do_sample:
            return replace(self, seed=None, generator=None)
        seed = int.from_bytes(os.urandom(7), "little") if self.seed is None else int(self.seed)
        gen = torch.Generator(device="cpu").manual_seed(seed)  # the same stream on any device
        return replace(self, seed=seed, generator=gen)

    def pick(self, logits: torch.Tensor) -> torch.Tensor:
        """(rows, vocab) logits -> one token per row: argmax, or temperature + top-p sampling.

        The draw is made on the CPU from the request's CPU generator (the probabilities move to
        the CPU, the token moves back), so a seed gives the same draw from the same
        probabilities on any device: CUDA generators produce other streams than CPU ones."""
        if not self.do_sample:
            return logits.argmax(-1)
        if self.generator is None:
            raise ValueError("Sampling.pick needs a started Sampling (call start() first)")
        probs = torch.softmax(logits.detach().float().cpu() / self.temperature, dim=-1)
        if self.top_p < 1.0:
            sorted_p, idx = probs.sort(dim=-1, descending=True)
            drop = sorted_p.cumsum(-1) - sorted_p > self.top_p  # smallest set reaching top_p
            sorted_p = sorted_p.masked_fill(drop, 0.0)
            probs = torch.zeros_like(probs).scatter(-1, idx, sorted_p)
        return torch.multinomial(probs, 1, generator=self.generator).squeeze(-1).to(logits.device)
