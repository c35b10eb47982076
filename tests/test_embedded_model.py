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
    loaded = loading.load_model(ModelSpec(adapters={}, device="cpu"))
    tok = loaded.tokenizer
    assert loaded.model.config.model_type == "llama"
    assert loaded.model.num_parameters() > 100_000_000
    ids = tok("The capital of France is", return_tensors="pt")
    with torch.no_grad():
        out = loaded.model.generate(**ids, max_new_tokens=8, do_sample=False)
    text = tok.decode(out[0, ids.input_ids.shape[1] :], skip_special_tokens=True)
    assert "Paris" in text
