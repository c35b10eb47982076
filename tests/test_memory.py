"""One copy of the base weights: memory-mapped from the cached file, shared by every adapter."""

from __future__ import annotations

import gc
import sys

import pytest
import torch

from magnet_model import loading
from magnet_model.memory import file_backed_bytes, release_free_memory, rss_bytes
from magnet_model.settings import ModelSpec

linux = pytest.mark.skipif(not sys.platform.startswith("linux"), reason="reads /proc/self/maps")


def lora_dirs(tmp_path, tokenizer, names=("first", "second")) -> dict[str, str]:
    from peft import LoraConfig, get_peft_model
    from tiny_models import make_tiny_llama

    refs = {}
    for seed, name in enumerate(names):
        cfg = LoraConfig(r=2, target_modules=["q_proj", "v_proj"], init_lora_weights=False)
        torch.manual_seed(seed + 1)
        get_peft_model(make_tiny_llama(len(tokenizer)), cfg).save_pretrained(tmp_path / name)
        refs[name] = str(tmp_path / name)
    return refs


def base_params(model) -> list[torch.Tensor]:
    base = model.get_base_model() if hasattr(model, "get_base_model") else model
    return [p for n, p in base.named_parameters() if "lora_" not in n]


@linux
def test_base_weights_stay_in_the_mapped_file_with_two_adapters(tiny_dir, tiny_tokenizer, tmp_path):
    loaded = loading.load_model(
        ModelSpec(
            base=str(tiny_dir),
            device="cpu",
            dtype="float32",  # float16-weights (packed.py) keep a packed copy of their own
            adapters=lora_dirs(tmp_path, tiny_tokenizer),
        )
    )
    inside, outside = file_backed_bytes(base_params(loaded.model))
    assert inside > 0 and outside == 0  # no private copy of any base weight
    lora = [p for n, p in loaded.model.named_parameters() if "lora_" in n]
    assert file_backed_bytes(lora)[0] == 0  # the helper tells the two kinds apart


def test_adapters_wrap_the_base_weights_without_copying(tiny_dir, tiny_tokenizer, tmp_path):
    spec = ModelSpec(base=str(tiny_dir), device="cpu")
    model, _, _ = loading.load_base(spec)
    before = [p.data_ptr() for p in base_params(model)]
    wrapped = loading.attach_adapters(model, lora_dirs(tmp_path, tiny_tokenizer))
    assert [p.data_ptr() for p in base_params(wrapped)] == before


def test_dequantizing_frees_its_float_copy_before_the_cache_is_loaded(
    tmp_path, tiny_llama, tiny_tokenizer, monkeypatch
):
    """The first start builds a float model from the GGUF only to save it; the served copy is
    the saved file. The built one must be garbage, and its memory handed back, on return."""
    import transformers

    gguf = tmp_path / "model.gguf"
    gguf.write_bytes(b"GGUF")
    monkeypatch.setattr(loading.assets, "smollm2_gguf", lambda: gguf)
    built = []

    def from_pretrained(*args, **kwargs):
        built.append(True)
        return tiny_llama

    monkeypatch.setattr(transformers.AutoModelForCausalLM, "from_pretrained", from_pretrained)
    monkeypatch.setattr(
        transformers.AutoTokenizer, "from_pretrained", lambda *a, **k: tiny_tokenizer
    )
    released = []
    monkeypatch.setattr(loading, "release_free_memory", lambda: released.append(len(built)))
    target = loading.dequantize_embedded(tmp_path / "cache")
    assert (target / "model.safetensors").is_file()
    assert released == [1]  # after building (and saving) the float copy, before returning


def test_release_free_memory_lowers_anonymous_memory_after_a_large_free():
    release_free_memory()
    before = rss_bytes()
    block = torch.ones(64 * 2**20 // 4)  # 64 MiB, touched
    assert rss_bytes()["anon"] - before["anon"] > 32 * 2**20
    del block
    gc.collect()
    release_free_memory()
    after = rss_bytes()
    assert after["anon"] - before["anon"] < 16 * 2**20
    assert after["peak"] >= before["rss"]
