"""The model card and loss plots are derived from what the trainer wrote."""

from __future__ import annotations

import dataclasses
import json

import pytest
from huggingface_hub import ModelCard
from tiny_models import TINY_CORPUS, make_tiny_llama, make_tiny_tokenizer

from magnet_model.adapter_meta import load_meta
from magnet_model.errors import ModelLoadError
from magnet_model.training.card import (
    EMBEDDED_BASE_ID,
    base_model_of,
    count_tokens,
    final_losses,
    render_card,
    train_config,
)
from magnet_model.training.train import load_corpus, main


@pytest.fixture(scope="module")
def trained(tmp_path_factory):
    root = tmp_path_factory.mktemp("card")
    tok = make_tiny_tokenizer()
    make_tiny_llama(len(tok)).save_pretrained(root / "base")
    tok.save_pretrained(root / "base")
    corpus = root / "corpus.txt"
    corpus.write_text("\n".join(TINY_CORPUS[:4]) + "\n")
    out = root / "magnet"
    argv = [
        "--output", str(out), "--base-model", str(root / "base"), "--corpus", str(corpus),
        "--device", "cpu", "--max-length", "10", "--batch-size", "2", "--stage1-steps", "3",
        "--stage2-steps", "2", "--sscl-max-length", "4", "--no-progress", "--lora-r", "2",
    ]  # fmt: skip
    assert main(argv) == 0
    return out


def test_the_trainer_leaves_no_template_card_and_publish_asks_for_the_real_one(trained, capsys):
    """peft's save_pretrained writes a "[More Information Needed]" README; the trainer removes
    it, so publish's refusal of an adapter without its card still holds after training."""
    from magnet_model.training import publish

    root = trained.parent
    out = root / "one-step"
    argv = [
        "--output", str(out), "--base-model", str(root / "base"), "--corpus",
        str(root / "corpus.txt"), "--device", "cpu", "--max-length", "10", "--batch-size", "2",
        "--stage1-steps", "1", "--stage2-steps", "1", "--sscl-max-length", "4", "--no-progress",
        "--lora-r", "2",
    ]  # fmt: skip
    assert main(argv) == 0
    assert (out / "adapter_model.safetensors").is_file() and not (out / "README.md").exists()
    capsys.readouterr()
    assert publish.main([str(out), "you/magnet", "--dry-run"]) == 2
    assert "README.md" in capsys.readouterr().err
    # a card already there (written by the card command) is kept when the output is written again
    (out / "README.md").write_text("---\nlibrary_name: peft\n---\n# the real card\n")
    assert main([*argv, "--overwrite"]) == 0
    assert "# the real card" in (out / "README.md").read_text()


def test_tokens_seen_replays_the_trainer_sampler(trained):
    tok = make_tiny_tokenizer()
    cfg = train_config(load_meta(trained).training)
    examples = load_corpus(cfg, tok)
    lengths = sorted(len(e.ids) for e in examples)
    seen = count_tokens(cfg, 5, tok)
    # 5 steps x batch 2 masked views; the last 2 add x and x+ cut to 4 tokens (MIN_TOKENS).
    assert lengths[0] * 10 <= seen.token_views <= lengths[-1] * 10
    assert seen.sentence_views == 2 * 2 * 2 * 4
    assert count_tokens(cfg, 3, tok).sentence_views == 0  # stage 1 has no SSCL
    # 2 ranks of batch 2 see what one process of batch 4 sees (the global micro-batch)
    double = dataclasses.replace(cfg, batch_size=4)
    assert count_tokens(cfg, 5, tok, world=2) == count_tokens(double, 5, tok)
    assert count_tokens(cfg, 5, tok, world=2).sentence_views == 2 * seen.sentence_views


def test_card_and_plots(trained):
    cmd = "python -m magnet_model.training.train ..."
    card = render_card(trained, cmd, "a test machine", make_tiny_tokenizer())
    assert "| steps | 5 of 5 planned (3 in stage 1, 2 in stage 2)" in card
    assert cmd in card and "a test machine" in card
    for obj in ("mntp", "msg", "sscl"):
        png = trained / f"loss_{obj}.png"
        assert png.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
        assert f"![loss_{obj}](loss_{obj}.png)" in card
    log = [json.loads(x) for x in (trained / "train_log.jsonl").read_text().splitlines()]
    assert final_losses(log)["sscl"] == pytest.approx(sum(r["sscl"] for r in log[3:]) / 2)


def test_card_needs_a_trained_adapter(tmp_path):
    with pytest.raises(ModelLoadError):
        render_card(tmp_path, "cmd", "hw", make_tiny_tokenizer())


def test_a_run_recorded_before_the_vital_extracts_replays_the_wikipedia_corpus_alone():
    old = train_config({"output": "x", "corpus": []})  # what earlier trainers recorded
    new = train_config({"output": "x", "corpus": [], "vital_extracts": True})
    assert not old.vital_extracts and new.vital_extracts
    tok = make_tiny_tokenizer()
    assert len(load_corpus(old, tok)) < len(load_corpus(new, tok))


def test_the_base_model_comes_from_the_adapter_not_a_constant(trained, tmp_path):
    """PEFT's base_model_name_or_path names the base when it is a Hub id; a local folder (the
    tiny base here, or the de-quantized embedded model) gives way to the base the card is
    written with; the metadata block is a ModelCard's, which the Hub reads."""
    tok = make_tiny_tokenizer()
    local = ModelCard(render_card(trained, "cmd", "hw", tok))
    assert local.data.base_model is None  # a local folder is no Hub id
    assert f"| base model | {trained.parent / 'base'} |" in local.text
    assert local.data.library_name == "peft" and "magnet" in local.data.tags
    embedded = ModelCard(render_card(trained, "cmd", "hw", tok, base="embedded"))
    assert embedded.data.base_model == EMBEDDED_BASE_ID
    assert "a LoRA adapter for SmolLM2-135M-Instruct" in embedded.text

    copy = tmp_path / "adapter"
    copy.mkdir()
    for f in trained.iterdir():
        if f.is_file():
            (copy / f.name).write_bytes(f.read_bytes())
    config = json.loads((copy / "adapter_config.json").read_text())
    config["base_model_name_or_path"] = "org/tiny-llama"
    (copy / "adapter_config.json").write_text(json.dumps(config))
    assert base_model_of(copy, "embedded") == "org/tiny-llama"  # the recorded id wins
    hub = ModelCard(render_card(copy, "cmd", "hw", tok))
    assert hub.data.base_model == "org/tiny-llama"
    assert "# adapter: a LoRA adapter for tiny-llama" in hub.text


def test_card_cli_writes_the_readme_with_the_given_base(trained, capsys):
    from magnet_model.training import card

    base = str(trained.parent / "base")
    argv = [
        str(trained),
        "--command",
        "python -m magnet_model.training.train --output x --stage1-steps 2",
        "--hardware",
        "hw",
        "--note",
        "Stopped by hand at step 1.",
    ]
    assert card.main([*argv, "--base-model", base]) == 0
    written = ModelCard.load(trained / "README.md")
    assert f"| base model | {base} |" in written.text and written.data.library_name == "peft"
    assert "--stage1-steps 2\n```\n\nStopped by hand at step 1.\n" in written.text


@pytest.mark.parametrize(
    "command, why",
    [
        ("python -m magnet_model.training.train --output x  (stopped by hand)", "unrecognized"),
        ("python -m magnet_model.training.train --output x --cpu-bf16 (stopped", "Truthy"),
        ("python -m magnet_model.training.train --output x --objectives mntp,nope", "nope"),
        ("train --output x", "must start with"),
    ],
)
def test_card_refuses_a_command_that_would_not_run_as_written(trained, capsys, command, why):
    from magnet_model.training import card

    before = (trained / "README.md").read_text() if (trained / "README.md").exists() else None
    assert card.main([str(trained), "--command", command, "--hardware", "hw"]) == 2
    err = capsys.readouterr().err
    assert "error: --command" in err and why in err, err
    after = (trained / "README.md").read_text() if (trained / "README.md").exists() else None
    assert after == before  # nothing written


def test_card_names_the_role_tokens_and_a_calibration(trained, tmp_path):
    import shutil

    from magnet_model.adapter_meta import save_meta

    tok = make_tiny_tokenizer()
    card = render_card(trained, "cmd", "here", tok)
    assert "| token roles | mask `<filename>`" in card and "rows trained" in card
    assert "calibration" not in card  # none fitted
    copy = tmp_path / "calibrated"
    shutil.copytree(trained, copy)
    meta = load_meta(copy)
    meta.calibration = {
        "span_end_bias": 1.5,
        "tie": [9, 5],
        "fitted_on": "8 texts",
        "end_nll": [3.0, 2.0],
        "command": "python -m magnet_model.evaluation.calibrate",
    }
    save_meta(copy, meta)
    card = render_card(copy, "cmd", "here", tok)
    assert "a calibration, not training: +1.500 added to the <span_end> logit" in card
    assert "shared by 2 tokens" in card and "3.0 -> 2.0 nats" in card


def test_card_states_a_sentence_gap_chosen_after_training(trained, tmp_path):
    import shutil

    from magnet_model.adapter_meta import save_meta
    from magnet_model.layout import GapRule

    tok = make_tiny_tokenizer()
    copy = tmp_path / "sentence-gap"
    shutil.copytree(trained, copy)
    meta = load_meta(copy)
    meta.gap = GapRule(default=32, hint_share=0.5, hint_noise=0.2)
    save_meta(copy, meta)
    assert "between sentences" not in render_card(copy, "cmd", "here", tok)
    meta.gap = dataclasses.replace(meta.gap, sentence=56)
    save_meta(copy, meta)
    card = render_card(copy, "cmd", "here", tok)
    assert "a blank of unknown length between sentences gets 56 positions" in card
