"""Side-by-side cost: one comparison against a single system and against three separate calls
(issue 7, item 3).

    python bench/bench_side_by_side.py [--quick] [--repeat 3] [--threads N]

Infill: the Infill tab's comparison (MAGNET, base zero-shot, base five-shot; greedy, spans of up
to 16 tokens) as the app runs it (`Engine.compare_infill`: the three systems are rows of one
batch, peft applying the adapter to MAGNET's row only, the prompted baselines starting from
their cached prompt heads), against each system alone and against the three calls in turn.
A comparison cannot end before its longest member, so the target is checked against the
slowest single system; the ratio to MAGNET alone is shown too.
Continuation: the Continue tab's comparison (MAGNET, base, llm2vec; 48 greedy tokens) as one
batch (`Engine.compare_continue`) against one continuation and against three in turn.
Outputs of the batched and separate runs are compared token for token.
"""

from __future__ import annotations

import argparse
import time

from common import Row, model_spec, timed, write_report

from magnet_model import systems
from magnet_model.inference.engine import BASE, Engine

INFILL = "The Eiffel Tower is a wrought-iron [blank] in Paris, France."
TEXTS = [
    INFILL,
    "She opened the door and [blank] into the cold morning air.",
    "The river rises in the mountains and flows [blank] before it reaches the sea.",
]
PROMPT = "The history of the city begins"
SYSTEMS = list(systems.for_task("infill"))


def best_time(fn, repeat: int) -> tuple[float, object]:
    out, best = None, float("inf")
    for _ in range(repeat):
        t = time.perf_counter()
        out = fn()
        best = min(best, time.perf_counter() - t)
    return best, out


def single(engine: Engine, system: str, text: str, span: int):
    row = systems.get(system)
    if row.kind == systems.PROMPTED:
        return engine.infill_prompted(text, shots=row.shots, max_span_tokens=span)
    return engine.infill(text, adapter=system, max_span_tokens=span)


def small_batch_cost(rows: int, repeat: int = 5) -> tuple[float, float]:
    """Seconds of a rows x 576 @ 576 x 1536 product and of a 1-row one, over 64 distinct
    matrices (more than the caches hold, as in decoding): what batching rows costs in BLAS."""
    import torch

    ws = [torch.randn(1536, 576) for _ in range(64)]
    one, many = torch.randn(1, 576), torch.randn(rows, 576)
    t1 = timed(lambda: [torch.nn.functional.linear(one, w) for w in ws], repeat=repeat)
    tn = timed(lambda: [torch.nn.functional.linear(many, w) for w in ws], repeat=repeat)
    return tn, t1


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--quick", action="store_true", help="one text, one repeat, 8 tokens")
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--threads", type=int, default=None)
    parser.add_argument("--out", default=None)
    args = parser.parse_args(argv)
    import torch

    if args.threads:
        torch.set_num_threads(args.threads)
    repeat = 1 if args.quick else args.repeat
    texts = TEXTS[:1] if args.quick else TEXTS
    span, new = (8, 8) if args.quick else (16, 48)
    engine = Engine.from_spec(model_spec())
    missing = [a for a in ("magnet", "llm2vec") if a not in engine.runner.adapter_names]
    if missing:
        raise SystemExit(f"needs the adapters {missing}; the shipped ones load by default")
    t = time.perf_counter()
    for shots in (0, 5):
        engine.prompt_prefix(shots)
    prefix_s = time.perf_counter() - t
    engine.compare_infill(INFILL, SYSTEMS, max_span_tokens=2)  # warm-up

    together = {s: 0.0 for s in ["comparison", *SYSTEMS]}
    same = True
    for text in texts:
        seconds, batched = best_time(
            lambda text=text: engine.compare_infill(text, SYSTEMS, max_span_tokens=span), repeat
        )
        together["comparison"] += seconds
        for system, b in zip(SYSTEMS, batched, strict=True):
            seconds, alone = best_time(lambda s=system, x=text: single(engine, s, x, span), repeat)
            together[system] += seconds
            same &= [s.token_ids for s in alone.spans] == [s.token_ids for s in b.spans]
    comp = together["comparison"]
    slowest = max(SYSTEMS, key=lambda s: together[s])
    separate = sum(together[s] for s in SYSTEMS)
    note = f"{len(texts)} texts, spans <= {span}, identical outputs: {'yes' if same else 'NO'}"
    rows = [
        Row(
            "infill comparison vs the slowest single system",
            comp,
            "s",
            together[slowest],
            f"{slowest} alone",
            "<= 1.5",
            note,
        ),
        Row("infill comparison vs MAGNET alone", comp, "s", together["magnet"], "magnet alone"),
        Row("infill comparison vs three separate calls", comp, "s", separate, "3 calls in turn"),
    ]

    adapters = ["magnet", BASE, "llm2vec"]

    def batched_continue():
        return list(engine.compare_continue(PROMPT, adapters, max_new_tokens=new))[-1]

    comp_s, last = best_time(batched_continue, repeat)
    alone_s = {}
    texts_alone = {}
    for a in adapters:
        alone_s[a], texts_alone[a] = best_time(
            lambda a=a: "".join(engine.continue_text(PROMPT, adapter=a, max_new_tokens=new)),
            repeat,
        )
    same_c = [t for t, _ in last] == [texts_alone[a] for a in adapters]
    note = f"{new} tokens each, identical outputs: {'yes' if same_c else 'NO'}"
    rows += [
        Row(
            "continuation comparison vs one continuation",
            comp_s,
            "s",
            alone_s[BASE],
            "base alone",
            "<= 1.5",
            note,
        ),
        Row(
            "continuation comparison vs three separate calls",
            comp_s,
            "s",
            sum(alone_s.values()),
            "3 calls in turn",
        ),
    ]
    for n, why in ((3, "1.0x would make 3 rows free"), (4, "the batch is padded to 4 rows")):
        many, one = small_batch_cost(n)
        rows.append(
            Row(
                f"BLAS: a {n}-row product vs a 1-row product (the floor of batching)",
                many * 1e3,
                "ms",
                one * 1e3,
                "1 row",
                "",
                f"64 matrices 1536x576 fp32; {why}",
            )
        )
    extra = {
        "prompt_heads_first_time_s": prefix_s,
        "prompt_head_tokens": {s: len(engine.prompt_prefix(s)) for s in (0, 5)},
        "seconds": {**together, **{f"continue_{a}": s for a, s in alone_s.items()}},
        "identical_outputs": same and same_c,
    }
    name = args.out or ("side_by_side-quick" if args.quick else "side_by_side")
    write_report(name, rows, extra, engine.runner.device, engine.runner.loaded.dtype_name)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
