"""The trainer CLI end to end on a tiny Llama saved to disk (as --base-model)."""

from __future__ import annotations

import dataclasses
import json
import re
import shlex
import typing

import pytest
import torch
from safetensors.torch import load_file
from tiny_models import TINY_CORPUS as SENTENCES
from tiny_models import make_tiny_llama, make_tiny_tokenizer

from magnet_model.adapter_meta import load_meta
from magnet_model.data import vital_articles
from magnet_model.errors import ConfigError
from magnet_model.masks import MODES
from magnet_model.pooling import POOLINGS
from magnet_model.tokens import choose_token_roles
from magnet_model.training import loop, train
from magnet_model.training.train import (
    SSCL_POSITIVES,
    Example,
    Sampler,
    TrainConfig,
    build_parser,
    chunk,
    config_from_args,
    load_corpus,
    main,
    sentence_pairs,
    validate,
)


@pytest.fixture(scope="module")
def base_dir(tmp_path_factory):
    path = tmp_path_factory.mktemp("tiny-base")
    tok = make_tiny_tokenizer()
    make_tiny_llama(len(tok)).save_pretrained(path)
    tok.save_pretrained(path)
    return path


@pytest.fixture(scope="module")
def corpus(tmp_path_factory):
    path = tmp_path_factory.mktemp("corpus") / "tiny.jsonl"
    rows = [{"text": s} for s in SENTENCES]
    rows[0]["paraphrase"] = "the dog ran to the tree and the cat sat on the mat ."
    path.write_text("".join(json.dumps(r) + "\n" for r in rows))
    return path


def args(base_dir, corpus, out, *extra) -> list[str]:
    return [
        "--output", str(out), "--base-model", str(base_dir), "--corpus", str(corpus),
        "--device", "cpu", "--max-length", "12", "--batch-size", "4", "--stage1-steps", "3",
        "--stage2-steps", "3", "--save-every", "2", "--warmup-steps", "2", "--lr", "1e-3",
        "--lora-r", "4", "--no-progress", *extra,
    ]  # fmt: skip


def log_of(out) -> list[dict]:
    return [json.loads(line) for line in (out / "train_log.jsonl").read_text().splitlines()]


def test_an_adapter_of_the_embedded_base_records_its_hub_id_not_the_cache_folder(
    base_dir, corpus, tmp_path, monkeypatch
):
    """The embedded base loads from the folder it was de-quantized into; an adapter that named
    that folder as its base would point every other machine at a path it does not have."""
    from magnet_model import loading

    real = loading.load_base
    monkeypatch.setattr(
        loading,
        "load_base",
        lambda spec, *a, **k: real(dataclasses.replace(spec, base=str(base_dir)), *a, **k),
    )
    out = tmp_path / "embedded"
    given = args(base_dir, corpus, out, "--stage1-steps", "1", "--stage2-steps", "1")
    given[given.index("--base-model") + 1] = "embedded"
    assert main(given) == 0
    for folder in (out, out / "checkpoints" / "step-0000002"):
        config = json.loads((folder / "adapter_config.json").read_text())
        assert config["base_model_name_or_path"] == "HuggingFaceTB/SmolLM2-135M-Instruct"


def test_cli_writes_a_standard_peft_adapter_with_meta_log_and_checkpoints(
    base_dir, corpus, tmp_path
):
    out = tmp_path / "magnet"
    assert main(args(base_dir, corpus, out)) == 0
    assert (out / "adapter_config.json").is_file()
    assert (out / "adapter_model.safetensors").is_file()

    meta = load_meta(out)
    from transformers import AutoModelForCausalLM as Auto

    # chosen by the base's weights (tokens.py): the tiny base's small rows reach no role token
    # well, so <span_end> is the candidate that comes closest
    assert meta.token_roles == choose_token_roles(
        make_tiny_tokenizer(), Auto.from_pretrained(base_dir)
    )
    assert (out / "role_rows.safetensors").is_file()  # --train-role-rows is the default
    assert meta.attention == "hybrid" and meta.pooling == "last"
    assert meta.objectives == ["mntp", "msg", "sscl"]
    assert meta.training["steps_done"] == 6 and meta.training["complete"]
    assert "bos" in meta.training

    log = log_of(out)
    assert [r["step"] for r in log] == [1, 2, 3, 4, 5, 6]
    assert all(set(r) >= {"mntp", "msg", "loss", "lr"} and "sscl" not in r for r in log[:3])
    # the NLL of <span_end> is logged, and the total counts only weighted objectives
    assert all("msg_end" in r and r["loss"] == pytest.approx(r["mntp"] + r["msg"]) for r in log[:3])
    assert meta.training["all_span_share"] == 0.15 and meta.training["w_span_end"] == 1.0
    assert all("sscl" in r for r in log[3:])
    assert all(r["stage"] == 2 for r in log[3:])

    ckpts = sorted(p.name for p in (out / "checkpoints").iterdir())
    assert ckpts == ["step-0000004", "step-0000006"]  # the last two are kept

    from peft import PeftModel
    from transformers import AutoModelForCausalLM

    base = AutoModelForCausalLM.from_pretrained(base_dir)
    ids = torch.tensor([[11, 33, 37, 20, 11, 41]])
    with torch.no_grad():
        before = base(ids).logits
        loaded = PeftModel.from_pretrained(base, str(out)).eval()
        after = loaded(ids).logits
    assert not torch.allclose(before, after), "the trained adapter changes the model"


def test_resume_continues_exactly(base_dir, corpus, tmp_path):
    straight, resumed = tmp_path / "straight", tmp_path / "resumed"
    assert main(args(base_dir, corpus, straight)) == 0
    assert main(args(base_dir, corpus, resumed, "--max-steps", "3")) == 0
    assert not load_meta(resumed).training["complete"]
    assert [r["step"] for r in log_of(resumed)] == [1, 2, 3]
    assert main(args(base_dir, corpus, resumed, "--resume")) == 0

    a = load_file(straight / "adapter_model.safetensors")
    b = load_file(resumed / "adapter_model.safetensors")
    assert a.keys() == b.keys()
    for k in a:
        assert torch.equal(a[k], b[k]), k
    drop = lambda r: {k: v for k, v in r.items() if k != "seconds"}  # noqa: E731
    assert [drop(r) for r in log_of(straight)] == [drop(r) for r in log_of(resumed)]


def test_resume_reads_a_setting_newer_than_the_checkpoint_as_its_default(
    base_dir, corpus, tmp_path, capsys
):
    out = tmp_path / "older"
    assert main(args(base_dir, corpus, out, "--max-steps", "2")) == 0
    path = out / "checkpoints" / "step-0000002" / "trainer_state.pt"
    state = torch.load(path, weights_only=False)
    del state["config"]["w_anchor_structure"], state["config"]["sscl_queue"]  # as before them
    torch.save(state, path)
    assert main(args(base_dir, corpus, out, "--resume", "--sscl-queue", "4")) != 0
    assert "different sscl_queue" in capsys.readouterr().err  # still told apart from its default
    assert main(args(base_dir, corpus, out, "--resume")) == 0
    assert [r["step"] for r in log_of(out)] == [1, 2, 3, 4, 5, 6]


def test_llm2vec_baseline_trains_bidirectional_mntp_then_simcse_with_mean_pooling(
    base_dir, corpus, tmp_path
):
    out = tmp_path / "llm2vec"
    extra = ["--attention", "bidirectional", "--objectives", "mntp,sscl"]
    assert main(args(base_dir, corpus, out, *extra, "--stage2-objectives", "sscl")) == 0
    meta = load_meta(out)
    assert meta.attention == "bidirectional" and meta.pooling == "mean"
    log = log_of(out)
    assert all("mntp" in r and "msg" not in r for r in log[:3])
    assert all(set(r) & {"mntp", "msg", "sscl"} == {"sscl"} for r in log[3:])


def test_gradient_checkpointing_gives_the_same_losses(base_dir, corpus, tmp_path):
    plain, ckpt = tmp_path / "plain", tmp_path / "gc"
    assert main(args(base_dir, corpus, plain, "--max-steps", "3")) == 0
    assert main(args(base_dir, corpus, ckpt, "--max-steps", "3", "--gradient-checkpointing")) == 0
    for r1, r2 in zip(log_of(plain), log_of(ckpt), strict=True):
        assert r1["loss"] == pytest.approx(r2["loss"], rel=1e-4)


@pytest.mark.parametrize(
    ("extra", "msg"),
    [
        (["--objectives", "sscl"], "--stage1-steps 0"),
        (["--objectives", "sscl", "--stage1-steps", "0", "--stage2-steps", "0"], "Nothing"),
        (["--attention", "bidirectional"], "MSG cannot"),
        (["--objectives", "mntp,foo"], "--objectives"),
        (["--stage2-objectives", "sscl", "--objectives", "mntp"], "subset"),
        (["--batch-size", "1"], "in-batch negatives"),
        (["--lora-targets", "nonexistent_proj"], "--lora-targets"),
    ],
)
def test_bad_flag_combinations_are_clear_errors(base_dir, corpus, tmp_path, capsys, extra, msg):
    assert main(args(base_dir, corpus, tmp_path / "x", *extra)) == 2
    assert msg in capsys.readouterr().err


def test_empty_corpus_and_existing_checkpoints_are_clear_errors(base_dir, corpus, tmp_path, capsys):
    empty = tmp_path / "empty.txt"
    empty.write_text("\n\n")
    assert main(args(base_dir, empty, tmp_path / "e")) == 2
    assert "no text" in capsys.readouterr().err
    out = tmp_path / "twice"
    assert main(args(base_dir, corpus, out, "--max-steps", "2")) == 0
    assert main(args(base_dir, corpus, out)) == 2
    assert "--resume" in capsys.readouterr().err
    assert main(args(base_dir, corpus, out, "--resume", "--batch-size", "2")) == 2
    assert "batch_size" in capsys.readouterr().err


def test_corpus_chunks_plain_texts_and_keeps_paraphrase_pairs_whole(corpus, tmp_path):
    tok = make_tiny_tokenizer()
    txt = tmp_path / "lines.txt"
    txt.write_text(SENTENCES[1] + "\n\n" + "the cat sat\n")
    cfg = TrainConfig(output="x", corpus=[str(corpus), str(txt)], max_length=5)
    examples = load_corpus(cfg, tok)
    pair = [e for e in examples if e.positive is not None]
    assert len(pair) == 1 and len(pair[0].ids) == 5  # truncated, not chunked
    assert all(len(e.ids) <= 5 for e in examples)
    assert all(len(e.ids) >= 4 for e in examples)  # "the cat sat" (3 tokens) is dropped
    n_plain = sum(len(chunk(tok(s).input_ids, 5)) for s in SENTENCES[1:] + [SENTENCES[1]])
    assert len(examples) <= 1 + n_plain


def test_sentence_pairs_use_the_paraphrase_else_the_text_and_respect_the_length():
    batch = [Example((1, 2, 3, 4, 5), positive=(9, 8, 7)), Example((4, 5, 6))]
    texts, positives = sentence_pairs(batch, 4)
    assert texts == [[1, 2, 3, 4], [4, 5, 6]]
    assert positives == [[9, 8, 7], [4, 5, 6]]


def test_sampler_visits_every_text_once_per_epoch_and_is_reproducible():
    s = Sampler(10, seed=3)
    epoch = s.indices(0, 5) + s.indices(1, 5)
    assert sorted(epoch) == list(range(10))
    assert Sampler(10, seed=3).indices(1, 5) == s.indices(1, 5)
    assert Sampler(10, seed=4).indices(0, 10) != epoch


def test_default_pooling_follows_attention_and_defaults_validate():
    parse = lambda *a: config_from_args(build_parser().parse_args(["--output", "o", *a]))  # noqa: E731
    assert parse().pooling == "last"
    assert parse("--attention", "bidirectional", "--objectives", "mntp,sscl").pooling == "mean"
    assert parse("--attention", "causal").pooling == "last"
    validate(parse())
    with pytest.raises(ConfigError):
        validate(parse("--max-steps", "0"))


@pytest.mark.integration
def test_one_step_of_each_stage_on_the_real_embedded_model(tmp_path):
    corpus = tmp_path / "lines.txt"
    corpus.write_text(
        "The river flows through the old city before it reaches the sea.\n"
        "Paris is the capital and largest city of France, on the Seine.\n"
        "The first computers filled whole rooms and used vacuum tubes.\n"
    )
    out = tmp_path / "magnet"
    argv = [
        "--output", str(out), "--base-model", "embedded", "--device", "cpu",
        "--corpus", str(corpus), "--stage1-steps", "1", "--stage2-steps", "1",
        "--batch-size", "2", "--max-length", "24", "--no-progress",
    ]  # fmt: skip
    assert main(argv) == 0
    meta = load_meta(out)
    assert len(set(meta.token_roles.to_dict().values()) - {meta.token_roles.pad}) >= 4
    assert meta.training["bos"] is None  # SmolLM2 adds no BOS to text
    log = log_of(out)
    assert [r["stage"] for r in log] == [1, 2]
    assert all(torch.isfinite(torch.tensor(r["loss"])) for r in log)


def test_time_bound_stops_early_with_a_usable_adapter_and_accumulates(base_dir, corpus, tmp_path):
    out = tmp_path / "bounded"
    assert main(args(base_dir, corpus, out, "--max-minutes", "0", "--grad-accum", "2")) == 0
    meta = load_meta(out)
    assert meta.training["steps_done"] == 1 and not meta.training["complete"]
    assert (out / "adapter_model.safetensors").is_file()
    assert (out / "checkpoints" / "step-0000001").is_dir()


def test_init_adapter_starts_from_a_trained_adapter_and_refuses_one_that_does_not_fit(
    base_dir, corpus, tmp_path, capsys
):
    first, second = tmp_path / "first", tmp_path / "second"
    assert main(args(base_dir, corpus, first)) == 0
    # lr 0: the second run changes nothing, so it saves exactly the weights it started from
    extra = ["--init-adapter", str(first), "--lr", "0", "--stage2-steps", "0"]
    extra += ["--objectives", "mntp,msg"]
    assert main(args(base_dir, corpus, second, *extra)) == 0
    a = load_file(first / "adapter_model.safetensors")
    b = load_file(second / "adapter_model.safetensors")
    assert a.keys() == b.keys() and all(torch.equal(a[k], b[k]) for k in a)
    assert load_meta(second).training["init_adapter"] == str(first)
    # another rank: one sentence, no traceback
    bad = tmp_path / "bad"
    assert main(args(base_dir, corpus, bad, "--init-adapter", str(first), "--lora-r", "8")) == 2
    assert "does not fit this run's LoRA" in capsys.readouterr().err


def test_default_corpus_adds_vital_extracts_and_description_positives(base_dir, tmp_path):
    tok = make_tiny_tokenizer()
    vital = [a for a in vital_articles("train") if a.description]
    ids = lambda text: tuple(tok(text, add_special_tokens=False).input_ids[:24])  # noqa: E731
    plain = load_corpus(TrainConfig(output="x", max_length=24), tok)
    assert ids(vital[0].extract) in {e.ids for e in plain}
    assert all(e.positive is None for e in plain)
    paired = load_corpus(TrainConfig(output="x", max_length=24, sscl_positives="description"), tok)
    assert (ids(vital[0].extract), ids(vital[0].query)) in {(e.ids, e.positive) for e in paired}
    assert len(paired) < len(plain)  # paired extracts are cut, not chunked
    wiki = load_corpus(TrainConfig(output="x", max_length=24, vital_extracts=False), tok)
    assert ids(vital[0].extract) not in {e.ids for e in wiki} and len(wiki) < len(paired)


def test_description_positives_reach_the_sscl_batch(base_dir, tmp_path, monkeypatch):
    seen = []
    real = loop.collate_sentences

    def spy(texts, positives, *rest):
        seen.append((texts, positives))
        return real(texts, positives, *rest)

    monkeypatch.setattr(loop, "collate_sentences", spy)
    tok = make_tiny_tokenizer()
    queries = {
        tuple(tok(a.query, add_special_tokens=False).input_ids[:12])
        for a in vital_articles("train")
    }
    argv = [
        "--output", str(tmp_path / "o"), "--base-model", str(base_dir), "--device", "cpu",
        "--objectives", "sscl", "--stage1-steps", "0", "--stage2-steps", "1", "--batch-size", "8",
        "--max-length", "12", "--lora-r", "4", "--no-progress", "--sscl-positives",
    ]  # fmt: skip
    assert main([*argv, "description"]) == 0
    ((texts, positives),) = seen
    assert any(tuple(p) in queries and p != t for t, p in zip(texts, positives, strict=True))
    seen.clear()
    assert main([*argv, "dropout", "--overwrite"]) == 0
    ((texts, positives),) = seen
    assert positives == texts  # SimCSE: the text itself, noised by dropout


def test_description_positives_refuse_a_corpus_file(base_dir, corpus, tmp_path, capsys):
    assert main(args(base_dir, corpus, tmp_path / "x", "--sscl-positives", "description")) == 2
    assert "vital-pairs" in capsys.readouterr().err


# ---------------------------------------------------------------- CLI generated from TrainConfig


def _other_value(name: str, hint, default) -> tuple[list[str], object]:
    """Flag arguments that set field `name` to a value other than its default, and that value."""
    flag = "--" + name.replace("_", "-")
    if name == "corpus":
        return [flag, "a.txt", "b.jsonl"], ["a.txt", "b.jsonl"]
    if name in ("objectives", "stage2_objectives"):
        return [flag, "msg,mntp"], ["mntp", "msg"]
    if hint is bool:
        return ([f"--no-{flag[2:]}"], False) if default else ([flag], True)
    choices = {"attention": MODES, "pooling": POOLINGS, "sscl_positives": SSCL_POSITIVES}
    if name in choices:
        value = next(c for c in choices[name] if c != default)
        return [flag, value], value
    if float in typing.get_args(hint) or hint is float:
        return [flag, "0.625"], 0.625
    if int in typing.get_args(hint) or hint is int:
        value = (default or 0) + 3
        return [flag, str(value)], value
    return [flag, "some/value"], "some/value"


def test_every_train_config_field_is_a_flag_with_its_default_and_help():
    """The CLI is generated from TrainConfig: a field without a flag, help or its default fails."""
    hints = typing.get_type_hints(TrainConfig)
    defaults = config_from_args(build_parser().parse_args(["--output", "o"]))
    assert defaults == TrainConfig(output="o", pooling="last")  # pooling: resolved from attention
    help_text = build_parser().format_help()
    for f in dataclasses.fields(TrainConfig):
        assert f.metadata.get("help"), f"TrainConfig.{f.name} has no help for its flag"
        assert f"--{f.name.replace('_', '-')}" in help_text, f"TrainConfig.{f.name} has no flag"
        default = getattr(TrainConfig(output="o"), f.name)
        argv, want = _other_value(f.name, hints[f.name], default)
        assert want != default
        got = config_from_args(build_parser().parse_args(["--output", "o", *argv]))
        assert getattr(got, f.name) == want, f"{argv} did not set TrainConfig.{f.name}"


def test_flags_keep_their_names_aliases_and_meanings():
    parse = lambda *a: config_from_args(build_parser().parse_args(["--output", "o", *a]))  # noqa: E731
    assert parse("--resume").resume == "latest"  # bare --resume: the newest checkpoint
    assert parse("--resume", "ck/step-1").resume == "ck/step-1"
    assert parse("--objectives", "SSCL, mntp").objectives == ["mntp", "sscl"]
    assert parse("--objectives", "sscl", "mntp").objectives == ["mntp", "sscl"]
    assert parse().stage2_objectives is None
    off = parse("--no-vital-extracts", "--no-bf16", "--no-progress")
    assert (off.vital_extracts, off.bf16, off.progress) == (False, False, False)
    on = parse("--gradient-checkpointing", "--overwrite")
    assert (on.gradient_checkpointing, on.overwrite) == (True, True)
    assert parse("--pooling", "last", "--attention", "bidirectional").pooling == "last"
    args = build_parser().parse_args(["--output", "o", "--base-model", "b", "--dtype", "float32"])
    assert (args.base_model, args.dtype) == ("b", "float32")  # the shared model flags
    for bad in (["--attention", "sideways"], ["--pooling", "max"], ["--max-length", "many"], []):
        with pytest.raises(SystemExit):
            build_parser().parse_args(bad if not bad else ["--output", "o", *bad])
    with pytest.raises(ConfigError, match="--objectives"):
        parse("--objectives", "mntp,nsp")


def _documented_train_commands() -> list[tuple[str, list[str]]]:
    """Every `python -m magnet_model.training.train ...` line of README.md, docs/ and the
    adapters' cards (shipped, and the checkpoints kept to continue from)."""
    from project_docs import ROOT as root
    from project_docs import doc_paths

    found = []
    cards = [*sorted((root / "adapters").glob("*/README.md"))]
    cards += sorted((root / "checkpoints").glob("*/README.md"))
    for path in [*doc_paths(), *cards]:
        text = path.read_text().replace("\\\n", " ")
        for m in re.finditer(r"python -m magnet_model\.training\.train +([^\n`]*)", text):
            found.append((f"{path.relative_to(root)}: {m.group(1)[:40]}", shlex.split(m.group(1))))
    return found


def test_every_documented_training_command_still_parses_and_validates():
    commands = _documented_train_commands()
    # docs/training.md: 4, shipped cards: 1 each, the CPU retrain: 2
    assert len(commands) >= 8, commands
    assert sum(where.startswith("docs/training.md") for where, _ in commands) >= 4, commands
    for where, argv in commands:
        try:
            validate(config_from_args(build_parser().parse_args(argv)))
        except (SystemExit, ConfigError) as e:
            pytest.fail(f"{where}: {e!r}")
    llm2vec = next(argv for where, argv in commands if where.startswith("adapters/llm2vec"))
    cfg = config_from_args(build_parser().parse_args(llm2vec))
    assert (cfg.attention, cfg.pooling, cfg.objectives) == (
        "bidirectional",
        "mean",
        ["mntp", "sscl"],
    )
    assert (cfg.stage1_steps, cfg.lr, cfg.sscl_max_length) == (844, 2e-4, 64)


@pytest.mark.parametrize(
    "warmup, stage1, stage2, rates",
    [  # the trainer's schedule: warm-up (step + 1) / warmup, then linear to 0 at the end
        (0, 2, 2, [1.0, 0.75, 0.5, 0.25]),
        (2, 3, 3, [0.5, 1.0, 1.0, 0.75, 0.5, 0.25]),
        (4, 4, 0, [0.25, 0.5, 0.75, 1.0]),
        (3, 1, 1, [1 / 3, 2 / 3]),  # warm-up longer than the run
    ],
)
def test_learning_rate_schedule_step_by_step(warmup, stage1, stage2, rates):
    cfg = TrainConfig(
        output="o", lr=2e-4, warmup_steps=warmup, stage1_steps=stage1, stage2_steps=stage2
    )
    optimizer = torch.optim.AdamW([torch.nn.Parameter(torch.zeros(1))], lr=cfg.lr)
    scheduler = train.make_scheduler(optimizer, cfg)
    seen = []
    for _ in range(cfg.total_steps):  # as train_step: the rate it logs, then step both
        seen.append(scheduler.get_last_lr()[0])
        optimizer.step()
        scheduler.step()
    assert seen == pytest.approx([cfg.lr * r for r in rates], rel=1e-12, abs=0)


def test_calibrate_fits_on_the_runs_own_views_and_decoding_uses_it(base_dir, corpus, tmp_path):
    """magnet_model.evaluation.calibrate rebuilds the trainer's views from the adapter's record,
    stores the fitted bias with how it was fitted, and an engine loading the adapter reads it."""
    from magnet_model.evaluation import calibrate
    from magnet_model.inference.engine import Engine
    from magnet_model.settings import ModelSpec

    out = tmp_path / "magnet"
    assert main(args(base_dir, corpus, out)) == 0
    cal = ["--adapter", str(out), "--texts", "6", "--base-model", str(base_dir), "--device", "cpu"]
    assert calibrate.main(cal) == 0
    assert not load_meta(out).calibration  # without --write nothing is stored
    assert calibrate.main([*cal, "--write"]) == 0
    c = load_meta(out).calibration
    assert -20 < c["span_end_bias"] < 20 and c["span_end_bias"] != 0
    assert (
        c["end_nll"][1] <= c["end_nll"][0] + 1e-9 or c["span_token_nll"][1] < c["span_token_nll"][0]
    )
    assert "training texts" in c["fitted_on"] and str(out) in c["command"]
    spec = ModelSpec(base=str(base_dir), adapters={"magnet": str(out)}, device="cpu")
    assert Engine.from_spec(spec).runner.span_end("magnet").bias == c["span_end_bias"]
    assert calibrate.main(["--adapter", str(tmp_path / "none")]) == 2  # one sentence, no trace


def test_sscl_batch_size_draws_its_own_pairs_and_the_card_counts_them(
    base_dir, tmp_path, monkeypatch
):
    from magnet_model.training.card import count_tokens

    seen = []
    real = loop.collate_sentences

    def spy(texts, positives, *rest):
        seen.append(texts)
        return real(texts, positives, *rest)

    monkeypatch.setattr(loop, "collate_sentences", spy)
    argv = [
        "--base-model", str(base_dir), "--device", "cpu", "--stage1-steps", "0",
        "--stage2-steps", "2", "--batch-size", "2", "--max-length", "12", "--sscl-max-length",
        "6", "--lora-r", "4", "--no-progress", "--no-vital-extracts",
    ]  # fmt: skip
    out = tmp_path / "big"
    assert main(["--output", str(out), *argv, "--sscl-batch-size", "6"]) == 0
    assert [len(t) for t in seen] == [6, 6]  # 6 pairs a step, while the masked view has 2 texts
    assert seen[0] != seen[1]
    cfg = train.recorded_config(load_meta(out).training)
    assert cfg.sscl_pairs == 6
    # the card replays the same draws: 2 steps x 6 pairs x (x, x+), each cut to 6 tokens
    assert count_tokens(cfg, 2, make_tiny_tokenizer()).sentence_views == 2 * 6 * 2 * 6
    seen.clear()
    assert main(["--output", str(tmp_path / "same"), *argv]) == 0
    assert [len(t) for t in seen] == [2, 2]  # without it SSCL takes the masked view's texts


def test_sscl_batch_size_refuses_zero_and_a_single_pair(base_dir, corpus, tmp_path, capsys):
    assert main(args(base_dir, corpus, tmp_path / "a", "--sscl-batch-size", "0")) == 2
    assert "--sscl-batch-size must be positive" in capsys.readouterr().err
    assert main(args(base_dir, corpus, tmp_path / "b", "--sscl-batch-size", "1")) == 2
    assert "in-batch negatives" in capsys.readouterr().err


@pytest.mark.parametrize("kind", ["epyc-avx2", "xeon-amx"])
def test_cpu_bf16_autocasts_only_where_the_cpu_multiplies_bfloat16(
    base_dir, corpus, tmp_path, monkeypatch, capsys, kind
):
    from fake_cpu import fake_cpu

    fake_cpu(monkeypatch, tmp_path, kind)
    dtypes = []
    real = loop.masked_view_terms

    def spy(model, batch, *a, **k):
        dtypes.append(torch.get_autocast_dtype("cpu") if torch.is_autocast_enabled("cpu") else None)
        return real(model, batch, *a, **k)

    monkeypatch.setattr(loop, "masked_view_terms", spy)
    out = tmp_path / kind
    stage1 = ("--objectives", "mntp,msg", "--stage2-steps", "0")
    code = main(args(base_dir, corpus, out, "--cpu-bf16", *stage1))
    if kind == "epyc-avx2":
        assert code == 2 and "AMX or AVX-512 BF16" in capsys.readouterr().err
        assert dtypes == []
        return
    assert code == 0 and dtypes == [torch.bfloat16] * 3
    weights = load_file(out / "adapter_model.safetensors")
    assert {w.dtype for w in weights.values()} == {torch.float32}  # the weights stay float32
    assert all(r["loss"] == r["loss"] for r in log_of(out))  # no NaN
    dtypes.clear()
    assert main(args(base_dir, corpus, tmp_path / "plain", *stage1)) == 0
    assert dtypes == [None] * 3  # off by default: float32 as before


def test_a_checkpoint_is_an_adapter_with_its_layout_recorded(base_dir, corpus, tmp_path):
    out = tmp_path / "ck"
    assert main(args(base_dir, corpus, out, "--keep-checkpoints", "0")) == 0
    ckpt = out / "checkpoints" / "step-0000002"
    meta = load_meta(ckpt)
    assert meta is not None and meta.training["steps_done"] == 2
    assert not meta.training["complete"] and meta.token_roles == load_meta(out).token_roles
    assert meta.gap == load_meta(out).gap
    assert not (ckpt / "README.md").exists()  # no template card


def test_watch_sts_logs_the_dev_spearman_at_every_checkpoint_and_the_end(
    base_dir, corpus, tmp_path, monkeypatch
):
    import magnet_model.data as data

    asked = []
    original = data.load_sts_b

    def spy(split="test"):
        asked.append(split)
        return original(split)

    monkeypatch.setattr(data, "load_sts_b", spy)
    out = tmp_path / "w"
    assert main(args(base_dir, corpus, out, "--watch-sts", "12", "--stage2-steps", "1")) == 0
    assert asked == ["dev"]  # never the test pairs the evaluator reports
    log = log_of(out)
    assert [r["step"] for r in log if "sts_dev" in r] == [2, 4]  # save-every 2, and the end
    assert all(-100 <= r["sts_dev"] <= 100 for r in log if "sts_dev" in r)


def test_news_adds_the_conll_stories_to_the_default_corpus_and_is_recorded(base_dir, tmp_path):
    from magnet_model.data import conll_news

    tok = make_tiny_tokenizer()
    plain = load_corpus(TrainConfig(output="x", max_length=24, pack_texts=False), tok)
    news = load_corpus(TrainConfig(output="x", max_length=24, pack_texts=False, news=True), tok)
    first = tok(conll_news()[0], add_special_tokens=False).input_ids[:24]
    assert tuple(first) in {e.ids for e in news} and tuple(first) not in {e.ids for e in plain}
    assert train.recorded_config({"output": "x"}).news is False  # older adapters had none


def test_sscl_queue_adds_earlier_positives_as_negatives_and_resumes_exactly(
    base_dir, corpus, tmp_path
):
    import torch.nn.functional as F

    from magnet_model.training.objectives import info_nce

    torch.manual_seed(0)
    z1, z2 = torch.randn(4, 8), torch.randn(4, 8)
    queue = F.normalize(torch.randn(6, 8), dim=-1)
    keep: dict = {}
    plain = info_nce(z1, z2, keep=keep)
    more = info_nce(z1, z2, negatives=queue)
    assert more > plain  # more candidates to tell apart, the same positives
    assert torch.allclose(keep["positives"], F.normalize(z2, dim=-1))
    # a queue of the batch's own positives again: each x now also meets its positive's copy
    assert info_nce(z1, z2, negatives=keep["positives"]) > plain

    queued = ("--sscl-queue", "6", "--stage1-steps", "1", "--stage2-steps", "5")
    straight, resumed = tmp_path / "straight", tmp_path / "resumed"
    assert main(args(base_dir, corpus, straight, *queued)) == 0
    state = torch.load(
        straight / "checkpoints" / "step-0000006" / "trainer_state.pt", weights_only=False
    )
    assert state["sscl_queue"].shape == (6, 32)  # 5 steps x 4 positives, cut to the newest 6
    assert main(args(base_dir, corpus, resumed, *queued, "--max-steps", "3")) == 0
    assert main(args(base_dir, corpus, resumed, *queued, "--resume")) == 0
    a = load_file(straight / "adapter_model.safetensors")
    b = load_file(resumed / "adapter_model.safetensors")
    assert all(torch.equal(a[k], b[k]) for k in a)
    without = tmp_path / "without"
    assert main(args(base_dir, corpus, without, "--stage1-steps", "1", "--stage2-steps", "5")) == 0
    # from the second SSCL step on the queue changes the loss
    sscl = [r["sscl"] for r in log_of(straight) if "sscl" in r]
    plain_sscl = [r["sscl"] for r in log_of(without) if "sscl" in r]
    assert sscl[0] == plain_sscl[0] and sscl[1:] != plain_sscl[1:]


def test_sscl_anchor_holds_the_sentence_vectors_near_a_trained_adapters(
    base_dir, corpus, tmp_path, capsys
):
    first = tmp_path / "first"
    assert main(args(base_dir, corpus, first, "--stage1-steps", "1", "--stage2-steps", "1")) == 0
    # from the anchor itself, without dropout: the two read every text alike at the first step
    run = ("--init-adapter", str(first), "--sscl-anchor", str(first), "--sscl-dropout", "0",
           "--lora-dropout", "0", "--stage1-steps", "0", "--stage2-steps", "4", "--lr", "0.05",
           "--warmup-steps", "0")  # fmt: skip
    held, free = tmp_path / "held", tmp_path / "free"
    assert main(args(base_dir, corpus, held, *run, "--w-anchor", "50")) == 0
    assert main(args(base_dir, corpus, free, *run, "--w-anchor", "0")) == 0
    a = [r["anchor"] for r in log_of(held) if "anchor" in r]
    b = [r["anchor"] for r in log_of(free) if "anchor" in r]
    assert len(a) == len(b) == 4 and a[0] == b[0] and abs(a[0]) < 1e-4
    assert b[-1] > 1e-3 and a[-1] < b[-1] / 2  # trained apart without the term, held with it
    assert "anchor" not in log_of(first)[-1]  # no anchor, no term
    # the structure term: logged beside the cosine term, and with a weight it trains
    shaped = tmp_path / "shaped"
    assert main(args(base_dir, corpus, shaped, *run, "--w-anchor", "0",
                     "--w-anchor-structure", "5")) == 0  # fmt: skip
    s = [r["anchor_structure"] for r in log_of(shaped) if "anchor_structure" in r]
    f = [r["anchor_structure"] for r in log_of(free) if "anchor_structure" in r]
    assert len(s) == len(f) == 4 and s[0] == f[0] and abs(s[0]) < 1e-4 and s[1] > 1e-3
    a, b = (load_file(d / "adapter_model.safetensors") for d in (shaped, free))
    assert any(not torch.equal(a[k], b[k]) for k in a)
    assert main(args(base_dir, corpus, tmp_path / "z", "--w-anchor-structure", "1")) == 2
    assert "give --sscl-anchor" in capsys.readouterr().err
    no_sscl = ("--sscl-anchor", str(first), "--objectives", "mntp", "msg")
    assert main(args(base_dir, corpus, tmp_path / "x", *no_sscl)) == 2
    assert "needs sscl" in capsys.readouterr().err
    assert main(args(base_dir, corpus, tmp_path / "y", "--sscl-anchor", str(tmp_path))) == 2
    assert "--sscl-anchor" in capsys.readouterr().err  # no adapter there
    # an anchor of another rank than the run (a soup's ranks add): read at its own rank
    wide = tmp_path / "wide"
    assert main(args(base_dir, corpus, wide, "--sscl-anchor", str(first), "--lora-r", "8",
                     "--stage1-steps", "0", "--stage2-steps", "1")) == 0  # fmt: skip
    assert "anchor" in log_of(wide)[-1]
