"""The trainer under torchrun: 2 CPU processes (gloo) on the tiny random Llama.

(a) the loss of every objective matches one process with the same global batch and seed, step
    by step (the weights after each step too: later steps' losses depend on them, SSCL's
    gathered negatives and their gradients included);
(b) only rank 0 writes under the output folder (an audit hook in every rank records each
    file it opens for writing, each folder it makes, each rename and removal);
(c) a run killed mid-way resumes from its last checkpoint with the same step count, data
    order and curve.

Dropout is off (LoRA's and SSCL's attention dropout): ranks draw their own dropout noise, so
with it the runs would agree in distribution, not number for number. SSCL's positives then
come from the corpus's paraphrases.
"""

from __future__ import annotations

import json
import os
import random
import re
import shutil
import signal
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import pytest
from tiny_models import WORDS, make_tiny_llama, make_tiny_tokenizer

ROOT = Path(__file__).resolve().parents[1]
TOTAL = (2, 38)  # stage 1, stage 2 steps: the schedule of every run here
OBJECTIVES = ("mntp", "msg", "msg_end", "sscl")

# Written into each rank's interpreter through sitecustomize: the writes it makes under
# AUDIT_ROOT, one JSON list per rank (written at exit, outside that folder).
AUDIT = textwrap.dedent(
    """
    import atexit, json, os, sys
    _root = os.environ.get("AUDIT_ROOT")
    if _root:
        _seen = []
        def _mine(path):
            try:
                return os.path.abspath(os.fsdecode(path)).startswith(_root)
            except TypeError:
                return False
        def _hook(event, args):
            if event == "open" and args and isinstance(args[0], (str, bytes, os.PathLike)):
                mode = args[1] if len(args) > 1 and isinstance(args[1], str) else "r"
                flags = args[2] if len(args) > 2 and isinstance(args[2], int) else 0
                writes = any(c in mode for c in "wax+") or flags & (os.O_WRONLY | os.O_RDWR)
                if writes and _mine(args[0]):
                    _seen.append(["open", os.fsdecode(args[0])])
            elif event in ("os.mkdir", "os.rename", "os.remove", "os.rmdir", "shutil.rmtree",
                           "os.truncate"):
                if args and isinstance(args[0], (str, bytes, os.PathLike)) and _mine(args[0]):
                    _seen.append([event, os.fsdecode(args[0])])
        sys.addaudithook(_hook)
        def _dump():
            rank = os.environ.get("RANK", "single")
            with open(os.path.join(os.environ["AUDIT_OUT"], f"rank-{rank}.json"), "w") as f:
                json.dump(_seen, f)
        atexit.register(_dump)
    """
)


@pytest.fixture(scope="module")
def setup(tmp_path_factory):
    root = tmp_path_factory.mktemp("ddp")
    base = root / "base"
    tok = make_tiny_tokenizer()
    make_tiny_llama(len(tok)).save_pretrained(base)
    tok.save_pretrained(base)
    rng = random.Random(0)
    words = [w for w in WORDS if w.isalpha()]
    rows = []
    for i in range(48):
        text = " ".join(rng.choice(words) for _ in range(rng.randint(8, 14))) + " ."
        row = {"text": text}
        if i % 2 == 0:  # a paraphrase: the text with two words changed
            para = text.split()
            para[1], para[3] = rng.choice(words), rng.choice(words)
            row["paraphrase"] = " ".join(para)
        rows.append(row)
    corpus = root / "corpus.jsonl"
    corpus.write_text("".join(json.dumps(r) + "\n" for r in rows))
    hook = root / "hook"
    hook.mkdir()
    (hook / "sitecustomize.py").write_text(AUDIT)
    return {"root": root, "base": base, "corpus": corpus, "hook": hook}


def flags(setup, out: Path, batch: int, *extra: str) -> list[str]:
    return [
        "--output", str(out), "--base-model", str(setup["base"]), "--corpus",
        str(setup["corpus"]), "--device", "cpu", "--dtype", "float32", "--max-length", "16",
        "--sscl-max-length", "12", "--batch-size", str(batch), "--stage1-steps", str(TOTAL[0]),
        "--stage2-steps", str(TOTAL[1]), "--warmup-steps", "1", "--lr", "5e-3", "--lora-r", "4",
        "--lora-dropout", "0", "--sscl-dropout", "0", "--save-every", "3", "--keep-checkpoints",
        "0", "--no-progress", *extra,
    ]  # fmt: skip


def launch(
    setup,
    out: Path,
    batch: int,
    *extra: str,
    procs: int = 2,
    audit: Path | None = None,
    launcher: str = "torchrun",
):
    """The trainer as torchrun (or accelerate launch) starts it, procs ranks, or as a plain
    command (procs 0)."""
    env = dict(os.environ, PYTHONPATH=os.pathsep.join([str(setup["hook"]), str(ROOT)]))
    env.pop("WORLD_SIZE", None)
    env["OMP_NUM_THREADS"] = "1"  # torchrun's choice for its ranks; the plain command's too
    if audit is not None:
        audit.mkdir(parents=True, exist_ok=True)
        env.update(AUDIT_ROOT=str(out.resolve()), AUDIT_OUT=str(audit))
    train = ["-m", "magnet_model.training.train", *flags(setup, out, batch, *extra)]
    if launcher == "accelerate":  # its multi-process launcher (on a CPU: --multi_gpu)
        cmd = [sys.executable, "-m", "accelerate.commands.launch", "--multi_gpu",
               f"--num_processes={procs}", "--num_machines=1", "--mixed_precision=no",
               "--dynamo_backend=no", *train]  # fmt: skip
    elif procs:
        torchrun = ["-m", "torch.distributed.run", "--standalone", f"--nproc-per-node={procs}"]
        cmd = [sys.executable, *torchrun, *train]
    else:
        cmd = [sys.executable, *train]
    return subprocess.Popen(
        cmd, cwd=ROOT, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
        start_new_session=True,
    )  # fmt: skip


def finish(proc) -> str:
    output, _ = proc.communicate(timeout=600)
    assert proc.returncode == 0, output[-4000:]
    return output


def log_of(out: Path) -> list[dict]:
    return [json.loads(ln) for ln in (out / "train_log.jsonl").read_text().splitlines()]


def assert_same_curve(got: list[dict], want: list[dict], steps: int) -> None:
    assert [r["step"] for r in got[:steps]] == list(range(1, steps + 1))
    for a, b in zip(got[:steps], want[:steps], strict=True):
        assert {k for k in OBJECTIVES if k in a} == {k for k in OBJECTIVES if k in b}, (a, b)
        for k in OBJECTIVES:
            if k in a:
                assert a[k] == pytest.approx(b[k], rel=2e-4, abs=1e-5), (k, a, b)


@pytest.fixture(scope="module")
def two_ranks(setup):
    """The reference 2-rank run (batch 2 each), audited, 20 steps."""
    out = setup["root"] / "two"
    audit = setup["root"] / "audit-two"
    finish(launch(setup, out, 2, "--max-steps", "20", audit=audit))
    return out, audit


def test_two_ranks_compute_the_losses_of_one_process_with_their_global_batch(setup, two_ranks):
    out, _ = two_ranks
    single = setup["root"] / "one"
    finish(launch(setup, single, 4, "--max-steps", "5", procs=0))
    got, want = log_of(out), log_of(single)
    assert len(want) == 5 and "sscl" in want[-1] and "mntp" in want[0]
    assert_same_curve(got, want, 5)
    meta = json.loads((out / "magnet_config.json").read_text())["training"]
    assert meta["world_size"] == 2 and meta["global_batch"] == 4 and meta["batch_size"] == 2
    one = json.loads((single / "magnet_config.json").read_text())["training"]
    assert one["world_size"] == 1 and one["global_batch"] == 4


def test_only_rank_0_writes_files(two_ranks):
    out, audit = two_ranks
    rank0 = json.loads((audit / "rank-0.json").read_text())
    rank1 = json.loads((audit / "rank-1.json").read_text())
    assert rank1 == []
    written = {Path(p).name for _, p in rank0}
    assert {"train_log.jsonl", "magnet_config.json", "adapter_config.json"} <= written, written
    assert any(e == "os.rename" for e, _ in rank0)  # the checkpoints, renamed into place
    assert len(log_of(out)) == 20  # each step logged once


def test_a_killed_two_rank_run_resumes_on_the_same_curve(setup, two_ranks):
    reference = log_of(two_ranks[0])
    out = setup["root"] / "killed"
    proc = launch(setup, out, 2)  # all 40 steps planned: time to kill it mid-way
    log = out / "train_log.jsonl"
    deadline = time.monotonic() + 300
    while not (log.is_file() and len(log.read_text().splitlines()) >= 5):
        assert proc.poll() is None, proc.communicate()[0][-3000:]
        assert time.monotonic() < deadline, "the run wrote no 5 steps in 300 s"
        time.sleep(0.005)
    import psutil

    # the launcher and both ranks (torchrun starts each rank in a session of its own)
    tree = [*psutil.Process(proc.pid).children(recursive=True), psutil.Process(proc.pid)]
    for p in tree:
        p.send_signal(signal.SIGKILL)  # no clean-up, no last checkpoint
    proc.communicate()
    killed_at = len(log_of(out))
    assert killed_at < sum(TOTAL), "the run ended before it was killed"
    checkpoints = sorted(p.name for p in (out / "checkpoints").glob("step-*"))
    assert checkpoints, "no checkpoint before the kill"
    resumed_from = int(checkpoints[-1].split("-")[1])
    assert resumed_from <= killed_at

    finish(launch(setup, out, 2, "--resume", "--max-steps", "20"))
    got = log_of(out)
    assert [r["step"] for r in got] == list(range(1, 21))  # each step once
    assert_same_curve(got, reference, 20)


def test_resuming_with_another_global_batch_is_refused(setup, two_ranks, tmp_path):
    out = tmp_path / "copy"
    shutil.copytree(two_ranks[0], out)
    proc = launch(setup, out, 2, "--resume", procs=0)  # one process of 2: half the batch
    output, _ = proc.communicate(timeout=300)
    assert proc.returncode == 2, output[-3000:]
    assert "global batch (batch_size 2 x 2 ranks, now 2 x 1)" in output


def test_two_ranks_checkpoint_resumes_as_one_process_with_the_same_global_batch(
    setup, two_ranks, tmp_path
):
    out = tmp_path / "as-one"
    shutil.copytree(two_ranks[0], out)
    for later in sorted((out / "checkpoints").glob("step-*"))[1:]:
        shutil.rmtree(later)  # back to the first checkpoint, step 3
    finish(launch(setup, out, 4, "--resume", "--max-steps", "20", procs=0))
    got = log_of(out)
    assert [r["step"] for r in got] == list(range(1, 21))
    assert_same_curve(got, log_of(two_ranks[0]), 20)


def test_fsdp_shards_the_base_and_computes_the_same_losses(setup, two_ranks):
    out = setup["root"] / "fsdp"
    output = finish(launch(setup, out, 2, "--fsdp", "--max-steps", "5"))
    assert "FSDP: " in output and "parameters sharded over 2 ranks" in output
    assert_same_curve(log_of(out), log_of(two_ranks[0]), 5)
    meta = json.loads((out / "magnet_config.json").read_text())["training"]
    assert meta["fsdp"] is True and meta["world_size"] == 2
    from safetensors.torch import load_file

    saved = load_file(str(out / "adapter_model.safetensors"))
    whole = load_file(
        str(two_ranks[0] / "checkpoints" / "step-0000006" / "adapter_model.safetensors")
    )
    assert saved.keys() == whole.keys()  # the whole adapter, not a shard of it
    assert all(saved[k].shape == whole[k].shape for k in saved)


def test_fsdp_on_one_process_is_refused(setup, tmp_path):
    proc = launch(setup, tmp_path / "x", 2, "--fsdp", procs=0)
    output, _ = proc.communicate(timeout=300)
    assert proc.returncode == 2 and "--fsdp shards the base over the training processes" in output


def test_accelerate_launch_runs_the_same_ranks(setup, two_ranks):
    out = setup["root"] / "accelerate"
    finish(launch(setup, out, 2, "--max-steps", "3", launcher="accelerate"))
    assert_same_curve(log_of(out), log_of(two_ranks[0]), 3)
    meta = json.loads((out / "magnet_config.json").read_text())["training"]
    assert meta["world_size"] == 2


def test_an_fsdp_run_resumes_on_the_same_curve(setup, two_ranks):
    out = setup["root"] / "fsdp-resumed"
    finish(launch(setup, out, 2, "--fsdp", "--max-steps", "4"))  # checkpoints at 3 and 4
    shutil.rmtree(out / "checkpoints" / "step-0000004")  # as if killed after step 4's log line
    finish(launch(setup, out, 2, "--fsdp", "--resume", "--max-steps", "8"))
    got = log_of(out)
    assert [r["step"] for r in got] == list(range(1, 9))
    assert_same_curve(got, log_of(two_ranks[0]), 8)


def test_a_bad_world_size_or_one_device_for_many_ranks_is_one_sentence(setup, tmp_path):
    env = dict(os.environ, PYTHONPATH=str(ROOT), WORLD_SIZE="abc")
    train = [sys.executable, "-m", "magnet_model.training.train"]
    cmd = [*train, *flags(setup, tmp_path / "x", 2)]
    done = subprocess.run(cmd, cwd=ROOT, env=env, capture_output=True, text=True, timeout=300)
    assert done.returncode == 2 and "Traceback" not in done.stderr, done.stderr[-2000:]
    assert "error: WORLD_SIZE='abc' is not a number." in done.stderr
    proc = launch(setup, tmp_path / "y", 2, "--device", "cuda:1")
    output, _ = proc.communicate(timeout=300)
    assert proc.returncode != 0
    # whichever rank checks first says it (both would)
    assert re.search(r"error: rank [01]: --device cuda:1 names one device, but 2 processes", output)
