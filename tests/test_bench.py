"""bench/common.py and bench/run_all.py: the ratio and target logic every benchmark table uses,
and the README built from results JSON (no timing here: benchmarks are not tests)."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "bench"))

import common  # noqa: E402
import run_all  # noqa: E402
from common import Row  # noqa: E402


def test_ratio_and_targets():
    r = Row("decode", 15.0, "tok/s", 30.0, "bound", ">= 0.6")
    assert r.ratio == pytest.approx(0.5) and r.met is False
    assert Row("speed-up", 20.0, "s", 2.0, "cached", ">= 5").met is True
    assert Row("p95", 7.0, "ms", target="<= 50").met is True  # no baseline: on the value
    assert Row("failures", 1, "", target="== 0").met is False
    assert Row("info", 3.0, "x").met is None and Row("x", 1.0, "", 0.0).ratio is None


def test_table_marks_misses():
    text = common.table([Row("a", 1.0, "s", 4.0, "b", "<= 0.2"), Row("c", 2.0, "s")])
    assert "| a | 1.00 s | 4.00 s (b) | 0.25x | <= 0.2 | **no** |" in text
    assert text.count("\n") == 3


def test_readme_from_results(tmp_path, monkeypatch):
    monkeypatch.setattr(run_all, "RESULTS", tmp_path)
    monkeypatch.setattr(run_all, "BENCH", tmp_path)
    rows = [Row("p95 at 1M", 6.6, "ms", target="<= 50").as_dict()]
    report = {
        "command": "python bench/bench_search.py",
        "finished": "now",
        "rows": rows,
        "hardware": {"cpu": "CPU", "cores": 2, "device": "cpu", "torch_threads": 2},
    }
    (tmp_path / "search.json").write_text(json.dumps(report))
    text = run_all.readme().read_text()
    assert "Targets in the tables below: 1 met, 0 missed." in text
    assert "| p95 at 1M | 6.60 ms |" in text
    assert "Not run yet: `python bench/bench_decode.py`" in text
