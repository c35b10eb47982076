"""`python -m magnet_model.training.publish`: what goes to the Hub, and what is refused (no
network)."""

import shutil
from pathlib import Path

import pytest

from magnet_model.errors import ConfigError
from magnet_model.training import publish

ROOT = Path(__file__).resolve().parent.parent
SHIPPED = ROOT / "adapters" / "magnet"


@pytest.fixture
def adapter(tmp_path):
    """A copy of the shipped adapter, with a checkpoint the trainer left behind."""
    folder = tmp_path / "magnet"
    shutil.copytree(SHIPPED, folder)
    ckpt = folder / "checkpoints" / "step-150"
    ckpt.mkdir(parents=True)
    (ckpt / "optimizer.pt").write_bytes(b"x" * 100)
    return folder


class NoNetwork:
    def __getattr__(self, name):
        raise AssertionError(f"the dry run called HfApi.{name}")


def test_dry_run_prints_the_adapter_files_without_checkpoints(adapter, capsys, monkeypatch):
    import huggingface_hub

    monkeypatch.setattr(huggingface_hub, "HfApi", lambda *a, **k: NoNetwork())
    assert publish.main([str(adapter), "you/magnet-smollm2", "--dry-run"]) == 0
    out = capsys.readouterr().out
    expected = sorted(p.name for p in SHIPPED.iterdir())
    assert f"Would upload {len(expected)} files" in out and "to you/magnet-smollm2" in out
    for name in expected:
        assert f"  {name}  (" in out
    assert "checkpoints" not in out and "optimizer.pt" not in out
    up = publish.plan(adapter, "you/magnet-smollm2")
    assert [p for p, _ in up.files] == expected
    assert up.total_bytes == sum(p.stat().st_size for p in SHIPPED.iterdir())


@pytest.mark.parametrize("drop", ["README.md", "magnet_config.json", "adapter_config.json"])
def test_refuses_an_adapter_without_its_card_or_config(adapter, drop, capsys):
    (adapter / drop).unlink()
    assert publish.main([str(adapter), "you/magnet", "--dry-run"]) == 2
    err = capsys.readouterr().err
    assert err.startswith("error: ") and drop in err and "nothing was uploaded" in err
    assert len(err.strip().splitlines()) == 1
    if drop == "README.md":
        assert "python -m magnet_model.training.card" in err


@pytest.mark.parametrize("repo_id", ["magnet", "you/ma gnet", "a/b/c"])
def test_refuses_a_bad_repo_id(adapter, repo_id):
    with pytest.raises(ConfigError, match="owner/name"):
        publish.plan(adapter, repo_id)


def test_refuses_a_missing_folder(tmp_path):
    with pytest.raises(ConfigError, match="does not exist"):
        publish.plan(tmp_path / "nope", "you/magnet")


def test_upload_creates_the_repo_and_uploads_the_folder_with_the_same_filter(adapter):
    calls = []

    class Api:
        def create_repo(self, repo_id, **kw):
            calls.append(("create_repo", repo_id, kw))

        def upload_folder(self, **kw):
            calls.append(("upload_folder", kw))
            return "https://hub.test/you/magnet/commit/1"

    assert publish.publish(adapter, "you/magnet", private=True, api=Api()).endswith("/commit/1")
    assert calls[0] == ("create_repo", "you/magnet", {"repo_type": "model", "private": True,
                                                       "exist_ok": True})  # fmt: skip
    kw = calls[1][1]
    assert kw["folder_path"] == str(adapter) and kw["repo_id"] == "you/magnet"
    assert kw["ignore_patterns"] == publish.IGNORE
