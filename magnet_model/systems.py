"""The one table of the systems the app and the evaluator compare.

A system's name is what CLIs, settings and stored results use. Its kind says how it runs:

    adapter   the base model with a LoRA adapter on ("magnet", "llm2vec"), or with none ("base")
    prompted  the base model asked to fill a blank by a prompt with `shots` examples
    encoder   a separate sentence encoder (all-MiniLM-L6-v2 from an installed package)

`tasks` are where it takes part: "infill" (the Infill tab and the human studies), "continue",
"search" (the Search tab and `magnet-search`) and "evaluate" (the evaluator's default systems).
Each task's systems come in the order of this table. Adding a system is one row here plus the
code that runs its kind.
"""

from __future__ import annotations

from dataclasses import dataclass

from .errors import InputError

ADAPTER, PROMPTED, ENCODER = "adapter", "prompted", "encoder"
TASKS = ("infill", "continue", "search", "evaluate")
BASE = "base"  # the base model, no adapter on
MINILM = "minilm"  # the sentence-encoder baseline (all-MiniLM-L6-v2)


@dataclass(frozen=True)
class System:
    name: str
    title: str  # how people read it (the app's headings, the evaluator's tables)
    kind: str  # ADAPTER, PROMPTED or ENCODER
    tasks: tuple[str, ...]
    shots: int | None = None  # PROMPTED: examples in the prompt
    short: str = ""  # a narrow table's header (the title when empty)

    @property
    def label(self) -> str:
        """The short form of the title, for a table that must fit a phone."""
        return self.short or self.title

    @property
    def adapter(self) -> str | None:
        """The adapter that is on while it runs (None: the base model alone, or no LLM)."""
        return self.name if self.kind == ADAPTER and self.name != BASE else None

    @property
    def uses_llm(self) -> bool:
        return self.kind != ENCODER


SYSTEMS = (
    System("magnet", "MAGNET", ADAPTER, ("infill", "continue", "search", "evaluate")),
    System("zero-shot", "Base, zero-shot prompt", PROMPTED, ("infill",), shots=0),
    System("five-shot", "Base, five-shot prompt", PROMPTED, ("infill",), shots=5),
    System(MINILM, "all-MiniLM-L6-v2", ENCODER, ("search", "evaluate"), short="MiniLM"),
    System(BASE, "Base model", ADAPTER, ("continue", "search", "evaluate"), short="Base"),
    System(
        "llm2vec", "LLM2Vec-style", ADAPTER, ("continue", "search", "evaluate"), short="LLM2Vec"
    ),
)
BY_NAME = {s.name: s for s in SYSTEMS}
TITLES = {s.name: s.title for s in SYSTEMS}


def for_task(task: str) -> tuple[str, ...]:
    """The names of the systems that take part in `task`, in table order."""
    if task not in TASKS:
        raise ValueError(f"task must be one of {', '.join(TASKS)}, not {task!r}")
    return tuple(s.name for s in SYSTEMS if task in s.tasks)


def title(name: str) -> str:
    """A system's title; a name outside the table (an extra adapter) reads as itself."""
    return TITLES.get(name, name)


def get(name: str) -> System:
    """The table's row for `name`. An `N-shot` name is the prompted base model with N examples
    and any other name is an adapter of that name (one loaded with MAGNET_ADAPTERS=NAME=PATH),
    so a system outside the table still runs; a malformed `-shot` name is an InputError."""
    if name in BY_NAME:
        return BY_NAME[name]
    if name.endswith("-shot"):
        if not name[:-5].isdigit():
            raise InputError(f"Unknown system {name!r}; say e.g. 'five-shot'.")
        shots = int(name[:-5])
        return System(name, f"Base, {shots}-shot prompt", PROMPTED, ("infill",), shots=shots)
    return System(name, name, ADAPTER, ("continue", "search", "evaluate"))


def shots_name(shots: int) -> str:
    """The system name of the prompted base model with `shots` examples."""
    for s in SYSTEMS:
        if s.kind == PROMPTED and s.shots == shots:
            return s.name
    return f"{shots}-shot"
