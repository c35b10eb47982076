"""Every use of peft's internals: rows of one batch running different LoRA adapters.

A side-by-side batch has rows for several adapters (and the base). peft's documented way,
`PeftModel.forward(adapter_names=...)`, computes logits for every position; the runner needs
the decoder's hidden states only, so it enters peft's per-row hooks around the decoder
(`LoraModel._enable_peft_forward_hooks`), or, faster, adds the stacked LoRA itself (RowLora),
which reads LoRA layers' attributes (lora_A, lora_B, scaling, r, base_layer, ...).

Those are not peft's public API: they are used here only, behind a check of peft's version
(PEFT_TESTED). Another version warns once if the attributes are still there, and stops with a
ConfigError naming the tested version if they are gone.
"""

from __future__ import annotations

import contextlib
import functools
import warnings
from importlib import metadata

import torch
from packaging.specifiers import SpecifierSet
from packaging.version import Version

from ..errors import ConfigError

PEFT_TESTED = SpecifierSet(">=0.21,<0.22")  # the versions whose internals this file matches
_LAYER_ATTRS = ("lora_A", "lora_B", "scaling", "r", "base_layer", "merged", "disable_adapters")
_checked: dict[str, bool] = {}


def check_peft(lora_model=None, layer=None) -> None:
    """Warn once when peft is not a tested version; raise ConfigError when an internal this
    module uses is missing (a peft change to adapt to, not a silent wrong result)."""
    version = metadata.version("peft")
    if lora_model is not None and not hasattr(lora_model, "_enable_peft_forward_hooks"):
        raise _changed(version, "LoraModel._enable_peft_forward_hooks")
    if layer is not None and not all(hasattr(layer, a) for a in _LAYER_ATTRS):
        missing = [a for a in _LAYER_ATTRS if not hasattr(layer, a)]
        raise _changed(version, ", ".join(f"lora.Linear.{a}" for a in missing))
    if version not in _checked:
        _checked[version] = Version(version) in PEFT_TESTED
        if not _checked[version]:
            warnings.warn(
                f"peft {version} is not the tested version ({PEFT_TESTED}); batches mixing "
                "adapters use its internals (magnet_model/inference/multi_lora.py): compare their "
                "outputs with single-adapter calls (tests/test_batching.py) first.",
                stacklevel=3,
            )


def _changed(version: str, what: str) -> ConfigError:
    return ConfigError(
        f"peft {version} has no {what}, which batches mixing adapters use "
        f"(tested with peft {PEFT_TESTED}); install a tested version, e.g. peft==0.21.2."
    )


@contextlib.contextmanager
def peft_rows(lora_model, names: list[str]):
    """peft's own mixed batch (the hooks behind `adapter_names=` of PeftModel.forward), entered
    around the decoder alone so no logits are computed for every position. names: one adapter
    per row, "__base__" for the base."""
    check_peft(lora_model)
    with lora_model._enable_peft_forward_hooks(adapter_names=names):
        yield


class RowLora:
    """The LoRA of several adapters stacked per layer, for batches whose rows use different
    adapters (or none): y = W x + ((x A^T) * m) B^T with A = [s_1 A_1; s_2 A_2; ...] and
    B = [B_1, B_2, ...]; m keeps, for each row, the rank block of that row's adapter only.

    3 small products per layer whatever the number of adapters, the scale folded into A and B's
    product added in place; peft's mixed batch indexes each adapter's rows in and out of every
    layer, which cost more than the decoding step itself."""

    def __init__(self, layers: list[tuple], names: tuple[str, ...]):
        self.layers = layers  # (module, names present, stacked A (R, in), stacked B^T (R, out))
        self.names = names
        # row masks per (adapters of the rows, dtype, device), kept: a CUDA graph captured
        # with them reads them at every replay (static_decode)
        self._masks: dict[tuple, dict[tuple, torch.Tensor]] = {}

    @classmethod
    def build(cls, peft_model, names: tuple[str, ...]) -> RowLora | None:
        """The stacks, or None where a layer is not plain LoRA (DoRA, dropout in training...):
        then peft's own mixed batch (peft_rows) handles it."""
        check_peft()
        from peft.tuners.lora import Linear as LoraLinear
        from peft.tuners.lora import LoraLayer

        layers = []
        for module in peft_model.modules():
            if not isinstance(module, LoraLayer):
                continue
            check_peft(layer=module)
            present = tuple(n for n in names if n in module.lora_A)
            if not present:
                continue
            if not isinstance(module, LoraLinear) or not all(
                fusable(module, n, enabled=False) for n in present
            ):
                return None
            a = torch.cat([module.lora_A[n].weight * module.scaling[n] for n in present])
            b = torch.cat([module.lora_B[n].weight.t() for n in present])
            layers.append((module, present, a, b))
        return cls(layers, names)

    @contextlib.contextmanager
    def patched(self, adapters: list[str], dtype, device):
        """While open, the LoRA layers add the stacked LoRA of each row's adapter."""
        masks = self._masks.setdefault((tuple(adapters), dtype, device), {})
        for module, present, a, b in self.layers:
            if present not in masks:
                cols = [
                    torch.tensor([[float(row == n)] * module.r[n] for n in present]).flatten()
                    for row in adapters
                ]
                masks[present] = torch.stack(cols)[:, None, :].to(device=device, dtype=dtype)
            module.forward = functools.partial(_rows_lora_forward, module, a, b, masks[present])
        try:
            yield
        finally:
            for module, *_ in self.layers:
                del module.forward  # back to the class's forward


def _rows_lora_forward(module, a, b, mask, x: torch.Tensor, *args, **kwargs) -> torch.Tensor:
    out = module.base_layer(x, *args, **kwargs)
    h = torch.nn.functional.linear(x, a) * mask  # (batch, seq, R): each row its own block
    flat = out.view(-1, out.shape[-1])
    flat.addmm_(h.view(-1, h.shape[-1]), b)
    return out


def fusable(module, name: str, enabled: bool = True) -> bool:
    """A plain unmerged LoRA Linear with adapter `name` (no DoRA or other variant, no bias on
    B, no dropout in effect): the case RowLora computes exactly. enabled=False: whether
    peft's adapter layers are on does not matter (RowLora switches them off itself)."""
    if name not in module.lora_A or name not in module.lora_B:
        return False
    return (
        not module.merged
        and (not enabled or not module.disable_adapters)
        and not module.training
        and name not in getattr(module, "lora_variant", {})
        and module.lora_B[name].bias is None
        and module.lora_A[name].weight.dtype == module.base_layer.weight.dtype
    )
