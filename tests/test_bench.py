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
import unit_fills  # noqa: E402
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


def test_a_report_goes_to_the_path_given_or_under_results(tmp_path, monkeypatch, capsys):
    """`--out /absolute/path` (or any path with a folder) is where the report goes; a plain
    name goes under bench/results/. Both say where they wrote, and the report records the
    environment settings the figures depend on."""
    monkeypatch.setattr(common, "RESULTS", tmp_path / "results")
    monkeypatch.setenv("OMP_WAIT_POLICY", "PASSIVE")
    rows = [Row("x", 1.0, "s")]
    report = common.write_report(str(tmp_path / "elsewhere" / "mine"), rows, dtype="bfloat16")
    written = json.loads((tmp_path / "elsewhere" / "mine.json").read_text())
    assert written["benchmark"] == "mine" == report["benchmark"]
    assert written["hardware"]["dtype"] == "bfloat16"
    assert written["environment"]["OMP_WAIT_POLICY"] == "PASSIVE"
    assert f"wrote {tmp_path / 'elsewhere' / 'mine.json'}" in capsys.readouterr().out
    common.write_report("plain", rows)
    assert (tmp_path / "results" / "plain.json").is_file()
    assert common.result_path("a/b.json") == Path("a/b.json").resolve()


@pytest.mark.parametrize("kind", ["epyc-avx2", "xeon-amx"])
def test_llama_cpp_runs_without_extra_buffer_types_on_amx(kind, monkeypatch, tmp_path):
    """llama.cpp segfaulted in llama_decode on an AMX Xeon with its AMX / repacked weight
    buffers on (issue 32): off there, left on elsewhere; its OpenMP threads sleep when idle
    unless the user set OMP_WAIT_POLICY (even empty)."""
    import levers
    from fake_cpu import fake_cpu

    fake_cpu(monkeypatch, tmp_path, kind)
    assert levers.llama_cpp_options() == {"extra_bufts": kind != "xeon-amx"}
    assert levers.llama_cpp_env({"A": "1"}) == {"A": "1", "OMP_WAIT_POLICY": "PASSIVE"}
    assert levers.llama_cpp_env({"OMP_WAIT_POLICY": ""})["OMP_WAIT_POLICY"] == ""


def test_a_crash_of_llama_cpp_is_one_sentence_not_the_end_of_the_bench(tmp_path, monkeypatch):
    """llama.cpp runs in a process of its own: a segfault there is a LlamaCppFailed naming the
    signal, which bench_decode turns into a table without the llama.cpp row."""
    import levers

    crash = tmp_path / "crash.py"
    crash.write_text("import os, signal\nos.kill(os.getpid(), signal.SIGSEGV)\n")
    monkeypatch.setattr(levers, "CHILD", crash)
    monkeypatch.setattr(levers, "llama_cpp_installed", lambda: True)
    with pytest.raises(levers.LlamaCppFailed, match=r"killed by signal 11 \(SIGSEGV\)"):
        levers.llama_cpp_rate(tmp_path / "m.gguf", "the cat", 8, 1, 1)
    monkeypatch.setattr(levers, "llama_cpp_installed", lambda: False)
    assert levers.llama_cpp_rate(tmp_path / "m.gguf", "the cat", 8, 1, 1) is None
    rows = levers.lever_rows(
        {"float32": {"continuation": (10.0, 5e8)}}, 40e9, "float32", None, "llama.cpp failed: x"
    )
    assert rows[0].baseline_what == "bandwidth bound; llama.cpp failed: x"


def test_blind_batches_hide_the_systems_and_merge_every_label_back(tmp_path, monkeypatch):
    import blind_batches

    data = tmp_path / "labelled.jsonl"
    data.write_text(json.dumps({"id": "old-1"}) + "\n")
    monkeypatch.setattr(blind_batches, "DATA", data)
    rows = [
        {"id": f"s:sent-{i}:{sys_}", "system": sys_, "left": "It rained all day.",
         "right": "Then it stopped.", "original": "The river rose.", "fill": f"fill {i}{len(sys_)}"}
        for i in range(3) for sys_ in ("magnet", "zero-shot")
    ]  # fmt: skip
    dump = tmp_path / "dump.jsonl"
    dump.write_text("".join(json.dumps(r) + "\n" for r in rows))
    blind_batches.main(["make", str(dump), str(tmp_path / "b"), "--parts", "2", "--seed", "1"])
    parts = [(tmp_path / "b" / f"part-{k}.md").read_text() for k in (1, 2)]
    assert all("magnet" not in p and "zero-shot" not in p for p in parts)  # blind
    assert sum(p.count("FILL: «") for p in parts) == 6
    labels = tmp_path / "b" / "labels-1.jsonl"
    labels.write_text('{"n": 1, labels}\n')  # a reader's typo: one sentence, nothing merged
    with pytest.raises(SystemExit, match="not a label line"):
        blind_batches.main(["merge", str(tmp_path / "b"), "--prefix", "pp9", "--source", "t"])
    assert len(data.read_text().splitlines()) == 1
    labels.write_text("".join(json.dumps({"n": n, "labels": []}) + "\n" for n in range(1, 6)))
    with pytest.raises(SystemExit, match="without labels: \\[6\\]"):
        blind_batches.main(["merge", str(tmp_path / "b"), "--prefix", "pp9", "--source", "t"])
    (tmp_path / "b" / "labels-2.jsonl").write_text(json.dumps({"n": 6, "labels": ["chat"]}))
    blind_batches.main(["merge", str(tmp_path / "b"), "--prefix", "pp9", "--source", "t"])
    merged = [json.loads(line) for line in data.read_text().splitlines()][1:]
    key = json.loads((tmp_path / "b" / "key.json").read_text())
    assert sorted(r["id"] for r in merged) == sorted(
        f"pp9-{r['id'].split(':')[1]}-{r['system']}" for r in rows
    )
    chat = [r for r in merged if r["labels"] == ["chat"]]
    assert len(chat) == 1 and chat[0]["fill"] == key["6"]["fill"]
    with pytest.raises(SystemExit, match="already in"):  # merging twice adds nothing
        blind_batches.main(["merge", str(tmp_path / "b"), "--prefix", "pp9", "--source", "t"])
    assert len(data.read_text().splitlines()) == 7


def test_a_benchmark_that_builds_its_engine_reads_the_magnet_settings(monkeypatch):
    """MAGNET_DTYPE and MAGNET_DEVICE reach a benchmark's own engine, as they reach the app's;
    the benchmark's adapters replace the shipped ones."""
    from magnet_model.inference.engine import Engine

    monkeypatch.setenv("MAGNET_DTYPE", "float32")
    monkeypatch.setenv("MAGNET_DEVICE", "cpu")
    spec = common.model_spec({})
    assert (spec.dtype, spec.device, spec.adapters) == ("float32", "cpu", {})
    monkeypatch.setattr(Engine, "from_spec", staticmethod(lambda s: s))
    spec = unit_fills.magnet_engine("some/adapter", None)
    assert (spec.dtype, spec.adapters) == ("float32", {"magnet": "some/adapter"})
    monkeypatch.delenv("MAGNET_DTYPE")
    assert common.model_spec({}).dtype == "auto"
    from magnet_model.settings import ModelSpec

    assert common.model_spec().adapters == ModelSpec.from_env().adapters  # None: the settings'
    monkeypatch.setenv("MAGNET_DTYPE", "bogus")  # a typo: one sentence naming the setting
    with pytest.raises(SystemExit, match="MAGNET_DTYPE must be one of"):
        common.model_spec({})
    with pytest.raises(SystemExit, match="MAGNET_DTYPE must be one of"):
        common.app_dtype()  # what a benchmark that starts the app records


def test_the_meta_rules_word_measurement_learns_each_folds_words_without_it_and_writes_nothing(
    tmp_path, monkeypatch, capsys
):
    import fit_meta_rule

    # the fill's own words outside quotes, not the passage's, and its first word
    keys = fit_meta_rule.word_keys('False. The "sentence" text', "The text [blank] here.")
    assert keys == {"w:false", "first:false"}
    assert fit_meta_rule.vocabulary([{"a", "b"}, {"a"}, {"c"}], 2) == ["a"]
    with pytest.raises(SystemExit):  # a negative row count is refused, not run
        fit_meta_rule.main(["--words", "-1"])

    out, weights = tmp_path / "meta_rule.json", tmp_path / "meta_weights.py"
    monkeypatch.setattr(fit_meta_rule, "OUT", out)
    monkeypatch.setattr(fit_meta_rule, "WEIGHTS", weights)
    seen = []
    real_vocabulary = fit_meta_rule.vocabulary
    monkeypatch.setattr(
        fit_meta_rule,
        "vocabulary",
        lambda rows, n: seen.append(len(rows)) or real_vocabulary(rows, n),
    )
    assert fit_meta_rule.main(["--words", "5", "--c", "0.3"]) == 0
    text = capsys.readouterr().out
    assert (
        "| threshold | precision | recall | recall on pp" in text
        and "written fills flagged |" in text
    )
    assert not out.exists() and not weights.exists()  # a measurement: no rule written
    rows = len(fit_meta_rule.DATA.read_text(encoding="utf-8").splitlines())
    # one vocabulary per left-out batch, each from fewer rows than all, then one from all
    assert seen[-1] == rows and seen[:-1] and all(n < rows for n in seen[:-1])


def test_reading_a_paper_study_that_is_not_there_is_one_sentence_and_makes_no_database(
    tmp_path, capsys
):
    import paper_protocol_fills

    db = tmp_path / "paper.sqlite3"
    assert paper_protocol_fills.main(["--db-path", str(db), "--study", "paper-x"]) == 2
    assert "does not exist: make the study first" in capsys.readouterr().err
    assert not db.exists()
    from annotation_db import AnnotationStore

    with AnnotationStore(path=str(db)):
        pass  # a database without the study (its making was interrupted before the end)
    assert paper_protocol_fills.main(["--db-path", str(db), "--study", "paper-x"]) == 2
    assert "no study named 'paper-x'" in capsys.readouterr().err


def test_the_unit_fill_benches_share_their_flags_cells_and_rows():
    """unit_fills: --split and --length-bonus parsed once for every bench that takes them; a
    setting's share cells paired with the reference setting's (the differences kept under the
    bench's key, none for the reference itself); a share or seconds row against the
    reference's; the Markdown rows."""
    p = unit_fills.unit_parser("doc", 40, "word", "x", split=True, bonus_rule="join")
    args = p.parse_args(["--length-bonus", "0.3, 1", "--split", "dev"])
    assert args.length_bonus == [0.3, 1.0] and args.split == "dev"
    assert p.parse_args([]).length_bonus == [] and p.parse_args([]).split == "heldout"
    assert "rules join+B" in p.format_help()
    plain = unit_fills.unit_parser("doc", 40, "word", "x").parse_args([])
    assert not hasattr(plain, "split") and not hasattr(plain, "length_bonus")

    ref = {"flags": {"a": [True, False, False, False], "b": [True] * 4}}
    r = {"flags": {"a": [True, True, True, False], "b": [True] * 4}}
    cells = unit_fills.share_cells(r, ("a", "b"), ref, "paired_vs_off")
    assert cells[0] == unit_fills.share_cell(r["flags"]["a"], ref["flags"]["a"])[0]
    assert cells[0].startswith("75% (") and ", +50 pts (p=" in cells[0]
    assert set(r["paired_vs_off"]) == {"a", "b"} and r["paired_vs_off"]["a"]["diff"] == 0.5
    alone = unit_fills.share_cells(ref, ("a",), None, "paired_vs_off")
    assert "pts" not in alone[0] and "paired_vs_off" not in ref

    row = unit_fills.share_row("a vs off", r, ref, "a", "off, same fills")
    assert (row.value, row.unit, row.baseline, row.ratio) == (0.75, "share", 0.25, 3.0)
    secs = unit_fills.seconds_row("s", {"new": 6.0, "old": 3.0}, "new", "old", 3, "old")
    assert (secs.value, secs.unit, secs.baseline, secs.baseline_what) == (2.0, "s", 1.0, "old")
    assert unit_fills.md_head("suite", "rule", "x") == ["| suite | rule | x |", "|---|---|---|"]
    assert unit_fills.md_row("k (3)", "join", "0.50") == "| k (3) | join | 0.50 |"
