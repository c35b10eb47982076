"""Import of items/outputs (JSONL, CSV) and export of ratings (CSV, JSONL, datasets layout).

Imports are validated completely before anything is written; an error names file and line.
``read_records`` is the package's one CSV/JSONL reader (annotation_db does not import
magnet_model, which has its own for corpora); export takes a session, not a store.
"""

from __future__ import annotations

import csv
import json
import os
import re
from collections.abc import Iterable, Mapping
from dataclasses import asdict, fields
from pathlib import Path
from typing import Any

from sqlalchemy import select
from sqlalchemy.orm import Session

from .errors import ImportFormatError, InvalidInputError
from .queries import as_utc, get_study, label_of
from .schema import Assignment, Item, Output, Rater, Rating, Study
from .views import ItemIn, OutputIn

FORMATS = ("csv", "jsonl", "datasets")
MAX_IMPORT_BYTES = 200 * 1024 * 1024
_ITEM_FIELDS = [f.name for f in fields(ItemIn)]
_OUTPUT_FIELDS = [f.name for f in fields(OutputIn)]
# OWASP "CSV injection": a cell starting with one of these is a formula to spreadsheets.
_FORMULA_START = ("=", "+", "-", "@", "\t", "\r")


def safe_file_stem(name: str) -> str:
    """``name`` reduced to a file name without folders: runs of anything but ASCII letters,
    digits, '-', '_' and '.' become '_', leading dots are dropped (no '..', no hidden file)."""
    stem = re.sub(r"[^A-Za-z0-9_.-]+", "_", name).lstrip(".")
    stem = re.sub(r"\.{2,}", ".", stem)[:100]
    return stem or "study"


def neutralize_formula(value: Any) -> Any:
    """A text cell that a spreadsheet would run as a formula, prefixed with ``'`` so it shows
    as text (OWASP CSV injection guidance); anything else unchanged."""
    if isinstance(value, str) and value.startswith(_FORMULA_START):
        return "'" + value
    return value


def _private_open(path: Path, newline: str | None = None):  # noqa: ANN202 - a text file
    """Open ``path`` for writing, readable by its owner only (ratings are personal data)."""
    path.unlink(missing_ok=True)
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
    return open(fd, "w", encoding="utf-8", newline=newline)


# ---------------------------------------------------------------------- import


def read_items(path: str | os.PathLike[str]) -> list[ItemIn]:
    """Items from ``.jsonl`` (one object per line) or ``.csv`` (header: key,text,...)."""
    return [_build(ItemIn, rec, where) for rec, where in read_records(Path(path), "item")]


def read_outputs(path: str | os.PathLike[str]) -> list[OutputIn]:
    """Outputs from ``.jsonl`` or ``.csv`` (header: item_key,system,text,...)."""
    return [_build(OutputIn, rec, where) for rec, where in read_records(Path(path), "output")]


def write_items(path: str | os.PathLike[str], items: Iterable[ItemIn] | Iterable[OutputIn]) -> Path:
    """Write items or outputs as JSONL or CSV (by extension); the inverse of ``read_*``."""
    p = Path(path)
    rows = [asdict(x) for x in items]
    if p.suffix.lower() == ".csv":
        _write_csv(p, rows)
    else:
        _write_jsonl(p, rows)
    return p


def read_records(path: Path, what: str) -> list[tuple[dict[str, Any], str]]:
    """Each record of a ``.jsonl`` (also ``.json``, ``.ndjson``: one object per line) or
    ``.csv`` file with where it came from (``"file:line"``); ``ImportFormatError`` naming file
    and line for anything unreadable. ``what`` names the records in messages ("item")."""
    if not path.is_file():
        raise ImportFormatError(f"{path}: no such file")
    if path.stat().st_size > MAX_IMPORT_BYTES:
        raise ImportFormatError(f"{path}: larger than {MAX_IMPORT_BYTES // 2**20} MiB")
    suffix = path.suffix.lower()
    try:
        text = path.read_text(encoding="utf-8-sig")
    except UnicodeDecodeError as e:
        raise ImportFormatError(f"{path}: not UTF-8 text ({e})") from e
    out: list[tuple[dict[str, Any], str]] = []
    if suffix in (".jsonl", ".json", ".ndjson"):
        for n, line in enumerate(text.splitlines(), start=1):
            if not line.strip():
                continue
            where = f"{path}:{n}"
            try:
                rec = json.loads(line)
            except json.JSONDecodeError as e:
                raise ImportFormatError(f"{where}: invalid JSON ({e.msg})") from e
            except RecursionError:
                raise ImportFormatError(f"{where}: JSON nested too deeply") from None
            if not isinstance(rec, dict):
                raise ImportFormatError(f"{where}: each line must be a JSON object")
            out.append((rec, where))
    elif suffix == ".csv":
        reader = csv.DictReader(text.splitlines())
        try:
            if not reader.fieldnames:
                raise ImportFormatError(f"{path}: empty CSV (a header row is needed)")
            for n, row in enumerate(reader, start=2):
                where = f"{path}:{n}"
                if None in row:
                    raise ImportFormatError(f"{where}: more cells than header columns")
                out.append(({k: _csv_cell(k, v, where) for k, v in row.items() if v != ""}, where))
        except csv.Error as e:  # a cell over the csv module's 128 KB limit, a stray NUL, ...
            raise ImportFormatError(f"{path}:{reader.line_num}: unreadable CSV ({e})") from None
    else:
        raise ImportFormatError(f"{path}: use a .jsonl or .csv file for {what}s")
    if not out:
        raise ImportFormatError(f"{path}: no {what}s in the file")
    return out


def _csv_cell(key: str | None, v: str | None, where: str) -> Any:
    if key in ("original", "fills", "decoding") and v and v.strip()[:1] in "[{":
        try:
            return json.loads(v)
        except json.JSONDecodeError as e:
            raise ImportFormatError(f"{where}: column {key!r} holds invalid JSON") from e
    if key == "seed" and v:
        try:
            return int(v)
        except ValueError as e:
            raise ImportFormatError(f"{where}: seed must be an integer, got {v!r}") from e
    if key == "is_gold" and v is not None:
        if v.strip().lower() not in ("true", "false", "1", "0", "yes", "no", ""):
            raise ImportFormatError(f"{where}: is_gold must be true/false, got {v!r}")
        return v.strip().lower() in ("true", "1", "yes")
    return v


def _build(cls: type, rec: Mapping[str, Any], where: str) -> Any:
    allowed = _ITEM_FIELDS if cls is ItemIn else _OUTPUT_FIELDS
    unknown = sorted(set(rec) - set(allowed))
    if unknown:
        raise ImportFormatError(f"{where}: unknown field(s) {unknown}; allowed: {allowed}")
    required = ["key", "text"] if cls is ItemIn else ["item_key", "system", "text"]
    missing = [k for k in required if k not in rec or rec[k] in (None, "")]
    if missing:
        raise ImportFormatError(f"{where}: missing field(s) {missing}")
    for k in required:
        if not isinstance(rec[k], str):
            raise ImportFormatError(f"{where}: {k!r} must be a string")
    if cls is OutputIn and "decoding" in rec and not isinstance(rec["decoding"], dict):
        raise ImportFormatError(f"{where}: 'decoding' must be a JSON object")
    if (
        "seed" in rec
        and rec["seed"] is not None
        and (isinstance(rec["seed"], bool) or not isinstance(rec["seed"], int))
    ):
        raise ImportFormatError(f"{where}: 'seed' must be an integer")
    if "is_gold" in rec and not isinstance(rec["is_gold"], bool):
        raise ImportFormatError(f"{where}: 'is_gold' must be true or false")
    return cls(**rec)


# ---------------------------------------------------------------------- export


def export_rows(s: Session, study: str) -> list[dict[str, Any]]:
    """One row per rating, with item, output, system and the order shown to the rater.

    Reads in the caller's session (``store.db.read(lambda s: export_rows(s, "pilot"))``)."""
    st: Study = get_study(s, study)
    q = (
        select(Rating, Output, Item, Assignment, Rater)
        .join(Output, Output.id == Rating.output_id)
        .join(Item, Item.id == Output.item_id)
        .join(Assignment, Assignment.id == Rating.assignment_id)
        .join(Rater, Rater.id == Rating.rater_id)
        .where(Item.study_id == st.id)
        .order_by(Rater.id, Assignment.position, Rating.position)
    )
    systems = {
        o.id: o.system for o in s.scalars(select(Output).join(Item).where(Item.study_id == st.id))
    }
    rows = []
    for r, o, it, a, rater in s.execute(q):
        shown, answered = as_utc(r.shown_at), as_utc(r.answered_at)
        if a.preference == "choice":
            pref = label_of(a.output_order.index(a.preferred_output_id))
        else:
            pref = a.preference
        rows.append(
            {
                "study": st.name,
                "rater_id": rater.id,
                "rater": rater.display_name,
                "item_key": it.key,
                "item_position": a.position,
                "is_gold": it.is_gold,
                "item_text": it.text,
                "original": it.original,
                "source": it.source,
                "output_label": label_of(r.position),
                "output_position": r.position,
                "system": o.system,
                "model": o.model,
                "adapter_revision": o.adapter_revision,
                "decoding": o.decoding,
                "seed": o.seed,
                "gold_role": o.gold_role,
                "output_text": o.text,
                "fills": o.fills,
                "answers": r.answers,
                "preference": pref,
                "preferred_system": systems.get(a.preferred_output_id),
                "preferred": a.preferred_output_id == o.id,
                "comment": a.comment,
                "gold_passed": a.gold_passed,
                "shown_at": shown.isoformat(),
                "answered_at": answered.isoformat(),
                "seconds": (answered - shown).total_seconds(),
            }
        )
    return rows


def write_export(
    study: str,
    rows: list[dict[str, Any]],
    items: list[ItemIn],
    outputs: list[OutputIn],
    fmt: str,
    out: Path,
) -> Path:
    """Write ``export_rows`` as ``fmt`` (csv, jsonl, or a datasets folder with the items and
    outputs beside the ratings); files readable by their owner only."""
    if fmt not in FORMATS:
        raise InvalidInputError(f"format must be one of {FORMATS}, got {fmt!r}")
    if fmt == "jsonl":
        _write_jsonl(out, rows)
        return out
    if fmt == "csv":
        _write_csv(out, _flatten(rows), neutralize=True)
        return out
    out.mkdir(parents=True, exist_ok=True)
    _write_jsonl(out / "ratings.jsonl", [_flat_answers(r) for r in rows])
    _write_jsonl(out / "items.jsonl", [asdict(i) for i in items])
    _write_jsonl(out / "outputs.jsonl", [asdict(o) for o in outputs])
    (out / "README.md").write_text(_dataset_card(study, len(rows), len(items)), encoding="utf-8")
    return out


def _flat_answers(row: Mapping[str, Any]) -> dict[str, Any]:
    """``answers`` spread into ``answer_<name>`` columns: a fixed schema per study."""
    flat = {k: v for k, v in row.items() if k != "answers"}
    for k, v in (row.get("answers") or {}).items():
        flat[f"answer_{k}"] = v
    return flat


def _flatten(rows: list[dict[str, Any]]) -> list[dict[str, Any]]:
    out = []
    for r in rows:
        flat = _flat_answers(r)
        for k, v in flat.items():
            if isinstance(v, dict | list):
                flat[k] = json.dumps(v, ensure_ascii=False)
        out.append(flat)
    return out


def _write_jsonl(path: Path, rows: Iterable[Mapping[str, Any]]) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(path.name + ".tmp")
    with _private_open(tmp) as f:
        for r in rows:
            f.write(json.dumps(r, ensure_ascii=False) + "\n")
    tmp.replace(path)


def _write_csv(path: Path, rows: list[dict[str, Any]], *, neutralize: bool = False) -> None:
    """``neutralize``: for files meant for spreadsheets (rating exports); the items/outputs
    CSV written by ``write_items`` stays exact, since ``read_items`` reads it back."""
    path.parent.mkdir(parents=True, exist_ok=True)
    header: list[str] = []
    for r in rows:
        header.extend(k for k in r if k not in header)
    cell = neutralize_formula if neutralize else (lambda v: v)
    tmp = path.with_name(path.name + ".tmp")
    with _private_open(tmp, newline="") as f:
        w = csv.DictWriter(f, fieldnames=[cell(h) for h in header])
        w.writeheader()
        for r in rows:
            w.writerow(
                {
                    cell(k): cell(
                        json.dumps(v, ensure_ascii=False) if isinstance(v, dict | list) else v
                    )
                    for k, v in r.items()
                }
            )
    tmp.replace(path)


def _dataset_card(study: str, n_ratings: int, n_items: int) -> str:
    return f"""---
configs:
- config_name: ratings
  data_files: ratings.jsonl
  default: true
- config_name: items
  data_files: items.jsonl
- config_name: outputs
  data_files: outputs.jsonl
---
# Human ratings: {study}

{n_ratings} ratings of {n_items} items, exported by `annotation_db`.
Load with `datasets.load_dataset("path/to/this/folder", "ratings")`.
One row of `ratings` per (rater, output): the item, the output and its system, the order
shown to the rater (`item_position`, `output_label`), the answers (`answer_*`), the
item-level preference and comment, and the times shown and answered (UTC).
"""
