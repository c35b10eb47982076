"""``python -m annotation_db``: run a study without the app (backup, export, import, results).

The database comes from ``--db-url URL`` or ``--db-path FILE``, else ``MAGNET_DB_URL`` /
``MAGNET_DB_PATH`` (see settings). Errors print one line and exit with status 2.
"""

from __future__ import annotations

import argparse
import json
import sys
from collections.abc import Sequence

from .attention import DEFAULT_SLIP, planned_settings
from .errors import AnnotationError
from .io import FORMATS, read_items, read_outputs, write_items
from .planner import DEFAULT_ICC, DEFAULT_RATES, plan_study, power_at
from .questions import appropriate
from .schema import STUDY_STATUSES
from .settings import DBSettings
from .store import AnnotationStore


def build_parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="python -m annotation_db", description=__doc__)
    p.add_argument("--db-url", help="SQLAlchemy URL (default: MAGNET_DB_URL)")
    p.add_argument("--db", dest="db_url", help=argparse.SUPPRESS)  # the old spelling
    p.add_argument("--db-path", help="SQLite file (default: MAGNET_DB_PATH)")
    sub = p.add_subparsers(dest="cmd", required=True)

    b = sub.add_parser("backup", help="copy the live SQLite database (online backup API)")
    b.add_argument("dest")
    b.add_argument("--overwrite", action="store_true")

    e = sub.add_parser("export", help="write every rating of a study")
    e.add_argument("--study", required=True)
    e.add_argument("--format", choices=FORMATS, default="jsonl")
    e.add_argument("out", help="file (csv, jsonl) or folder (datasets)")

    x = sub.add_parser("export-items", help="write a study's items and outputs (.jsonl/.csv)")
    x.add_argument("--study", required=True)
    x.add_argument("items_out")
    x.add_argument("outputs_out")

    c = sub.add_parser("create-study", help="create a study from items and outputs files")
    c.add_argument("--name", required=True)
    c.add_argument("--items", required=True, help=".jsonl or .csv")
    c.add_argument("--outputs", required=True, help=".jsonl or .csv")
    c.add_argument(
        "--questions",
        default="appropriate",
        help="comma-separated: appropriate, likert:NAME, preference, comment",
    )
    c.add_argument("--raters-per-item", type=int, default=3)
    c.add_argument("--instructions", help="Markdown file shown to raters")

    i = sub.add_parser("invite", help="create raters and print their tokens")
    i.add_argument("--study", required=True)
    i.add_argument("names", nargs="+")

    st = sub.add_parser("status", help="close, reopen or draft a study")
    st.add_argument("--study", required=True)
    st.add_argument("status", choices=STUDY_STATUSES)

    r = sub.add_parser("revoke", help="make a rater's invite token stop working")
    r.add_argument("--study", required=True)
    r.add_argument("rater_id", type=int, help="the rater's id (see `progress`)")

    nl = sub.add_parser("new-link", help="a new token for a rater; the old one stops working")
    nl.add_argument("--study", required=True)
    nl.add_argument("rater_id", type=int, help="the rater's id (see `progress`)")

    for name, help_ in (("progress", "progress per rater"), ("results", "results as JSON")):
        x = sub.add_parser(name, help=help_)
        x.add_argument("--study", required=True)
    _exclusion_args(sub.choices["results"])
    sub.add_parser("studies", help="list studies")

    pl = sub.add_parser("plan", help="items needed to tell two rates apart (80%% power)")
    pl.add_argument("--p1", type=float, default=DEFAULT_RATES[0])
    pl.add_argument("--p2", type=float, default=DEFAULT_RATES[1])
    pl.add_argument("--raters-per-item", type=int, default=3)
    pl.add_argument("--icc", type=float, default=DEFAULT_ICC, help="intra-item correlation")
    pl.add_argument("--alpha", type=float, default=0.05)
    pl.add_argument("--power", type=float, default=0.8)
    pl.add_argument("--items", type=int, nargs="*", default=[], help="also: power at N items")
    pl.add_argument(
        "--items-per-rater", type=int, help="also: attention checks each rater needs among N items"
    )
    pl.add_argument("--outputs", type=int, default=3, help="outputs an item shows (checks too)")
    pl.add_argument("--slip-rate", type=float, default=DEFAULT_SLIP,
                    help="share of checks an attentive rater fails")  # fmt: skip

    r = sub.add_parser("report", help="write a self-contained HTML report of a study")
    r.add_argument("study")
    r.add_argument("--out", required=True, help="HTML file to write")
    _exclusion_args(r)
    return p


def _exclusion_args(p: argparse.ArgumentParser) -> None:
    p.add_argument(
        "--no-exclusion", action="store_true", help="count every rater (no attention rule)"
    )
    p.add_argument("--slip-rate", type=float, help="judge by this slip rate, not the study's")


def _check_plan(args: argparse.Namespace) -> None:
    """The attention checks per rater (``attention.plan_checks``), for the yes/no question."""
    settings, plan = planned_settings(args.items_per_rater, [appropriate()], args.outputs,
                                      slip=args.slip_rate)  # fmt: skip
    print(plan.summary())
    print(json.dumps({"attention": settings.to_dict(), "plan": plan.to_dict()}, indent=2))


def main(argv: Sequence[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    try:
        if args.cmd == "plan":  # no database needed
            plan = plan_study(
                args.p1, args.p2, args.raters_per_item, icc=args.icc, alpha=args.alpha,
                power=args.power,
            )  # fmt: skip
            print(plan.summary())
            for n in args.items:
                pw = power_at(n, args.p1, args.p2, args.raters_per_item, icc=args.icc,
                              alpha=args.alpha)  # fmt: skip
                print(f"{n} items x {args.raters_per_item} raters: power {pw:.0%}")
            print(json.dumps(plan.to_dict(), indent=2))
            if args.items_per_rater is not None:
                _check_plan(args)
            return 0
        store = AnnotationStore(settings=DBSettings.from_env(url=args.db_url, path=args.db_path))
        with store:
            return _run(store, args)
    except AnnotationError as e:
        print(f"error: {e}", file=sys.stderr)
        return 2


def _run(store: AnnotationStore, args: argparse.Namespace) -> int:
    if args.cmd == "backup":
        print(store.backup(args.dest, overwrite=args.overwrite))
    elif args.cmd == "export":
        print(store.export(args.study, args.format, args.out))
    elif args.cmd == "export-items":
        items, outputs = store.items(args.study)
        print(write_items(args.items_out, items))
        print(write_items(args.outputs_out, outputs))
    elif args.cmd == "create-study":
        instructions = ""
        if args.instructions:
            with open(args.instructions, encoding="utf-8") as f:
                instructions = f.read()
        info = store.create_study(
            args.name,
            read_items(args.items),
            read_outputs(args.outputs),
            questions=[q for q in args.questions.split(",") if q.strip()],
            raters_per_item=args.raters_per_item,
            instructions=instructions,
        )
        print(
            f"created study {info.name!r}: {info.n_items} items, {info.n_gold} gold,"
            f" systems {info.systems}"
        )
    elif args.cmd == "invite":
        for inv in store.invite_many(args.study, args.names):
            print(f"{inv.display_name}\t{inv.token}")
    elif args.cmd == "status":
        info = store.set_status(args.study, args.status)
        print(f"study {info.name!r} is {info.status}")
    elif args.cmd == "revoke":
        r = store.revoke(args.study, args.rater_id)
        print(f"revoked the token of rater {r.rater_id} ({r.display_name}); {r.done} answers kept")
    elif args.cmd == "new-link":
        inv = store.new_link(args.study, args.rater_id)
        print(f"{inv.display_name}\t{inv.token}")
    elif args.cmd == "progress":
        print(json.dumps(store.progress(args.study).to_dict(), indent=2, default=str))
    elif args.cmd == "results":
        res = store.results(args.study, exclude=not args.no_exclusion, slip=args.slip_rate)
        print(json.dumps(res.to_dict(), indent=2))
    elif args.cmd == "report":
        from .report import write_report  # matplotlib is loaded only for this command

        print(
            write_report(
                store, args.study, args.out, exclude=not args.no_exclusion, slip=args.slip_rate
            )
        )
    elif args.cmd == "studies":
        for st in store.list_studies():
            print(f"{st.name}\t{st.status}\t{st.n_items} items\t{st.n_raters} raters")
    return 0
