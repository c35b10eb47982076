"""The app's own settings (MAGNET_* environment variables), declared like the libraries' own.

Each package declares its settings as one pydantic-settings class (prefix MAGNET_, every field
typed, with its default and description): the model in magnet_model.settings.ModelSettings, the
rating store in annotation_db.settings.StoreSettings, the app's limits here in AppSettings.
`python -m app.settings` prints the table of all of them (docs/settings.md holds its output).
"""

from __future__ import annotations

import os
from collections.abc import MutableMapping
from pathlib import Path

from pydantic import Field, field_validator
from pydantic_settings import BaseSettings

from annotation_db.settings import StoreSettings
from magnet_model import systems
from magnet_model.settings import MagnetSettings, ModelSettings, load_settings

from .security import parse_networks

# OpenMP's idle threads spin after every parallel region (each matmul of a decoding step) and
# so hold the cores the rating and page requests need while a generation runs; PASSIVE makes
# them sleep instead. Read once when torch loads OpenMP, so it is set before torch is imported.
SERVER_ENV_DEFAULTS = {"OMP_WAIT_POLICY": "PASSIVE"}


def proxy_env(environ: MutableMapping[str, str] | None = None) -> None:
    """uvicorn trusts X-Forwarded-For from 127.0.0.1 unless told otherwise, so a same-host
    tunnel let any client pick its address; it trusts no one here, and the app's RequestGuard
    applies MAGNET_TRUSTED_PROXIES instead (one place, one rule)."""
    environ = os.environ if environ is None else environ
    environ["FORWARDED_ALLOW_IPS"] = ""


def server_process_env(environ: MutableMapping[str, str] | None = None) -> None:
    """Defaults for the serving process; a value the user set (even empty) is kept."""
    environ = os.environ if environ is None else environ
    for name, value in SERVER_ENV_DEFAULTS.items():
        environ.setdefault(name, value)


# A Gradio-SDK Space (README variant in deploy/zerogpu/) installs no asset package: the base
# model comes from the Hub. The default is the model the embedded GGUF was quantized from, with
# the adapters shipped in adapters/ (trained on that GGUF's de-quantized weights).
SPACE_BASE_MODEL = "HuggingFaceTB/SmolLM2-135M-Instruct"
SPACE_FRAME_ANCESTORS = "https://huggingface.co"  # a Space's page shows the app in a frame
# Only Hugging Face's proxy reaches a Space's container, from a private address: its
# X-Forwarded-For names the visitor, so per-address limits are per visitor, not one for all.
SPACE_PROXIES = "10.0.0.0/8,172.16.0.0/12,192.168.0.0/16,fc00::/7"


def space_env(
    root: Path, environ: MutableMapping[str, str] | None = None, persistent: Path = Path("/data")
) -> None:
    """Defaults of a Gradio-SDK Space; a value the Space's owner set is kept. The base model
    from the Hub; where persistent storage is attached (a writable /data), the model cache,
    search vectors, Hub downloads and the rating database live there and survive restarts."""
    environ = os.environ if environ is None else environ
    environ.setdefault("MAGNET_BASE_MODEL", SPACE_BASE_MODEL)
    environ.setdefault("MAGNET_FRAME_ANCESTORS", SPACE_FRAME_ANCESTORS)  # the Space's page
    environ.setdefault("MAGNET_TRUSTED_PROXIES", SPACE_PROXIES)
    if environ["MAGNET_BASE_MODEL"] == SPACE_BASE_MODEL:
        names = [s.adapter for s in systems.SYSTEMS if s.adapter]  # the table's adapters
        shipped = ",".join(f"{n}={root / 'adapters' / n}" for n in names)
        environ.setdefault("MAGNET_ADAPTERS", shipped)
    if persistent.is_dir() and os.access(persistent, os.W_OK):
        environ.setdefault("MAGNET_CACHE_DIR", str(persistent / "magnet-cache"))
        environ.setdefault("MAGNET_DATA_DIR", str(persistent / "magnet"))
        environ.setdefault("HF_HOME", str(persistent / "huggingface"))


class AppSettings(MagnetSettings):
    """The app's own settings: limits of the tabs, the queue, the Admin tab."""

    admin_password: str | None = Field(
        None, description="password of the Admin tab; unset: no Admin tab"
    )
    demo: bool = Field(
        True,
        description="serve the demo tabs (Infill, Continue, Search); `false` while a study "
        "runs: only `/rate` and Admin are served, so no rater can rerun an item in the demo",
    )
    search_warmup: bool = Field(
        True,
        description="at start, embed the default search corpus in the background unless its "
        "vectors are cached (`make prepare` caches them), so the first search embeds only its "
        "query",
    )
    max_input_tokens: int = Field(
        512, ge=16, le=32768, description="longest infill text, prompt or query"
    )
    max_span_tokens: int = Field(
        32, ge=1, le=512, description="upper end of the span-length slider"
    )
    max_new_tokens: int = Field(
        128, ge=1, le=4096, description="upper end of the continuation-length slider"
    )
    max_upload_mb: int = Field(5, ge=1, le=1024, description="largest corpus or items upload")
    max_passages: int = Field(
        2000,
        ge=1,
        le=10_000_000,
        description="most passages of an uploaded search corpus; above 20,000 the search uses a "
        "faiss IVF index (embed big corpora once with "
        "`python -m magnet_model.inference.search index`)",
    )
    queue_size: int = Field(
        32, ge=1, le=10000, description='requests waiting for the model; more get "queue full"'
    )
    concurrency: int = Field(
        1, ge=1, le=64, description="model calls running at once (one model in memory)"
    )
    public_url: str | None = Field(
        None,
        description="base of invite links (set it behind a proxy)",
        json_schema_extra={"shown_default": "the address the admin uses"},
    )

    trusted_proxies: str | None = Field(
        None,
        description="addresses or networks (comma-separated) of the reverse proxies whose "
        "X-Forwarded-For/-Host headers count; from anyone else they are dropped",
        json_schema_extra={"shown_default": "none (private networks on a Space)"},
    )
    frame_ancestors: str = Field(
        "'none'",
        description="CSP frame-ancestors: which sites may show the app in a frame",
        json_schema_extra={"shown_default": "`'none'` (`https://huggingface.co` on a Space)"},
    )
    admin_idle_minutes: int = Field(
        30, ge=1, le=1440, description="an admin login ends after this long unused"
    )
    admin_session_hours: int = Field(
        8, ge=1, le=168, description="an admin login ends this long after it began"
    )
    demo_calls_per_minute: int = Field(
        12, ge=1, le=100000, description="Infill/Continue/Search calls per address per minute"
    )
    demo_calls_per_minute_total: int = Field(
        120, ge=1, le=1000000, description="Infill/Continue/Search calls from everyone per minute"
    )
    upload_mb_per_hour: int = Field(
        50, ge=1, le=1000000, description="upload megabytes per address per hour"
    )
    upload_mb_per_hour_total: int = Field(
        500, ge=1, le=10000000, description="upload megabytes from everyone per hour"
    )
    upload_min_free_mb: int = Field(
        1024,
        ge=0,
        le=10000000,
        description="uploads are refused while the upload folder's disk (GRADIO_TEMP_DIR) has "
        "less free space than this",
    )
    search_cache_mb: int = Field(
        1024, ge=1, le=10000000, description="size cap of the search-vector cache (oldest go first)"
    )

    @field_validator("trusted_proxies")
    @classmethod
    def _networks(cls, value: str | None) -> str | None:
        parse_networks(value or "")  # a bad entry is one sentence naming it
        return value

    @field_validator("public_url")
    @classmethod
    def _no_trailing_slash(cls, value: str | None) -> str | None:
        return (value or "").rstrip("/") or None

    @classmethod
    def from_env(cls) -> AppSettings:
        """MAGNET_* variables over the defaults; a bad value is one sentence naming it."""
        return load_settings(cls)

    @property
    def max_input_chars(self) -> int:
        """A character cap checked before tokenizing (a token is rarely over 8 characters)."""
        return self.max_input_tokens * 8


SETTINGS_CLASSES: tuple[type[BaseSettings], ...] = (ModelSettings, StoreSettings, AppSettings)


def settings_table(classes: tuple[type[BaseSettings], ...] = SETTINGS_CLASSES) -> str:
    """The Markdown table of every MAGNET_* setting, from the settings classes (docs/settings)."""
    rows = ["| variable | default | meaning |", "|---|---|---|"]
    for cls in classes:
        prefix = cls.model_config.get("env_prefix", "")
        for name, f in cls.model_fields.items():
            extra = f.json_schema_extra if isinstance(f.json_schema_extra, dict) else {}
            if "shown_default" in extra:
                default = str(extra["shown_default"])
            elif f.default is None:
                default = "unset"
            else:
                default = f"`{f.default}`"
            rows.append(f"| `{prefix}{name.upper()}` | {default} | {f.description} |")
    return "\n".join(rows)


if __name__ == "__main__":
    print(settings_table())
