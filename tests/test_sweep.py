"""python -m magnet_model.training.sweep: a whole tiny sweep on CPU (two trainings at once for a
fixed number of steps, two evaluations, one table), the time budget's plan with the probe
stubbed, and the config's one-sentence errors. No test here holds a wall-clock budget: a busy
machine runs the same steps, only slower (timing belongs to bench/)."""

from __future__ import annotations

import json
import random

import pytest
from tiny_models import TINY_CORPUS, make_tiny_llama, make_tiny_tokenizer

from magnet_model.errors import ConfigError
from magnet_model.training import sweep

STEPS = 4


@pytest.fixture(scope="module")
def tiny_sweep(tmp_path_factory):
    root = tmp_path_factory.mktemp("sweep")
    tok = make_tiny_tokenizer()
    base = root / "base"  # room for the evaluator's five-shot infill prompts
    make_tiny_llama(len(tok), max_position_embeddings=1024).save_pretrained(base)
    tok.save_pretrained(base)
    corpus = root / "corpus.jsonl"
    corpus.write_text("".join(json.dumps({"text": s}) + "\n" for s in TINY_CORPUS))
    rng = random.Random(0)
    held = root / "held.txt"
    held.write_text("\n".join(" ".join(rng.sample(TINY_CORPUS, 8) * 2) for _ in range(6)) + "\n")
    config = {
        "configs": [
            {"name": "end1", "flags": ["--w-span-end", "1"]},
            {"name": "end5", "flags": ["--w-span-end", "5", "--span-min", "1"]},
        ],
        "model": ["--base-model", str(base)],
        "train": ["--corpus", str(corpus), "--max-length", "12", "--batch-size", "4"]
        + ["--warmup-steps", "1", "--lr", "1e-3", "--lora-r", "4", "--no-vital-extracts"],
        "evaluate": ["--quick", "--tasks", "infill,knowledge", "--heldout", str(held)]
        + ["--n-passages", "2", "--n-infills", "1", "--n-ppl", "2", "--threads", "1"],
    }
    path = root / "sweep.json"
    path.write_text(json.dumps(config))
    out = root / "out"
    # a step count, not a budget: a loaded machine trains the same steps, only slower
    rc = sweep.main([str(path), "--steps", str(STEPS), "--output", str(out)])
    return rc, out


def test_a_tiny_sweep_trains_both_configs_and_tables_their_numbers(tiny_sweep):
    rc, out = tiny_sweep
    result = json.loads((out / "sweep.json").read_text())
    assert rc == 0, [r["error"] for r in result["rows"]]
    rows = {r["name"]: r for r in result["rows"]}
    assert set(rows) == {"end1", "end5"}
    for name, r in rows.items():
        assert r["error"] is None and r["train_seconds"] > 0
        assert r["steps"] == r["planned_steps"] == STEPS
        assert (out / name / "adapter_config.json").is_file()
        m = r["metrics"]
        assert m["span PPL hybrid"] > 0 and m["causal PPL / base"] > 0
        assert m["STS-B"] is None  # not asked for
    assert rows["end5"]["flags"] == ["--w-span-end", "5", "--span-min", "1"]
    md = (out / "sweep.md").read_text()
    lines = [ln for ln in md.splitlines() if ln.startswith("| end")]
    assert len(lines) == 2 and "span PPL hybrid" in md and "STS-B" not in md
    assert all(any(c.strip()[:1].isdigit() for c in ln.split("|")[4:6]) for ln in lines)
    assert f"{STEPS} steps each" in md and result["steps"] == STEPS and result["probe"] == {}
    for name in rows:  # a step count: no probe ran and no run was cut by a clock
        log = (out / "logs" / f"{name}.train.log").read_text().splitlines()[0]
        assert "--max-minutes" not in log and "--stage1-steps 2 --stage2-steps 2" in log
    assert not (out / "probe").exists()


def test_a_time_budget_plans_from_the_probe_and_refuses_one_too_small(tmp_path, monkeypatch):
    """--minutes: the probe (stubbed here, so no clock decides the outcome) times a step; the
    plan fits the budget, capped by max_steps, and refuses a budget with no room for a step."""
    probes = {"a": sweep.Probe(1.0, 0.0), "b": sweep.Probe(100.0, 0.0)}
    monkeypatch.setattr(sweep, "probe", lambda cfg, where, root: probes)
    cfg = sweep.SweepConfig({"a": [], "b": []}, max_steps=7)
    steps, got, train_s = sweep._plan_by_time(cfg, 60.0, {}, tmp_path, sweep.time.monotonic())
    assert got is probes and 2000 < train_s <= 60 * 60 * 0.75
    assert steps == {"a": 7, "b": 7}  # 2430 and 24 fit; max_steps caps both
    cfg.max_steps = None  # one minute: 45 s of training, 40 steps of a, none of b
    with pytest.raises(sweep.MagnetError, match=r"too little for a step of b; give more --minutes"):
        sweep._plan_by_time(cfg, 1.0, {}, tmp_path, sweep.time.monotonic())


def test_plan_fits_the_probed_step_time_into_the_budget():
    probes = {"a": sweep.Probe(0.5, 10.0), "b": sweep.Probe(0.25, 10.0)}
    assert sweep.plan_steps(probes, 60.0, safety=1.0) == {"a": 100, "b": 200}
    assert sweep.plan_steps(probes, 5.0) == {"a": 0, "b": 0}
    assert sweep._stage_steps(10, 0.5) == (5, 5)
    assert sweep._stage_steps(10, 0.0) == (10, 0)
    assert sweep._stage_steps(1, 0.5) == (1, 0) or sweep._stage_steps(1, 0.5) == (0, 1)


@pytest.mark.parametrize(
    "raw, message",
    [
        ([], "must be a JSON object"),
        ({"configs": []}, "non-empty list"),
        ({"configs": [{"name": "a"}], "shared": []}, "Unknown keys"),
        ({"configs": [{"name": "a b"}]}, "has the name"),
        ({"configs": [{"name": "base"}]}, "has the name"),
        ({"configs": [{"name": "a"}, {"name": "a"}]}, "Two configs are named"),
        ({"configs": [{"name": "a", "flags": "--lr 1"}]}, "must be a list of strings"),
        ({"configs": [{"name": "a", "flags": ["--max-steps", "3"]}]}, "sweep sets itself"),
        ({"configs": [{"name": "a"}], "train": ["--output=x"]}, "sweep sets itself"),
        ({"configs": [{"name": "a", "flags": ["--stage1_steps", "3"]}]}, "sweep sets itself"),
        ({"configs": [{"name": "a"}], "probe_steps": 0}, "probe_steps"),
        ({"configs": [{"name": "a"}], "max_steps": 0}, "max_steps"),
        ({"configs": [{"name": "a"}], "max_steps": "3"}, "max_steps"),
        ({"configs": [{"name": "a"}], "eval_share": 1.5}, "eval_share"),
    ],
)
def test_bad_configs_are_one_sentence_errors(tmp_path, raw, message):
    path = tmp_path / "c.json"
    path.write_text(json.dumps(raw))
    with pytest.raises(ConfigError, match=message):
        sweep.load_config(path)


def test_cli_errors_are_messages_not_tracebacks(tmp_path, capsys):
    assert sweep.main([str(tmp_path / "none.json"), "--minutes", "1"]) == 2
    assert "does not exist" in capsys.readouterr().err
    (tmp_path / "bad.json").write_text("{")
    assert sweep.main([str(tmp_path / "bad.json"), "--minutes", "1"]) == 2
    assert "not readable JSON" in capsys.readouterr().err
    assert sweep.main([str(tmp_path / "bad.json"), "--minutes", "0"]) == 2
    assert "--minutes must be above 0" in capsys.readouterr().err
    assert sweep.main([str(tmp_path / "bad.json"), "--steps", "0"]) == 2
    assert "--steps must be a whole number >= 1" in capsys.readouterr().err
    for both_or_neither in (["--minutes", "1", "--steps", "3"], []):
        with pytest.raises(SystemExit):  # argparse: one of --minutes and --steps
            sweep.main([str(tmp_path / "bad.json"), *both_or_neither])
    assert "--steps" in sweep.build_parser().format_help()


def test_the_documented_example_config_is_valid(tmp_path):
    import re

    from project_docs import docs_text

    block = re.search(r"```json\n(\{\s*\"configs\".*?)```", docs_text(), re.S)
    assert block, "no sweep example config in README.md or docs/ (docs/training.md has it)"
    path = tmp_path / "c.json"
    path.write_text(block.group(1))
    cfg = sweep.load_config(path)
    assert list(cfg.configs) == ["end1", "end5", "span-min1", "all-span15"]
    from magnet_model.training.train import build_parser

    for flags in cfg.configs.values():  # every flag is one the trainer knows
        build_parser().parse_args(["--output", "x", *cfg.train, *cfg.model, *flags])
    from magnet_model.evaluation.evaluate import build_parser as eval_parser

    eval_parser().parse_args([*cfg.evaluate, *cfg.model])


def test_configurations_are_dealt_out_to_the_devices_in_turn():
    from magnet_model.training.sweep import assign_devices

    got = assign_devices(["a", "b", "c"], "cuda:0, cuda:1")
    assert got == {"a": "cuda:0", "b": "cuda:1", "c": "cuda:0"}
    assert assign_devices(["a", "b"], "cpu") == {"a": "cpu", "b": "cpu"}
    with pytest.raises(ConfigError, match="not 'gpu1'"):
        assign_devices(["a"], "cuda:0,gpu1")
    with pytest.raises(ConfigError, match="empty"):
        assign_devices(["a"], " , ")
