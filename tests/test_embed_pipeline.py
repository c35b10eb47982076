"""The sentence-embedding pipeline (packed rows, batch tokenisation, fused LoRA) gives the
vectors of the plain computation: one sentence per row, right padding, a 4-D mask built by
magnet_model.masks, positions counted over real tokens, peft's own LoRA forward."""

from __future__ import annotations

import numpy as np
import pytest
import torch
from tiny_models import tiny_engine

from magnet_model.errors import InputError
from magnet_model.inference.embedding import pack_rows
from magnet_model.inference.multi_lora import RowLora
from magnet_model.masks import additive, allowed_mask, position_ids_for

SENTENCES = [
    "a",
    "the cat sat on the mat and the dog ran to the tree .",
    "",
    "two big dogs",
    "the king of france was in paris on the first day of the war , the queen too .",
    "the sun . the moon !",
    "red",
    "a small bird flew over the river in the city at night .",
    "one two three",
    "music",
    " ".join(["the old man and the child sat by the river in the city ."] * 3),
]


@pytest.fixture(scope="module")
def engine():
    return tiny_engine()


def plain_vectors(engine, texts, adapter, pooling=None) -> np.ndarray:
    """The computation before packing: each sentence alone in its row, tokenised alone."""
    name = engine.runner.resolve_adapter(adapter)
    plan = engine.sentence_plan(name)
    pooling = pooling or plan.pooling
    tok = engine.tokenizer
    rows = []
    for t in texts:
        body = tok(t, add_special_tokens=False).input_ids or (
            [] if plan.end else [tok.eos_token_id]
        )
        rows.append((plan.prefix + body + plan.end, len(plan.prefix)))
    width = max(len(r) for r, _ in rows)
    ids = torch.tensor([r + [tok.pad_token_id] * (width - len(r)) for r, _ in rows])
    real = torch.tensor([[1] * len(r) + [0] * (width - len(r)) for r, _ in rows])
    mask = additive(allowed_mask(plan.mode, real))
    with engine.runner.using(name):
        h = engine.runner.hidden_states(ids, mask, position_ids_for(real))
    if pooling == "last":
        v = h[torch.arange(len(rows)), real.sum(1) - 1]
    else:
        cols = torch.arange(width)[None, :]
        starts = torch.tensor([s for _, s in rows])[:, None]
        pool = ((cols >= starts) & real.bool()).float()[..., None]
        v = (h * pool).sum(1) / pool.sum(1)
    return torch.nn.functional.normalize(v, dim=-1).numpy()


@pytest.mark.parametrize("adapter", ["magnet", "llm2vec", None])
@pytest.mark.parametrize("batch_size", [2, 3, 32])
def test_packed_pipeline_equals_one_sentence_per_row(engine, adapter, batch_size):
    got = engine.embed_sentences(SENTENCES, adapter=adapter, batch_size=batch_size)
    want = plain_vectors(engine, SENTENCES, adapter)
    np.testing.assert_allclose(got, want, atol=2e-5)
    # the case under test: some row really holds several sentences
    plan = engine.sentence_plan(adapter)
    lengths = [len(r) for r, _ in engine.sentence_rows(SENTENCES, plan)]
    assert any(len(row) > 1 for batch in pack_rows(lengths, batch_size) for row in batch)


@pytest.mark.parametrize(("adapter", "pooling"), [("magnet", "mean"), ("llm2vec", "last")])
def test_pooling_override_pools_the_same_hidden_states_the_other_way(engine, adapter, pooling):
    got = engine.embed_sentences(SENTENCES, adapter=adapter, batch_size=3, pooling=pooling)
    np.testing.assert_allclose(got, plain_vectors(engine, SENTENCES, adapter, pooling), atol=2e-5)
    assert not np.allclose(got, engine.embed_sentences(SENTENCES, adapter=adapter), atol=1e-3)
    same = engine.sentence_plan(adapter).pooling
    np.testing.assert_array_equal(
        engine.embed_sentences(SENTENCES, adapter=adapter, pooling=same),
        engine.embed_sentences(SENTENCES, adapter=adapter),
    )
    with pytest.raises(InputError, match="Pooling must be one of last, mean"):
        engine.embed_sentences(SENTENCES, adapter=adapter, pooling="max")


def test_sentence_rows_match_tokenising_one_by_one(engine):
    plan = engine.sentence_plan("magnet")
    rows = engine.sentence_rows(SENTENCES, plan)
    for text, (ids, start) in zip(SENTENCES, rows, strict=True):
        body = engine.tokenizer(text, add_special_tokens=False).input_ids
        assert ids == plan.prefix + body + plan.end and start == len(plan.prefix)
    base = engine.sentence_plan("base")
    assert engine.sentence_rows([""], base)[0][0] == [engine.tokenizer.eos_token_id]


def test_pack_rows_places_every_sentence_once_within_the_batch_width():
    lengths = [30, 3, 12, 7, 30, 18, 5, 11, 2, 29, 9, 14]
    batches = pack_rows(lengths, batch_size=2)
    placed = sorted(i for batch in batches for row in batch for i in row)
    assert placed == list(range(len(lengths)))
    padded = 0
    for batch in batches:
        assert 1 <= len(batch) <= 2
        width = max(lengths[row[0]] for row in batch)  # a row starts with its longest
        fills = [sum(lengths[i] for i in row) for row in batch]
        assert max(fills) <= width
        padded += len(batch) * max(fills)
    one_per_row = sorted(lengths, reverse=True)
    padded_plain = sum(max(one_per_row[i : i + 2]) * 2 for i in range(0, len(lengths), 2))
    assert padded < padded_plain
    assert pack_rows([], 4) == []


def test_stacked_lora_equals_peft_per_row_and_is_undone(engine):
    """Rows with llm2vec, magnet and no adapter in one batch: each row gets what peft gives it."""
    layers = [m for m in engine.model.modules() if hasattr(m, "lora_A")]
    torch.manual_seed(0)
    inputs = [torch.randn(3, 5, m.in_features) for m in layers]
    want = []
    for row, name in enumerate(["llm2vec", "magnet", "base"]):
        with engine.runner.using(name):
            want.append([m(i[row : row + 1]) for m, i in zip(layers, inputs, strict=True)])
    rows = RowLora.build(engine.model, ("llm2vec", "magnet"))
    assert rows is not None and len(rows.layers) == len(layers) > 0
    with (
        engine.runner.using("base"),
        rows.patched(["llm2vec", "magnet", "base"], torch.float32, "cpu"),
    ):
        got = [m(i) for m, i in zip(layers, inputs, strict=True)]
    assert all("forward" not in vars(m) for m in layers)  # peft's forward is back
    for k in range(len(layers)):
        for row in range(3):
            torch.testing.assert_close(got[k][row : row + 1], want[row][k], atol=1e-5, rtol=1e-5)
    assert not torch.allclose(want[0][0], want[2][0])  # the adapter does change the output
