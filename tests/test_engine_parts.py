"""The pieces the engine is built from, each in its one home: the incremental and packed mask
rules agree with the full masks, span pooling with training's pooling, Sampling checks its
settings, and the peft version check speaks up (the import graph: tests/test_layout.py)."""

from __future__ import annotations

import pytest
import torch
from tiny_models import make_tiny_tokenizer, tiny_engine

from magnet_model.errors import ConfigError, InputError
from magnet_model.inference import multi_lora
from magnet_model.inference.sampling import Sampling
from magnet_model.masks import (
    allowed_mask,
    causal_see,
    hybrid_allowed,
    hybrid_step_see,
    packed_allowed,
)
from magnet_model.pooling import pool, pool_spans
from magnet_model.tokens import bos_of


def test_a_decoding_step_sees_what_the_full_hybrid_mask_lets_it_see():
    """Context of 4, span 1 already has 2 tokens, span 2 has 1; one new token each: the step
    rule gives exactly the rows of the whole sequence's hybrid mask for those tokens."""
    keys = torch.tensor([0, 0, 0, 0, 1, 1, 2])
    new = torch.tensor([1, 2])
    step = hybrid_step_see(torch.cat([keys, new]), new)
    seg = torch.cat([keys, new])[None]
    full = hybrid_allowed(torch.ones_like(seg), seg)[0, 0]
    # the full mask orders tokens by position: a span's new token sees its own earlier ones
    assert torch.equal(step, full[-2:])
    assert step[0].tolist() == [1, 1, 1, 1, 1, 1, 0, 1, 0]


def test_causal_see_matches_the_causal_mask():
    full = allowed_mask("causal", torch.ones(1, 5))[0, 0]
    assert torch.equal(causal_see(2, 3), full[2:])
    assert causal_see([True, False], 1).tolist() == [[True, False, True]]


def test_packed_rows_are_the_block_diagonal_of_sentences_alone():
    seg = torch.tensor([[1, 1, 1, 2, 2, 0]])
    for causal, mode in ((True, "causal"), (False, "bidirectional")):
        got = packed_allowed(seg, causal)[0, 0]
        a = allowed_mask(mode, torch.ones(1, 3))[0, 0]
        b = allowed_mask(mode, torch.ones(1, 2))[0, 0]
        assert torch.equal(got[:3, :3], a) and torch.equal(got[3:5, 3:5], b)
        assert not got[:3, 3:].any() and not got[3:5, :3].any()
        assert got[5].tolist() == [False] * 5 + [True]  # padding sees itself only


@pytest.mark.parametrize("pooling", ["last", "mean"])
def test_span_pooling_is_trainings_pooling(pooling):
    h = torch.randn(2, 6, 4, generator=torch.Generator().manual_seed(0))
    mask = torch.tensor([[0, 1, 1, 1, 0, 0], [0, 0, 1, 1, 1, 1]])
    want = pool(h, mask, pooling)
    got = pool_spans(h, [(0, 1, 4), (1, 2, 6)], pooling)
    torch.testing.assert_close(got, want)
    with pytest.raises(ValueError):
        pool_spans(h, [(0, 1, 4)], "cls")


def test_sampling_checks_its_settings_and_needs_a_start_to_draw():
    with pytest.raises(InputError):
        Sampling(True, temperature=0).start()
    with pytest.raises(InputError):
        Sampling(top_p=1.5).start()
    with pytest.raises(ValueError):
        Sampling(True).pick(torch.zeros(1, 3))
    assert Sampling(True).start().seed is not None  # a drawn seed, reported to reproduce it
    assert Sampling().pick(torch.tensor([[0.0, 2.0, 1.0]])).tolist() == [1]


def test_bos_of_is_the_token_the_tokenizer_puts_first():
    tok = make_tiny_tokenizer()  # its BOS is never added to text, like SmolLM2's
    assert tok.bos_token_id is not None and bos_of(tok) is None


def test_an_untested_peft_warns_and_missing_internals_stop(monkeypatch):
    engine = tiny_engine()
    monkeypatch.setattr(multi_lora, "_checked", {})  # warned once per process: forget it
    monkeypatch.setattr(multi_lora.metadata, "version", lambda name: "9.0.0")
    with pytest.warns(UserWarning, match="not the tested version"):
        multi_lora.check_peft()
    lora = engine.model.base_model
    monkeypatch.delattr(type(lora), "_enable_peft_forward_hooks")
    with pytest.raises(ConfigError, match="_enable_peft_forward_hooks"):
        multi_lora.check_peft(lora)
