"""What every benchmark shares: rows of ratios, the physical limits, the JSON and the table.

A benchmark measures something and, in the same process, the thing it is compared with (a
physical limit such as the copy bandwidth or matmul FLOP/s, or a baseline implementation). It
reports rows; each row is a ratio with its two measured sides and, where the issue sets one, a
target. ``write_report`` prints the table and writes ``bench/results/<name>.json`` with the
hardware, the command and the time, which ``bench/run_all.py`` turns into bench/README.md.
"""

from __future__ import annotations

import json
import os
import shlex
import sys
import time
from collections.abc import Callable
from dataclasses import asdict, dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
RESULTS = Path(__file__).resolve().parent / "results"
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))


@dataclass
class Row:
    """One line of a benchmark table.

    value / baseline is the ratio (baseline None: the value stands alone, e.g. a latency with
    an absolute target). target: ">= 0.6" style text, checked by ``met``.
    """

    measure: str
    value: float
    unit: str
    baseline: float | None = None
    baseline_what: str = ""
    target: str = ""
    note: str = ""

    @property
    def ratio(self) -> float | None:
        if self.baseline is None or self.baseline == 0:
            return None
        return self.value / self.baseline

    @property
    def met(self) -> bool | None:
        """Whether the target holds; the target applies to the ratio when there is one."""
        if not self.target:
            return None
        op, bound = self.target.split()
        x = self.ratio if self.ratio is not None else self.value
        return {">=": x >= float(bound), "<=": x <= float(bound), "==": x == float(bound)}[op]

    def as_dict(self) -> dict:
        return {**asdict(self), "ratio": self.ratio, "met": self.met}


def timed(fn: Callable[[], object], repeat: int = 3, warmup: int = 1) -> float:
    """Best wall time of repeat calls after warmup calls (best: least disturbed by neighbours)."""
    for _ in range(warmup):
        fn()
    best = float("inf")
    for _ in range(repeat):
        t = time.perf_counter()
        fn()
        best = min(best, time.perf_counter() - t)
    return best


def copy_bandwidth(mbytes: int = 512, repeat: int = 5) -> float:
    """Bytes/s moved by a large tensor copy, counted as STREAM's Copy counts them: bytes read
    plus bytes written. Decoding at batch 1 only reads weights; a read-only stream runs at about
    this rate, so weight bytes per token / this is the time a token cannot beat."""
    import torch

    n = mbytes * 2**20 // 4
    src = torch.ones(n, dtype=torch.float32)
    dst = torch.empty_like(src)
    seconds = timed(lambda: dst.copy_(src), repeat=repeat)
    return 2 * n * 4 / seconds


def matmul_flops(n: int = 2048, dtype=None, repeat: int = 5) -> float:
    """FLOP/s of an n x n x n matmul (2 n^3 FLOPs) at torch's current thread count."""
    import torch

    dtype = dtype or torch.float32
    a = torch.randn(n, n, dtype=dtype)
    b = torch.randn(n, n, dtype=dtype)
    seconds = timed(lambda: a @ b, repeat=repeat)
    return 2 * n**3 / seconds


def _fmt(x: float | None) -> str:
    if x is None:
        return ""
    if x == 0:
        return "0"
    if abs(x) >= 100:
        return f"{x:,.0f}"
    if abs(x) >= 1:
        return f"{x:.2f}"
    return f"{x:.3g}"


def table(rows: list[Row]) -> str:
    """A Markdown table of rows."""
    lines = [
        "| measure | value | baseline | ratio | target | met |",
        "|---|---|---|---|---|---|",
    ]
    for r in rows:
        base = f"{_fmt(r.baseline)} {r.unit} ({r.baseline_what})" if r.baseline is not None else ""
        met = {True: "yes", False: "**no**", None: ""}[r.met]
        ratio = f"{r.ratio:.2f}x" if r.ratio is not None else ""
        measure = r.measure + (f" ({r.note})" if r.note else "")
        lines.append(
            f"| {measure} | {_fmt(r.value)} {r.unit} | {base} | {ratio} | {r.target} | {met} |"
        )
    return "\n".join(lines)


# Settings a figure depends on that the command line does not show (set in the environment)
RECORDED_ENV = ("MAGNET_DTYPE", "MAGNET_THREADS", "OMP_NUM_THREADS", "OMP_WAIT_POLICY")


def result_path(name: str) -> Path:
    """Where a report named `name` goes: bench/results/<name>.json for a plain name, else the
    path it spells (absolute, or with a folder: from the current directory), ".json" added when
    it has no suffix."""
    if "/" not in name:
        return RESULTS / f"{name}.json"
    path = Path(name).expanduser().resolve()
    return path if path.suffix else path.with_suffix(".json")


def shown(path: Path) -> str:
    """A path as the user reads it: relative to the repository when inside it."""
    return str(path.relative_to(ROOT)) if path.is_relative_to(ROOT) else str(path)


def app_dtype(extra_env: dict[str, str] | None = None) -> str:
    """The dtype (as --dtype names it) that `python -m app`, started here with this process's
    environment plus extra_env, runs its model in: what a benchmark that starts the app records
    (the CPU default differs between processors: docs/performance.md)."""
    import dataclasses

    from magnet_model.loading import resolve_device, resolve_dtype

    spec, env = model_spec(), extra_env or {}
    spec = dataclasses.replace(
        spec,
        dtype=env.get("MAGNET_DTYPE") or spec.dtype,
        device=env.get("MAGNET_DEVICE") or spec.device,
    )
    return resolve_dtype(spec, resolve_device(spec)[0].type)


def model_spec(adapters: dict[str, str] | None = None):
    """The model the MAGNET_* settings name (base, device, dtype, threads, decoding), with these
    adapters (None: the settings' own): what a benchmark that builds its own engine loads, so
    that `MAGNET_DTYPE=float32` reaches it as it reaches the app and the evaluator. A bad
    setting stops the benchmark with its one sentence, not a traceback."""
    import dataclasses

    from magnet_model.errors import ConfigError
    from magnet_model.settings import ModelSpec

    try:
        spec = ModelSpec.from_env()
    except ConfigError as e:
        raise SystemExit(f"error: {e}") from None
    return spec if adapters is None else dataclasses.replace(spec, adapters=dict(adapters))


def write_report(name: str, rows: list[Row], extra: dict | None = None, device=None, dtype=None):
    """Print the table and write the report (result_path(name)): hardware and the dtype the
    model ran in, the command and the environment settings it depends on, time, rows."""
    from magnet_model.hardware import describe

    out = result_path(name)
    report = {
        "benchmark": out.stem,
        "command": "python " + " ".join(shlex.quote(a) for a in sys.argv),
        "environment": {k: os.environ[k] for k in RECORDED_ENV if k in os.environ},
        "finished": time.strftime("%Y-%m-%d %H:%M:%S %Z"),
        "hardware": describe(device, dtype),
        "rows": [r.as_dict() for r in rows],
        **(extra or {}),
    }
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(json.dumps(report, indent=2) + "\n")
    print(table(rows))
    print(f"wrote {shown(out)}")
    return report
