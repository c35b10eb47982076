"""Average trained adapters into one (a weight "soup"): the weighted sum of their updates.

    python -m magnet_model.training.soup checkpoints/magnet-v7 checkpoints/magnet-v8 \\
        --output checkpoints/magnet-soup [--weights 0.5,0.5]

Adapters continued one from another (v6 -> v7 -> v8) sit near each other; the average of
such weights often scores better than each of them (Izmailov et al. 2018, stochastic weight
averaging; Wortsman et al. 2022, model soups), and a CPU stretch at batch 8 moves an adapter
by its per-step noise more than by what it learns. The soup is exact, not approximate: peft's
`add_weighted_adapter(..., combination_type="cat")` stacks the LoRA factors, so each layer's
update is sum_i w_i B_i A_i at rank sum_i r_i (no SVD truncation). The trained role rows
(role_rows.safetensors) are averaged with the same weights.

magnet_config.json is the last adapter's, with what the soup was made of recorded under
"training" / "soup" and the calibration dropped: the end bias belongs to one model and has to
be fitted again (`python -m magnet_model.evaluation.calibrate --adapter OUT --write`, which
rebuilds the last adapter's training views). Adapters that disagree on what inference reads
from that file (token roles, attention, sentence instruction and pooling, layout) are refused.
"""

from __future__ import annotations

import argparse
import json
import shutil
import sys
import tempfile
from pathlib import Path

from ..adapter_meta import META_FILE, adapter_revision, load_meta, save_meta
from ..errors import ConfigError, MagnetError
from ..role_rows import ROLE_ROWS_FILE
from ..settings import ModelSpec, add_model_args

COMMAND = "python -m magnet_model.training.soup"
# what inference reads from magnet_config.json: a soup's parts must agree on all of it
SHARED = ("token_roles", "attention", "instruction", "pooling", "gap")


def parse_weights(text: str | None, n: int) -> list[float]:
    """--weights as floats summing to 1 (default: equal)."""
    if not text:
        return [1.0 / n] * n
    try:
        weights = [float(w) for w in text.split(",")]
    except ValueError:
        raise ConfigError(f"--weights must be numbers separated by commas, not {text!r}.") from None
    if len(weights) != n:
        raise ConfigError(f"--weights gives {len(weights)} numbers for {n} adapters.")
    if any(w < 0 for w in weights) or abs(sum(weights) - 1.0) > 1e-6:
        raise ConfigError(
            f"--weights must be non-negative and sum to 1 (they sum to {sum(weights):g})."
        )
    return weights


def check_parts(folders: list[Path]) -> list:
    """Each folder's AdapterMeta; refused unless every part is a MAGNET adapter and they agree
    on what inference reads from the config."""
    if len(folders) < 2:
        raise ConfigError("A soup needs at least two adapters.")
    metas = []
    for folder in folders:
        if not (folder / "adapter_config.json").is_file():
            raise ConfigError(f"{folder} has no adapter_config.json: not an adapter folder.")
        meta = load_meta(folder)
        if meta is None:
            raise ConfigError(f"{folder} has no {META_FILE}: not a MAGNET adapter.")
        metas.append(meta)
    bases = [
        json.loads((f / "adapter_config.json").read_text()).get("base_model_name_or_path")
        for f in folders
    ]
    if any(b != bases[0] for b in bases[1:]):
        raise ConfigError(
            f"The adapters were trained on different base models ({', '.join(map(str, bases))}): "
            "their updates cannot be added."
        )
    for key in SHARED:
        values = [getattr(m, key) for m in metas]
        if any(v != values[0] for v in values[1:]):
            raise ConfigError(
                f"The adapters differ in {key} ({folders[0]}: {values[0]!r}); only adapters "
                "trained with the same token roles and layout can be averaged."
            )
    return metas


def average_role_rows(folders: list[Path], weights: list[float]):
    """(ids, weighted mean of the rows), or None when no part has trained rows; refused when
    only some parts have them or they cover different tokens."""
    from safetensors.torch import load_file

    have = [(f / ROLE_ROWS_FILE).is_file() for f in folders]
    if not any(have):
        return None
    if not all(have):
        missing = [str(f) for f, h in zip(folders, have, strict=True) if not h]
        raise ConfigError(f"{', '.join(missing)} has no {ROLE_ROWS_FILE}, the others do.")
    parts = [load_file(str(f / ROLE_ROWS_FILE)) for f in folders]
    ids = parts[0]["ids"]
    if any(not bool((p["ids"] == ids).all()) or p["ids"].shape != ids.shape for p in parts):
        raise ConfigError("The adapters' trained role rows are for different tokens.")
    rows = sum(w * p["rows"].float() for w, p in zip(weights, parts, strict=True))
    return ids, rows


def make_soup(model, folders: list[Path], weights: list[float], output: Path) -> None:
    """Write the soup of the adapters at `folders` into `output` (the LoRA weights, the role
    rows and magnet_config.json). `model` is the base they were trained on; it is wrapped by
    peft here and should not be reused."""
    from peft import PeftModel
    from safetensors.torch import save_file

    metas = check_parts(folders)
    names = [f"part{i}" for i in range(len(folders))]
    peft_model = PeftModel.from_pretrained(model, str(folders[0]), adapter_name=names[0])
    for name, folder in zip(names[1:], folders[1:], strict=True):
        peft_model.load_adapter(str(folder), adapter_name=name)
    peft_model.add_weighted_adapter(names, weights, "soup", combination_type="cat")
    with tempfile.TemporaryDirectory() as tmp:
        # no embedding layers: LoRA adapts linear layers only (and peft would ask the Hub)
        peft_model.save_pretrained(tmp, selected_adapters=["soup"], save_embedding_layers=False)
        saved = Path(tmp) / "soup"  # peft writes a named adapter into a folder of its name
        output.mkdir(parents=True, exist_ok=True)
        for name in ("adapter_config.json", "adapter_model.safetensors"):
            shutil.copyfile(saved / name, output / name)
    rows = average_role_rows(folders, weights)
    if rows is not None:
        save_file({"ids": rows[0], "rows": rows[1]}, str(output / ROLE_ROWS_FILE))
    else:  # a soup written over another must not keep the rows of the one it replaces
        (output / ROLE_ROWS_FILE).unlink(missing_ok=True)
    meta = metas[-1]
    meta.training = dict(meta.training)
    meta.training["soup"] = {
        "adapters": [str(f) for f in folders],
        "revisions": [adapter_revision(str(f)) for f in folders],
        "weights": weights,
        "method": "peft add_weighted_adapter, combination_type cat (exact weighted sum of "
        "the LoRA updates); role rows averaged with the same weights",
    }
    meta.training["output"] = str(output)
    meta.calibration = {}
    save_meta(output, meta)


def build_parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog=COMMAND, description=__doc__.split("\n\n")[0])
    p.add_argument(
        "parts", nargs="+", metavar="ADAPTER", help="adapter folders to average (at least two)"
    )
    p.add_argument("--output", required=True, help="folder for the averaged adapter")
    p.add_argument("--weights", help="one weight per adapter, comma separated (default: equal)")
    p.add_argument("--overwrite", action="store_true", help="replace an existing --output")
    add_model_args(p)  # the base the adapters were trained on; its --adapters is ignored
    return p


def main(argv: list[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    try:
        folders = [Path(a) for a in args.parts]
        args.adapters = "none"  # ModelSpec: the bare base
        weights = parse_weights(args.weights, len(folders))
        check_parts(folders)
        output = Path(args.output)
        if output.exists() and any(output.iterdir()) and not args.overwrite:
            raise ConfigError(f"{output} exists and is not empty; pass --overwrite to replace it.")
        if output.resolve() in {f.resolve() for f in folders}:
            raise ConfigError("--output must not be one of the adapters averaged.")
        from ..loading import load_base

        spec = ModelSpec.from_args(args)
        spec.device, spec.dtype = "cpu", "float32"
        model, _, _ = load_base(spec)
        make_soup(model, folders, weights, output)
    except MagnetError as e:
        print(f"error: {e}", file=sys.stderr)
        return 2
    shown = ", ".join(f"{w:g} x {f}" for w, f in zip(weights, folders, strict=True))
    print(
        f"wrote {output}: {shown}. Fit its end bias next: "
        f"python -m magnet_model.evaluation.calibrate --adapter {output} --write"
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
