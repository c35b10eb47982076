"""The small JSON saved next to every adapter: token roles, attention mode, training config.

A PEFT adapter directory stays standard (PeftModel.from_pretrained loads it unchanged); this
file adds what inference needs to use it the way it was trained:

    magnet_config.json
    {
      "format": 1,
      "token_roles": {"mask": .., "blank": .., "span_start": .., "span_end": ..,
                      "sentence_end": .., "pad": ..},
      "attention": "hybrid" | "bidirectional" | "causal",   # mode used for representations
      "objectives": ["mntp", "msg", "sscl"],
      "sentence": {"instruction": "...", "pooling": "last" | "mean"},
      "training": {...},                                     # the trainer's full config
      "calibration": {"span_end_bias": .., ...},            # optional: span_end.SpanEnd's
                                                             # bias and how it was fitted
      "layout": {"gap": {"default": .., "hint_share": .., "hint_noise": ..,
                         "sentence": ..}}  # sentence: optional, chosen after training
    }                           # optional: layout.GapRule; absent = gap 0, the first layout
"""

from __future__ import annotations

import hashlib
import json
from dataclasses import dataclass, field
from pathlib import Path

from .errors import ModelLoadError
from .layout import GapRule
from .loading import hub_kwargs, is_hub_id
from .tokens import TokenRoles

META_FILE = "magnet_config.json"
SENTENCE_INSTRUCTION = "Given the sentence, find its representation: "


@dataclass
class AdapterMeta:
    token_roles: TokenRoles
    attention: str = "hybrid"
    objectives: list[str] = field(default_factory=lambda: ["mntp", "msg", "sscl"])
    instruction: str = SENTENCE_INSTRUCTION
    pooling: str = "last"
    training: dict = field(default_factory=dict)
    # the end-logit calibration (magnet_model.evaluation.calibrate): span_end_bias and how it
    # was fitted
    calibration: dict = field(default_factory=dict)
    # where the right context of a blank sits (layout.GapRule); older adapters: gap 0
    gap: GapRule = field(default_factory=GapRule)

    def to_dict(self) -> dict:
        d = {
            "format": 1,
            "token_roles": self.token_roles.to_dict(),
            "attention": self.attention,
            "objectives": list(self.objectives),
            "sentence": {"instruction": self.instruction, "pooling": self.pooling},
            "training": self.training,
        }
        if self.calibration:
            d["calibration"] = self.calibration
        if self.gap != GapRule():
            d["layout"] = {"gap": self.gap.to_dict()}
        return d

    @classmethod
    def from_dict(cls, d: dict) -> AdapterMeta:
        sentence = d.get("sentence", {})
        return cls(
            token_roles=TokenRoles.from_dict(d["token_roles"]),
            attention=d.get("attention", "hybrid"),
            objectives=list(d.get("objectives", [])),
            instruction=sentence.get("instruction", SENTENCE_INSTRUCTION),
            pooling=sentence.get("pooling", "last"),
            training=d.get("training", {}),
            calibration=d.get("calibration", {}),
            gap=GapRule.from_dict(d.get("layout", {}).get("gap")),
        )


def save_meta(directory: str | Path, meta: AdapterMeta) -> Path:
    path = Path(directory) / META_FILE
    path.write_text(json.dumps(meta.to_dict(), indent=2, sort_keys=True) + "\n")
    return path


def load_meta(directory: str | Path) -> AdapterMeta | None:
    """The adapter's MAGNET metadata, or None for a plain PEFT adapter without it."""
    path = Path(directory) / META_FILE
    if not path.is_file():
        return None
    try:
        return AdapterMeta.from_dict(json.loads(path.read_text()))
    except (ValueError, KeyError, TypeError) as e:
        raise ModelLoadError(f"{path} is not a valid MAGNET adapter config ({e}).") from None


def adapter_revision(where: str) -> str:
    """Which adapter exactly: 'sha256:' + the first 12 hex digits of a local adapter's weights
    (adapter_model.safetensors, or .bin), so an export tells two trainings apart; a Hub id as
    given (the Hub keeps its revisions); 'unknown' when no weights file is found."""
    local = Path(where).expanduser()
    if not local.exists():
        return where
    for name in ("adapter_model.safetensors", "adapter_model.bin"):
        f = local / name
        if f.is_file():
            digest = hashlib.sha256()
            with f.open("rb") as fh:
                for block in iter(lambda: fh.read(1 << 20), b""):
                    digest.update(block)
            return "sha256:" + digest.hexdigest()[:12]
    return "unknown"


def find_meta(ref: str) -> AdapterMeta | None:
    """magnet_config.json of a local adapter directory (Hub adapters: from the Hub cache)."""
    path = Path(ref).expanduser()
    if path.exists():
        return load_meta(path)
    if not is_hub_id(ref):  # neither a folder nor a Hub id: nothing to ask the Hub
        return None
    try:
        from huggingface_hub import hf_hub_download

        return load_meta(Path(hf_hub_download(ref, META_FILE, **hub_kwargs())).parent)
    except Exception:  # a plain PEFT adapter on the Hub, or no network: no metadata
        return None
