"""The adapter soup (magnet_model.training.soup): an exact weighted sum of adapters' updates."""

from __future__ import annotations

import json

import pytest
import torch
from tiny_models import LORA_TARGETS, make_tiny_llama, make_tiny_tokenizer

from magnet_model.adapter_meta import AdapterMeta, load_meta, save_meta
from magnet_model.errors import ConfigError
from magnet_model.role_rows import ROLE_ROWS_FILE, RoleRows
from magnet_model.tokens import choose_token_roles
from magnet_model.training import soup


def _adapter(folder, seed, **meta):
    """A random rank-4 LoRA on the tiny Llama with MAGNET metadata and trained role rows."""
    from peft import LoraConfig, get_peft_model

    tok = make_tiny_tokenizer()
    base = make_tiny_llama(len(tok))  # the same base for every part (its own seed)
    torch.manual_seed(seed)
    cfg = LoraConfig(r=4, lora_alpha=16, target_modules=LORA_TARGETS, init_lora_weights=False)
    model = get_peft_model(base, cfg)
    model.save_pretrained(folder)
    roles = choose_token_roles(tok)
    save_meta(
        folder,
        AdapterMeta(
            token_roles=roles,
            training={"seed": seed, "output": str(folder)},
            calibration={"span_end_bias": -0.5 - seed},
            **meta,
        ),
    )
    ids = sorted({roles.mask, roles.blank, roles.span_start, roles.span_end})
    RoleRows(ids, torch.randn(len(ids), model.config.hidden_size)).save(folder)
    return folder


def _merged(folder):
    """The tiny base's weights with the adapter's update merged in."""
    from peft import PeftModel

    base = make_tiny_llama(len(make_tiny_tokenizer()))
    return PeftModel.from_pretrained(base, str(folder)).merge_and_unload().state_dict()


@pytest.fixture()
def parts(tmp_path):
    return [_adapter(tmp_path / "a", 1), _adapter(tmp_path / "b", 2)]


def test_a_soup_is_the_weighted_sum_of_its_parts_updates(parts, tmp_path):
    out = tmp_path / "soup"
    soup.make_soup(make_tiny_llama(len(make_tiny_tokenizer())), parts, [0.25, 0.75], out)
    a, b, got = _merged(parts[0]), _merged(parts[1]), _merged(out)
    changed = 0
    for name, w in got.items():
        expected = 0.25 * a[name] + 0.75 * b[name]  # W + sum w_i dW_i, the weights summing to 1
        assert torch.allclose(w, expected, atol=1e-5), name
        changed += not torch.allclose(a[name], b[name])
    assert changed >= len(LORA_TARGETS)  # the parts differ, so the check can fail
    assert json.loads((out / "adapter_config.json").read_text())["r"] == 8  # exact: ranks add


def test_a_soup_averages_the_role_rows_and_drops_the_calibration(parts, tmp_path):
    from safetensors.torch import load_file

    out = tmp_path / "soup"
    soup.make_soup(make_tiny_llama(len(make_tiny_tokenizer())), parts, [0.5, 0.5], out)
    rows = [load_file(str(p / ROLE_ROWS_FILE))["rows"] for p in (*parts, out)]
    assert torch.allclose(rows[2], (rows[0] + rows[1]) / 2)
    meta = load_meta(out)
    assert meta.calibration == {}  # the end bias belongs to one model: fitted again
    assert meta.training["seed"] == 2  # the last part's record: calibrate rebuilds its views
    assert meta.training["soup"]["adapters"] == [str(p) for p in parts]
    assert meta.training["soup"]["weights"] == [0.5, 0.5]
    assert all(r.startswith("sha256:") for r in meta.training["soup"]["revisions"])


def test_the_soup_cli_writes_the_adapter_from_a_local_base(parts, tmp_path, capsys):
    base = tmp_path / "base"
    make_tiny_llama(len(make_tiny_tokenizer())).save_pretrained(base)
    make_tiny_tokenizer().save_pretrained(base)
    out = tmp_path / "soup"
    argv = [*map(str, parts), "--output", str(out), "--base-model", str(base)]
    assert soup.main(argv) == 0
    assert "calibrate --adapter" in capsys.readouterr().out
    assert (out / "adapter_model.safetensors").is_file()
    assert soup.main(argv) == 2  # a second run does not overwrite silently
    assert "--overwrite" in capsys.readouterr().err
    assert soup.main([*argv, "--overwrite"]) == 0


def test_adapters_that_read_differently_are_not_averaged(tmp_path, capsys):
    a = _adapter(tmp_path / "a", 1)
    b = _adapter(tmp_path / "b", 2, attention="bidirectional")
    assert soup.main([str(a), str(b), "--output", str(tmp_path / "s")]) == 2
    assert "differ in attention" in capsys.readouterr().err
    assert not (tmp_path / "s").exists()


@pytest.mark.parametrize(
    "extra, why",
    [
        (["--weights", "0.5,0.6"], "sum to 1"),
        (["--weights", "1"], "1 numbers for 2 adapters"),
        (["--weights", "a,b"], "numbers separated by commas"),
        (["--weights", "1.5,-0.5"], "non-negative"),
    ],
)
def test_weights_that_do_not_make_an_average_are_refused(parts, tmp_path, capsys, extra, why):
    assert soup.main([*map(str, parts), "--output", str(tmp_path / "s"), *extra]) == 2
    assert why in capsys.readouterr().err


def test_a_soup_is_not_written_over_one_of_its_parts(parts, capsys):
    assert soup.main([*map(str, parts), "--output", str(parts[0]), "--overwrite"]) == 2
    assert "must not be one of the adapters" in capsys.readouterr().err


def test_role_rows_in_only_some_parts_are_refused(parts, capsys):
    (parts[1] / ROLE_ROWS_FILE).unlink()
    with pytest.raises(ConfigError, match="has no role_rows"):
        soup.average_role_rows(parts, [0.5, 0.5])


def test_one_adapter_is_no_soup(parts, tmp_path, capsys):
    assert soup.main([str(parts[0]), "--output", str(tmp_path / "s")]) == 2
    assert "at least two" in capsys.readouterr().err


def test_a_soups_card_names_its_parts_and_takes_the_soup_command(parts, tmp_path, capsys):
    from magnet_model.training import card

    base = tmp_path / "base"
    make_tiny_llama(len(make_tiny_tokenizer())).save_pretrained(base)
    make_tiny_tokenizer().save_pretrained(base)
    out = tmp_path / "soup"
    command = f"{soup.COMMAND} {parts[0]} {parts[1]} --output {out} --weights 0.25,0.75"
    assert soup.main([*command.split()[3:], "--base-model", str(base)]) == 0
    train_command = "python -m magnet_model.training.train --output x"
    assert card.main([str(out), "--command", train_command, "--base-model", str(base)]) == 2
    assert f"must start with '{soup.COMMAND}'" in capsys.readouterr().err
    bad = command.replace("0.25,0.75", "0.5,0.6")
    assert card.main([str(out), "--command", bad, "--base-model", str(base)]) == 2
    assert "does not parse as a soup command" in capsys.readouterr().err
    assert card.main([str(out), "--command", command, "--base-model", str(base)]) == 0
    text = (out / "README.md").read_text()
    assert f"`{parts[0]}` (sha256:" in text and "weight 0.75" in text
    assert "| LoRA | r=8, alpha=8" in text and command in text
    assert "calibration" not in text  # none fitted yet


def test_adapters_of_different_base_models_are_not_averaged(parts, tmp_path, capsys):
    config = parts[1] / "adapter_config.json"
    config.write_text(
        json.dumps({**json.loads(config.read_text()), "base_model_name_or_path": "other/model"})
    )
    assert soup.main([*map(str, parts), "--output", str(tmp_path / "s")]) == 2
    assert "different base models" in capsys.readouterr().err


def test_a_soup_written_over_an_older_one_keeps_none_of_its_role_rows(parts, tmp_path):
    out = tmp_path / "soup"
    soup.make_soup(make_tiny_llama(len(make_tiny_tokenizer())), parts, [0.5, 0.5], out)
    for p in parts:
        (p / ROLE_ROWS_FILE).unlink()
    soup.make_soup(make_tiny_llama(len(make_tiny_tokenizer())), parts, [0.5, 0.5], out)
    assert not (out / ROLE_ROWS_FILE).exists()
