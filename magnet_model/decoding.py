"""How text is decoded, as one frozen object per kind of request (transformers'
GenerationConfig is the model): MagnetFill for MAGNET's span lanes, PromptedFill for the
prompted baselines, FillSettings for a whole infill request (the span cap, sampling, both), and
ContinueSettings for a continuation.

Each is validated once, where it is built (the settings layer, a study's record, the
evaluator's flags, a call's overrides); the decoding code below reads its fields and checks
nothing again. Defaults come from the model spec (MAGNET_* settings, `--fill-*` flags) through
the engine (Runner.magnet_fill / prompted_fill); a call overrides fields with `but(...)`.
`record()` gives the flat keys studies and reports have always stored (`fill_no_repeat`, ...),
and `from_record()` reads them back, older records included: a new lever is one field here,
its record key, and the one place in decoding that reads it.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping
from dataclasses import dataclass

from .errors import InputError
from .prompts import AUTO, FORMAT_NAMES

STOPS = ("join", "model")  # where a free span ends (inference/stops.py); the first: default


def _whole(name: str, value, low: int, high: int, low_means: str) -> None:
    if isinstance(value, bool) or not isinstance(value, int) or not low <= value <= high:
        raise InputError(
            f"{name} must be a whole number from {low} ({low_means}) to {high}, not {value!r}."
        )


def _but(settings, overrides: dict):
    """settings with the given fields changed (None: kept), validated; a name it does not have
    is one sentence naming the ones it has."""
    names = [f.name for f in dataclasses.fields(settings)]
    unknown = sorted(set(overrides) - set(names))
    if unknown:
        raise InputError(
            f"{type(settings).__name__} has no setting {', '.join(map(repr, unknown))}; its "
            f"settings are {', '.join(names)}."
        )
    return dataclasses.replace(settings, **{k: v for k, v in overrides.items() if v is not None})


@dataclass(frozen=True)
class MagnetFill:
    """The rules a MAGNET fill is decoded under (inference/infill.py)."""

    # no n-gram of tokens twice in one span (guard.py); 0: off, the model's own output
    no_repeat: int = 3
    # a blank that stands between sentences ends only where its fill ends a sentence
    close_sentences: bool = True
    # where a free span ends: "join" (cut where the completed text reads likeliest,
    # stops.py) or "model" (its own <span_end>)
    stop: str = "join"
    # first tokens a free blank inside a sentence is decoded from (1: the greedy path only)
    branches: int = 4
    # a blank between sentences may run to at least this many tokens whatever the request's
    # cap (which caps free blanks), so that a removed sentence comes back whole (0: the cap)
    sentence_tokens: int = 64

    def __post_init__(self) -> None:
        _whole("fill_no_repeat", self.no_repeat, 0, 16, "off")
        if not isinstance(self.close_sentences, bool):
            raise InputError(
                f"fill_close_sentences must be true or false, not {self.close_sentences!r}."
            )
        if self.stop not in STOPS:
            raise InputError(f"fill_stop must be one of {', '.join(STOPS)}, not {self.stop!r}.")
        _whole("fill_branches", self.branches, 1, 8, "the greedy path only")
        _whole("fill_sentence_tokens", self.sentence_tokens, 0, 512, "the request's cap")

    def but(self, **overrides) -> MagnetFill:
        """This fill with the given fields changed (None: kept), validated."""
        return _but(self, overrides)

    def record(self) -> dict:
        """The keys studies and reports store (flags' names without the dashes)."""
        return {f"fill_{f.name}": getattr(self, f.name) for f in dataclasses.fields(self)}

    @classmethod
    def from_record(cls, record: Mapping, default: MagnetFill) -> MagnetFill:
        """The rules a record was made under. A record that holds no rule at all predates
        them: `default` (the engine's). One that holds the first rule (the loop guard) but not
        a later one was made before that rule existed: its value then (no sentence rule, the
        model's own end, the greedy path, the request's cap)."""
        if "fill_no_repeat" not in record:
            return default
        before = cls(
            no_repeat=0, close_sentences=False, stop="model", branches=1, sentence_tokens=0
        )
        got = {f.name: record.get(f"fill_{f.name}") for f in dataclasses.fields(cls)}
        return before.but(**got)


def check_format(value: str) -> str:
    """A prompt format's name: "auto" or one of prompts.FORMAT_NAMES."""
    if value not in (AUTO, *FORMAT_NAMES):
        raise InputError(
            f"prompt_format must be auto or one of {', '.join(FORMAT_NAMES)}, not {value!r}."
        )
    return value


@dataclass(frozen=True)
class PromptedFill:
    """How the prompted baselines ask (inference/prompted.py)."""

    # "auto" or a name of prompts.FORMAT_NAMES; or, per system name, one of those (a study
    # records the format each system asked in; given as a mapping, kept as sorted pairs)
    format: str | Mapping[str, str] | tuple[tuple[str, str], ...] = AUTO
    # a reply may not copy a run of this many words of the passage or prompt; 0: off
    no_copy: int = 6

    def __post_init__(self) -> None:
        if isinstance(self.format, Mapping | tuple):
            pairs = tuple(sorted((str(k), v) for k, v in dict(self.format).items()))
            object.__setattr__(self, "format", pairs)
            for _, v in pairs:
                check_format(v)
        else:
            check_format(self.format)
        _whole("prompt_no_copy", self.no_copy, 0, 16, "off")

    def format_of(self, system: str) -> str:
        """The format `system` asks in (a mapping without it: auto)."""
        if isinstance(self.format, tuple):
            return dict(self.format).get(system, AUTO)
        return self.format

    def but(self, **overrides) -> PromptedFill:
        return _but(self, overrides)

    def record(self) -> dict:
        fmt = dict(self.format) if isinstance(self.format, tuple) else self.format
        return {"prompt_format": fmt, "prompt_no_copy": self.no_copy}

    @classmethod
    def from_record(cls, record: Mapping, default: PromptedFill) -> PromptedFill:
        return default.but(format=record.get("prompt_format"), no_copy=record.get("prompt_no_copy"))


_SAMPLING = ("do_sample", "temperature", "top_p", "seed")


@dataclass(frozen=True)
class FillSettings:
    """A whole infill request's decoding: the cap of a free span, sampling, and the rules of
    each kind of system (None: the engine's). What a study records and replays."""

    max_span_tokens: int | None = None  # None: the engine's (EngineConfig.max_span_tokens)
    do_sample: bool = False
    temperature: float = 1.0
    top_p: float = 1.0
    seed: int | None = None
    magnet: MagnetFill | None = None
    prompted: PromptedFill | None = None

    def __post_init__(self) -> None:
        m = self.max_span_tokens
        if m is not None and (isinstance(m, bool) or not isinstance(m, int) or m < 1):
            raise InputError(f"A span length must be a whole number of at least 1, not {m!r}.")

    def but(self, **overrides) -> FillSettings:
        """These settings with the given fields changed (None: kept)."""
        return _but(self, overrides)

    def resolved(self, magnet: MagnetFill, prompted: PromptedFill) -> FillSettings:
        """Every rule given: the engine's where this request left one to it."""
        return dataclasses.replace(
            self, magnet=self.magnet or magnet, prompted=self.prompted or prompted
        )

    def record(self) -> dict:
        """The flat record a study stores (and the keys it always stored)."""
        out = {k: getattr(self, k) for k in _SAMPLING if k != "seed" or self.seed is not None}
        if self.max_span_tokens is not None:
            out["max_span_tokens"] = self.max_span_tokens
        for rules in (self.magnet, self.prompted):
            if rules is not None:
                out.update(rules.record())
        return out

    @classmethod
    def from_record(
        cls, record: Mapping, magnet: MagnetFill, prompted: PromptedFill
    ) -> FillSettings:
        """The settings a stored record was made with, with the engine's rules (magnet,
        prompted) where the record predates them (MagnetFill.from_record)."""
        sampling = {k: record[k] for k in _SAMPLING if record.get(k) is not None}
        return cls(
            max_span_tokens=record.get("max_span_tokens"),
            magnet=MagnetFill.from_record(record, magnet),
            prompted=PromptedFill.from_record(record, prompted),
            **sampling,
        )


@dataclass(frozen=True)
class ContinueSettings:
    """A continuation's decoding (inference/generation.py)."""

    max_new_tokens: int | None = None  # None: the engine's (EngineConfig.max_new_tokens)
    do_sample: bool = False
    temperature: float = 1.0
    top_p: float = 1.0
    seed: int | None = None
    # no n-gram of tokens twice in the continuation (inference/guard.py); 0: off, the model's
    # own output (the default: the side-by-side is the paper's comparison)
    no_repeat: int = 0

    def __post_init__(self) -> None:
        _whole("no_repeat", self.no_repeat, 0, 16, "off")

    def sampling(self) -> dict:
        return {k: getattr(self, k) for k in _SAMPLING}

    def but(self, **overrides) -> ContinueSettings:
        return _but(self, overrides)
