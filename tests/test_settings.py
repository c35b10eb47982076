"""One model spec from MAGNET_* variables, CLI flags overriding, clear errors on bad values."""

import argparse

import pytest

from magnet_model import settings
from magnet_model.errors import ConfigError
from magnet_model.settings import ModelSpec, add_model_args, parse_adapters


@pytest.fixture(autouse=True)
def clean_env(monkeypatch):
    for var in (
        "MAGNET_BASE_MODEL",
        "MAGNET_ADAPTERS",
        "MAGNET_DEVICE",
        "MAGNET_DTYPE",
        "MAGNET_THREADS",
    ):
        monkeypatch.delenv(var, raising=False)


def parse(argv):
    parser = argparse.ArgumentParser()
    add_model_args(parser)
    return ModelSpec.from_args(parser.parse_args(argv))


def test_defaults_are_offline_and_auto(monkeypatch, tmp_path):
    monkeypatch.setenv("MAGNET_CACHE_DIR", str(tmp_path))
    spec = ModelSpec.from_env()
    assert spec.base == "embedded" and spec.device == "auto" and spec.dtype == "auto"
    assert spec.cache_dir == tmp_path


def test_env_then_flags_override(monkeypatch):
    monkeypatch.setenv("MAGNET_BASE_MODEL", "meta-llama/Llama-2-7b-hf")
    monkeypatch.setenv("MAGNET_ADAPTERS", "magnet=org/magnet-lora")
    monkeypatch.setenv("MAGNET_DEVICE", "cuda")
    spec = parse([])
    assert spec.base == "meta-llama/Llama-2-7b-hf"
    assert spec.adapters == {"magnet": "org/magnet-lora"}
    assert spec.device == "cuda"
    spec = parse(["--device", "cpu", "--adapters", "none", "--dtype", "bfloat16"])
    assert (spec.device, spec.adapters, spec.dtype) == ("cpu", {}, "bfloat16")


def test_shipped_adapters_are_the_embedded_default(monkeypatch, tmp_path):
    for name in ("magnet", "llm2vec"):
        (tmp_path / name).mkdir()
        (tmp_path / name / "adapter_config.json").write_text("{}")
    (tmp_path / "notes").mkdir()  # not an adapter
    monkeypatch.setattr(settings, "SHIPPED_ADAPTERS_DIR", tmp_path)
    assert set(ModelSpec.from_env().adapters) == {"magnet", "llm2vec"}
    # Another base model does not inherit adapters trained for the embedded one.
    assert parse(["--base-model", "some/model"]).adapters == {}


def test_parse_adapters():
    assert parse_adapters("a=x, b = y/z") == {"a": "x", "b": "y/z"}
    assert parse_adapters("") == {} and parse_adapters("none") == {}
    with pytest.raises(ConfigError, match="name=path"):
        parse_adapters("just-a-path")
    with pytest.raises(ConfigError, match="reserved"):
        parse_adapters("base=x")


@pytest.mark.parametrize(
    "var,value",
    [
        ("MAGNET_DEVICE", "gpu"),
        ("MAGNET_DTYPE", "fp8"),
        ("MAGNET_THREADS", "0"),
        ("MAGNET_THREADS", "two"),
    ],
)
def test_bad_values_are_one_clear_sentence(monkeypatch, var, value):
    monkeypatch.setenv(var, value)
    with pytest.raises(ConfigError, match=value):
        ModelSpec.from_env()


def test_threads_setting(monkeypatch):
    assert ModelSpec.from_env().threads is None
    monkeypatch.setenv("MAGNET_THREADS", "3")
    assert ModelSpec.from_env().threads == 3
