"""Loading a base model and adapters from every kind of reference, and failing clearly."""

import pytest
import torch
from fake_cpu import CPUS, fake_cpu

from magnet_model import loading
from magnet_model.errors import ModelLoadError
from magnet_model.loading import load_model, resolve_device
from magnet_model.settings import ModelSpec


def test_local_directory_loads_the_same_weights(tiny_dir, tiny_llama):
    loaded = load_model(ModelSpec(base=str(tiny_dir), device="cpu", dtype="float32"))
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


@pytest.mark.parametrize("kind", sorted(CPUS))
def test_auto_device_is_cpu_float32_without_cuda(kind, monkeypatch, tmp_path):
    """float32 activations on every kind of CPU (the weights: test_packed.py)."""
    if torch.cuda.is_available():
        pytest.skip("a CUDA device is present")
    fake_cpu(monkeypatch, tmp_path, kind)
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


@pytest.mark.parametrize("name", ["cpu", "to", "a.b"])
def test_an_adapter_name_torch_uses_is_one_sentence(tiny_dir, tiny_tokenizer, tmp_path, name):
    from peft import LoraConfig, get_peft_model
    from tiny_models import make_tiny_llama

    cfg = LoraConfig(r=2, target_modules=["q_proj"], init_lora_weights=False)
    get_peft_model(make_tiny_llama(len(tiny_tokenizer)), cfg).save_pretrained(tmp_path / "a")
    spec = ModelSpec(
        base=str(tiny_dir), adapters={"first": str(tmp_path / "a"), name: str(tmp_path / "a")}
    )
    with pytest.raises(ModelLoadError, match="cannot name an adapter"):
        load_model(spec)
    loaded = load_model(spec, skip_failed_adapters=True)  # the other adapter is served
    assert set(loaded.model.peft_config) == {"first"} and name in loaded.failed


def test_bad_adapter_paths(tiny_dir, tmp_path):
    with pytest.raises(ModelLoadError, match="no adapter_config.json"):
        load_model(ModelSpec(base=str(tiny_dir), adapters={"magnet": str(tmp_path)}))
    with pytest.raises(ModelLoadError, match="does not exist on disk"):
        load_model(ModelSpec(base=str(tiny_dir), adapters={"magnet": "./nowhere"}))


def _lora_dir(path, tokenizer, seed: int, **llama) -> str:
    """A LoRA saved by peft for a tiny Llama (llama: its config overrides, e.g. wider)."""
    from peft import LoraConfig, get_peft_model
    from tiny_models import make_tiny_llama

    cfg = LoraConfig(r=2, target_modules=["q_proj", "v_proj"], init_lora_weights=False)
    torch.manual_seed(seed)
    get_peft_model(make_tiny_llama(len(tokenizer), **llama), cfg).save_pretrained(path)
    return str(path)


def _count_base_loads(monkeypatch) -> list:

    calls = []
    real = loading.load_base

    def counted(spec):
        calls.append(spec.base)
        return real(spec)

    monkeypatch.setattr(loading, "load_base", counted)
    return calls


def test_one_broken_adapter_leaves_the_others_served(
    tiny_dir, tiny_tokenizer, tmp_path, monkeypatch
):
    """A half-saved adapter (config, no weights) and a missing one are reported by name, as
    typed errors; the good adapter is served; the base model is loaded once."""
    half = tmp_path / "half"
    _lora_dir(half, tiny_tokenizer, seed=1)
    for weights in half.glob("adapter_model.*"):
        weights.unlink()
    good = _lora_dir(tmp_path / "good", tiny_tokenizer, seed=2)
    refs = {"magnet": str(half), "llm2vec": good, "other": str(tmp_path / "nowhere")}
    loads = _count_base_loads(monkeypatch)
    loaded = load_model(ModelSpec(base=str(tiny_dir), adapters=refs), skip_failed_adapters=True)
    assert len(loads) == 1
    assert set(loaded.model.peft_config) == {"llm2vec"} and loaded.adapters == {"llm2vec": good}
    assert set(loaded.failed) == {"magnet", "other"}
    for name, error in loaded.failed.items():
        assert isinstance(error, ModelLoadError) and error.adapter == name
        assert f"'{name}'" in str(error)
    alone = load_model(ModelSpec(base=str(tiny_dir), adapters={"llm2vec": good}))
    ids = torch.tensor([[11, 33, 37]])
    with torch.no_grad():
        assert torch.equal(loaded.model(ids).logits, alone.model(ids).logits)
    # without skip_failed_adapters the first failure is raised, naming its adapter
    with pytest.raises(ModelLoadError, match="adapter 'magnet'") as info:
        load_model(ModelSpec(base=str(tiny_dir), adapters=refs))
    assert info.value.adapter == "magnet"


def test_adapter_of_another_base_is_reported_and_the_base_stays_clean(
    tiny_dir, tiny_tokenizer, tmp_path, monkeypatch
):
    """An adapter trained on a wider model fails only once peft has wrapped the base: the
    base is loaded afresh, and the next adapter runs exactly as when loaded alone."""
    wide = _lora_dir(tmp_path / "wide", tiny_tokenizer, seed=1, hidden_size=48)
    good = _lora_dir(tmp_path / "good", tiny_tokenizer, seed=2)
    loads = _count_base_loads(monkeypatch)
    spec = ModelSpec(base=str(tiny_dir), adapters={"magnet": wide, "llm2vec": good})
    loaded = load_model(spec, skip_failed_adapters=True)
    assert len(loads) == 2  # the wide adapter had changed the first copy's layers
    assert set(loaded.failed) == {"magnet"} and loaded.failed["magnet"].adapter == "magnet"
    assert "size mismatch" in str(loaded.failed["magnet"])
    assert set(loaded.model.peft_config) == {"llm2vec"}
    alone = load_model(ModelSpec(base=str(tiny_dir), adapters={"llm2vec": good}))
    ids = torch.tensor([[11, 33, 37]])
    with torch.no_grad():
        assert torch.equal(loaded.model(ids).logits, alone.model(ids).logits)
    # a wide adapter after a good one is deleted again; the good one is untouched
    loaded = load_model(
        ModelSpec(base=str(tiny_dir), adapters={"llm2vec": good, "magnet": wide}),
        skip_failed_adapters=True,
    )
    assert set(loaded.model.peft_config) == {"llm2vec"} and set(loaded.failed) == {"magnet"}
    with torch.no_grad():
        assert torch.equal(loaded.model(ids).logits, alone.model(ids).logits)


def test_broken_base_is_one_clear_error_even_when_skipping_adapters(tmp_path, tiny_tokenizer):
    good = _lora_dir(tmp_path / "good", tiny_tokenizer, seed=2)
    spec = ModelSpec(base=str(tmp_path / "missing"), adapters={"magnet": good})
    with pytest.raises(ModelLoadError, match="does not exist on disk") as info:
        load_model(spec, skip_failed_adapters=True)
    assert info.value.adapter is None  # the base model, not an adapter
