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
- attention-check exclusion (the likelihood-ratio rule of ``annotation_db.attention``, its
  checks per rater sized by ``plan_checks`` at the study's 12 items per rater): recall (the
  inattentive raters excluded), attentive raters excluded, undecided raters, and the coverage
  with every rater counted (no exclusion) beside the reported one;
- the rule against every rater strategy (``annotation_db.simulate.STRATEGIES``) at the Paper
  protocol's size (100 items x 3 raters, 10 checks in the study): the share of each strategy's
  raters excluded and kept, the recall over the careless ones together (``simulate.UNREAD``:
  "always the shortest" and "always the longest" output among them), attentive raters
  excluded, and for the skimmers the share of their regular items answered without reading.

Each share comes with its 95% Wilson interval; the default size (300 paper-like studies) makes
each paper-like figure's interval narrower than +/-3 points (coverage near 95% over 300
studies; recall and exclusion over thousands of raters). The secondary sets (2 checks per
rater, Bradley-Terry, alpha) run n/15 studies and show their wider intervals. Studies run in
parallel processes (``--workers``, the machine's cores by default), each study in a SQLite file
of its own, so that the figures do not depend on the number of workers.

    python bench/bench_study_simulation.py [--studies 300] [--strategy-studies 60] [--workers N]
        [--quick]

Writes bench/results/study_simulation.json and bench/results/study_simulation.md (the table),
and rewrites the figures between the markers in docs/human-study.md (a full run only): the
docs' numbers are this command's.
"""

from __future__ import annotations

import argparse
import json
import math
import os
import platform
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from scipy.stats import binomtest  # noqa: E402

from annotation_db import AnnotationStore  # noqa: E402
from annotation_db.attention import plan_checks, rule_for  # noqa: E402
from annotation_db.questions import parse_questions  # noqa: E402
from annotation_db.simulate import (  # noqa: E402
    STRATEGIES,
    UNREAD,
    SimConfig,
    SimOutcome,
    simulate_study,
)

RESULTS = Path(__file__).resolve().parent / "results"
DOCS = Path(__file__).resolve().parents[1] / "docs" / "human-study.md"
BEGIN, END = "<!-- study-simulation:begin -->", "<!-- study-simulation:end -->"
PAPER = SimConfig(
    rates={"magnet": 0.62, "five-shot": 0.54, "zero-shot": 0.2},
    n_items=30,
    raters_per_item=3,
    icc=0.3,
    noise=0.1,
    inattentive_share=0.2,
    n_gold=10,  # as the Paper protocol: more checks than a rater meets, so raters differ
    items_per_rater=20,  # as the Paper protocol (app/studies.py)
    questions=("appropriate",),  # the paper preset asks only this
)
# Every rater strategy at the Paper protocol's size: 100 items x 3 raters, 10 checks; half the
# raters play one of the strategies (each drawn equally often), so that each is met often.
STRATEGY_MIX = SimConfig(
    **{
        **PAPER.__dict__,
        "n_items": 100,
        "inattentive_share": 0.5,
        "strategies": tuple(STRATEGIES),
    }
)
# What fewer checks cost: the same studies with 2 checks per rater.
FEW_CHECKS = SimConfig(**{**PAPER.__dict__, "checks_per_rater": 2})
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
    undecided = sum(len(r.undecided) for r in runs)
    checks = [a.gold_done for r in runs for a in r.results.attention]
    return {
        "raters": n_raters,
        "inattentive": tp + fn,
        "mean_checks_per_rater": sum(checks) / max(len(checks), 1),
        "precision": _share(tp, tp + fp),
        "recall": _share(tp, tp + fn),
        "attentive_excluded": _share(fp, n_raters - tp - fn),
        "undecided": _share(undecided, n_raters),
    }


def _strategies(runs: list[SimOutcome]) -> dict:
    """Per strategy: raters, share excluded and undecided; over the careless strategies
    together: recall; attentive raters excluded; the skimmers' unread share of regular items."""
    out: dict = {}
    for strategy in ("attentive", *STRATEGIES):
        ids = [(r, rid) for r in runs for rid, s in r.strategy_of.items() if s == strategy]
        kept = sum(rid not in r.excluded and rid not in r.undecided for r, rid in ids)
        row = {
            "raters": len(ids),
            "excluded": _share(sum(rid in r.excluded for r, rid in ids), len(ids)),
            "kept": _share(kept, len(ids)),
            "undecided": _share(sum(rid in r.undecided for r, rid in ids), len(ids)),
            "what": STRATEGIES.get(strategy, "reads everything, slips now and then"),
        }
        skim = [r.skimmed[rid] for r, rid in ids if rid in r.skimmed]
        if skim:
            row["unread"] = _share(sum(k for k, _ in skim), sum(n for _, n in skim))
        out[strategy] = row
    careless = [(r, rid) for r in runs for rid, s in r.strategy_of.items() if s in UNREAD]
    out["careless_mix"] = {
        "raters": len(careless),
        "excluded": _share(sum(rid in r.excluded for r, rid in careless), len(careless)),
    }
    return out


def _one(job: tuple[str, SimConfig, int, str]) -> SimOutcome:
    """One simulated study in a SQLite file of its own (in a process of the pool): its raters'
    ids, which their item order depends on, then do not depend on which studies the same
    process ran before, so a run gives the same figures whatever --workers."""
    name, config, seed, folder = job
    path = Path(folder) / f"{name}.sqlite3"
    with AnnotationStore(path=path) as store:
        outcome = simulate_study(store, name, config, seed=seed)
    for leftover in Path(folder).glob(f"{name}.sqlite3*"):
        leftover.unlink()
    return outcome


def _coverage(runs: list[SimOutcome], systems) -> dict:  # noqa: ANN001 - names
    return {
        "coverage_reported": {
            s: _share(sum(r.covered(s) for r in runs), len(runs)) for s in systems
        },
        "coverage_every_rater": {
            s: _share(sum(r.covered_every_rater(s) for r in runs), len(runs)) for s in systems
        },
        "coverage_independent_wilson": {
            s: _share(sum(r.covered_naive(s) for r in runs), len(runs)) for s in systems
        },
    }


def run(n_studies: int, n_gap: int, n_alpha: int, workers: int = 1, n_strategy: int = 0) -> dict:
    folder = tempfile.mkdtemp(prefix="magnet-sim-")
    t0 = time.perf_counter()
    jobs = [(f"paper-{i}", PAPER, i, folder) for i in range(n_studies)]
    jobs += [(f"strat-{i}", STRATEGY_MIX, 4000 + i, folder) for i in range(n_strategy)]
    jobs += [(f"few-{i}", FEW_CHECKS, 3000 + i, folder) for i in range(n_gap)]
    jobs += [(f"gap-{i}", LARGE_GAP, 1000 + i, folder) for i in range(n_gap)]
    noises = (0.0, 0.2, 0.4, 0.7)
    for noise in noises:
        cfg = SimConfig(
            rates=PAPER.rates,
            n_items=24,
            icc=PAPER.icc,
            noise=noise,
            inattentive_share=0.0,
            exclude=False,
            questions=("appropriate",),
        )
        jobs += [(f"alpha-{noise}-{i}", cfg, 2000 + i, folder) for i in range(n_alpha)]
    if workers > 1:
        import multiprocessing

        with multiprocessing.get_context("fork").Pool(workers) as pool:
            done = pool.map(_one, jobs, chunksize=1)
    else:
        done = [_one(j) for j in jobs]
    by = {j[0]: r for j, r in zip(jobs, done, strict=True)}
    runs = [by[f"paper-{i}"] for i in range(n_studies)]
    deff = {s: sum(r._interval(s).design_effect for r in runs) / len(runs) for s in PAPER.rates}
    rule = rule_for(
        parse_questions(list(PAPER.questions)),
        len(PAPER.rates),
        slip=PAPER.slip,
        against="careless",
    )
    plan = plan_checks(PAPER.items_per_rater, rule)
    out: dict = {
        "paper": {
            "config": _config(PAPER),
            "studies": n_studies,
            **_coverage(runs, PAPER.rates),
            "mean_design_effect": deff,
            "exclusion": _exclusion(runs),
            "rule": {**rule.to_dict(), "summary": plan.summary()},
            "checks_per_rater": plan.checks_per_rater,
        }
    }
    strat = [by[f"strat-{i}"] for i in range(n_strategy)]
    if strat:
        s_rule = rule_for(
            parse_questions(list(STRATEGY_MIX.questions)),
            len(STRATEGY_MIX.rates),
            slip=STRATEGY_MIX.slip,
            against="careless",
        )
        out["strategies"] = {
            "config": _config(STRATEGY_MIX),
            "studies": n_strategy,
            "checks_per_rater": plan_checks(STRATEGY_MIX.items_per_rater, s_rule).checks_per_rater,
            "per_strategy": _strategies(strat),
        }
    few = [by[f"few-{i}"] for i in range(n_gap)]
    out["few_checks"] = {
        "config": _config(FEW_CHECKS),
        "studies": n_gap,
        **_coverage(few, PAPER.rates),
        "exclusion": _exclusion(few),
    }
    gap = [by[f"gap-{i}"] for i in range(n_gap)]
    out["large_gap"] = {
        "config": _config(LARGE_GAP),
        "studies": n_gap,
        "bt_order_correct": _share(sum(r.bt_order_correct() for r in gap), n_gap),
    }
    alpha = {}
    for noise in noises:
        vals = [by[f"alpha-{noise}-{i}"].alpha() for i in range(n_alpha)]
        alpha[str(noise)] = sum(vals) / len(vals)
    out["alpha_by_noise"] = {"studies_per_noise": n_alpha, "mean_alpha": alpha}
    out["seconds"] = round(time.perf_counter() - t0, 1)
    out["workers"] = workers
    return out


def _config(c: SimConfig) -> dict:
    return {k: v for k, v in c.__dict__.items()}


def _pct(d: dict) -> str:
    return f"{d['share']:.1%} [{d['low']:.1%}, {d['high']:.1%}] ({d['k']}/{d['n']})"


def markdown(res: dict, command: str) -> str:
    p = res["paper"]
    c = p["config"]
    lines = [
        "# Study statistics by simulation",
        "",
        f"Command: `{command}` ({res['seconds']} s with {res['workers']} worker process(es); "
        f"{res['hardware']}).",
        "",
        f"Paper-like studies ({p['studies']}): rates {c['rates']}, {c['n_items']} items x "
        f"{c['raters_per_item']} raters, intra-output correlation {c['icc']}, rater noise "
        f"{c['noise']}, {c['inattentive_share']:.0%} inattentive raters (answering at random), "
        f"each rater doing {c['items_per_rater']} items; {c['n_gold']} attention checks in the "
        f"study, {p['checks_per_rater']} per rater (sized by the planner); questions "
        f"{', '.join(c['questions'])}. The true rate is what an attentive rater says yes to: "
        "(1 - noise) theta + noise / 2.",
        "",
        f"The rule: {p['rule']['summary']}",
        "",
        "Coverage of the 95% interval of each system's rate (share of studies whose interval "
        "holds the true rate; in brackets its own 95% Wilson interval):",
        "",
        "| system | true rate | reported (rule applied) | every rater counted | Wilson, "
        "judgments as independent | mean design effect |",
        "|---|---|---|---|---|---|",
    ]
    for s, theta in c["rates"].items():
        lines.append(
            f"| {s} | {(1 - c['noise']) * theta + c['noise'] / 2:.3f} | "
            f"{_pct(p['coverage_reported'][s])} | {_pct(p['coverage_every_rater'][s])} | "
            f"{_pct(p['coverage_independent_wilson'][s])} | {p['mean_design_effect'][s]:.2f} |"
        )
    f = res["few_checks"]
    lines += [
        "",
        "Attention checks (recall: inattentive raters excluded; precision: excluded raters who "
        "were inattentive; undecided: too few checks to tell, kept):",
        "",
        "| raters | checks met per rater (mean) | recall | attentive raters excluded | "
        "precision | undecided |",
        "|---|---|---|---|---|---|",
    ]
    for what, e in (
        (f"{c['items_per_rater']} items per rater, {p['checks_per_rater']} checks", p["exclusion"]),
        (
            f"the same with {f['config']['checks_per_rater']} checks ({f['studies']} studies)",
            f["exclusion"],
        ),
    ):
        lines.append(
            f"| {what} | {e['mean_checks_per_rater']:.1f} | {_pct(e['recall'])} | "
            f"{_pct(e['attentive_excluded'])} | {_pct(e['precision'])} | "
            f"{_pct(e['undecided'])} |"
        )
    lines += [
        "",
        f"With {f['config']['checks_per_rater']} checks per rater the reported coverage is "
        + ", ".join(f"{s} {_pct(v)}" for s, v in f["coverage_reported"].items())
        + ".",
    ]
    if "strategies" in res:
        lines += ["", *strategy_table(res["strategies"])]
    g = res["large_gap"]
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


def strategy_table(st: dict) -> list[str]:
    """The per-strategy exclusion table (markdown lines)."""
    c, per = st["config"], st["per_strategy"]
    lines = [
        f"Every rater strategy at the Paper protocol's size ({st['studies']} studies of "
        f"{c['n_items']} items x {c['raters_per_item']} raters, {c['n_gold']} checks in the "
        f"study, {c['items_per_rater']} items and at least {st['checks_per_rater']} checks per "
        f"rater; {c['inattentive_share']:.0%} of raters play a strategy, each equally often; "
        f"questions {', '.join(c['questions'])}):",
        "",
        "| raters | what they do | raters | excluded | kept | undecided | regular items unread |",
        "|---|---|---|---|---|---|---|",
    ]
    for name, row in per.items():
        if name == "careless_mix":
            continue
        unread = _pct(row["unread"]) if "unread" in row else "-"
        lines.append(
            f"| {name} | {row['what']} | {row['raters']} | {_pct(row['excluded'])} | "
            f"{_pct(row['kept'])} | {_pct(row['undecided'])} | {unread} |"
        )
    mix = per["careless_mix"]
    lines += [
        f"| careless, all together ({', '.join(UNREAD)}) | | {mix['raters']} | "
        f"{_pct(mix['excluded'])} | | | |",
    ]
    return lines


def _short(d: dict) -> str:
    return f"{d['share']:.1%} [{d['low']:.1%}, {d['high']:.1%}]"


def docs_block(res: dict, command: str) -> str:
    """The paragraph of docs/human-study.md that quotes this run (between the markers)."""
    p, f = res["paper"], res["few_checks"]
    c, e, fe = p["config"], p["exclusion"], f["exclusion"]
    cover = ", ".join(f"{s} {_short(v)}" for s, v in p["coverage_reported"].items())
    every = ", ".join(f"{s} {_short(v)}" for s, v in p["coverage_every_rater"].items())
    naive = ", ".join(f"{s} {_short(v)}" for s, v in p["coverage_independent_wilson"].items())
    return (
        f"{BEGIN}\n"
        f"`{command}` ({res['seconds']:.0f} s with {res['workers']} worker processes; "
        f"{res['hardware']}) ran {p['studies']} paper-like studies ({c['n_items']} items x "
        f"{c['raters_per_item']} raters, {c['inattentive_share']:.0%} of raters answering at "
        f"random, each rater doing {c['items_per_rater']} items, {p['checks_per_rater']} of "
        f"them checks as the planner sizes them; in brackets each figure's 95% interval). "
        f"The rule excluded {_short(e['recall'])} of the inattentive raters and "
        f"{_short(e['attentive_excluded'])} of the attentive ones; "
        f"{_short(e['undecided'])} of raters were undecided (too few checks: the last raters "
        f"of a study, who found fewer items). The reported 95% intervals covered the true "
        f"rates in {cover} of studies (every rater counted: {every}; plain Wilson over all "
        f"judgments as if independent: {naive}). With {f['config']['checks_per_rater']} checks "
        f"per rater instead ({f['studies']} studies) the rule caught {_short(fe['recall'])} "
        f"and left {_short(fe['undecided'])} of raters undecided. Bradley-Terry (with the "
        f"best-of-three question) ordered three well-separated systems correctly in "
        f"{_short(res['large_gap']['bt_order_correct'])} of studies. "
        + _strategy_sentence(res)
        + "The whole table is "
        "[bench/results/study_simulation.md](../bench/results/study_simulation.md).\n"
        f"{END}"
    )


def _strategy_sentence(res: dict) -> str:
    st = res.get("strategies")
    if not st:
        return ""
    per = st["per_strategy"]
    each = ", ".join(
        f"{name} {_short(per[name]['excluded'])}" for name in UNREAD if per[name]["raters"]
    )
    kept = ", ".join(
        f"{name} {_short(per[name]['kept'])}"
        for name in ("first", "longest", "shortest")
        if per[name]["raters"]
    )
    skim = "; ".join(
        f"{name}: {_short(per[name]['excluded'])} excluded, "
        f"{_short(per[name]['unread'])} of their regular items unread"
        for name in ("position", "gamble")
        if per[name]["raters"] and "unread" in per[name]
    )
    return (
        f"Against every rater strategy at the Paper protocol's size ({st['studies']} studies of "
        f"{st['config']['n_items']} items) the rule excluded "
        f"{_short(per['careless_mix']['excluded'])} of the careless raters together ({each}) and "
        f"{_short(per['attentive']['excluded'])} of the attentive ones, and kept, decided as "
        f"attentive, {kept} of those who always took the first, the longest or the shortest "
        f"output; skimmers who read "
        f"wherever a check may stand ({skim}). "
    )


def write_docs(res: dict, command: str, path: Path = DOCS) -> bool:
    """Replace the block between the markers in ``path``; False when it has none."""
    text = path.read_text(encoding="utf-8")
    if BEGIN not in text or END not in text:
        return False
    head, rest = text.split(BEGIN, 1)
    _, tail = rest.split(END, 1)
    path.write_text(head + docs_block(res, command) + tail, encoding="utf-8")
    return True


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--studies", type=int, default=300, help="paper-like studies")
    ap.add_argument(
        "--workers", type=int, default=os.cpu_count() or 1, help="processes running studies"
    )
    ap.add_argument(
        "--strategy-studies",
        type=int,
        default=60,
        help="Paper-protocol-sized studies with every rater strategy",
    )
    ap.add_argument("--quick", action="store_true", help="a few studies (smoke test)")
    args = ap.parse_args(argv)
    n = 4 if args.quick else args.studies
    n_strategy = 2 if args.quick else args.strategy_studies
    res = run(
        n,
        3 if args.quick else max(10, n // 15),
        2 if args.quick else 5,
        max(1, args.workers),
        n_strategy,
    )
    res["hardware"] = (
        f"{platform.processor() or platform.machine()}, python {platform.python_version()}"
    )
    command = "python bench/bench_study_simulation.py" + (
        " --quick"
        if args.quick
        else f" --studies {n} --strategy-studies {n_strategy} --workers {max(1, args.workers)}"
    )
    res["command"] = command
    name = "study_simulation" + ("_quick" if args.quick else "")
    RESULTS.mkdir(exist_ok=True)
    (RESULTS / f"{name}.json").write_text(json.dumps(res, indent=2) + "\n")
    md = markdown(res, command)
    if not args.quick:
        (RESULTS / f"{name}.md").write_text(md)
        if not write_docs(res, command):
            print(f"note: {DOCS} has no {BEGIN} block; its figures were not updated")
    print(md)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
