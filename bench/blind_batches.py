"""Blind labelling of a study's fills for tests/data/labelled_outputs.jsonl: shuffle them, hide
the systems, cut them into parts for readers, then merge the readers' labels back.

    python bench/paper_protocol_fills.py --db-path /tmp/first.sqlite3 --study first-s6 \\
        --dump /tmp/first-s6.jsonl
    python bench/blind_batches.py make /tmp/first-s6.jsonl /tmp/blind --parts 2 --seed 6
    # each reader gets the labelling rule (tests/data/labelled_outputs.md) and one part,
    # /tmp/blind/part-N.md, and writes /tmp/blind/labels-N.jsonl: {"n": 17, "labels": [...],
    # "note": "..."} per row
    python bench/blind_batches.py merge /tmp/blind --prefix pp8 --source paper-protocol-... \\
        --adapter "v2 (adapters/magnet)"

`make` writes part-N.md (numbered rows: the text before the gap, the fill, the text after it
and the removed original, with the two counting aids of the rule: word counts, and the longest
run of words the fill shares with the passage) and key.json (row number -> the dump's row),
which a reader never sees. `merge` appends the labelled rows to labelled_outputs.jsonl, in the
file's format, refusing a part with a row missing, twice, or with an unknown label, and ids
already in the file. The checks are never run here.
"""

from __future__ import annotations

import argparse
import json
import random
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from textrules.words import ngrams, words  # noqa: E402

DATA = ROOT / "tests" / "data" / "labelled_outputs.jsonl"
LABELS = ("empty", "overlong", "unfinished", "chat", "copy", "repeats")


def shared_run(fill: str, passage: str) -> int:
    """The longest run of consecutive words (textrules' words, as the copy check counts them)
    the fill shares with the passage."""
    f, p = words(fill), words(passage)
    best = 0
    for n in range(1, len(f) + 1):
        if not ngrams(f, n) & ngrams(p, n):
            break
        best = n
    return best


def make(dump: Path, out: Path, parts: int, seed: int) -> int:
    rows = [json.loads(line) for line in dump.read_text(encoding="utf-8").splitlines() if line]
    order = list(range(len(rows)))
    random.Random(seed).shuffle(order)
    out.mkdir(parents=True, exist_ok=True)
    key = {}
    size = -(-len(rows) // parts)
    for p in range(parts):
        lines = [f"# Part {p + 1}: rows to label (tests/data/labelled_outputs.md's rule)\n"]
        for n in range(p * size + 1, min((p + 1) * size, len(rows)) + 1):
            r = rows[order[n - 1]]
            key[n] = r
            passage = f"{r['left']} {r['right']}"
            lines.append(
                f"## {n}\n\nBEFORE: {r['left']}\n\nFILL: «{r['fill']}»\n\nAFTER: {r['right']}\n\n"
                f"ORIGINAL: {r['original']}\n\n(words: fill {len(words(r['fill']))}, original "
                f"{len(words(r['original']))}; longest run shared with the passage: "
                f"{shared_run(r['fill'], passage)} words)\n"
            )
        (out / f"part-{p + 1}.md").write_text("\n".join(lines), encoding="utf-8")
    (out / "key.json").write_text(json.dumps(key, ensure_ascii=False, indent=1), encoding="utf-8")
    print(f"{len(rows)} rows in {parts} parts under {out}")
    return 0


def merge(folder: Path, prefix: str, source: str, adapter: str | None) -> int:
    key = {int(k): v for k, v in json.loads((folder / "key.json").read_text()).items()}
    labels: dict[int, dict] = {}
    for path in sorted(folder.glob("labels-*.jsonl")):
        for line in path.read_text(encoding="utf-8").splitlines():
            if not line.strip():
                continue
            try:
                rec = json.loads(line)
                n = int(rec["n"])
            except (ValueError, KeyError, TypeError):
                sys.exit(f'{path}: not a label line ({{"n": ..., "labels": [...]}}): {line[:80]}')
            if n in labels:
                sys.exit(f"{path}: row {n} labelled twice")
            bad = set(rec.get("labels", [])) - set(LABELS)
            if bad:
                sys.exit(f"{path}: row {n} has unknown labels {sorted(bad)}")
            labels[n] = rec
    missing = sorted(set(key) - set(labels))
    if missing:
        sys.exit(f"rows without labels: {missing[:20]}")
    have = {json.loads(line)["id"] for line in DATA.read_text(encoding="utf-8").splitlines()}
    new = []
    for n in sorted(key):
        r = key[n]
        _study, item, system = r["id"].split(":")
        row = {
            "id": f"{prefix}-{item}-{system}",
            "source": source,
            "system": system,
            "domain": "wikipedia",
            "unit": "sentence",
            "left": r["left"],
            "right": r["right"],
            "original": r["original"],
            "fill": r["fill"],
            "labels": [x for x in LABELS if x in labels[n].get("labels", [])],
        }
        if adapter and system == "magnet":
            row["adapter"] = adapter
        if labels[n].get("note"):
            row["note"] = labels[n]["note"]
        if row["id"] in have:
            sys.exit(f"{row['id']} is already in {DATA}")
        new.append(row)
    with DATA.open("a", encoding="utf-8") as f:
        for row in new:
            f.write(json.dumps(row, ensure_ascii=False) + "\n")
    print(f"appended {len(new)} rows ({prefix}-...) to {DATA}")
    return 0


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    sub = ap.add_subparsers(dest="cmd", required=True)
    m = sub.add_parser("make")
    m.add_argument("dump", type=Path)
    m.add_argument("out", type=Path)
    m.add_argument("--parts", type=int, default=2)
    m.add_argument("--seed", type=int, default=0)
    g = sub.add_parser("merge")
    g.add_argument("folder", type=Path)
    g.add_argument("--prefix", required=True)
    g.add_argument("--source", required=True)
    g.add_argument("--adapter")
    a = ap.parse_args(argv)
    if a.cmd == "make":
        return make(a.dump, a.out, a.parts, a.seed)
    return merge(a.folder, a.prefix, a.source, a.adapter)


if __name__ == "__main__":
    raise SystemExit(main())
