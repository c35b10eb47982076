"""The prompted baselines' formats, chosen by measurement (issue 36, point 1).

    python bench/bench_prompt_formats.py [--fills 80] [--suites sentence,phrase,word]
        [--domains wikipedia,news] [--zero chat,plain,chat-prefix]
        [--five chat,plain,chat-prefix,chat-nearest,chat-nearest-prefix]
        [--no-copy 6] [--against chat] [--out prompt_formats]

The evaluator's unit suites (the same held-out cases, seeded: evaluation/suites.py) asked of
the base model zero-shot and five-shot in every format named (prompts.py), greedy, cap 64.
Per suite, system and format:
- span PPL of the truth as the answer to that prompt (after the reply's opening in a -prefix
  format);
- on the fills: the right unit (exactly one complete sentence on the sentence suite, no
  sentence end on the phrase and word suites), chat or meta replies, copies of 6+ words of the
  passage, copies of an example, a repeated 3-gram, fills the copy guard turned, and the
  length against the truth; each share with its 95% interval, and against the format
  `--against` names (today's `chat`) the difference on the same cases with McNemar p.
`--no-copy 0` measures the formats without the copy guard (the prompts' own output).
Fills and span NLLs go through the evaluator's baseline cache (evaluation/baselines.py), so a
rerun costs only what changed. Writes bench/results/<out>.json (the table, every fill) and
prints the table (Markdown).
"""

from __future__ import annotations

import argparse
import math
import time

from common import Row, model_spec, write_report

from magnet_model import prompts
from magnet_model.evaluation.baselines import BaselineCache
from magnet_model.evaluation.fills import fill_tokens
from magnet_model.evaluation.scoring import span_perplexity
from magnet_model.evaluation.stats import paired_shares, share
from magnet_model.evaluation.suites import SUITES, fill_flags, unit_cases

CAP = 64
FLAGS = ("unit", "chat", "copy", "example_copy", "repeat_3gram", "copy_blocked")
HEAD = (
    "span PPL",
    "right unit",
    "chat/meta",
    "copies passage",
    "copies example",
    "repeated 3-gram",
    "guard turned",
    "length / truth",
)


def measure(engine, cache, kind, cases, shots, fmt, no_copy, sample=None) -> dict:
    """One format on one suite's cases; sample: (temperature, top_p, seed) decodes each case
    sampled with the seed seed + its index, as a study samples (None: greedy)."""
    blanked = [c.blanked("[blank]") for c in cases]
    results = [
        cache.fill(
            t, shots, CAP, fmt, no_copy, None if sample is None else (*sample[:2], sample[2] + i)
        )
        for i, t in enumerate(blanked)
    ]
    spec = prompts.get_format(fmt, shots, engine.tokenizer)
    flags = fill_flags(engine, kind, results, None, (shots, spec))
    flags["unit"] = flags["one_sentence" if kind == "sentence" else "no_sentence_end"]
    nll = cache.span_nll(cases, shots, 2, fmt)
    written = sum(fill_tokens(engine, r.spans[0].text.strip()) for r in results)
    return {
        "span_ppl": span_perplexity(nll),
        "flags": {k: flags[k] for k in FLAGS},
        "length_ratio": written / sum(c.n_tokens for c in cases),
        "fills": [r.spans[0].text.strip() for r in results],
        "truth": [c.span_text.strip() for c in cases],
        "texts": blanked,
    }


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--fills", type=int, default=80, help="cases per suite and domain")
    p.add_argument("--suites", default=",".join(SUITES))
    p.add_argument("--domains", default="wikipedia,news")
    p.add_argument("--zero", default="chat,plain,chat-prefix", help="zero-shot formats")
    p.add_argument(
        "--five",
        default="chat,plain,chat-prefix,chat-nearest,chat-nearest-prefix",
        help="five-shot formats",
    )
    p.add_argument("--no-copy", type=int, default=6, help="the copy guard's run (0: off)")
    p.add_argument("--against", default="chat", help="the format the others are paired with")
    p.add_argument(
        "--sample",
        default=None,
        metavar="T,P",
        help="decode sampled at temperature T and top-p P, as studies do (0.7,0.9), instead "
        "of greedy; each case's seed is --seed plus its index",
    )
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--threads", type=int, default=None)
    p.add_argument("--cache-dir", default=None, help="baseline cache (default: MAGNET's)")
    p.add_argument("--out", default="prompt_formats")
    args = p.parse_args(argv)
    sample = None
    if args.sample:
        try:
            temperature, top_p = (float(x) for x in args.sample.split(","))
        except ValueError:
            p.error(f"--sample takes T,P such as 0.7,0.9, not {args.sample!r}")
        if not (temperature > 0 and 0 < top_p <= 1):
            p.error("--sample: T must be above 0 and P in (0, 1]")
        sample = (temperature, top_p, args.seed)

    import torch

    from magnet_model.data import lee_background_docs, wikipedia_paragraphs
    from magnet_model.evaluation.baselines import FOLDER
    from magnet_model.inference.engine import Engine
    from magnet_model.settings import default_cache_dir

    if args.threads:
        torch.set_num_threads(args.threads)
    engine = Engine.from_spec(model_spec({}))
    folder = args.cache_dir or default_cache_dir() / FOLDER
    cache = BaselineCache(engine, folder)
    sources = {"wikipedia": lambda: wikipedia_paragraphs("heldout"), "news": lee_background_docs}
    systems = {0: _names(args.zero), 5: _names(args.five)}
    report: dict = {"fills": args.fills, "no_copy": args.no_copy, "systems": {}, "suites": {}}
    report["decoding"] = (
        "greedy" if sample is None else f"sampled, temperature {sample[0]}, top-p {sample[1]}"
    )
    report["systems"] = {("zero-shot" if k == 0 else "five-shot"): v for k, v in systems.items()}
    rows: list[Row] = []
    lines = [
        "| suite | system | format | " + " | ".join(HEAD) + " |",
        "|---|---|---|" + "---|" * len(HEAD),
    ]
    t0 = time.perf_counter()
    for domain in args.domains.split(","):
        passages = sources[domain]()
        for kind in args.suites.split(","):
            cases = unit_cases(engine.tokenizer, passages, kind, args.fills, args.seed, 256)
            key = f"{domain}/{kind}"
            report["suites"][key] = {}
            for shots, formats in systems.items():
                system = "zero-shot" if shots == 0 else "five-shot"
                per = {
                    f: measure(engine, cache, kind, cases, shots, f, args.no_copy, sample)
                    for f in formats
                }
                report["suites"][key][system] = per
                base = per.get(args.against)
                for f, r in per.items():
                    cells = [f"{r['span_ppl']:.2f}"]
                    for flag in FLAGS:
                        s = share(r["flags"][flag])
                        cell = f"{s['share']:.0%} ({s['lo']:.0%}–{s['hi']:.0%})"
                        if base is not None and f != args.against and flag in ("unit", "copy"):
                            d = paired_shares(r["flags"][flag], base["flags"][flag])
                            cell += f", {100 * d['diff']:+.0f} pts (p={d['p']:.2g})"
                            r.setdefault("paired", {})[flag] = d
                        cells.append(cell)
                    cells.append(f"{r['length_ratio']:.2f}")
                    lines.append(
                        f"| {key} ({len(cases)}) | {system} | {f} | " + " | ".join(cells) + " |"
                    )
                    if base is not None and f != args.against and math.isfinite(r["span_ppl"]):
                        rows.append(
                            Row(
                                f"{key}: {system} span PPL, {f} vs {args.against}",
                                r["span_ppl"],
                                "PPL",
                                base["span_ppl"],
                                f"{args.against}, same cases",
                            )
                        )
            print("\n".join(lines), flush=True)
    table = "\n".join(lines)
    report["table"] = table
    report["seconds"] = round(time.perf_counter() - t0, 1)
    report["cache"] = {"hits": cache.hits, "misses": cache.misses}
    runner = engine.runner
    write_report(args.out, rows, report, runner.device, runner.loaded.dtype_name)
    return 0


def _names(raw: str) -> list[str]:
    names = [n.strip() for n in raw.split(",") if n.strip()]
    for n in names:
        if n not in prompts.FORMAT_NAMES:
            raise SystemExit(
                f"unknown prompt format {n!r}; one of {', '.join(prompts.FORMAT_NAMES)}"
            )
    return names


if __name__ == "__main__":
    raise SystemExit(main())
