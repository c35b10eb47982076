"""Base weights packed for fbgemm's CPU products: float16 or int8 read instead of float32.

At batch 1 a decoding step reads every weight once, so a CPU decodes about as fast as it reads
weights: SmolLM2-135M reads 540 MB a token in float32. Fewer bytes need a product that reads
them at full speed, and torch's own ones do not on a CPU without AVX-512: its float16 and
bfloat16 products and its int8/int4 weight-only kernels (`_weight_int8pack_mm`,
`_weight_int4pack_mm_for_cpu`) run 1.5-20x slower than float32 on AVX2 (bench/README.md).
fbgemm's packed products (torch.ops.quantized, written for AVX2 and AVX-512) do:

- "float16": `linear_dynamic_fp16`, weights stored as float16, activations and sums float32.
  The embedded model's weights are de-quantized Q4_1 (4-bit codes times a float16 scale plus a
  float16 minimum), which float16 holds to 11 significant bits: its outputs move by ~1e-4.
- "int8": `linear_dynamic`, weights int8 per output channel and each input row quantized to
  8 bits on the fly (uses torch's deprecated quantized tensors; an experiment, measured in
  bench/bench_decode.py and the evaluator, not a default).

Every nn.Linear of the base model is replaced, the LM head included (the 49k-row head is a
fifth of SmolLM2's weights); peft's LoRA layers keep their float LoRA weights and wrap the packed
base layer (quantize after the adapters are attached), so rows of a batch still run different
adapters. The input embedding stays float (a row lookup per token); a tied head keeps pointing
at it as its `weight`, for the code that reads head rows. Inference only: no gradients flow.
"""

from __future__ import annotations

import torch

KINDS = ("float16", "int8")


def supported() -> bool:
    """Whether this torch has fbgemm and this CPU runs it (x86 with AVX2 or AVX-512)."""
    engines = torch.backends.quantized.supported_engines
    return "fbgemm" in engines and torch.backends.cpu.get_cpu_capability() in ("AVX2", "AVX512")


class PackedLinear(torch.nn.Module):
    """A frozen nn.Linear whose weight fbgemm holds packed (float16 or int8), on the CPU.

    `weight` is the original parameter where another module shares it (a tied LM head), else an
    empty float32 tensor that keeps the dtype and device code reads from it; `weight_bytes` is
    what one product reads (for bandwidth bounds)."""

    def __init__(self, linear: torch.nn.Linear, kind: str, keep_weight: bool = False):
        super().__init__()
        if kind not in KINDS:
            raise ValueError(f"packing must be one of {', '.join(KINDS)}, not {kind!r}")
        w = linear.weight.detach().float()
        bias = None if linear.bias is None else linear.bias.detach().float()
        self.in_features, self.out_features, self.kind = w.shape[1], w.shape[0], kind
        if kind == "float16":
            self._packed = torch.ops.quantized.linear_prepack_fp16(w, bias)
            self.weight_bytes = w.numel() * 2
        else:
            scale = (w.abs().amax(dim=1) / 127).clamp(min=1e-12).double()
            zero = torch.zeros(w.shape[0], dtype=torch.long)
            q = torch.quantize_per_channel(w, scale, zero, 0, torch.qint8)
            self._packed = torch.ops.quantized.linear_prepack(q, bias)
            self.weight_bytes = w.numel() + w.shape[0] * 8
        if keep_weight:
            self.weight = linear.weight
        else:
            self.register_buffer("weight", torch.empty(0, dtype=w.dtype), persistent=False)
        self.bias = None

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        flat = x.reshape(-1, self.in_features).float()
        if self.kind == "float16":
            y = torch.ops.quantized.linear_dynamic_fp16(flat, self._packed)
        else:
            y = torch.ops.quantized.linear_dynamic(flat, self._packed, True)
        return y.view(*x.shape[:-1], self.out_features).to(x.dtype)

    def extra_repr(self) -> str:
        return f"in_features={self.in_features}, out_features={self.out_features}, {self.kind}"


def pack_linears(model: torch.nn.Module, kind: str) -> int:
    """Replace every base nn.Linear of `model` (peft's LoRA A/B layers excepted) by a
    PackedLinear, in place; returns how many. The model must be on the CPU, in eval mode."""
    if not supported():
        raise RuntimeError("fbgemm is not available here (it needs an x86 CPU with AVX2)")
    embed = model.get_input_embeddings() if hasattr(model, "get_input_embeddings") else None
    shared = {id(embed.weight)} if embed is not None else set()
    targets = [
        (name, module)
        for name, module in model.named_modules()
        if type(module) is torch.nn.Linear and "lora_" not in name
    ]
    for name, module in targets:
        parent_name, _, child = name.rpartition(".")
        parent = model.get_submodule(parent_name) if parent_name else model
        keep = id(module.weight) in shared
        setattr(parent, child, PackedLinear(module, kind, keep_weight=keep))
    return len(targets)


def weight_bytes(model: torch.nn.Module) -> int:
    """Bytes of the packed weights of `model` (0 when none is packed)."""
    return sum(m.weight_bytes for m in model.modules() if isinstance(m, PackedLinear))
