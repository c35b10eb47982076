"""What raters would meet in a Paper-protocol study: per system, how many of its 100 fills are
one complete sentence, repeat a 3-gram of words, and are flagged by the output checks.

Make the study first (the app's own generation, sampled as studies are), then read it:

    python -m app.study_cli --preset paper --name paper-x --db-path /tmp/paper.sqlite3 \\
        --adapters magnet=adapters/magnet
    python bench/paper_protocol_fills.py --db-path /tmp/paper.sqlite3 --study paper-x \\
        --out bench/results/paper_protocol_x.json [--dump /tmp/paper-x.jsonl]

Prints a table (shares with 95% Wilson intervals) and writes it as JSON; ``--dump`` writes
every regular item's fill per system (passage left and right of the blank, the removed
sentence, the fill) as JSON lines, for reading and labelling.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from annotation_db import AnnotationStore  # noqa: E402
from annotation_db.errors import AnnotationError  # noqa: E402
from annotation_db.stats import wilson_interval  # noqa: E402
from magnet_model.evaluation.fills import is_one_sentence, repeats_ngram  # noqa: E402

MARKER = "[blank]"


def _share(k: int, n: int) -> dict:
    ci = wilson_interval(k, n)
    return {"k": k, "n": n, "share": k / n if n else None, "low": ci.low, "high": ci.high}


def measure(store: AnnotationStore, study: str) -> tuple[dict, list[dict]]:
    items, outputs = store.items(study)
    regular = {it.key: it for it in items if not it.is_gold}
    counts = {c.system: c for c in store.fill_counts(study)}
    per: dict[str, dict] = {}
    rows: list[dict] = []
    for o in outputs:
        it = regular.get(o.item_key)
        if it is None or not o.fills:
            continue
        fill = " ".join(o.fills)
        left, _, right = it.text.partition(MARKER)
        original = it.original if isinstance(it.original, str) else " ".join(it.original or [])
        rows.append(
            {
                "id": f"{study}:{o.item_key}:{o.system}",
                "system": o.system,
                "left": left.strip(),
                "right": right.strip(),
                "original": original,
                "fill": fill,
            }  # fmt: skip
        )
        s = per.setdefault(o.system, {"n": 0, "one_sentence": 0, "repeated_3gram": 0})
        s["n"] += 1
        s["one_sentence"] += is_one_sentence(fill)
        s["repeated_3gram"] += repeats_ngram(fill, 3)
    out = {}
    for system, s in sorted(per.items()):
        c = counts.get(system)
        out[system] = {
            "fills": s["n"],
            "one_complete_sentence": _share(s["one_sentence"], s["n"]),
            "repeated_3gram": _share(s["repeated_3gram"], s["n"]),
            "flagged": _share(c.n_flagged, c.n_outputs) if c else None,
            "flagged_by_problem": dict(c.counts) if c else {},
        }
    return out, rows


def _pct(d: dict | None) -> str:
    if not d or d["share"] is None:
        return "-"
    return f"{d['k']}/{d['n']} ({d['share']:.0%}, {d['low']:.0%}-{d['high']:.0%})"


def main(argv: list[str] | None = None) -> int:
    command = " ".join(["python bench/paper_protocol_fills.py", *(argv or sys.argv[1:])])
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--db-path", required=True)
    ap.add_argument("--study", required=True)
    ap.add_argument("--out", help="JSON file for the table")
    ap.add_argument("--dump", help="JSON lines of every fill, for reading")
    args = ap.parse_args(argv)
    if not Path(args.db_path).is_file():  # the store would make an empty database there
        print(f"error: {args.db_path} does not exist: make the study first", file=sys.stderr)
        return 2
    try:
        with AnnotationStore(path=args.db_path) as store:
            res, rows = measure(store, args.study)
    except AnnotationError as e:  # no such study (or not finished being made)
        print(f"error: {e} in {args.db_path}", file=sys.stderr)
        return 2
    print(f"Study {args.study}: fills of the regular items, per system")
    print("| system | fills | one complete sentence | repeated word 3-gram | flagged | problems |")
    print("|---|---|---|---|---|---|")
    for system, r in res.items():
        print(
            f"| {system} | {r['fills']} | {_pct(r['one_complete_sentence'])} | "
            f"{_pct(r['repeated_3gram'])} | {_pct(r['flagged'])} | {r['flagged_by_problem']} |"
        )
    if args.out:
        Path(args.out).write_text(
            json.dumps({"command": command, "study": args.study, "systems": res}, indent=1) + "\n",
            encoding="utf-8",
        )
    if args.dump:
        with open(args.dump, "w", encoding="utf-8") as f:
            for r in rows:
                f.write(json.dumps(r, ensure_ascii=False) + "\n")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
