"""The real embedded SmolLM2: de-quantized once into the cache, then loaded from it."""

import pytest
import torch

from magnet_model import loading
from magnet_model.settings import ModelSpec

pytestmark = pytest.mark.integration


def test_first_load_fills_the_cache_and_second_load_uses_it(tmp_path, monkeypatch):
    spec = ModelSpec(adapters={}, device="cpu", cache_dir=tmp_path)
    model, tokenizer, source = loading.load_base(spec)
    assert "de-quantized into" in source
    cached = loading.embedded_cache_path(tmp_path)
    assert (cached / "model.safetensors").stat().st_size > 400_000_000  # float32 weights
    assert not list(cached.parent.glob(".tmp-*"))  # written atomically, nothing left behind

    def no_gguf(*args, **kwargs):
        raise AssertionError("second load went back to the GGUF file")

    monkeypatch.setattr(loading, "dequantize_embedded", no_gguf)
    model2, tokenizer2, source2 = loading.load_base(spec)
    assert source2.startswith("embedded SmolLM2-135M-Instruct (cache ")
    ids = tokenizer("The capital of France is", return_tensors="pt").input_ids
    with torch.no_grad():
        assert torch.equal(model(ids).logits, model2(ids).logits)


def test_embedded_model_generates_text():
    # float32: the model as transformers holds it (the CPU default packs the linear layers for
    # fbgemm, whose weights num_parameters does not count); tests/test_engine_real.py decodes
    # with the default
    loaded = loading.load_model(ModelSpec(adapters={}, device="cpu", dtype="float32"))
    tok = loaded.tokenizer
    assert loaded.model.config.model_type == "llama"
    assert loaded.model.num_parameters() > 100_000_000
    ids = tok("The capital of France is", return_tensors="pt")
    with torch.no_grad():
        out = loaded.model.generate(**ids, max_new_tokens=8, do_sample=False)
    text = tok.decode(out[0, ids.input_ids.shape[1] :], skip_special_tokens=True)
    assert "Paris" in text


@pytest.fixture(scope="module")
def smollm2():
    return loading.load_model(ModelSpec(adapters={}, device="cpu"))


def test_role_tokens_have_rows_of_their_own(smollm2):
    from magnet_model import head_rows
    from magnet_model.tokens import choose_token_roles

    tok, lm = smollm2.tokenizer, smollm2.model
    roles = choose_token_roles(tok, lm)
    weight = lm.get_output_embeddings().weight
    for t in roles.special_ids():
        assert head_rows.near_duplicates(weight, t) == [], tok.convert_ids_to_tokens(t)
    assert head_rows.reachable(lm, roles.span_end) > 0.9
    # the first adapter's <span_end>, <issue_comment>, shares its row with 16 tokens
    first = tok.convert_tokens_to_ids("<issue_comment>")
    assert len(head_rows.tie_of(weight, first)) == 17
    assert first not in roles.special_ids()


def test_never_trained_rows_by_the_weights(smollm2):
    """The tied-row cluster and the junk seen in fills (LEGATO, PlaneProtection,
    InterfaceSelection) are never-trained rows; common words are not."""
    from magnet_model import head_rows

    tok, weight = smollm2.tokenizer, smollm2.model.get_output_embeddings().weight
    never = set(head_rows.undertrained(weight))
    ids = tok.convert_tokens_to_ids
    first = ids("<issue_comment>")
    assert set(head_rows.tie_of(weight, first)) <= never
    assert {ids("LEGATO"), ids("PlaneProtection"), ids("InterfaceSelection")} <= never
    common = tok(" the of and a to in is was . , The He It", add_special_tokens=False).input_ids
    assert not set(common) & never
    assert 17 <= len(never) < 100  # a small cluster, not a share of the vocabulary
