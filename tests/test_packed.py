"""Base weights packed for fbgemm (magnet_model/packed.py): the same tokens as float32 on the
tiny Llama, under peft's LoRA layers and in mixed-adapter batches, and "auto" choosing them."""

import pytest
import torch
from fake_cpu import fake_cpu
from test_engine import TEXT, ids_of
from tiny_models import tiny_engine

from magnet_model import hardware, loading, packed
from magnet_model.errors import ConfigError, ModelLoadError
from magnet_model.settings import ModelSpec

needs_fbgemm = pytest.mark.skipif(not packed.supported(), reason="fbgemm needs x86 with AVX2")


@needs_fbgemm
@pytest.mark.parametrize("kind, tol", [("float16", 2e-3), ("int8", 5e-2)])
def test_a_packed_linear_computes_the_float_product(kind, tol):
    torch.manual_seed(0)
    linear = torch.nn.Linear(48, 24)
    x = torch.randn(2, 3, 48)
    mine = packed.PackedLinear(linear, kind)
    with torch.inference_mode():
        want, got = linear(x), mine(x)
    assert got.shape == want.shape and got.dtype == torch.float32
    assert (got - want).abs().max() <= tol * want.abs().max()
    assert mine.weight_bytes == (48 * 24 * 2 if kind == "float16" else 48 * 24 + 24 * 8)


@pytest.fixture(scope="module")
def engines():
    if not packed.supported():
        pytest.skip("fbgemm needs x86 with AVX2")
    return tiny_engine(), tiny_engine(packing="float16")


@needs_fbgemm
def test_every_base_linear_is_packed_under_the_lora_layers(engines):
    _, fp16 = engines
    lm = fp16.runner.lm
    kinds = {type(m).__name__ for n, m in lm.named_modules() if n.endswith("base_layer")}
    assert kinds == {"PackedLinear"}
    lora = [m for n, m in lm.named_modules() if "lora_A" in n and isinstance(m, torch.nn.Linear)]
    assert lora and all(m.weight.dtype == torch.float32 for m in lora)  # LoRA stays float
    head = fp16.runner.head
    assert isinstance(head, packed.PackedLinear)
    assert head.weight is lm.get_input_embeddings().weight  # tied: the rows code reads


@needs_fbgemm
@pytest.mark.parametrize("adapter", [None, "magnet", "llm2vec"])
def test_float16_weights_decode_the_same_tokens(engines, adapter):
    fp32, fp16 = engines
    prompt = "the cat sat on the"
    a = fp32.generate(prompt, adapter=adapter, max_new_tokens=12)
    b = fp16.generate(prompt, adapter=adapter, max_new_tokens=12)
    assert a.token_ids == b.token_ids
    assert ids_of(fp32.infill(TEXT, fixed_lengths=3)) == ids_of(fp16.infill(TEXT, fixed_lengths=3))


@needs_fbgemm
def test_float16_weights_give_close_logits_in_a_mixed_adapter_batch(engines):
    fp32, fp16 = engines
    ids = torch.tensor([[11, 33, 37, 40]] * 3)
    pos = torch.arange(4).expand(3, 4)
    adapters = ["base", "magnet", "llm2vec"]
    out = []
    for engine in engines:
        r = engine.runner
        hidden = r.forward_rows(ids, pos, None, None, adapters)  # stacked LoRA (multi_lora)
        out.append(r.logits(hidden, adapters))
    assert fp16.runner.row_loras  # the stacked LoRA over packed base layers ran
    assert (out[0] - out[1]).abs().max() <= 1e-2 * out[0].abs().max()  # float16's 11 bits
    assert torch.equal(out[0].argmax(-1), out[1].argmax(-1))


@needs_fbgemm
def test_int8_dynamic_runs_every_path():
    engine = tiny_engine(packing="int8")
    assert len(engine.generate("the cat sat", adapter="magnet", max_new_tokens=5).token_ids) == 5
    assert len(ids_of(engine.infill(TEXT, fixed_lengths=2))) == 3


@needs_fbgemm
def test_packed_weights_refuse_to_move(engines):
    _, fp16 = engines
    with pytest.raises(ConfigError, match="--dtype float32"):
        fp16.runner.to("meta")
    assert fp16.to_cuda_if_visible() == torch.device("cpu")


@pytest.mark.parametrize("kind", ["epyc-avx2", "xeon-amx"])
def test_auto_on_either_x86_cpu_is_float16_weights(kind, monkeypatch, tmp_path):
    """The CPU default is float16-weights on both kinds of CPU the project runs on: an AMX Xeon
    computes bfloat16 in hardware but decodes slowest in it (docs/performance.md)."""
    fake_cpu(monkeypatch, tmp_path, kind)
    assert hardware.has_fast_bf16() == (kind == "xeon-amx")  # the fake is what the code sees
    assert packed.supported()
    spec = ModelSpec(device="cpu")
    assert loading.resolve_dtype(spec, "cpu") == "float16-weights"
    assert loading.resolve_packing(spec) == "float16"
    assert loading.resolve_device(spec) == (torch.device("cpu"), torch.float32)
    bf16 = ModelSpec(device="cpu", dtype="bfloat16")  # asked for: served on either
    assert loading.resolve_packing(bf16) is None
    assert loading.resolve_device(bf16)[1] == torch.bfloat16


def test_auto_without_fbgemm_is_float32_and_a_packed_dtype_is_refused(monkeypatch, tmp_path):
    fake_cpu(monkeypatch, tmp_path, "no-x86-simd")
    spec = ModelSpec(device="cpu")
    assert loading.resolve_dtype(spec, "cpu") == "float32"
    assert loading.resolve_packing(spec) is None
    assert loading.resolve_device(spec)[1] == torch.float32
    with pytest.raises(ModelLoadError, match="AVX2"):
        loading.resolve_packing(ModelSpec(device="cpu", dtype="float16-weights"))


def test_an_explicit_dtype_stays_and_packed_dtypes_compute_in_float32():
    cpu = ModelSpec(device="cpu", dtype="float32")
    assert loading.resolve_dtype(cpu, "cpu") == "float32"  # the override stays the override
    assert loading.resolve_device(ModelSpec(device="cpu", dtype="int8-dynamic"))[1] == torch.float32


def test_a_packed_dtype_off_the_cpu_is_one_sentence():
    with pytest.raises(ModelLoadError, match="x86 CPUs"):
        loading.resolve_packing(ModelSpec(device="mps", dtype="float16-weights"))


@needs_fbgemm
def test_load_model_packs_after_the_adapters(tiny_dir):
    spec = ModelSpec(base=str(tiny_dir), device="cpu", dtype="float16-weights")
    loaded = loading.load_model(spec)
    assert loaded.packing == "float16" and loaded.dtype == torch.float32
    assert loaded.dtype_name == "float16-weights"  # what reports say, not float32
    assert isinstance(loaded.model.get_output_embeddings(), packed.PackedLinear)
    plain = loading.load_model(ModelSpec(base=str(tiny_dir), device="cpu", dtype="float32"))
    assert plain.packing is None and plain.dtype_name == "float32"
