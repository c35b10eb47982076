"""Loading a base model and adapters from every kind of reference, and failing clearly."""

import pytest
import torch

from magnet_model.errors import ModelLoadError
from magnet_model.loading import load_model, resolve_device
from magnet_model.settings import ModelSpec


def test_local_directory_loads_the_same_weights(tiny_dir, tiny_llama):
    loaded = load_model(ModelSpec(base=str(tiny_dir), device="cpu"))
    ids = torch.tensor([[11, 33, 37]])
    with torch.no_grad():
        assert torch.equal(loaded.model(ids).logits, tiny_llama(ids).logits)
    assert "local directory" in loaded.source
    assert loaded.dtype == torch.float32 and not loaded.model.training


def test_threads_setting_reaches_torch(tiny_dir):
    before = torch.get_num_threads()
    try:
        load_model(ModelSpec(base=str(tiny_dir), device="cpu", threads=2))
        assert torch.get_num_threads() == 2
        load_model(ModelSpec(base=str(tiny_dir), device="cpu", threads=1))
        assert torch.get_num_threads() == 1
    finally:
        torch.set_num_threads(before)


def test_auto_device_is_cpu_float32_without_cuda():
    if torch.cuda.is_available():
        pytest.skip("a CUDA device is present")
    assert resolve_device(ModelSpec()) == (torch.device("cpu"), torch.float32)
    with pytest.raises(ModelLoadError, match="--device cpu"):
        resolve_device(ModelSpec(device="cuda"))


def test_wrong_path_is_one_sentence(tmp_path):
    with pytest.raises(ModelLoadError, match="does not exist on disk"):
        load_model(ModelSpec(base=str(tmp_path / "missing")))
    with pytest.raises(ModelLoadError, match="no config.json"):
        load_model(ModelSpec(base=str(tmp_path)))


def test_hub_id_without_network_names_the_fix(monkeypatch):
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    with pytest.raises(ModelLoadError, match="local directory"):
        load_model(ModelSpec(base="nobody-xyz/no-such-model-xyz"))


def test_adapters_load_by_name_over_one_base(tiny_dir, tiny_tokenizer, tmp_path):
    from peft import LoraConfig, get_peft_model
    from tiny_models import make_tiny_llama

    refs = {}
    for seed, name in enumerate(("first", "second")):
        cfg = LoraConfig(r=2, target_modules=["q_proj", "v_proj"], init_lora_weights=False)
        base = make_tiny_llama(len(tiny_tokenizer))
        torch.manual_seed(seed + 1)  # a different LoRA per adapter
        get_peft_model(base, cfg).save_pretrained(tmp_path / name)
        refs[name] = str(tmp_path / name)
    loaded = load_model(ModelSpec(base=str(tiny_dir), adapters=refs))
    assert set(loaded.model.peft_config) == {"first", "second"}
    ids = torch.tensor([[11, 33, 37]])
    with torch.no_grad():
        loaded.model.set_adapter("first")
        a = loaded.model(ids).logits
        loaded.model.set_adapter("second")
        b = loaded.model(ids).logits
        with loaded.model.disable_adapter():
            base = loaded.model(ids).logits
    assert not torch.allclose(a, b) and not torch.allclose(a, base)


def test_bad_adapter_paths(tiny_dir, tmp_path):
    with pytest.raises(ModelLoadError, match="no adapter_config.json"):
        load_model(ModelSpec(base=str(tiny_dir), adapters={"magnet": str(tmp_path)}))
    with pytest.raises(ModelLoadError, match="does not exist on disk"):
        load_model(ModelSpec(base=str(tiny_dir), adapters={"magnet": "./nowhere"}))
