"""The public facade of inference: infill, compare_*, continue_text, generate, embed_*.

One base model in memory serves several adapters, switched per call.

- infill(text): MAGNET infilling (infill.py): the context encoded once, every blank's span
  decoded side by side from a KV cache; infill_reference() re-encodes at each step.
- infill_prompted(text, shots=0|5): the paper's baselines, the base LLM asked in a prompt
  (prompted.py, templates in prompts.py).
- compare_infill / compare_continue: several systems or adapters as lanes of one batch.
- continue_text(prompt) / generate(prompt): causal generation (generation.py).
- embed_sentences(texts) / embed_tokens(text): representations (embedding.py).

The model, its lock and adapter switching, and the forward of rows are the Runner's
(runner.py); `Engine.runner` and its public `hidden_states` / `logits` serve code that needs
the model's states (scoring, probes, benchmarks). Adapters: None or "base" = adapter off.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping, Sequence

import numpy as np
import torch

from .. import prompts
from ..adapter_meta import AdapterMeta
from ..decoding import ContinueSettings, FillSettings, MagnetFill, PromptedFill
from ..errors import (
    EmptyInputError,
    InputTooLongError,
    MagnetError,
    NoBlankError,
    TooManyBlanksError,
    UnknownAdapterError,
)
from ..loading import LoadedModel, load_model
from ..settings import ModelSpec
from ..systems import PROMPTED, shots_name
from ..systems import get as system_row
from . import embedding
from .batching import Prefix
from .blanks import (
    DEFAULT_MARKER,
    END_REASONS,
    FilledSpan,
    InfillResult,
    assemble,
    split_blanks,
)
from .embedding import TokenVectors, token_vector_index
from .generation import (
    Continuation,
    compare_events,
    continuation_lanes,
    continue_events,
    generate,
)
from .infill import JOIN_TOKENS, infill_job, infill_lane, infill_reference
from .prompted import PromptPrefixes, prompted_lane
from .runner import BASE, EngineConfig, Runner, batch_items
from .sampling import Sampling

__all__ = [
    "BASE",
    "DEFAULT_MARKER",
    "END_REASONS",
    "JOIN_TOKENS",
    "Continuation",
    "EmptyInputError",
    "Engine",
    "EngineConfig",
    "FilledSpan",
    "InfillResult",
    "InputTooLongError",
    "NoBlankError",
    "Sampling",
    "TokenVectors",
    "TooManyBlanksError",
    "UnknownAdapterError",
    "assemble",
    "split_blanks",
    "token_vector_index",
]


class Engine:
    """One LoadedModel (base + named adapters) behind infill / continue / embed calls."""

    def __init__(
        self,
        loaded: LoadedModel,
        config: EngineConfig | None = None,
        metas: dict[str, AdapterMeta] | None = None,
    ):
        self.runner = Runner(loaded, config, metas)
        self.loaded = loaded
        self.config = self.runner.config
        self.tokenizer = loaded.tokenizer
        self.model = loaded.model
        self.max_input_tokens = self.runner.max_input_tokens
        self.prefixes = PromptPrefixes(self.runner)  # prompt heads of the prompted baselines

    @classmethod
    def from_spec(cls, spec: ModelSpec | None = None, config: EngineConfig | None = None) -> Engine:
        return cls(load_model(spec), config)

    # ------------------------------------------------------------ the model's device
    # (adapters, roles, tensors, forward passes: `engine.runner`)

    def to(self, device: str | torch.device) -> torch.device:
        """Move the model (base and adapters) to `device`; what was computed on the old device
        (prompt-head KV, stacked LoRA) is dropped and rebuilt there on first use."""
        with self.runner.lock:
            if self.runner.to(device):
                self.prefixes.clear()
        return self.runner.device

    def to_cuda_if_visible(self) -> torch.device:
        """The model on CUDA when a GPU is visible now, else where it is. For ZeroGPU, which
        attaches a GPU only while a `spaces.GPU` call runs: call it inside that call. Weights
        packed for the CPU (dtype float16-weights, int8-dynamic) stay there."""
        on_cpu_only = self.runner.loaded.packing is not None
        if self.runner.device.type != "cuda" and torch.cuda.is_available() and not on_cpu_only:
            return self.to("cuda")
        return self.runner.device

    # ------------------------------------------------------------ infilling

    def magnet_fill(self, fill: MagnetFill | Mapping | None = None) -> MagnetFill:
        """MAGNET fills' rules: the engine's (its config, else the model spec's: MAGNET_FILL_*),
        or `fill` as given, or the engine's with a mapping of fields changed
        ({"branches": 1}); validated."""
        if isinstance(fill, MagnetFill):
            return fill
        return self.runner.magnet_fill.but(**(fill or {}))

    def prompted_fill(self, rules: PromptedFill | Mapping | None = None) -> PromptedFill:
        """The prompted baselines' rules, as magnet_fill (MAGNET_PROMPT_*)."""
        if isinstance(rules, PromptedFill):
            return rules
        return self.runner.prompted_fill.but(**(rules or {}))

    def infill(
        self,
        text: str,
        adapter: str | None = "magnet",
        marker: str = DEFAULT_MARKER,
        max_span_tokens: int | Sequence[int] | None = None,
        fixed_lengths: int | Sequence[int | None] | None = None,
        do_sample: bool = False,
        temperature: float = 1.0,
        top_p: float = 1.0,
        seed: int | None = None,
        reference: bool = False,
        length_hints: int | Sequence[int | None] | None = None,
        fill: MagnetFill | Mapping | None = None,
    ) -> InfillResult:
        """Fill every blank of text with a span that stops by itself (or at a max/fixed length).

        length_hints: per blank (or one for all) the length in tokens the fill is expected to
        have, given to a model trained to read its gap as one (layout.GapRule); the span still
        ends by itself. None: unknown (the adapter's default gap).
        fill: the decoding rules (decoding.MagnetFill: loop guard, sentence rule, stop rule,
        first tokens, a sentence's length); a mapping changes some of the engine's
        ({"stop": "model"}); None: the engine's (magnet_fill).
        reference=True re-encodes the whole sequence at every step (slow; for tests/bench).
        """
        s = Sampling(do_sample, temperature, top_p, seed)
        job = infill_job(
            self.runner, text, marker, adapter, max_span_tokens, fixed_lengths,
            self.magnet_fill(fill), length_hints,
        )  # fmt: skip
        if reference:
            return infill_reference(self.runner, job, adapter, s)
        return self.runner.run_one(infill_lane(self.runner, job, adapter, s))

    def infill_reference(self, text: str, **kwargs) -> InfillResult:
        return self.infill(text, reference=True, **kwargs)

    def infill_prompted(
        self,
        text: str,
        shots: int = 0,
        marker: str = DEFAULT_MARKER,
        max_span_tokens: int | None = None,
        do_sample: bool = False,
        temperature: float = 1.0,
        top_p: float = 1.0,
        seed: int | None = None,
        prompted: PromptedFill | Mapping | None = None,
    ) -> InfillResult:
        """The paper's baseline: the base model (adapter off) asked to fill each blank in turn.
        prompted: the prompt format and copy guard (decoding.PromptedFill); a mapping
        changes some of the engine's ({"format": "plain"}); None: the engine's."""
        s = Sampling(do_sample, temperature, top_p, seed)
        lane = prompted_lane(
            self.runner, self.prefixes, text, shots, marker, max_span_tokens, s,
            self.prompted_fill(prompted),
        )  # fmt: skip
        return self.runner.run_one(lane)

    def prompt_formats(self, systems: Sequence[str]) -> dict[str, str]:
        """The name of the format each prompted system among `systems` asks in now (the
        engine's setting resolved per system: prompts.get_format), e.g. for a study to record
        and pass back to compare_infill."""
        rules = self.runner.prompted_fill
        out = {}
        for system in systems:
            row = system_row(system)
            if row.kind == PROMPTED:
                fmt = prompts.get_format(rules.format_of(system), row.shots, self.tokenizer)
                out[system] = fmt.name
        return out

    def prompt_prefix(self, shots: int, prompt_format: str | None = None) -> Prefix:
        """The KV of the fixed head of the prompted baseline's prompt (instruction, examples),
        computed once per (shots, format) with the adapter off; requests reuse it."""
        if prompt_format is None:
            prompt_format = self.runner.prompted_fill.format_of(shots_name(shots))
        return self.prefixes.get(shots, prompt_format)

    def fill_settings(self, settings: FillSettings | None = None, **overrides) -> FillSettings:
        """A request's whole decoding (decoding.FillSettings) with every rule given: the
        engine's where `settings` leaves one to it, then `overrides` (its fields) applied."""
        settings = (settings or FillSettings()).but(**overrides)
        return settings.resolved(self.runner.magnet_fill, self.runner.prompted_fill)

    def compare_infill(
        self,
        text: str,
        systems: Sequence[str],
        settings: FillSettings | None = None,
        marker: str = DEFAULT_MARKER,
        **overrides,
    ) -> list:
        """Several infilling systems on one text in one batch: an adapter name (MAGNET-style
        infill with that adapter) or 'zero-shot' / 'five-shot' / 'N-shot' (the base model
        prompted). Returns per system an InfillResult, or the MagnetError that stopped it.
        Input errors common to all (no blank, empty text) are raised. settings: the request's
        decoding (decoding.FillSettings: span cap, sampling, MAGNET's rules, the prompted
        systems'; None: the engine's); overrides: any of its fields, e.g. max_span_tokens=16."""
        lanes = self._infill_lanes(text, systems, self.fill_settings(settings, **overrides), marker)
        return self.runner.run(lanes)

    def compare_infill_many(
        self,
        requests: Sequence[tuple[str, Sequence[str], FillSettings | None]],
        marker: str = DEFAULT_MARKER,
        items_per_batch: int | None = None,
    ) -> Iterator[tuple[int, int, object]]:
        """Many comparisons (text, systems, settings), their lanes stepped together in batches
        of `items_per_batch` texts (None: EngineConfig.items_per_batch, else measured per
        device: batch_items). Yields (request index, system index, InfillResult or the
        MagnetError that stopped it) the moment each output is done, so a caller can store
        it. Each request keeps its own settings and seed: an output does not depend on the
        batch it ran in (up to float rounding: docs/performance.md). A request's input error
        (no blank, too long) is raised before any of its batch runs."""
        k = items_per_batch or self.items_per_batch()
        for start in range(0, len(requests), k):
            chunk = requests[start : start + k]
            lanes, owner = [], []
            for i, (text, systems, settings) in enumerate(chunk, start=start):
                made = self._infill_lanes(text, systems, self.fill_settings(settings), marker)
                lanes += made
                owner += [(i, j) for j in range(len(made))]
            told = [False] * len(lanes)
            for _ in self.runner.steps(lanes):
                for n, lane in enumerate(lanes):
                    if lane.done and not told[n]:
                        told[n] = True
                        yield (*owner[n], lane.error if lane.error is not None else lane.result)

    def infill_many(
        self,
        texts: Sequence[str],
        adapter: str = "magnet",
        max_span_tokens: int | None = None,
        fill: MagnetFill | Mapping | None = None,
        items_per_batch: int | None = None,
    ) -> list[InfillResult]:
        """infill() of each text (greedy), in order, many texts' lanes stepped together
        (compare_infill_many); the first error is raised."""
        settings = self.fill_settings(
            max_span_tokens=max_span_tokens, magnet=self.magnet_fill(fill)
        )
        out: list = [None] * len(texts)
        requests = [(text, [adapter], settings) for text in texts]
        for i, _, r in self.compare_infill_many(requests, items_per_batch=items_per_batch):
            if isinstance(r, MagnetError):
                raise r
            out[i] = r
        return out

    def items_per_batch(self) -> int:
        """Texts whose lanes compare_infill_many steps together: EngineConfig.items_per_batch,
        else the measured default of this device (runner.batch_items)."""
        return self.config.items_per_batch or batch_items(self.runner.device)

    def _infill_lanes(self, text: str, systems: Sequence[str], d: FillSettings, marker) -> list:
        """One text's lanes, one per system, under resolved settings d (fill_settings), not
        yet run: compare_infill runs them, compare_infill_many beside other texts' lanes."""
        s = Sampling(d.do_sample, d.temperature, d.top_p, d.seed)
        lanes = []
        for system in systems:
            row = system_row(system)
            if row.kind == PROMPTED:
                lane = prompted_lane(
                    self.runner, self.prefixes, text, row.shots, marker, d.max_span_tokens, s,
                    d.prompted,
                )  # fmt: skip
            else:
                job = infill_job(
                    self.runner, text, marker, system, d.max_span_tokens, None, d.magnet
                )
                lane = infill_lane(self.runner, job, system, s)
            lanes.append(lane)
        return lanes

    # ------------------------------------------------------------ causal generation

    def compare_continue(
        self,
        prompt: str,
        adapters: Sequence[str | None],
        max_new_tokens: int | None = None,
        settings: ContinueSettings | None = None,
        **overrides,
    ) -> Iterator[list[tuple[str, str | None]]]:
        """Continue one prompt with several adapters at once (one batch); after every step,
        yields (text so far, stop reason or None) per adapter. Validated eagerly.
        settings: the decoding (decoding.ContinueSettings: length, sampling, loop guard);
        overrides: any of its fields (do_sample=True, seed=7, no_repeat=3, ...)."""
        c = _continue(settings, max_new_tokens, overrides)
        lanes, outs, ids = continuation_lanes(self.runner, prompt, adapters, c)
        return compare_events(self.runner, lanes, outs, ids)

    def continue_text(
        self,
        prompt: str,
        adapter: str | None = None,
        max_new_tokens: int | None = None,
        settings: ContinueSettings | None = None,
        **overrides,
    ) -> Iterator[str]:
        """Stream the continuation of prompt as text pieces (causal mask, KV cache); settings
        and overrides as compare_continue."""
        c = _continue(settings, max_new_tokens, overrides)
        events = continue_events(self.runner, prompt, adapter, c, Sampling(**c.sampling()).start())
        return (piece for _, piece, _ in events if piece)

    def generate(
        self,
        prompt: str,
        adapter: str | None = None,
        max_new_tokens: int | None = None,
        settings: ContinueSettings | None = None,
        **overrides,
    ) -> Continuation:
        """continue_text without streaming: the whole continuation, its tokens and timing."""
        return generate(
            self.runner, prompt, adapter, _continue(settings, max_new_tokens, overrides)
        )

    # ------------------------------------------------------------ embeddings

    def embed_sentences(
        self,
        texts: str | Sequence[str],
        adapter: str | None = "magnet",
        batch_size: int = 32,
        normalize_embeddings: bool = True,
        show_progress_bar: bool = False,
        pooling: str | None = None,
    ) -> np.ndarray:
        """Sentence vectors (n, hidden) in input order; one text -> one vector (hidden,).

        pooling: None = the adapter's own (see embedding.sentence_plan); 'last' or 'mean'
        overrides it (mean over the text and its end token, never the instruction), to
        compare poolings."""
        single = isinstance(texts, str)
        texts = [texts] if single else list(texts)
        name = self.runner.resolve_adapter(adapter)
        plan = self.sentence_plan(name, pooling)
        out = embedding.embed_sentences(
            self.runner, texts, name, plan, batch_size, normalize_embeddings, show_progress_bar
        )
        return out[0] if single else out

    def sentence_plan(
        self, adapter: str | None, pooling: str | None = None
    ) -> embedding.SentencePlan:
        """How `adapter` turns a sentence into a vector: mode, pooling, prefix, end token."""
        return embedding.sentence_plan(self.runner, self.runner.resolve_adapter(adapter), pooling)

    def sentence_rows(
        self, texts: Sequence[str], plan: embedding.SentencePlan
    ) -> list[tuple[list[int], int]]:
        """(token ids, where the text starts) per sentence, as embed_sentences lays them out."""
        return embedding.sentence_rows(self.runner, list(texts), plan)

    def token_layout(self, adapter: str | None) -> tuple[list[int], str]:
        """(tokens put before a text, attention mode) for token vectors: exactly what training
        used. The prefix is the BOS the trainer recorded (none for SmolLM2: `bos: null`), or,
        without a record, the one the tokenizer itself adds; never a token training lacked."""
        return embedding.token_layout(self.runner, self.runner.resolve_adapter(adapter))

    def embed_tokens(self, text: str, adapter: str | None = "magnet") -> TokenVectors:
        """One vector per token, in the layout training used (token_layout). Bidirectional
        adapters: token i's vector is the output at i - 1 (the MNTP convention); the first
        token, with nothing before it, takes its own output. Causal (base, adapters trained
        causally): the token's own output."""
        if not text or not text.strip():
            raise EmptyInputError("The text is empty.")
        return embedding.embed_tokens(self.runner, text, self.runner.resolve_adapter(adapter))


def _continue(settings: ContinueSettings | None, max_new_tokens, overrides) -> ContinueSettings:
    """A continuation's settings: `settings` (None: the defaults), max_new_tokens and the
    overrides applied (validated)."""
    return (settings or ContinueSettings()).but(max_new_tokens=max_new_tokens, **overrides)
