"""Do the study statistics hold up? Many simulated studies through the real store.

Each study (``annotation_db.simulate``): systems with known true rates, outputs whose own
yes-probability varies around them (intra-output correlation ``icc``), attentive raters with
some noise, a share of inattentive raters answering at random, attention checks, the real
assignment (``next_item``) and submission (``submit``), then ``results``. Reported:

- coverage of the 95% interval of each system's rate: the reported one (Wilson at the
  effective sample size, an output's raters as one cluster) and plain Wilson over all
  judgments as if independent;
- how often Bradley-Terry orders the systems correctly (large gaps);
- Krippendorff's alpha as rater noise rises;
- attention-check exclusion: precision and recall for finding the inattentive raters.

    python bench/bench_study_simulation.py [--studies 60] [--quick]

Writes bench/results/study_simulation.json and bench/results/study_simulation.md (the table).
"""

from __future__ import annotations

import argparse
import json
import math
import platform
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from scipy.stats import binomtest  # noqa: E402

from annotation_db import AnnotationStore  # noqa: E402
from annotation_db.simulate import SimConfig, simulate_study  # noqa: E402

RESULTS = Path(__file__).resolve().parent / "results"
PAPER = SimConfig(
    rates={"magnet": 0.62, "five-shot": 0.54, "zero-shot": 0.2},
    n_items=30,
    raters_per_item=3,
    icc=0.3,
    noise=0.1,
    inattentive_share=0.2,
    n_gold=4,
    items_per_rater=12,
    questions=("appropriate",),  # the paper preset asks only this
)
# Raters who stay for the whole study meet every attention check (4 of them).
ALL_CHECKS = SimConfig(
    rates=PAPER.rates,
    n_items=PAPER.n_items,
    icc=PAPER.icc,
    noise=PAPER.noise,
    inattentive_share=PAPER.inattentive_share,
    n_gold=PAPER.n_gold,
    items_per_rater=PAPER.n_items + PAPER.n_gold,
    questions=PAPER.questions,
)
LARGE_GAP = SimConfig(  # with the best-of-three question, which Bradley-Terry needs
    rates={"strong": 0.95, "middle": 0.5, "weak": 0.05},
    n_items=24,
    inattentive_share=0.2,
    questions=("appropriate", "preference"),
)


def _share(k: int, n: int) -> dict:
    ci = binomtest(k, n).proportion_ci(method="wilson") if n else None
    return {
        "k": k,
        "n": n,
        "share": k / n if n else math.nan,
        "low": ci.low if ci else math.nan,
        "high": ci.high if ci else math.nan,
    }


def _exclusion(runs: list) -> dict:
    tp = sum(len(r.excluded & r.inattentive) for r in runs)
    fp = sum(len(r.excluded - r.inattentive) for r in runs)
    fn = sum(len(r.inattentive - r.excluded) for r in runs)
    n_raters = sum(len(r.results.attention) for r in runs)
    checks = [a.gold_done for r in runs for a in r.results.attention]
    return {
        "raters": n_raters,
        "inattentive": tp + fn,
        "mean_checks_per_rater": sum(checks) / max(len(checks), 1),
        "precision": _share(tp, tp + fp),
        "recall": _share(tp, tp + fn),
        "attentive_excluded": _share(fp, n_raters - tp - fn),
    }


def run(n_studies: int, n_gap: int, n_alpha: int) -> dict:
    folder = Path(tempfile.mkdtemp(prefix="magnet-sim-"))
    store = AnnotationStore(path=folder / "sim.sqlite3")
    t0 = time.perf_counter()
    out: dict = {}
    with store:
        runs = [simulate_study(store, f"paper-{i}", PAPER, seed=i) for i in range(n_studies)]
        cover, naive = {}, {}
        for s in PAPER.rates:
            cover[s] = _share(sum(r.covered(s) for r in runs), len(runs))
            naive[s] = _share(sum(r.covered_naive(s) for r in runs), len(runs))
        deff = {
            s: sum(
                next(x for x in r.results.systems if x.system == s).appropriate.design_effect
                for r in runs
            )
            / len(runs)
            for s in PAPER.rates
        }
        out["paper"] = {
            "config": _config(PAPER),
            "studies": n_studies,
            "coverage_reported": cover,
            "coverage_independent_wilson": naive,
            "mean_design_effect": deff,
            "exclusion": _exclusion(runs),
        }
        full = [
            simulate_study(store, f"checks-{i}", ALL_CHECKS, seed=3000 + i) for i in range(n_gap)
        ]
        out["all_checks"] = {
            "config": _config(ALL_CHECKS),
            "studies": n_gap,
            "exclusion": _exclusion(full),
        }
        gap = [simulate_study(store, f"gap-{i}", LARGE_GAP, seed=1000 + i) for i in range(n_gap)]
        out["large_gap"] = {
            "config": _config(LARGE_GAP),
            "studies": n_gap,
            "bt_order_correct": _share(sum(r.bt_order_correct() for r in gap), n_gap),
        }
        alpha = {}
        for noise in (0.0, 0.2, 0.4, 0.7):
            cfg = SimConfig(
                rates=PAPER.rates,
                n_items=24,
                icc=PAPER.icc,
                noise=noise,
                inattentive_share=0.0,
                exclude_failing_share=None,
                questions=("appropriate",),
            )
            vals = [
                simulate_study(store, f"alpha-{noise}-{i}", cfg, seed=2000 + i).alpha()
                for i in range(n_alpha)
            ]
            alpha[str(noise)] = sum(vals) / len(vals)
        out["alpha_by_noise"] = {"studies_per_noise": n_alpha, "mean_alpha": alpha}
    out["seconds"] = round(time.perf_counter() - t0, 1)
    return out


def _config(c: SimConfig) -> dict:
    return {k: v for k, v in c.__dict__.items()}


def _pct(d: dict) -> str:
    return f"{d['share']:.1%} [{d['low']:.1%}, {d['high']:.1%}] ({d['k']}/{d['n']})"


def markdown(res: dict, command: str) -> str:
    p = res["paper"]
    lines = [
        "# Study statistics by simulation",
        "",
        f"Command: `{command}` ({res['seconds']} s; {res['hardware']}).",
        "",
        f"Paper-like studies ({p['studies']}): rates {p['config']['rates']}, "
        f"{p['config']['n_items']} items x {p['config']['raters_per_item']} raters, "
        f"intra-output correlation {p['config']['icc']}, rater noise {p['config']['noise']}, "
        f"{p['config']['inattentive_share']:.0%} inattentive raters, "
        f"{p['config']['n_gold']} attention checks, raters failing more than "
        f"{p['config']['exclude_failing_share']:.0%} of them excluded; questions "
        f"{', '.join(p['config']['questions'])}. The true rate is what "
        "an attentive rater says yes to: (1 - noise) theta + noise / 2.",
        "",
        "Coverage of the 95% interval of each system's rate (share of studies whose interval "
        "holds the true rate; in brackets its own 95% Wilson interval):",
        "",
        "| system | true rate | reported (Wilson at effective n) | Wilson, judgments as "
        "independent | mean design effect |",
        "|---|---|---|---|---|",
    ]
    noise = p["config"]["noise"]
    for s, theta in p["config"]["rates"].items():
        lines.append(
            f"| {s} | {(1 - noise) * theta + noise / 2:.3f} | {_pct(p['coverage_reported'][s])}"
            f" | {_pct(p['coverage_independent_wilson'][s])}"
            f" | {p['mean_design_effect'][s]:.2f} |"
        )
    g = res["large_gap"]
    lines += [
        "",
        "Attention checks (precision: excluded raters who were inattentive; recall: "
        "inattentive raters excluded):",
        "",
        "| raters | checks met per rater (mean) | precision | recall | attentive raters excluded |",
        "|---|---|---|---|---|",
    ]
    for what, e in (
        (f"paper-like, {p['config']['items_per_rater']} items per rater", p["exclusion"]),
        ("staying for the whole study", res["all_checks"]["exclusion"]),
    ):
        lines.append(
            f"| {what} | {e['mean_checks_per_rater']:.1f} | {_pct(e['precision'])} | "
            f"{_pct(e['recall'])} | {_pct(e['attentive_excluded'])} |"
        )
    lines += [
        "",
        "| measure | value |",
        "|---|---|",
        f"| Bradley-Terry order correct, rates {g['config']['rates']} ({g['studies']} studies)"
        f" | {_pct(g['bt_order_correct'])} |",
    ]
    for noise, a in res["alpha_by_noise"]["mean_alpha"].items():
        lines.append(
            f"| Krippendorff's alpha (appropriate), rater noise {noise} "
            f"(mean of {res['alpha_by_noise']['studies_per_noise']} studies) | {a:.3f} |"
        )
    return "\n".join(lines) + "\n"


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--studies", type=int, default=60, help="paper-like studies")
    ap.add_argument("--quick", action="store_true", help="a few studies (smoke test)")
    args = ap.parse_args(argv)
    n = 4 if args.quick else args.studies
    res = run(n, 3 if args.quick else max(10, n // 3), 2 if args.quick else 5)
    res["hardware"] = (
        f"{platform.processor() or platform.machine()}, python {platform.python_version()}"
    )
    command = "python bench/bench_study_simulation.py" + (
        " --quick" if args.quick else f" --studies {n}"
    )
    res["command"] = command
    name = "study_simulation" + ("_quick" if args.quick else "")
    RESULTS.mkdir(exist_ok=True)
    (RESULTS / f"{name}.json").write_text(json.dumps(res, indent=2) + "\n")
    md = markdown(res, command)
    if not args.quick:
        (RESULTS / f"{name}.md").write_text(md)
    print(md)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
