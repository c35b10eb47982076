"""python -m magnet_model.training.sweep CONFIG.json (--minutes N | --steps N): train K
configurations side by side on one device within a time budget or for a fixed number of steps,
evaluate each adapter, and write one comparison table.

With --steps N every configuration trains N steps (split between the stages by `stage2_share`,
capped by `max_steps`): no probe, no plan, no clock; what a test or a like-for-like comparison
wants. With --minutes N:

1. Probe: every configuration trains a few steps of each stage, all K at once (as they will
   run), to time a step and the start-up (loading the model and the corpus).
2. Plan: the budget less the probe's time and a fixed share for evaluation is what the
   trainings get; each configuration's step count is what fits in it at its probed step time
   (split between the stages by `stage2_share`); `--max-minutes` bounds each run as well.
3. Train: one `python -m magnet_model.training.train` subprocess per configuration, all at
   once, each with its log (OUTPUT/logs/NAME.train.log); progress is printed every few seconds.
4. Evaluate: one `python -m magnet_model.evaluation.evaluate` subprocess per adapter, all at
   once, with the configuration's evaluator flags and --device passed through (OUTPUT/NAME/eval).
5. Write OUTPUT/sweep.md and OUTPUT/sweep.json: one row per configuration with the evaluator's
   numbers (– where a task was not run), steps trained, seconds, and the flags.

CONFIG.json (only "configs" is required):
    {
      "configs": [{"name": "end1", "flags": ["--w-span-end", "1"]},
                  {"name": "end5", "flags": ["--w-span-end", "5"]}],
      "model": ["--base-model", "embedded"],      # given to the trainer and the evaluator
      "train": ["--batch-size", "64", "--lr", "2e-4"],  # every configuration's trainer flags
      "evaluate": ["--tasks", "infill,knowledge", "--n-passages", "60"],  # evaluator flags
      "systems": ["base"],        # evaluated beside each adapter (base: for the PPL ratio)
      "probe_steps": 3,           # steps per stage in the timing probe (--minutes only)
      "max_steps": null,          # cap on each configuration's planned steps (a quick check)
      "stage2_share": 0.5,        # share of the steps in stage 2 (0: stage 1 only)
      "eval_share": 0.25          # share of the budget kept for evaluation (--minutes only)
    }
"""

from __future__ import annotations

import argparse
import contextlib
import json
import math
import os
import re
import shlex
import subprocess
import sys
import time
from dataclasses import asdict, dataclass, field
from pathlib import Path

from ..errors import ConfigError, MagnetError

LOG_FILE = "train_log.jsonl"  # what the trainer writes per step (train.LOG_FILE)
# flags the sweep sets itself; a configuration that sets them would undo the plan
OWNED = (
    "--output",
    "--stage1-steps",
    "--stage2-steps",
    "--max-steps",
    "--max-minutes",
    "--resume",
    "--overwrite",
    "--device",
    "--adapters",
    "--systems",
)
NAME = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_.-]{0,63}$")
# (column, task, path into the system's result in results.json, format)
COLUMNS = [
    ("span PPL hybrid", "infill", ("hybrid_ppl",), "{:.2f}"),
    ("span PPL left-only", "infill", ("causal_left_ppl",), "{:.2f}"),
    ("stop share", "infill", ("stop_share",), "{:.0%}"),
    ("joined share", "infill", ("joined_share",), "{:.0%}"),
    ("fit share", "infill", ("fit_share",), "{:.0%}"),
    ("length ratio", "infill", ("length_ratio",), "{:.2f}"),
    ("span_end NLL", "infill", ("end_nll_mean",), "{:.2f}"),
    ("STS-B", "sts", ("spearman",), "{:.2f}"),
    ("retrieval MRR", "retrieval", ("mrr",), "{:.3f}"),
    ("POS acc", "probe", ("pos", "accuracy"), "{:.2%}"),
    ("Rep-4", "repetition", ("rep_4",), "{:.4f}"),
    ("causal PPL / base", "knowledge", ("ratio_to_base",), "{:.3f}"),
]
DASH = "–"


# ---------------------------------------------------------------- configuration


@dataclass
class SweepConfig:
    configs: dict[str, list[str]]  # name -> the configuration's own trainer flags
    model: list[str] = field(default_factory=list)
    train: list[str] = field(default_factory=list)
    evaluate: list[str] = field(default_factory=list)
    systems: list[str] = field(default_factory=lambda: ["base"])
    probe_steps: int = 3
    max_steps: int | None = None  # cap on the planned steps: a quick check of a config
    stage2_share: float = 0.5
    eval_share: float = 0.25


def _flags(value, where: str) -> list[str]:
    if not isinstance(value, list) or not all(isinstance(v, str) for v in value):
        raise ConfigError(f"{where} must be a list of strings (flags and their values).")
    # the trainer also takes --a_b for --a-b (its flags are generated from TrainConfig)
    owned = [v for v in value if v.split("=")[0].replace("_", "-") in OWNED]
    if owned:
        raise ConfigError(f"{where} sets {', '.join(owned)}, which the sweep sets itself.")
    return list(value)


def load_config(path: Path) -> SweepConfig:
    """CONFIG.json -> SweepConfig, with a one-sentence error for every mistake."""
    try:
        raw = json.loads(Path(path).read_text(encoding="utf-8"))
    except FileNotFoundError:
        raise ConfigError(f"The sweep config {path} does not exist.") from None
    except (OSError, UnicodeDecodeError, json.JSONDecodeError) as e:
        raise ConfigError(f"The sweep config {path} is not readable JSON ({e}).") from None
    if not isinstance(raw, dict):
        raise ConfigError(f"The sweep config {path} must be a JSON object with a 'configs' list.")
    known = set(SweepConfig.__dataclass_fields__)
    unknown = sorted(set(raw) - known)
    if unknown:
        raise ConfigError(f"Unknown keys in {path}: {', '.join(unknown)}; known: {sorted(known)}.")
    items = raw.get("configs")
    if not isinstance(items, list) or not items:
        raise ConfigError(f"{path} needs 'configs': a non-empty list of {{name, flags}} objects.")
    configs: dict[str, list[str]] = {}
    for i, item in enumerate(items):
        if not isinstance(item, dict) or set(item) - {"name", "flags"} or "name" not in item:
            raise ConfigError(f"configs[{i}] must be an object with 'name' and 'flags' only.")
        name = item["name"]
        if not isinstance(name, str) or not NAME.match(name) or name == "base":
            raise ConfigError(
                f"configs[{i}] has the name {name!r}; use letters, digits, '_', '-' or '.' "
                "(not 'base')."
            )
        if name in configs:
            raise ConfigError(f"Two configs are named {name!r}; give each its own name.")
        configs[name] = _flags(item.get("flags", []), f"configs[{i}] ({name}) flags")
    cfg = SweepConfig(configs)
    for key in ("model", "train", "evaluate"):
        if key in raw:
            setattr(cfg, key, _flags(raw[key], f"'{key}'"))
    if "systems" in raw:
        systems = raw["systems"]
        if not isinstance(systems, list) or not all(isinstance(s, str) for s in systems):
            raise ConfigError("'systems' must be a list of system names (e.g. [\"base\"]).")
        cfg.systems = systems
    probe = raw.get("probe_steps", cfg.probe_steps)
    if not isinstance(probe, int) or isinstance(probe, bool) or probe < 1:
        raise ConfigError(f"'probe_steps' must be a whole number >= 1, not {probe!r}.")
    cfg.probe_steps = probe
    cap = raw.get("max_steps")
    if cap is not None and (not isinstance(cap, int) or isinstance(cap, bool) or cap < 1):
        raise ConfigError(f"'max_steps' must be a whole number >= 1 or null, not {cap!r}.")
    cfg.max_steps = cap
    for key, lo, hi in (("stage2_share", 0.0, 1.0), ("eval_share", 0.0, 0.9)):
        v = raw.get(key, getattr(cfg, key))
        if not isinstance(v, int | float) or isinstance(v, bool) or not lo <= v <= hi:
            raise ConfigError(f"'{key}' must be a number in [{lo}, {hi}], not {v!r}.")
        setattr(cfg, key, float(v))
    return cfg


# ---------------------------------------------------------------- subprocesses


def _env(k: int) -> dict[str, str]:
    env = dict(os.environ, PYTHONUNBUFFERED="1")
    root = str(Path(__file__).resolve().parent.parent)
    env["PYTHONPATH"] = os.pathsep.join(p for p in (root, env.get("PYTHONPATH")) if p)
    if "OMP_NUM_THREADS" not in os.environ:  # K processes share the CPU cores
        env["OMP_NUM_THREADS"] = str(max(1, (os.cpu_count() or 1) // k))
    return env


def _start(module: str, args: list[str], log: Path, k: int) -> subprocess.Popen:
    log.parent.mkdir(parents=True, exist_ok=True)
    cmd = [sys.executable, "-m", module, *args]
    with log.open("w") as f:
        f.write("$ " + shlex.join(cmd) + "\n")
        f.flush()
        return subprocess.Popen(cmd, stdout=f, stderr=subprocess.STDOUT, env=_env(k))


def _log_rows(adapter: Path) -> list[dict]:
    path = adapter / LOG_FILE
    if not path.is_file():
        return []
    rows = []
    for line in path.read_text().splitlines():
        with contextlib.suppress(json.JSONDecodeError):  # a line being written
            rows.append(json.loads(line))
    return rows


def _wait(procs: dict[str, subprocess.Popen], what: str, progress=None, every: float = 5.0):
    """Wait for every process; print progress every `every` seconds; name -> return code."""
    t0 = last = time.monotonic()
    while any(p.poll() is None for p in procs.values()):
        time.sleep(0.2)
        if progress is not None and time.monotonic() - last >= every:
            last = time.monotonic()
            print(f"{what} {time.monotonic() - t0:.0f}s: {progress()}", file=sys.stderr)
    return {n: p.returncode for n, p in procs.items()}


def _tail(log: Path, n: int = 400) -> str:
    text = log.read_text(errors="replace") if log.is_file() else ""
    return text[-n:].strip().splitlines()[-1] if text.strip() else "(no output)"


# ---------------------------------------------------------------- probe and plan


def _stage_steps(total: int, share: float) -> tuple[int, int]:
    s2 = round(total * share)
    if share > 0 and total >= 2:
        s2 = max(1, s2)
    if share < 1 and total >= 2:
        s2 = min(total - 1, s2)
    return total - s2, s2


@dataclass
class Probe:
    step_s: float  # seconds per step, the stages mixed as planned, all K running at once
    startup_s: float  # process wall time not spent in steps (imports, model, corpus, saving)


def assign_devices(names, device: str) -> dict[str, str]:
    """Configuration name -> its device: `device` is one device or a comma list of them
    (cuda:0,cuda:1), dealt out to the configurations in turn; configurations that share a
    device train side by side on it."""
    devices = [d.strip() for d in device.split(",") if d.strip()]
    for dev in devices:
        if not (dev in ("cpu", "cuda", "mps") or re.fullmatch(r"cuda:\d+", dev)):
            raise ConfigError(
                f"--device takes cpu, cuda, cuda:N or mps (or a comma list), not {dev!r}."
            )
    if not devices:
        raise ConfigError("--device is empty.")
    return {name: devices[i % len(devices)] for i, name in enumerate(names)}


def probe(cfg: SweepConfig, where: dict[str, str], root: Path) -> dict[str, Probe]:
    """A few steps of each configuration, all at once, each on its device (assign_devices);
    name -> Probe. Fails on a failed run."""
    p = cfg.probe_steps
    s1 = 0 if cfg.stage2_share == 1 else p
    s2 = 0 if cfg.stage2_share == 0 else p
    procs, t0 = {}, time.monotonic()
    for name, flags in cfg.configs.items():
        args = [*cfg.model, *cfg.train, *flags, "--output", str(root / name)]
        args += [
            "--device",
            where[name],
            "--stage1-steps",
            str(s1),
            "--stage2-steps",
            str(s2),
            "--no-progress",
        ]
        args += ["--save-every", "1000000", "--overwrite"]
        procs[name] = _start(
            "magnet_model.training.train", args, root / f"{name}.log", len(cfg.configs)
        )
    codes = _wait(procs, "probe")
    wall = time.monotonic() - t0
    failed = {n: c for n, c in codes.items() if c != 0}
    if failed:
        name = next(iter(failed))
        raise MagnetError(
            f"The timing probe of {name!r} failed: {_tail(root / f'{name}.log')} "
            f"(log: {root / f'{name}.log'})."
        )
    out = {}
    for name in cfg.configs:
        rows = _log_rows(root / name)
        per_stage = {}
        for stage in (1, 2):
            secs = [r["seconds"] for r in rows if r.get("stage") == stage]
            if secs:  # the first step of a stage warms up; leave it out when there are others
                per_stage[stage] = sum(secs[1:] or secs) / len(secs[1:] or secs)
        mean = per_stage.get(1, per_stage.get(2, 0.0))
        step = (1 - cfg.stage2_share) * per_stage.get(1, mean)
        step += cfg.stage2_share * per_stage.get(2, mean)
        out[name] = Probe(step, max(0.0, wall - sum(r["seconds"] for r in rows)))
    return out


def plan_steps(probes: dict[str, Probe], seconds: float, safety: float = 0.9) -> dict[str, int]:
    """Steps per configuration that fit in `seconds` of wall time (start-up included)."""
    out = {}
    for name, pr in probes.items():
        left = seconds - pr.startup_s
        out[name] = max(0, int(safety * left / pr.step_s)) if pr.step_s > 0 else 0
    return out


# ---------------------------------------------------------------- the table


def _value(result: dict | None, path: tuple):
    node = result
    for k in path:
        node = node.get(k) if isinstance(node, dict) else None
    if isinstance(node, bool) or not isinstance(node, int | float):
        return None
    return None if math.isnan(node) else node


def row_numbers(name: str, report: dict | None) -> dict[str, float | None]:
    """The comparison's columns for adapter `name` from its evaluation's results.json."""
    tasks = (report or {}).get("tasks", {})
    return {
        col: _value(tasks.get(task, {}).get("systems", {}).get(name), path)
        for col, task, path, _ in COLUMNS
    }


def render_markdown(rows: list[dict], header: str) -> str:
    asked = [c for c in COLUMNS if any(c[0] in r["asked"] for r in rows)]
    head = ["config", "steps", "train s", *(c[0] for c in asked), "flags"]
    lines = [header, "", "| " + " | ".join(head) + " |", "|" + "---|" * len(head)]
    for r in rows:
        cells = [r["name"], str(r["steps"]), f"{r['train_seconds']:.0f}"]
        for col, _, _, fmt in asked:
            v = r["metrics"].get(col)
            cells.append(DASH if v is None else fmt.format(v))
        flags = shlex.join(r["flags"]) or "(shared flags only)"
        cells.append(f"`{flags}`" + (f" — {r['error']}" if r.get("error") else ""))
        lines.append("| " + " | ".join(cells) + " |")
    return "\n".join(lines) + "\n"


# ---------------------------------------------------------------- the sweep


def _plan_by_time(cfg: SweepConfig, minutes: float, where, output: Path, t_start: float):
    """--minutes: probe, then the steps that fit the budget; (steps, probes, train seconds)."""
    budget = 60 * minutes
    probes = probe(cfg, where, output / "probe")
    spent = time.monotonic() - t_start
    train_s = budget * (1 - cfg.eval_share) - spent
    steps = plan_steps(probes, train_s)
    if cfg.max_steps is not None:
        steps = {n: min(s, cfg.max_steps) for n, s in steps.items()}
    short = [n for n, s in steps.items() if s < 1]
    if short:
        raise MagnetError(
            f"After the timing probe ({spent:.0f}s) the budget leaves {train_s:.0f}s of training, "
            f"too little for a step of {', '.join(short)}; give more --minutes."
        )
    return steps, probes, train_s


def run_sweep(
    cfg: SweepConfig,
    minutes: float | None,
    device: str,
    output: Path,
    steps: int | None = None,
) -> dict:
    """Give `minutes` (a time budget: probe and plan) or `steps` (each configuration trains
    that many, capped by `max_steps`; no clock involved), not both."""
    if (minutes is None) == (steps is None):
        raise ConfigError("Give the sweep --minutes or --steps, one of them.")
    t_start = time.monotonic()
    output.mkdir(parents=True, exist_ok=True)
    k = len(cfg.configs)
    where = assign_devices(cfg.configs, device)
    if steps is None:
        print(f"sweep: {k} configs, {60 * minutes:.0f}s budget, device {device}", file=sys.stderr)
        planned, probes, train_s = _plan_by_time(cfg, minutes, where, output, t_start)
    else:
        print(f"sweep: {k} configs, {steps} steps each, device {device}", file=sys.stderr)
        cap = steps if cfg.max_steps is None else min(steps, cfg.max_steps)
        planned, probes, train_s = dict.fromkeys(cfg.configs, cap), {}, None
    plan = {n: _stage_steps(s, cfg.stage2_share) for n, s in planned.items()}
    for n, (a, b) in plan.items():
        why = ""
        if n in probes:
            pr = probes[n]
            why = f" ({pr.step_s:.3f} s/step with {k} at once, start-up {pr.startup_s:.0f}s)"
            why += f" in {train_s:.0f}s"
        print(f"plan {n}: {a} + {b} steps{why}", file=sys.stderr)

    procs = {}
    bound = []  # --minutes: each run stops at the budget too
    if train_s is not None:
        minutes_cap = max(0.01, (train_s - max(p.startup_s for p in probes.values())) / 60)
        bound = ["--max-minutes", f"{minutes_cap:.3f}"]
    for name, flags in cfg.configs.items():
        a, b = plan[name]
        args = [*cfg.model, *cfg.train, *flags, "--output", str(output / name)]
        args += ["--device", where[name], "--stage1-steps", str(a), "--stage2-steps", str(b)]
        args += [*bound, "--no-progress", "--overwrite"]
        procs[name] = _start(
            "magnet_model.training.train", args, output / "logs" / f"{name}.train.log", k
        )

    def progress() -> str:
        return ", ".join(f"{n} {len(_log_rows(output / n))}/{sum(plan[n])}" for n in cfg.configs)

    t_train = time.monotonic()
    codes = _wait(procs, "train", progress)
    print(f"train done in {time.monotonic() - t_train:.0f}s: {progress()}", file=sys.stderr)

    evals = {}
    for name in cfg.configs:
        if codes[name] != 0:
            continue
        systems = ",".join(dict.fromkeys([*cfg.systems, name]))
        args = [*cfg.model, *cfg.evaluate, "--adapters", f"{name}={output / name}"]
        args += ["--systems", systems, "--device", where[name], "--no-progress"]
        args += ["--output", str(output / name / "eval")]
        evals[name] = _start(
            "magnet_model.evaluation.evaluate",
            args,
            output / "logs" / f"{name}.eval.log",
            len(cfg.configs),
        )
    eval_codes = _wait(evals, "evaluate", lambda: "running")

    rows = []
    for name, flags in cfg.configs.items():
        log_rows = _log_rows(output / name)
        error = None
        report = None
        if codes[name] != 0:
            error = f"training failed: {_tail(output / 'logs' / f'{name}.train.log')}"
        elif eval_codes.get(name) != 0:
            error = f"evaluation failed: {_tail(output / 'logs' / f'{name}.eval.log')}"
        else:
            report = json.loads((output / name / "eval" / "results.json").read_text())
        asked = report_columns(report)
        rows.append(
            {
                "name": name,
                "adapter": str(output / name),
                "device": where[name],
                "steps": len(log_rows),
                "planned_steps": sum(plan[name]),
                "train_seconds": round(sum(r["seconds"] for r in log_rows), 1),
                "metrics": row_numbers(name, report),
                "asked": asked,
                "flags": flags,
                "error": error,
            }
        )
    result = {
        "minutes": minutes,
        "steps": steps,
        "device": device,
        "seconds": round(time.monotonic() - t_start, 1),
        "config": asdict(cfg),
        "probe": {n: asdict(p) for n, p in probes.items()},
        "rows": rows,
    }
    limit = f"budget {minutes:g} min" if steps is None else f"{steps} steps each"
    header = (
        f"Sweep of {k} configurations on {device}, {limit}, "
        f"{result['seconds']:.0f}s in all. Shared trainer flags: "
        f"`{shlex.join([*cfg.model, *cfg.train]) or '(none)'}`; evaluator flags: "
        f"`{shlex.join(cfg.evaluate) or '(defaults)'}`."
    )
    (output / "sweep.md").write_text(render_markdown(rows, header))
    (output / "sweep.json").write_text(json.dumps(result, indent=2) + "\n")
    return result


def report_columns(report: dict | None) -> list[str]:
    """The columns whose task the evaluation ran."""
    ran = set((report or {}).get("tasks", {}))
    return [col for col, task, _, _ in COLUMNS if task in ran]


def build_parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(
        prog="python -m magnet_model.training.sweep",
        description="Train the configurations of CONFIG.json side by side within a time budget "
        "(--minutes) or for a fixed number of steps (--steps), evaluate each adapter, write one "
        "comparison table (sweep.md, sweep.json).",
    )
    p.add_argument("config", help="JSON file: configs, shared trainer / evaluator flags")
    limit = p.add_mutually_exclusive_group(required=True)
    limit.add_argument(
        "--minutes",
        type=float,
        help="time budget, all steps included: a timing probe plans each configuration's steps",
    )
    limit.add_argument(
        "--steps",
        type=int,
        help="train every configuration this many steps (split between the stages by "
        "stage2_share, capped by max_steps), with no probe and no clock: the same run on a "
        "fast or a busy machine",
    )
    p.add_argument(
        "--device",
        default="cpu",
        help="cpu, cuda or cuda:N (trainer and evaluator), or a comma list (cuda:0,cuda:1): "
        "the configurations are dealt out to the devices in turn",
    )
    p.add_argument("--output", default="artifacts/sweep", help="adapters, logs and the table")
    return p


def main(argv: list[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    try:
        if args.minutes is not None and not args.minutes > 0:
            raise ConfigError(f"--minutes must be above 0, not {args.minutes}.")
        if args.steps is not None and args.steps < 1:
            raise ConfigError(f"--steps must be a whole number >= 1, not {args.steps}.")
        dev = args.device
        assign_devices([], dev)  # refuses a wrong name before anything starts
        output = Path(args.output).expanduser()
        if output.exists() and not output.is_dir():
            raise ConfigError(f"--output {output} is a file; give a directory.")
        cfg = load_config(Path(args.config))
        result = run_sweep(cfg, args.minutes, dev, output, steps=args.steps)
    except MagnetError as e:
        print(f"error: {e}", file=sys.stderr)
        return 2
    print((output / "sweep.md").read_text())
    print(f"Wrote {output / 'sweep.md'} and {output / 'sweep.json'}.", file=sys.stderr)
    return 1 if any(r["error"] for r in result["rows"]) else 0


if __name__ == "__main__":
    sys.exit(main())
