"""The model card and loss plots are derived from what the trainer wrote."""

from __future__ import annotations

import json

import pytest
from tiny_models import TINY_CORPUS, make_tiny_llama, make_tiny_tokenizer

from magnet_model.adapter_meta import load_meta
from magnet_model.card import count_tokens, final_losses, render_card, train_config
from magnet_model.errors import ModelLoadError
from magnet_model.train import load_corpus, main


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


def test_card_and_plots(trained):
    cmd = "python -m magnet_model.train ..."
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
