"""Memory of the app: peak RSS with the base model, two adapters and the sentence encoder loaded.

    python bench/bench_memory.py             # 2 fresh processes per measurement (~2-3 min)
    python bench/bench_memory.py --quick     # 1 of each, a short infill (< 1 min when quiet)
    python bench/bench_memory.py --cold      # also a first start: de-quantize into a new cache

Every measurement runs in a fresh subprocess (peak RSS is a per-process high-water mark):

- imports only: the process imports everything the app imports (torch, transformers, peft,
  sentence-transformers, gradio, app, annotation_db) and loads nothing. The baseline.
- the app: the same imports, then in order, with current RSS (anonymous / file-backed) and
  peak RSS (ru_maxrss) after each stage:
    base + adapters     Engine.from_spec(ModelSpec.from_env()) (embedded SmolLM2, float32,
                        adapters magnet and llm2vec), as app.main loads it
    sentence encoder    MiniLMEncoder (all-MiniLM-L6-v2) loaded and one sentence encoded
    gradio app          app.main.build_demo on a MagnetApp (temporary SQLite store)
    requests            one infill comparison through the app handler (MAGNET, zero-shot,
                        five-shot) and one search-sized embedding (16 passages, magnet)
- with --cold: the app again with an empty MAGNET_CACHE_DIR (the GGUF is de-quantized first).

Weight bytes: the distinct storages of the base model's parameters (no LoRA), measured in the
app process. Rows: peak RSS of the app (target <= 1536 MiB = 1.5 GiB); (peak - imports-only)
over the bytes of all weights loaded (base + LoRA + MiniLM): one copy plus activations and
Gradio is ~1.2x, a second copy of the base >= 2x; the same over the base weights alone; the
share of the base weights that lives in the memory-mapped safetensors file (1.0: not copied
into private memory). The weights are file-backed pages, so they count in RSS only once
touched: after the requests every page has been read (the tied LM head reads all of them).
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from bench.common import ROOT, Row, app_dtype, write_report  # noqa: E402

MB = 2**20
LIMIT_MB = 1536
INFILL = "The Eiffel Tower is a wrought-iron [blank] in Paris, France."


def _imports() -> None:
    """Everything the app process imports, without loading any weights."""
    import gradio  # noqa: F401
    import peft  # noqa: F401
    import sentence_transformers  # noqa: F401
    import torch  # noqa: F401
    import transformers  # noqa: F401
    from transformers import AutoModelForCausalLM, AutoTokenizer  # noqa: F401

    import annotation_db  # noqa: F401
    import app.main  # noqa: F401
    import magnet_model.inference.engine  # noqa: F401
    import magnet_model.inference.search  # noqa: F401


def child(mode: str, quick: bool) -> dict:
    """One measured process: returns {stage: memory}, plus weight bytes for the app."""
    from magnet_model.memory import file_backed_bytes, rss_bytes

    stages: dict[str, dict] = {}
    _imports()
    stages["imports"] = rss_bytes()
    if mode == "imports":
        return {"stages": stages}

    from annotation_db import AnnotationStore
    from app.handlers import MagnetApp
    from app.main import build_demo
    from app.settings import AppSettings
    from magnet_model.inference import search
    from magnet_model.inference.engine import Engine
    from magnet_model.settings import ModelSpec

    engine = Engine.from_spec(ModelSpec.from_env())
    stages["base + adapters"] = rss_bytes()
    base = [p for n, p in engine.runner.lm.named_parameters() if "lora_" not in n]
    mapped, private = file_backed_bytes(base)
    minilm = search.MiniLMEncoder()
    minilm.encode(["A sentence to load the encoder."])
    stages["sentence encoder"] = rss_bytes()
    lora = [p for n, p in engine.runner.lm.named_parameters() if "lora_" in n]
    lora_bytes = sum(file_backed_bytes(lora))  # MiniLM is memory-mapped too: count both kinds
    minilm_bytes = sum(file_backed_bytes(list(minilm._load().parameters())))
    tmp = Path(tempfile.mkdtemp(prefix="bench-memory-"))
    store = AnnotationStore(path=tmp / "db.sqlite3")
    app = MagnetApp(engine, store, AppSettings.from_env(), tmp / "cache", {}, minilm=minilm)
    demo = build_demo(app)
    stages["gradio app"] = rss_bytes()
    app.infill(INFILL, max_span=4 if quick else 16)
    passages = search.default_corpus(16, 0).passages
    engine.embed_sentences(list(passages), adapter="magnet", batch_size=16)
    stages["requests"] = rss_bytes()
    del demo
    return {
        "stages": stages,
        "weight_bytes": mapped + private,
        "weights_file_backed": mapped,
        "adapter_bytes": lora_bytes,
        "minilm_bytes": minilm_bytes,
        "adapters": engine.runner.adapter_names,
    }


def measure(mode: str, quick: bool, env: dict | None = None) -> dict:
    """Run child(mode) in a fresh interpreter and return what it reports."""
    cmd = [sys.executable, str(Path(__file__).resolve()), "--child", mode]
    if quick:
        cmd.append("--quick")
    out = subprocess.run(
        cmd, cwd=ROOT, env={**os.environ, **(env or {})}, capture_output=True, text=True
    )
    if out.returncode != 0:
        raise SystemExit(f"{mode} process failed:\n{out.stderr[-3000:]}")
    return json.loads(out.stdout.strip().splitlines()[-1])


def main(argv: list[str] | None = None) -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--quick", action="store_true", help="one process each, a short infill")
    p.add_argument("--repeat", type=int, default=None, help="processes per measurement (2)")
    p.add_argument("--cold", action="store_true", help="also measure a first start (slow)")
    p.add_argument("--out", default=None, help="result name (default memory / memory_quick)")
    p.add_argument("--child", choices=("imports", "app"), help=argparse.SUPPRESS)
    args = p.parse_args(argv)
    if args.child:
        print(json.dumps(child(args.child, args.quick)))
        return

    repeat = args.repeat or (1 if args.quick else 2)
    imports = [measure("imports", args.quick) for _ in range(repeat)]
    apps = [measure("app", args.quick) for _ in range(repeat)]
    cold = None
    if args.cold:
        with tempfile.TemporaryDirectory(prefix="bench-memory-cache-") as cache:
            cold = measure("app", args.quick, {"MAGNET_CACHE_DIR": cache})

    imports_peak = min(r["stages"]["imports"]["peak"] for r in imports)
    peaks = [r["stages"]["requests"]["peak"] for r in apps]
    peak = max(peaks)  # the worse process: the target is a bound
    weights = apps[0]["weight_bytes"]
    mapped = apps[0]["weights_file_backed"]
    loaded = weights + apps[0]["adapter_bytes"] + apps[0]["minilm_bytes"]
    stage_names = list(apps[0]["stages"])
    stages = {
        s: {k: statistics.median(r["stages"][s][k] for r in apps) / MB for k in mem}
        for s, mem in apps[0]["stages"].items()
    }
    where = ", ".join(
        f"{s}: {v['rss']:,.0f} MiB ({v['anon']:,.0f} anon + {v['file']:,.0f} file)"
        for s, v in stages.items()
    )
    rows = [
        Row(
            "peak RSS of the app (base + 2 adapters + MiniLM + Gradio + requests)",
            peak / MB,
            "MiB",
            target=f"<= {LIMIT_MB}",
            note=f"max of {repeat} processes; adapters {', '.join(apps[0]['adapters']) or 'none'}",
        ),
        Row(
            "peak RSS above imports-only / bytes of all weights loaded",
            (peak - imports_peak) / MB,
            "MiB",
            loaded / MB,
            "base + adapters + MiniLM",
            "<= 1.5",
            f"imports-only peak {imports_peak / MB:,.0f} MiB; weights: base {weights / MB:,.0f} + "
            f"adapters {apps[0]['adapter_bytes'] / MB:,.0f} + MiniLM "
            f"{apps[0]['minilm_bytes'] / MB:,.0f} MiB; a second copy of the base would make it "
            f">= {(loaded + weights) / loaded:.1f}x",
        ),
        Row(
            "peak RSS above imports-only / base weight bytes",
            (peak - imports_peak) / MB,
            "MiB",
            weights / MB,
            "base weights",
            note="one copy of the base is 1.0x; the rest: adapters, MiniLM, activations, Gradio",
        ),
        Row(
            "base weights in the memory-mapped safetensors file",
            mapped / MB,
            "MiB",
            weights / MB,
            "base weights",
            ">= 0.99",
            "file-backed: not copied into private memory, shared with the page cache",
        ),
    ]
    for s in stage_names[1:]:
        rows.append(
            Row(
                f"RSS after {s} above imports-only / base weight bytes",
                stages[s]["rss"] - stages["imports"]["rss"],
                "MiB",
                weights / MB,
                "base weights",
                note=f"peak so far {stages[s]['peak']:,.0f} MiB",
            )
        )
    if cold is not None:
        cold_peak = cold["stages"]["requests"]["peak"]
        rows.append(
            Row(
                "first start (de-quantize into an empty cache): peak RSS / warm peak",
                cold_peak / MB,
                "MiB",
                peak / MB,
                "warm-cache peak",
                f"<= {LIMIT_MB / (peak / MB):.2f}",
                f"peak after loading {cold['stages']['base + adapters']['peak'] / MB:,.0f} MiB; "
                f"anon after loading {cold['stages']['base + adapters']['anon'] / MB:,.0f} MiB",
            )
        )
    name = args.out or ("memory_quick" if args.quick else "memory")
    write_report(
        name,
        rows,
        {
            "stages_mb": stages,
            "stage_rss_mb": where,
            "imports_only_mb": [r["stages"]["imports"] for r in imports],
            "app_processes": apps,
            "cold": cold,
        },
        dtype=app_dtype(),
    )


if __name__ == "__main__":
    main()
