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
from ..errors import (
    EmptyInputError,
    InputTooLongError,
    NoBlankError,
    TooManyBlanksError,
    UnknownAdapterError,
)
from ..loading import LoadedModel, load_model
from ..settings import ModelSpec
from ..systems import PROMPTED
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
from .infill import JOIN_TOKENS, infill_lane, infill_reference
from .prompted import PromptPrefixes, prompted_lane
from .runner import BASE, EngineConfig, Runner
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
        fill_no_repeat: int | None = None,
        fill_close_sentences: bool | None = None,
        length_hints: int | Sequence[int | None] | None = None,
        fill_stop: str | None = None,
        fill_branches: int | None = None,
    ) -> InfillResult:
        """Fill every blank of text with a span that stops by itself (or at a max/fixed length).

        length_hints: per blank (or one for all) the length in tokens the fill is expected to
        have, given to a model trained to read its gap as one (layout.GapRule); the span still
        ends by itself. None: unknown (the adapter's default gap).
        fill_no_repeat: the loop guard's n for this request (no n-gram of tokens twice in a
        span, guard.py; 0: off; None: the engine's setting, MAGNET_FILL_NO_REPEAT).
        fill_close_sentences: whether a blank between sentences is filled until a sentence
        ends (infill.py; None: the engine's setting, MAGNET_FILL_CLOSE_SENTENCES).
        fill_stop: where a free span ends, "join" (cut where the completed text reads
        likeliest, stops.py) or "model" (its own <span_end>); None: the engine's setting,
        MAGNET_FILL_STOP.
        fill_branches: how many first tokens a free blank inside a sentence is filled from
        under "join", the fill that reads best kept (infill.py; 1: the greedy fill only;
        None: the engine's setting, MAGNET_FILL_BRANCHES).
        reference=True re-encodes the whole sequence at every step (slow; for tests/bench).
        """
        s = Sampling(do_sample, temperature, top_p, seed)
        args = (
            self.runner,
            text,
            adapter,
            marker,
            max_span_tokens,
            fixed_lengths,
            s,
            fill_no_repeat,
            fill_close_sentences,
            length_hints,
            fill_stop,
            fill_branches,
        )
        if reference:
            return infill_reference(*args)
        return self.runner.run_one(infill_lane(*args))

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
        prompt_format: str | None = None,
        prompt_no_copy: int | None = None,
    ) -> InfillResult:
        """The paper's baseline: the base model (adapter off) asked to fill each blank in turn.
        prompt_format: "auto" or a name of prompts.FORMAT_NAMES; prompt_no_copy: the copy
        guard's run of words (0: off); None: the engine's settings."""
        s = Sampling(do_sample, temperature, top_p, seed)
        lane = prompted_lane(
            self.runner,
            self.prefixes,
            text,
            shots,
            marker,
            max_span_tokens,
            s,
            prompt_format,
            prompt_no_copy,
        )
        return self.runner.run_one(lane)

    def prompt_formats(self, systems: Sequence[str]) -> dict[str, str]:
        """The name of the format each prompted system among `systems` asks in now (the
        engine's setting resolved per system: prompts.get_format), e.g. for a study to record
        and pass back to compare_infill."""
        out = {}
        for system in systems:
            row = system_row(system)
            if row.kind == PROMPTED:
                fmt = prompts.get_format(self.runner.prompt_format, row.shots, self.tokenizer)
                out[system] = fmt.name
        return out

    def prompt_prefix(self, shots: int, prompt_format: str | None = None) -> Prefix:
        """The KV of the fixed head of the prompted baseline's prompt (instruction, examples),
        computed once per (shots, format) with the adapter off; requests reuse it."""
        return self.prefixes.get(
            shots, self.runner.prompt_format if prompt_format is None else prompt_format
        )

    def compare_infill(
        self,
        text: str,
        systems: Sequence[str],
        marker: str = DEFAULT_MARKER,
        max_span_tokens: int | None = None,
        do_sample: bool = False,
        temperature: float = 1.0,
        top_p: float = 1.0,
        seed: int | None = None,
        fill_no_repeat: int | None = None,
        fill_close_sentences: bool | None = None,
        prompt_format: str | Mapping[str, str] | None = None,
        prompt_no_copy: int | None = None,
        fill_stop: str | None = None,
        fill_branches: int | None = None,
    ) -> list:
        """Several infilling systems on one text in one batch: an adapter name (MAGNET-style
        infill with that adapter) or 'zero-shot' / 'five-shot' / 'N-shot' (the base model
        prompted). Returns per system an InfillResult, or the MagnetError that stopped it.
        Input errors common to all (no blank, empty text) are raised. fill_no_repeat,
        fill_close_sentences, fill_stop, fill_branches: the MAGNET fills' decoding rules
        (infill); prompt_format,
        prompt_no_copy: the prompted systems' (infill_prompted; prompt_format may map a
        system's name to its format, as a study records them)."""
        s = Sampling(do_sample, temperature, top_p, seed)
        lanes = []
        for system in systems:
            row = system_row(system)
            if row.kind == PROMPTED:
                lane = prompted_lane(
                    self.runner,
                    self.prefixes,
                    text,
                    row.shots,
                    marker,
                    max_span_tokens,
                    s,
                    prompt_format.get(system)
                    if isinstance(prompt_format, Mapping)
                    else prompt_format,
                    prompt_no_copy,
                )
            else:
                lane = infill_lane(
                    self.runner,
                    text,
                    system,
                    marker,
                    max_span_tokens,
                    None,
                    s,
                    fill_no_repeat,
                    fill_close_sentences,
                    stop=fill_stop,
                    branches=fill_branches,
                )
            lanes.append(lane)
        return self.runner.run(lanes)

    # ------------------------------------------------------------ causal generation

    def compare_continue(
        self,
        prompt: str,
        adapters: Sequence[str | None],
        max_new_tokens: int | None = None,
        do_sample: bool = False,
        temperature: float = 1.0,
        top_p: float = 1.0,
        seed: int | None = None,
    ) -> Iterator[list[tuple[str, str | None]]]:
        """Continue one prompt with several adapters at once (one batch); after every step,
        yields (text so far, stop reason or None) per adapter. Validated eagerly."""
        s = Sampling(do_sample, temperature, top_p, seed)
        lanes, outs, ids = continuation_lanes(self.runner, prompt, adapters, max_new_tokens, s)
        return compare_events(self.runner, lanes, outs, ids)

    def continue_text(
        self,
        prompt: str,
        adapter: str | None = None,
        max_new_tokens: int | None = None,
        do_sample: bool = False,
        temperature: float = 1.0,
        top_p: float = 1.0,
        seed: int | None = None,
    ) -> Iterator[str]:
        """Stream the continuation of prompt as text pieces (causal mask, KV cache)."""
        s = Sampling(do_sample, temperature, top_p, seed).start()
        events = continue_events(self.runner, prompt, adapter, max_new_tokens, s)
        return (piece for _, piece, _ in events if piece)

    def generate(
        self,
        prompt: str,
        adapter: str | None = None,
        max_new_tokens: int | None = None,
        do_sample: bool = False,
        temperature: float = 1.0,
        top_p: float = 1.0,
        seed: int | None = None,
    ) -> Continuation:
        """continue_text without streaming: the whole continuation, its tokens and timing."""
        s = Sampling(do_sample, temperature, top_p, seed)
        return generate(self.runner, prompt, adapter, max_new_tokens, s)

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
