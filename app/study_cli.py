"""`python -m app.study_cli`: create a rating study from the command line, outputs made ahead.

    python -m app.study_cli --preset paper --name paper-1 [--n-items 100] [--raters-per-item 3]

The paper preset is the Admin tab's "Paper protocol" button: one sentence removed from each
held-out passage; MAGNET, base zero-shot and five-shot; the yes/no "contextually
appropriate" question; 3 raters per item; attention checks; a span cap long enough for a
sentence. Each output is stored as soon as it is made: run the same command again after an
interruption and it resumes. The model comes from the usual flags / MAGNET_* settings, the
database from --db-path / --db-url / MAGNET_DB_*. Errors print one line and exit with 2.
"""

from __future__ import annotations

import argparse
import sys

from tqdm import tqdm

from annotation_db import AnnotationError, AnnotationStore, check_study_name, fill_summary
from annotation_db.planner import plan_study, power_at
from magnet_model.errors import MagnetError
from magnet_model.settings import ModelSpec, add_model_args

from . import studies
from .main import load_engine  # the app's loader: an adapter that fails is reported, not fatal

PRESETS = {"paper": studies.PAPER}


def build_parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="python -m app.study_cli", description=__doc__.split("\n")[0])
    p.add_argument("--preset", choices=sorted(PRESETS), default="paper")
    p.add_argument("--name", required=True, help="study name (the same name resumes)")
    p.add_argument("--n-items", type=int, help="items (default: the preset's)")
    p.add_argument("--raters-per-item", type=int, help="default: the preset's")
    p.add_argument("--n-gold", type=int, help="attention checks (default: the preset's)")
    p.add_argument("--seed", type=int, default=0, help="which passages are drawn")
    p.add_argument("--db-path", help="SQLite file of the rating studies (MAGNET_DB_PATH)")
    p.add_argument("--db-url", help="SQLAlchemy URL of the rating studies (MAGNET_DB_URL)")
    add_model_args(p)
    return p


def main(argv: list[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    preset = PRESETS[args.preset]
    n_items = args.n_items or preset.n_items
    raters = args.raters_per_item or preset.raters_per_item
    n_gold = preset.n_gold if args.n_gold is None else args.n_gold
    try:
        print(plan_study(raters_per_item=raters).summary(), file=sys.stderr)
        power = power_at(n_items, raters_per_item=raters)
        print(f"This study: {n_items} items x {raters} raters, power {power:.0%}.", file=sys.stderr)
        check_study_name(args.name)  # before the model loads and minutes of generation
        store = AnnotationStore(url=args.db_url, path=args.db_path)
        engine, unavailable = load_engine(ModelSpec.from_args(args))
        missing = [s for s in preset.systems if s in unavailable]
        if missing:
            print(f"error: {missing[0]} is unavailable: {unavailable[missing[0]]}", file=sys.stderr)
            return 2
        with store, tqdm(desc="outputs", unit="output") as bar:

            def progress(done: int, total: int) -> None:
                bar.total = total
                bar.n = done
                bar.refresh()

            info, reused = studies.build_study(
                engine,
                lambda requests: engine.compare_infill_many(requests, marker=studies.MARKER),
                store,
                args.name,
                lambda: studies.study_items(
                    preset.item_kind, n_items, n_gold, len(preset.systems), seed=args.seed
                ),
                preset.systems,
                questions=list(preset.questions),
                raters_per_item=raters,
                instructions=preset.instructions,
                max_span_tokens=preset.max_span_tokens,
                progress=progress,
            )
            fills = fill_summary(store.fill_counts(info.name))
    except (AnnotationError, MagnetError) as e:
        print(f"error: {e}", file=sys.stderr)
        return 2
    print(
        f"created study {info.name!r}: {info.n_items} items, {info.n_gold} attention checks, "
        f"systems {info.systems}" + (f" ({reused} outputs reused)" if reused else "")
    )
    print(fills)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
