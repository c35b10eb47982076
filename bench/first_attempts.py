"""A Paper-protocol study whose prompted fills are their first attempts: the re-ask of an
empty or chat reply (prompted.ASKS) switched off, everything else as ``app.study_cli`` makes
it (the same passages, seeds and sampled decoding).

The chat check decides the re-ask, so the replies that reach a study are the ones the check
let through: measured on study outputs, its recall counts only its own misses. Measured on
first attempts, it sees the replies it decides on. Label the dump blind, as the other batches
of tests/data/labelled_outputs.jsonl were:

    python bench/first_attempts.py --name first-s5 --seed 5 --db-path /tmp/first.sqlite3 \\
        --adapters magnet=adapters/magnet
    python bench/paper_protocol_fills.py --db-path /tmp/first.sqlite3 --study first-s5 \\
        --out bench/results/paper_protocol_first_s5.json --dump /tmp/first-s5.jsonl

Takes study_cli's flags; the study's name must be new or one made by this script.
"""

from __future__ import annotations

import sys
from pathlib import Path
from unittest import mock

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from app import study_cli  # noqa: E402
from magnet_model.inference import prompted  # noqa: E402


def main(argv: list[str] | None = None) -> int:
    with mock.patch.object(prompted, "ASKS", 1):
        return study_cli.main(argv)


if __name__ == "__main__":
    raise SystemExit(main())
