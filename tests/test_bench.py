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


def test_lever_rows_against_llama_cpp_and_the_bandwidth_bound():
    import levers

    results = {
        "float32": {"continuation": (10.0, 500_000_000), "infill": (9.0, 510_000_000)},
        "float16-weights": {"continuation": (20.0, 250_000_000), "infill": (18.0, 260_000_000)},
        "HF generate, float32": {"continuation": (8.0, 500_000_000)},
        levers.LLAMA_CPP: {"continuation": (100.0, 100_000_000), "infill": (90.0, 101_000_000)},
    }
    rows = levers.lever_rows(results, 40e9, "float16-weights", {"infill": "32-token span"})
    by = {r.measure: r for r in rows}
    assert len(rows) == 7  # HF generate has no span row
    fast = by["base continuation tok/s, float16-weights"]
    assert fast.ratio == pytest.approx(0.2) and fast.target == ">= 0.5" and fast.met is False
    assert "0.12x its bandwidth bound, 160 tok/s (250 MB/token)" in fast.note
    assert "CPU default" in fast.note and by["base continuation tok/s, float32"].target == ""
    assert by["MAGNET span decoding tok/s, llama.cpp"].ratio == pytest.approx(1.0)
    assert by["MAGNET span decoding tok/s, float32"].note.startswith("32-token span; ")
    alone = levers.lever_rows({"float32": results["float32"]}, 40e9, "float32")
    assert alone[0].baseline == pytest.approx(80.0) and "not installed" in alone[0].baseline_what
