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
        ("MAGNET_PROMPT_FORMAT", "fancy"),
        ("MAGNET_PROMPT_NO_COPY", "-1"),
    ],
)
def test_bad_values_are_one_clear_sentence(monkeypatch, var, value):
    monkeypatch.setenv(var, value)
    with pytest.raises(ConfigError, match=value):
        ModelSpec.from_env()


def test_the_prompt_settings_reach_the_spec(monkeypatch):
    assert (ModelSpec.from_env().prompt_format, ModelSpec.from_env().prompt_no_copy) == ("auto", 6)
    monkeypatch.setenv("MAGNET_PROMPT_FORMAT", "chat-nearest-prefix")
    monkeypatch.setenv("MAGNET_PROMPT_NO_COPY", "0")
    spec = ModelSpec.from_env()
    assert (spec.prompt_format, spec.prompt_no_copy) == ("chat-nearest-prefix", 0)
    with pytest.raises(ConfigError, match="auto or one of chat, chat-prefix"):
        ModelSpec(prompt_format="chat-fancy").validate()


def test_threads_setting(monkeypatch):
    assert ModelSpec.from_env().threads is None
    monkeypatch.setenv("MAGNET_THREADS", "3")
    assert ModelSpec.from_env().threads == 3


# ------------------------------------------------ precedence: flag > MAGNET_* variable > default


def test_model_flags_beat_env_beat_defaults_in_the_trainer(monkeypatch):
    from magnet_model.training import train

    def spec(*argv):
        return ModelSpec.from_args(train.build_parser().parse_args(["--output", "x", *argv]))

    assert (spec().device, spec().dtype) == ("auto", "auto")
    monkeypatch.setenv("MAGNET_DEVICE", "cuda")
    monkeypatch.setenv("MAGNET_DTYPE", "float16")
    assert (spec().device, spec().dtype) == ("cuda", "float16")
    assert (spec("--device", "cpu").device, spec("--device", "cpu").dtype) == ("cpu", "float16")


def test_evaluate_threads_flag_beats_magnet_threads(monkeypatch):
    from magnet_model.evaluation import evaluate

    def threads(*argv):
        return ModelSpec.from_args(evaluate.build_parser().parse_args(list(argv))).threads

    assert threads() is None  # torch's own choice
    monkeypatch.setenv("MAGNET_THREADS", "3")
    assert threads() == 3
    assert threads("--threads", "1") == 1


def test_a_bad_flag_is_named_as_the_flag(monkeypatch):
    monkeypatch.setenv("MAGNET_THREADS", "2")
    args = argparse.Namespace(threads=0)
    with pytest.raises(ConfigError, match=r"^--threads must be at least 1, not 0\.$"):
        ModelSpec.from_args(args)


def test_adapters_default_follows_the_resolved_base(monkeypatch, tmp_path):
    (tmp_path / "magnet").mkdir()
    (tmp_path / "magnet" / "adapter_config.json").write_text("{}")
    monkeypatch.setattr(settings, "SHIPPED_ADAPTERS_DIR", tmp_path)
    monkeypatch.setenv("MAGNET_BASE_MODEL", "some/model")
    assert parse([]).adapters == {}  # shipped adapters belong to the embedded base
    assert set(parse(["--base-model", "embedded"]).adapters) == {"magnet"}
    monkeypatch.setenv("MAGNET_ADAPTERS", "")  # set but empty: no adapters (as 'none')
    assert parse(["--base-model", "embedded"]).adapters == {}
    assert parse(["--adapters", "a=b"]).adapters == {"a": "b"}


def test_app_flags_beat_env_beat_defaults(monkeypatch, tmp_path):
    from annotation_db import DBSettings
    from app.main import build_parser
    from app.settings import AppSettings

    for var in ("MAGNET_DB_URL", "MAGNET_DB_PATH", "MAGNET_MAX_UPLOAD_MB", "MAGNET_PUBLIC_URL"):
        monkeypatch.delenv(var, raising=False)
    monkeypatch.setenv("MAGNET_DATA_DIR", str(tmp_path))
    assert AppSettings.from_env().max_upload_mb == 5
    assert AppSettings.from_env().max_passages == 2000
    monkeypatch.setenv("MAGNET_MAX_UPLOAD_MB", "64")
    monkeypatch.setenv("MAGNET_PUBLIC_URL", "https://demo.example/")
    app_settings = AppSettings.from_env()
    assert app_settings.max_upload_mb == 64
    assert app_settings.public_url == "https://demo.example"

    def db_url(*argv):  # what app.main gives AnnotationStore
        args = build_parser().parse_args(list(argv))
        return DBSettings.from_env(url=args.db_url, path=args.db_path).url

    assert db_url() == f"sqlite:///{tmp_path / 'annotations.sqlite3'}"
    monkeypatch.setenv("MAGNET_DB_URL", "postgresql+psycopg://u@h/db")
    assert db_url() == "postgresql+psycopg://u@h/db"
    assert db_url("--db-path", str(tmp_path / "flag.db")) == f"sqlite:///{tmp_path / 'flag.db'}"
    monkeypatch.setenv("MAGNET_DEVICE", "cuda")
    assert ModelSpec.from_args(build_parser().parse_args(["--device", "cpu"])).device == "cpu"


def test_annotation_db_cli_flags_beat_env_beat_defaults(monkeypatch, tmp_path):
    from annotation_db import DBSettings
    from annotation_db.cli import build_parser

    for var in ("MAGNET_DB_URL", "MAGNET_DB_PATH", "MAGNET_DB_BUSY_TIMEOUT_MS"):
        monkeypatch.delenv(var, raising=False)
    monkeypatch.setenv("MAGNET_DATA_DIR", str(tmp_path))

    def resolved(*argv):  # what the CLI gives AnnotationStore
        args = build_parser().parse_args([*argv, "backup", "dest"])
        return DBSettings.from_env(url=args.db_url, path=args.db_path)

    assert resolved().url.endswith("/annotations.sqlite3")
    assert resolved().busy_timeout_ms == 10_000
    monkeypatch.setenv("MAGNET_DB_PATH", str(tmp_path / "env.db"))
    monkeypatch.setenv("MAGNET_DB_BUSY_TIMEOUT_MS", "250")
    assert resolved().url.endswith("/env.db") and resolved().busy_timeout_ms == 250
    assert resolved("--db-url", "sqlite:///flag.db").url == "sqlite:///flag.db"
    assert resolved("--db", "sqlite:///flag.db").url == "sqlite:///flag.db"  # the old spelling
    assert resolved("--db-path", str(tmp_path / "flag.db")).url.endswith("/flag.db")


@pytest.mark.parametrize(
    "var,value,message",
    [
        (
            "MAGNET_MAX_UPLOAD_MB",
            "lots",
            "MAGNET_MAX_UPLOAD_MB must be a whole number, not 'lots'.",
        ),
        ("MAGNET_QUEUE_SIZE", "0", "MAGNET_QUEUE_SIZE must be at least 1, not '0'."),
        ("MAGNET_MAX_PASSAGES", "0", "MAGNET_MAX_PASSAGES must be at least 1, not '0'."),
    ],
)
def test_bad_app_values_are_one_sentence(monkeypatch, var, value, message):
    from app.settings import AppSettings

    monkeypatch.setenv(var, value)
    with pytest.raises(ConfigError) as e:
        AppSettings.from_env()
    assert str(e.value) == message


def test_train_config_resolves_its_own_pooling():
    from magnet_model.training.train import TrainConfig, validate

    assert TrainConfig(output="x", pooling=None).pooling == "last"
    llm2vec = TrainConfig(
        output="x", attention="bidirectional", objectives=["mntp", "sscl"], pooling=None
    )
    assert llm2vec.pooling == "mean"
    validate(TrainConfig(output="x", pooling=None))  # no CLI needed
    assert TrainConfig(output="x", pooling="mean").pooling == "mean"


def test_the_docs_list_every_setting():
    from project_docs import ROOT

    from app.settings import settings_table

    page = (ROOT / "docs" / "settings.md").read_text()
    assert settings_table() in page, "docs/settings.md's table: paste `python -m app.settings`"
