"""The engine on the real embedded model (SmolLM2-135M-Instruct, adapter off): continuation,
the zero-shot prompted baseline, MAGNET-layout infill (cached = reference) and embeddings."""

from __future__ import annotations

import numpy as np
import pytest

pytestmark = pytest.mark.integration

EIFFEL = "The Eiffel Tower is located in [blank], the capital of France."


@pytest.fixture(scope="module")
def engine():
    from magnet_model.inference.engine import Engine
    from magnet_model.settings import ModelSpec

    return Engine.from_spec(ModelSpec(adapters={}))


def test_continuation_knows_paris_and_streams(engine):
    whole = engine.generate("The capital of France is", max_new_tokens=6)
    assert "Paris" in whole.text and len(whole.token_ids) <= 6
    assert "".join(engine.continue_text("The capital of France is", max_new_tokens=6)) == whole.text


def test_zero_shot_prompted_infill(engine):
    r = engine.infill_prompted(EIFFEL, shots=0, max_span_tokens=12)
    assert r.system == "zero-shot" and "Paris" in r.spans[0].text
    assert r.filled.startswith("The Eiffel Tower is located in Paris")
    assert r.filled.endswith(", the capital of France.")


def test_layout_infill_cached_equals_reference(engine):
    kw = dict(adapter=None, fixed_lengths=[4, 3])
    text = "The Eiffel Tower is in [blank]. It was built in [blank] for a world fair."
    fast, slow = engine.infill(text, **kw), engine.infill_reference(text, **kw)
    assert [s.token_ids for s in fast.spans] == [s.token_ids for s in slow.spans]
    assert [s.end_reason for s in fast.spans] == ["fixed", "fixed"]


def test_embeddings_are_sane(engine):
    v = engine.embed_sentences(
        ["A man is playing a guitar.", "A person plays the guitar.", "Stocks fell sharply today."],
        adapter=None,
    )
    assert v.shape == (3, engine.runner.hidden_size) and np.isfinite(v).all()
    sims = v @ v.T
    assert sims[0, 1] > sims[0, 2] and sims[0, 1] > sims[1, 2]
    tv = engine.embed_tokens("Hello world, this is a test.", adapter=None)
    assert tv.tokens[:2] == ["Hello", "Ġworld"] and tv.vectors.shape == (8, v.shape[1])


@pytest.fixture(scope="module")
def magnet():
    from magnet_model.inference.engine import Engine
    from magnet_model.settings import ModelSpec, shipped_adapters

    return Engine.from_spec(ModelSpec(adapters=shipped_adapters()))


def test_a_word_blank_gets_a_word_that_fits_from_another_first_token(magnet):
    # the shipped adapter's likeliest first token here is " was" ("She was the letter ..."):
    # decoded from four first tokens, the fill that reads best with the text after it is a verb
    text = "She [blank] the letter and put it back in the drawer."
    greedy = magnet.infill(text, fill={"branches": 1}).spans[0].text.strip()
    four = magnet.infill(text, fill={"branches": 4}).spans[0].text.strip()
    assert greedy == "was"
    assert four in {"wrote", "read", "opened", "folded", "took", "signed", "found", "received"}
