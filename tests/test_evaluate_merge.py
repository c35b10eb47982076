"""evaluate --add-to: a full run in parts (one report), refused when a part would measure under
other conditions than the report it joins."""

from __future__ import annotations

import json
import shutil

import pytest
from tiny_models import tiny_engine

from magnet_model.decoding import MagnetFill
from magnet_model.errors import InputError
from magnet_model.evaluation import evaluate as ev
from magnet_model.evaluation import merge

QUICK = ["--quick", "--n-sts", "40", "--n-ppl", "4", "--no-progress"]


@pytest.fixture
def engine():
    return tiny_engine()  # per test: a flag such as --fill-no-repeat changes its config


@pytest.fixture
def first_part(tmp_path, engine):
    folder = tmp_path / "eval"
    argv = [*QUICK, "--tasks", "sts", "--systems", "base,magnet", "--output", str(folder)]
    assert ev.main(argv, engine=engine) == 0
    return folder


def _read(folder):
    return json.loads((folder / "results.json").read_text())


def test_a_run_in_two_parts_is_one_report_with_both_commands(first_part, engine):
    before = _read(first_part)
    argv = [*QUICK, "--tasks", "knowledge", "--systems", "base,magnet,llm2vec"]
    assert ev.main([*argv, "--add-to", str(first_part)], engine=engine) == 0
    merged = _read(first_part)
    assert set(merged["tasks"]) == {"sts", "knowledge"}
    assert merged["tasks"]["sts"] == before["tasks"]["sts"]  # the first part's, untouched
    assert set(merged["systems"]) == {"base", "magnet", "llm2vec"}
    assert len(merged["commands"]) == 2 and "--add-to" in merged["commands"][1]
    judged = {t["task"] for t in merged["targets"] if t["met"] is not None}
    assert judged == {"sts", "knowledge"}  # judged anew on the tasks of both parts
    md = (first_part / "results.md").read_text()
    assert "Run in 2 parts" in md and "--tasks sts" in md and "--tasks knowledge" in md
    # a part at other sizes is refused and writes nothing; at the same, it replaces its task
    again = [*QUICK, "--tasks", "sts", "--systems", "base,magnet"]
    assert ev.main([*again, "--n-sts", "30", "--add-to", str(first_part)], engine=engine) == 2
    assert _read(first_part) == merged
    assert ev.main([*again, "--add-to", str(first_part)], engine=engine) == 0
    third = _read(first_part)
    assert len(third["commands"]) == 3 and set(third["tasks"]) == {"sts", "knowledge"}
    assert third["tasks"]["knowledge"] == merged["tasks"]["knowledge"]


@pytest.mark.parametrize(
    "extra, named",
    [
        (["--seed", "1"], "--seed"),
        (["--n-sts", "30"], "the size flags"),
        (["--fill-no-repeat", "0"], "--fill-no-repeat"),  # known once the engine is there
    ],
)
def test_a_part_under_other_conditions_is_refused_before_it_runs(
    first_part, engine, extra, named, capsys
):
    before = (first_part / "results.json").read_bytes()
    argv = [*QUICK, "--tasks", "knowledge", "--systems", "base,magnet", *extra]
    assert ev.main([*argv, "--add-to", str(first_part)], engine=engine) == 2
    err = capsys.readouterr().err
    assert err.startswith(f"error: --add-to {first_part}: this part would measure") and named in err
    assert (first_part / "results.json").read_bytes() == before


def test_adding_to_a_folder_without_a_report_says_how_to_start(tmp_path, capsys):
    argv = [*QUICK, "--tasks", "sts", "--add-to", str(tmp_path / "none")]
    assert ev.main(argv) == 2  # before any model is loaded
    assert "no results.json there; run the first part with --output" in capsys.readouterr().err
    (tmp_path / "bad").mkdir()
    (tmp_path / "bad" / "results.json").write_text("{not json")
    with pytest.raises(InputError, match="cannot be read"):
        merge.load_earlier(tmp_path / "bad")


def test_add_to_and_another_output_folder_is_a_clear_error(tmp_path):
    from magnet_model.errors import ConfigError

    args = ev.build_parser().parse_args(["--add-to", str(tmp_path / "a"), "--output", "b"])
    with pytest.raises(ConfigError, match="leave out --output"):
        ev.config_from_args(args)


def _adapter(folder, weights: bytes):
    folder.mkdir(exist_ok=True)
    (folder / "adapter_model.safetensors").write_bytes(weights)
    return str(folder)


def test_an_adapter_whose_weights_changed_between_parts_is_refused(tmp_path):
    path = _adapter(tmp_path / "magnet", b"first weights")
    conditions = {"hardware": {"dtype": "float32"}, "adapters": merge.adapter_record({"m": path})}
    merge.check_engine(conditions, conditions, "X")  # the same: fine
    _adapter(tmp_path / "magnet", b"trained further")
    changed = {**conditions, "adapters": merge.adapter_record({"m": path})}
    with pytest.raises(InputError, match="adapter 'm'"):
        merge.check_engine(conditions, changed, "X")
    other = _adapter(tmp_path / "other", b"other weights")
    elsewhere = {**conditions, "adapters": merge.adapter_record({"m": other})}
    with pytest.raises(InputError, match="adapter 'm'"):
        merge.check_engine(conditions, elsewhere, "X")


def test_an_adapter_moved_with_the_same_files_is_the_same_but_not_if_its_calibration_changed(
    tmp_path,
):
    path = _adapter(tmp_path / "checkpoint", b"weights")
    (tmp_path / "checkpoint" / "magnet_config.json").write_text('{"span_end_bias": 0.5}')
    then = {"adapters": merge.adapter_record({"m": path})}
    shipped = tmp_path / "shipped"
    shutil.copytree(path, shipped)
    shutil.rmtree(path)  # the checkpoint folder is gone, its files live on under another name
    merge.check_engine(then, {"adapters": merge.adapter_record({"m": str(shipped)})}, "X")
    (shipped / "magnet_config.json").write_text('{"span_end_bias": 0.9}')
    with pytest.raises(InputError, match="adapter 'm'"):
        merge.check_engine(then, {"adapters": merge.adapter_record({"m": str(shipped)})}, "X")
    # a record from before the files' hash: the weights decide
    old = {"adapters": {"m": {"path": "/gone", "sha256": then["adapters"]["m"]["sha256"]}}}
    merge.check_engine(old, {"adapters": merge.adapter_record({"m": str(shipped)})}, "X")


def test_a_part_with_other_attempts_per_prompted_reply_is_refused():
    then, now = {"prompt_asks": 1, "adapters": {}}, {"prompt_asks": 3, "adapters": {}}
    with pytest.raises(InputError, match="attempts per reply"):
        merge.check_engine(then, now, "X")
    merge.check_engine({"adapters": {}}, now, "X")  # a report from before the field


def _engine(**rules) -> dict:
    return {**MagnetFill(**rules).record(), "adapters": {}}


def test_fills_cut_by_the_stop_rule_are_not_added_to_fills_ended_by_the_model():
    now = _engine(stop="join", branches=1)
    with pytest.raises(InputError, match="--fill-stop"):
        merge.check_engine({**now, "fill_stop": "model"}, now, "X")
    # a report from before the rule recorded its engine but not the rule: its fills were the
    # model's own ends (and it predates the later rules too)
    with pytest.raises(InputError, match="'model' there, 'join' now"):
        merge.check_engine({"fill_no_repeat": 3, "adapters": {}}, now, "X")
    before = _engine(close_sentences=False, stop="model", branches=1, sentence_tokens=0)
    merge.check_engine({"fill_no_repeat": 3, "adapters": {}}, before, "X")


def test_fills_from_several_first_tokens_are_not_added_to_greedy_ones():
    now = _engine(stop="join", branches=4)
    with pytest.raises(InputError, match="--fill-branches"):
        merge.check_engine({**now, "fill_branches": 1}, now, "X")
    # a report from before branching: its fills came from the greedy path only
    old = {k: v for k, v in now.items() if k not in ("fill_branches", "fill_sentence_tokens")}
    with pytest.raises(InputError, match="1 there, 4 now"):
        merge.check_engine(old, now, "X")
    merge.check_engine(old, {**now, "fill_branches": 1, "fill_sentence_tokens": 0}, "X")


def test_a_blank_between_sentences_capped_differently_is_not_added():
    now = _engine()
    with pytest.raises(InputError, match="--fill-sentence-tokens"):
        merge.check_engine({**now, "fill_sentence_tokens": 0}, now, "X")


def test_a_report_from_before_the_adapter_record_is_read_from_its_command(tmp_path):
    path = _adapter(tmp_path / "v2", b"w")
    old = {"command": f"python -m magnet_model.evaluation.evaluate --adapters magnet={path}"}
    assert merge.adapters_of(old) == {"magnet": {"path": str(tmp_path / "v2"), "sha256": None}}
    now = {"adapters": merge.adapter_record({"magnet": path})}
    merge.check_engine(old, now, "X")  # same folder: accepted (no hash to compare there)
    with pytest.raises(InputError, match="does not record where its adapters came from"):
        merge.check_engine({"command": "python -m magnet_model.evaluation.evaluate"}, now, "X")


def test_a_size_the_report_predates_is_not_compared_but_the_others_are():
    """A report from before the speeches domain has no n_speech_passages: a part that reads
    the domains it has still joins it; a size it records still has to match."""
    cfg = ev.config_from_args(ev.build_parser().parse_args(["--domains", "wikipedia,news"]))
    now = ev.run_conditions(cfg)
    then = {**now, "sizes": {k: v for k, v in now["sizes"].items() if k != "n_speech_passages"}}
    merge.check_run(then, now, "X")
    with pytest.raises(InputError, match="the size flags"):
        merge.check_run(then, {**now, "sizes": {**now["sizes"], "n_news_passages": 9}}, "X")
    with pytest.raises(InputError, match="--domains"):
        merge.check_run(
            then, ev.run_conditions(ev.config_from_args(ev.build_parser().parse_args([]))), "X"
        )
