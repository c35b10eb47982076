"""The app's own settings (MAGNET_* environment variables; CLI flags of `python -m app` override).

The model (MAGNET_BASE_MODEL, MAGNET_ADAPTERS, MAGNET_DEVICE, MAGNET_CACHE_DIR...) is set by
magnet_model.settings, the database (MAGNET_DB_URL / MAGNET_DB_PATH) by annotation_db.settings.
"""

from __future__ import annotations

import os
from collections.abc import MutableMapping
from dataclasses import dataclass
from pathlib import Path

from magnet_model.errors import ConfigError

# OpenMP's idle threads spin after every parallel region (each matmul of a decoding step) and
# so hold the cores the rating and page requests need while a generation runs; PASSIVE makes
# them sleep instead. Read once when torch loads OpenMP, so it is set before torch is imported.
SERVER_ENV_DEFAULTS = {"OMP_WAIT_POLICY": "PASSIVE"}


def server_process_env(environ: MutableMapping[str, str] | None = None) -> None:
    """Defaults for the serving process; a value the user set (even empty) is kept."""
    environ = os.environ if environ is None else environ
    for name, value in SERVER_ENV_DEFAULTS.items():
        environ.setdefault(name, value)


# A Gradio-SDK Space (README variant in deploy/zerogpu/) installs no asset package: the base
# model comes from the Hub. The default is the model the embedded GGUF was quantized from, with
# the adapters shipped in adapters/ (trained on that GGUF's de-quantized weights).
SPACE_BASE_MODEL = "HuggingFaceTB/SmolLM2-135M-Instruct"


def space_env(
    root: Path, environ: MutableMapping[str, str] | None = None, persistent: Path = Path("/data")
) -> None:
    """Defaults of a Gradio-SDK Space; a value the Space's owner set is kept. The base model
    from the Hub; where persistent storage is attached (a writable /data), the model cache,
    search vectors, Hub downloads and the rating database live there and survive restarts."""
    environ = os.environ if environ is None else environ
    environ.setdefault("MAGNET_BASE_MODEL", SPACE_BASE_MODEL)
    if environ["MAGNET_BASE_MODEL"] == SPACE_BASE_MODEL:
        shipped = ",".join(f"{n}={root / 'adapters' / n}" for n in ("magnet", "llm2vec"))
        environ.setdefault("MAGNET_ADAPTERS", shipped)
    if persistent.is_dir() and os.access(persistent, os.W_OK):
        environ.setdefault("MAGNET_CACHE_DIR", str(persistent / "magnet-cache"))
        environ.setdefault("MAGNET_DATA_DIR", str(persistent / "magnet"))
        environ.setdefault("HF_HOME", str(persistent / "huggingface"))


def _int(name: str, default: int, lo: int, hi: int) -> int:
    raw = os.environ.get(name, "").strip()
    if not raw:
        return default
    try:
        value = int(raw)
    except ValueError:
        raise ConfigError(f"{name} must be a whole number, not {raw!r}.") from None
    if not lo <= value <= hi:
        raise ConfigError(f"{name} must be between {lo} and {hi}, not {value}.")
    return value


@dataclass
class AppSettings:
    admin_password: str | None = None  # None: no Admin tab at all
    max_input_tokens: int = 512  # infill text / continuation prompt / search query
    max_span_tokens: int = 32  # upper end of the span-length slider
    max_new_tokens: int = 128  # upper end of the continuation-length slider
    max_upload_mb: int = 5
    queue_size: int = 32  # requests waiting for the model; more get "queue full"
    concurrency: int = 1  # model calls running at once (one model in memory)
    public_url: str | None = None  # base of invite links; default: the URL the admin uses

    @classmethod
    def from_env(cls) -> AppSettings:
        env = os.environ
        return cls(
            admin_password=env.get("MAGNET_ADMIN_PASSWORD") or None,
            max_input_tokens=_int("MAGNET_MAX_INPUT_TOKENS", 512, 16, 32768),
            max_span_tokens=_int("MAGNET_MAX_SPAN_TOKENS", 32, 1, 512),
            max_new_tokens=_int("MAGNET_MAX_NEW_TOKENS", 128, 1, 4096),
            max_upload_mb=_int("MAGNET_MAX_UPLOAD_MB", 5, 1, 1024),
            queue_size=_int("MAGNET_QUEUE_SIZE", 32, 1, 10000),
            concurrency=_int("MAGNET_CONCURRENCY", 1, 1, 64),
            public_url=(env.get("MAGNET_PUBLIC_URL") or "").rstrip("/") or None,
        )

    @property
    def max_input_chars(self) -> int:
        """A character cap checked before tokenizing (a token is rarely over 8 characters)."""
        return self.max_input_tokens * 8
