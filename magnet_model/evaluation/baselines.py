"""The prompted baselines' work, computed once: a disk cache of their fills and span NLLs.

The base model prompted zero- and five-shot does not change when a new adapter is evaluated,
yet its fills are the slowest part of the unit suites (a 5-shot prompt per blank). Each fill
and each span NLL is stored under a key made of everything that decides it:
- the base weights (where they were read from, two embedding rows and the model's config),
  the dtype, the device kind, torch's version;
- the code of the baselines (prompts.py, the prompted decoder, sampling, the blank splitter,
  the scorer): any change to a prompt or a rule makes new keys;
- the request itself: the blanked passage (or the case's token ids), the shots, the cap, the
  prompt format and the copy guard's run length.
A run on another machine kind or dtype, or after a prompt change, misses and computes anew;
nothing is ever read from an entry made under other conditions.

Entries are JSON lines appended to one file per condition set (`{fingerprint}.jsonl` in the
cache folder); a torn last line (a killed run) is skipped when read.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Sequence
from dataclasses import asdict
from pathlib import Path

from .. import prompts
from ..decoding import FillSettings, PromptedFill
from ..inference.blanks import FilledSpan, InfillResult
from ..systems import shots_name
from . import scoring

# the code whose change changes a baseline's fill or score (paths under magnet_model/)
CODE = (
    "prompts.py",
    "example_pool.py",
    "units.py",
    "../textrules/chat.py",
    "../textrules/meta.py",
    "../textrules/meta_weights.py",
    "../textrules/copies.py",
    "../textrules/sentences.py",
    "../textrules/words.py",
    "inference/prompted.py",
    "inference/sampling.py",
    "inference/blanks.py",
    "evaluation/scoring.py",
)
FOLDER = "eval-baselines"


def fingerprint(engine) -> str:
    """A hash of the conditions every cached value depends on (module docstring)."""
    import torch

    root = Path(__file__).resolve().parents[1]
    loaded = engine.runner.loaded
    h = hashlib.sha256()
    for part in (
        str(loaded.spec.base),
        str(loaded.weights or loaded.spec.base),
        loaded.dtype_name,
        engine.runner.device.type,
        torch.__version__,
    ):
        h.update(part.encode() + b"\0")
    for rel in CODE:
        h.update((root / rel).read_bytes())
    # the weights themselves, cheaply: two rows of the embedding and the model's shape (two
    # models of one name, say a test's random one and the real one, never share entries)
    with engine.runner.lock:
        rows = engine.runner.lm.get_input_embeddings().weight
        h.update(rows[: min(2, rows.shape[0])].detach().float().cpu().numpy().tobytes())
    h.update(json.dumps(engine.runner.lm.config.to_dict(), sort_keys=True, default=str).encode())
    return h.hexdigest()[:24]


class BaselineCache:
    """Prompted fills and span NLLs of the base model, from disk when made before under the
    same conditions, else computed and stored. folder None: no cache (computed every time).
    `hits` and `misses` count what a run reused and what it computed."""

    def __init__(self, engine, folder: Path | None):
        self.engine = engine
        self.path = None if folder is None else Path(folder) / f"{fingerprint(engine)}.jsonl"
        self.entries: dict[str, object] = {}
        self.hits = self.misses = 0
        if self.path is not None and self.path.is_file():
            for line in self.path.read_text(encoding="utf-8").splitlines():
                try:
                    row = json.loads(line)
                    self.entries[row["key"]] = row["value"]
                except (ValueError, KeyError, TypeError):
                    continue  # a torn line from a run that was killed while writing

    def _get(self, key: str):
        if key in self.entries:
            self.hits += 1
            return self.entries[key]
        return None

    def _put(self, key: str, value) -> None:
        self.misses += 1
        self.entries[key] = value
        if self.path is None:
            return
        self.path.parent.mkdir(parents=True, exist_ok=True)
        with self.path.open("a", encoding="utf-8") as f:
            f.write(json.dumps({"key": key, "value": value}) + "\n")

    @staticmethod
    def _key(*parts) -> str:
        return hashlib.sha256(json.dumps(parts).encode()).hexdigest()

    def _format(self, shots: int, fmt: str | None) -> str:
        """The name of the format a request asks in (the engine's when fmt is None)."""
        runner = self.engine.runner
        if fmt is None:
            fmt = runner.prompted_fill.format_of(shots_name(shots))
        return prompts.get_format(fmt, shots, runner.tokenizer).name

    def fill(
        self,
        text: str,
        shots: int,
        max_span_tokens: int,
        fmt: str | None = None,
        no_copy: int | None = None,
        sample: tuple[float, float, int] | None = None,
    ) -> InfillResult:
        """engine.infill_prompted(text, shots, max_span_tokens, fmt, no_copy), greedy, or
        sampled as a study samples when `sample` is (temperature, top_p, seed) (None: the
        engine's format and copy guard)."""
        return self.fill_many([text], shots, max_span_tokens, fmt, no_copy, sample)[0]

    def fill_many(
        self,
        texts: Sequence[str],
        shots: int,
        max_span_tokens: int,
        fmt: str | None = None,
        no_copy: int | None = None,
        sample: tuple[float, float, int] | None = None,
    ) -> list[InfillResult]:
        """fill() of each text; those not stored run as batches of many texts
        (Engine.compare_infill_many), each stored the moment it is made."""
        fmt = self._format(shots, fmt)
        no_copy = self.engine.runner.prompted_fill.no_copy if no_copy is None else no_copy
        keys = []
        for text in texts:
            parts = ("fill", text, shots, max_span_tokens, fmt, no_copy)
            keys.append(
                self._key(*parts) if sample is None else self._key(*parts, "sample", *sample)
            )
        values = [self._get(key) for key in keys]
        todo = [i for i, v in enumerate(values) if v is None]
        if todo:
            temperature, top_p, seed = sample or (1.0, 1.0, None)
            settings = FillSettings(
                max_span_tokens,
                sample is not None,
                temperature,
                top_p,
                seed,
                prompted=PromptedFill(fmt, no_copy),
            )
            system = [shots_name(shots)]
            requests = [(texts[i], system, settings) for i in todo]
            for i, _, r in self.engine.compare_infill_many(requests):
                if isinstance(r, Exception):
                    raise r
                values[todo[i]] = asdict(r)
                self._put(keys[todo[i]], values[todo[i]])
        return [_result(v) for v in values]

    def span_nll(
        self,
        cases: Sequence[scoring.SpanCase],
        shots: int,
        batch_size: int,
        fmt: str | None = None,
    ) -> list[scoring.SpanNLL]:
        """scoring.prompted_span_nll of the cases (those not cached, in one call)."""
        fmt = self._format(shots, fmt)
        keys = [
            self._key("nll", c.left_text, c.span_text, c.right_text, c.span_ids, shots, fmt)
            for c in cases
        ]
        found = {k: self._get(k) for k in keys}
        todo = [i for i, k in enumerate(keys) if found[k] is None]
        if todo:
            fresh = scoring.prompted_span_nll(
                self.engine, [cases[i] for i in todo], shots, batch_size, fmt
            )
            for i, s in zip(todo, fresh, strict=True):
                found[keys[i]] = [s.span, s.end, s.n_tokens]
                self._put(keys[i], found[keys[i]])
        return [scoring.SpanNLL(*found[k]) for k in keys]


def _result(value: dict) -> InfillResult:
    spans = [FilledSpan(**s) for s in value["spans"]]
    return InfillResult(**{**value, "spans": spans})
