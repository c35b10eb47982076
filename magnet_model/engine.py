"""The inference engine: one base model in memory serving several adapters, switched per call.

- infill(text): MAGNET infilling. The context (with one <blank> per blank) is encoded ONCE with
  the hybrid mask, then every blank's span is decoded token by token from a KV cache, all spans
  side by side (one query row per unfinished span per step). Per-step 4-D masks let span k see
  the context and its own earlier tokens, never another span's; positions come from the layout
  (layout.build_hybrid, the contract shared with MSG training). A span stops by itself when the
  model predicts <span_end>, or is cut at a maximum / fixed length.
  infill_reference() does the same re-encoding everything at each step (tests and benchmarks).
- infill_prompted(text, shots=0|5): the paper's baselines, the base LLM asked in a prompt
  (templates in prompts.py).
- continue_text(prompt): causal generation with the cache, a generator of text pieces.
- embed_sentences(texts) / embed_tokens(text): representations as MAGNET.md says, from the
  inner model's hidden states (the LM head is never run for embeddings).

Adapters: None or "base" = adapter off; any name loaded by loading.load_model. The engine
owns the model: every forward runs under one lock with the adapter for that call switched on,
so calls from several threads (Gradio) never see another call's adapter or cache.
"""

from __future__ import annotations

import contextlib
import functools
import inspect
import os
import threading
import time
from collections.abc import Callable, Generator, Iterator, Sequence
from dataclasses import dataclass, field, replace
from pathlib import Path

import numpy as np
import torch

from . import prompts
from .adapter_meta import AdapterMeta, load_meta
from .batching import Feed, Lane, Prefix, causal_see, run_lanes
from .errors import InputError, MagnetError
from .layout import HybridSequence, build_hybrid
from .loading import LoadedModel, hub_kwargs, is_hub_id, load_model
from .masks import additive, allowed_mask
from .objectives import POOLINGS
from .settings import ModelSpec
from .static_decode import StaticDecoder
from .tokens import TokenRoles, choose_token_roles

BASE = "base"
DEFAULT_MARKER = "[blank]"
# Why a span ended, and how to say it to a person.
END_REASONS = {
    "end": "stopped by itself",
    "joined": "stopped where it ran into the text after the blank",
    "max": "cut at the length limit",
    "fixed": "fixed length",
}
# A span stops when its last tokens repeat the first tokens of the text after its blank: it
# has run into the right context. This many tokens (or the whole right piece, if shorter).
JOIN_TOKENS = 2


# ---------------------------------------------------------------- errors


class EmptyInputError(InputError):
    """The text (or prompt) is empty."""


class NoBlankError(InputError):
    """An infill request without a blank marker."""


class TooManyBlanksError(InputError):
    """More blanks than the engine fills in one request."""


class UnknownAdapterError(InputError):
    """An adapter name that is not loaded."""


class InputTooLongError(InputError):
    """The input (plus what is to be generated) exceeds the model's context."""


# ---------------------------------------------------------------- config and results


@dataclass
class EngineConfig:
    max_input_tokens: int | None = None  # None: the model's max_position_embeddings
    max_blanks: int = 8
    max_span_tokens: int = 48  # default cap of one span (paper spans: 8-32 tokens)
    max_new_tokens: int = 128  # default continuation length
    embed_max_tokens: int = 512  # longer sentences are truncated (as sentence-transformers)
    # side-by-side batches of 2-3 rows are padded to this many (None: 4 on CPU, where MKL's
    # fp32 product of 4 rows costs less than of 3; see bench/bench_side_by_side.py)
    pad_rows: int | None = None
    # a span stops where its text runs into the right context (reason "joined"); off: only
    # <span_end> or the length limit end it (to measure what the model does on its own)
    stop_at_right_context: bool = True
    # decoding path: "auto", "eager", "static" (static KV cache) or "graph" (static cache and
    # CUDA graphs; on a CPU: static); None: the model spec's (MAGNET_DECODE, --decode;
    # default "auto"). See static_decode.py.
    decode: str | None = None


@dataclass
class FilledSpan:
    text: str
    token_ids: list[int]
    start: int  # character offsets of the span in InfillResult.filled
    end: int
    end_reason: str  # one of END_REASONS
    written: int | None = None  # tokens the system wrote for it, before any were trimmed

    @property
    def stopped(self) -> bool:
        """The model ended the span itself (<span_end>), not a rule of the decoder."""
        return self.end_reason == "end"

    @property
    def fits(self) -> bool:
        """The span ended inside the blank: by itself, or where it ran into the right context."""
        return self.end_reason in ("end", "joined")


@dataclass
class InfillResult:
    text: str  # the input, with its blank markers
    filled: str
    spans: list[FilledSpan]
    system: str  # "magnet", "zero-shot", "five-shot"
    adapter: str
    context_tokens: int
    seconds: float  # whole call
    encode_seconds: float  # context (or prompt) encoding
    decode_seconds: float  # span decoding
    seed: int | None = None

    @property
    def generated_tokens(self) -> int:
        return sum(len(s.token_ids) for s in self.spans)

    @property
    def tokens_per_second(self) -> float:
        return self.generated_tokens / self.decode_seconds if self.decode_seconds > 0 else 0.0

    def highlighted(self) -> list[tuple[str, str | None]]:
        """(piece, label) pairs for gr.HighlightedText: spans labelled 'blank 1', 'blank 2'..."""
        out, at = [], 0
        for k, s in enumerate(self.spans, start=1):
            if s.start > at:
                out.append((self.filled[at : s.start], None))
            out.append((self.filled[s.start : s.end], f"blank {k}"))
            at = s.end
        if at < len(self.filled):
            out.append((self.filled[at:], None))
        return out


@dataclass
class Continuation:
    prompt: str
    text: str  # the generated text only
    token_ids: list[int]
    adapter: str
    prompt_tokens: int
    seconds: float
    first_token_seconds: float  # prompt encoding + first token
    stop_reason: str  # "eos" or "max"
    seed: int | None = None

    @property
    def tokens_per_second(self) -> float:
        """Decoding speed after the first token (the prompt encoding excluded)."""
        rest = self.seconds - self.first_token_seconds
        return (len(self.token_ids) - 1) / rest if len(self.token_ids) > 1 and rest > 0 else 0.0


@dataclass
class TokenVectors:
    tokens: list[str]
    token_ids: list[int]
    offsets: list[tuple[int, int]]  # character span of each token in the text
    vectors: np.ndarray  # (n_tokens, hidden)


@dataclass
class _Sampling:
    do_sample: bool
    temperature: float
    top_p: float
    seed: int | None
    generator: torch.Generator | None = None


@dataclass
class _InfillJob:
    pieces: list[str]  # the text between blanks, as typed (n + 1 pieces)
    gaps: list[str]  # whitespace typed right before each blank (not given to the model)
    piece_ids: list[list[int]]
    seq: HybridSequence  # context + one <span_start> per blank
    limits: list[int]  # max tokens per span
    fixed: list[bool]  # whether the limit is a fixed length
    roles: TokenRoles
    bos: int | None
    min_tokens: int = 1


@dataclass
class _SentencePlan:
    """How one adapter turns a sentence into a vector (see embed_sentences)."""

    mode: str
    pooling: str
    prefix: list[int] = field(default_factory=list)  # [bos] + instruction tokens
    end: list[int] = field(default_factory=list)  # [<sentence_end>] or nothing


# ---------------------------------------------------------------- helpers


def split_blanks(text: str, marker: str = DEFAULT_MARKER, max_blanks: int = 8) -> list[str]:
    """text -> the n + 1 pieces around its n blanks, with typed errors for bad input."""
    if not text or not text.strip():
        raise EmptyInputError("The text is empty; type a text with at least one blank.")
    if not marker:
        raise InputError("The blank marker must not be empty.")
    pieces = text.split(marker)
    n = len(pieces) - 1
    if n == 0:
        raise NoBlankError(f"The text has no blank; put {marker} where words are missing.")
    if n > max_blanks:
        raise TooManyBlanksError(
            f"The text has {n} blanks; at most {max_blanks} are filled at once."
        )
    if not "".join(pieces).strip():
        raise EmptyInputError("The text has only blanks; give some context around them.")
    return pieces


def _per_blank(value, n: int, what: str) -> list:
    if value is None or isinstance(value, int):
        return [value] * n
    value = list(value)
    if len(value) != n:
        raise InputError(f"{what} has {len(value)} entries for {n} blanks; give one per blank.")
    return value


def _sample(logits: torch.Tensor, s: _Sampling) -> torch.Tensor:
    """(rows, vocab) logits -> one token per row: argmax, or temperature + top-p sampling.

    The draw is made on the CPU from the request's CPU generator (the probabilities move to the
    CPU, the token moves back), so a seed gives the same draw from the same probabilities on any
    device: CUDA generators produce other streams than CPU ones."""
    if not s.do_sample:
        return logits.argmax(-1)
    probs = torch.softmax(logits.detach().float().cpu() / s.temperature, dim=-1)
    if s.top_p < 1.0:
        sorted_p, idx = probs.sort(dim=-1, descending=True)
        drop = sorted_p.cumsum(-1) - sorted_p > s.top_p  # keep the smallest set reaching top_p
        sorted_p = sorted_p.masked_fill(drop, 0.0)
        probs = torch.zeros_like(probs).scatter(-1, idx, sorted_p)
    return torch.multinomial(probs, 1, generator=s.generator).squeeze(-1).to(logits.device)


def assemble(pieces: list[str], gaps: list[str], spans: list[str]) -> tuple[str, list[tuple]]:
    """Pieces with the span texts in the blanks -> (filled text, (start, end) per span).

    The whitespace typed before a blank is kept only if the span does not bring its own;
    offsets leave out a span's surrounding whitespace so highlighting covers the words.
    """
    out: list[str] = []
    length = 0
    offsets = []
    for i, piece in enumerate(pieces):
        out.append(piece)
        length += len(piece)
        if i == len(spans):
            break
        span = spans[i]
        lead = span[: len(span) - len(span.lstrip())] or gaps[i]
        core = span.strip()
        tail = span[len(span.rstrip()) :] if core else ""
        start = length + len(lead)
        offsets.append((start, start + len(core)))
        piece_text = lead + core + tail
        out.append(piece_text)
        length += len(piece_text)
    return "".join(out), offsets


def _strip_gaps(pieces: list[str]) -> tuple[list[str], list[str]]:
    """The pieces without the spaces typed right before each blank, and those spaces (the
    model sees no trailing space; the filled text keeps the user's spacing)."""
    stripped = [p.rstrip(" \t") for p in pieces[:-1]] + [pieces[-1]]
    gaps = [p[len(q) :] for p, q in zip(pieces[:-1], stripped, strict=False)]
    return stripped, gaps


def _common_length(a: Sequence[int], b: Sequence[int]) -> int:
    n = 0
    for x, y in zip(a, b, strict=False):
        if x != y:
            break
        n += 1
    return n


def _decode_after(tokenizer, context: list[int], ids: list[int]) -> str:
    """Text of ids as it reads after context (spaces and merged bytes at the seam right)."""
    return tokenizer.decode(context + ids)[len(tokenizer.decode(context)) :]


class _TextStream:
    """Incremental detokenizer: O(1) work per token, correct across merged bytes and spaces."""

    def __init__(self, tokenizer, context_ids: list[int]):
        self.tok = tokenizer
        self.ids = list(context_ids[-4:])
        self.prefix = 0
        self.read = len(self.ids)

    def push(self, token: int) -> str:
        self.ids.append(token)
        before = self.tok.decode(self.ids[self.prefix : self.read])
        now = self.tok.decode(self.ids[self.prefix :])
        if len(now) > len(before) and not now.endswith("\ufffd"):
            self.prefix, self.read = self.read, len(self.ids)
            return now[len(before) :]
        return ""

    def flush(self) -> str:
        before = self.tok.decode(self.ids[self.prefix : self.read])
        now = self.tok.decode(self.ids[self.prefix :])
        self.prefix = self.read = len(self.ids)
        return now[len(before) :]


# ---------------------------------------------------------------- the engine


class Engine:
    """One LoadedModel (base + named adapters) behind infill / continue / embed calls."""

    def __init__(
        self,
        loaded: LoadedModel,
        config: EngineConfig | None = None,
        metas: dict[str, AdapterMeta] | None = None,
    ):
        self.loaded = loaded
        self.config = config or EngineConfig()
        self.tokenizer = loaded.tokenizer
        self.model = loaded.model
        self._peft = self.model if hasattr(self.model, "peft_config") else None
        self._lm = self._peft.get_base_model() if self._peft is not None else self.model
        self._inner = self._lm.get_decoder()  # hidden states without the LM head
        self._head = self._lm.get_output_embeddings()
        params = inspect.signature(self._inner.forward).parameters
        self._cache_kw = "cache" if "cache" in params else "past_key_values"
        self._lock = threading.RLock()
        self._active: str | None = None  # adapter state the model is in (None: unknown)
        self._layers_on: bool | None = None  # peft adapter layers enabled (None: unknown)
        self._peft_active: str | None = None  # peft's active adapter as last set here
        self._metas = {n: _find_meta(ref) for n, ref in loaded.adapters.items()}
        self._metas.update(metas or {})
        self._default_roles: TokenRoles | None = None
        self._prefixes: dict[tuple, Prefix] = {}  # prompt heads of the prompted baselines
        self._row_loras: dict[tuple, _RowLora | None] = {}  # stacked LoRA for mixed batches
        cap = getattr(self._lm.config, "max_position_embeddings", None) or 2048
        self.max_input_tokens = min(self.config.max_input_tokens or cap, cap)
        decode = self.config.decode or loaded.spec.decode
        self.decoder = StaticDecoder(self._lm.config, decode, self._lock)

    @classmethod
    def from_spec(cls, spec: ModelSpec | None = None, config: EngineConfig | None = None) -> Engine:
        return cls(load_model(spec), config)

    # ------------------------------------------------------------ adapters

    @property
    def adapter_names(self) -> list[str]:
        """Loaded adapters, without 'base' (which is always available)."""
        return list(self._peft.peft_config) if self._peft is not None else []

    def resolve_adapter(self, adapter: str | None) -> str:
        if adapter is None or adapter == BASE:
            return BASE
        if adapter in self.adapter_names:
            return adapter
        known = ", ".join([BASE, *self.adapter_names])
        raise UnknownAdapterError(f"No adapter named '{adapter}' is loaded; available: {known}.")

    def meta(self, adapter: str | None) -> AdapterMeta | None:
        name = self.resolve_adapter(adapter)
        return None if name == BASE else self._metas.get(name)

    def roles(self, adapter: str | None) -> TokenRoles:
        meta = self.meta(adapter)
        if meta is not None:
            return meta.token_roles
        if self._default_roles is None:
            self._default_roles = choose_token_roles(self.tokenizer)
        return self._default_roles

    def bos(self, adapter: str | None) -> int | None:
        """The BOS used in layouts: the trainer's record if any, else what the tokenizer adds."""
        meta = self.meta(adapter)
        if meta is not None and "bos" in meta.training:
            return meta.training["bos"]
        bos = self.tokenizer.bos_token_id
        if bos is None:
            return None
        probe = self.tokenizer("a").input_ids
        return bos if probe and probe[0] == bos else None

    def _switch(self, name: str) -> None:
        """Adapter layers off for 'base', else on with `name` active. Each peft call walks
        every module (~80 ms on SmolLM2 on a CPU), so only what changed is called."""
        if self._active == name or self._peft is None:
            return
        lora = self._peft.base_model
        if name == BASE:
            if self._layers_on is not False:
                lora.disable_adapter_layers()
            self._layers_on = False
        else:
            if self._layers_on is not True:
                lora.enable_adapter_layers()
            self._layers_on = True
            if self._peft_active != name:
                self._peft.set_adapter(name, inference_mode=True)
                self._peft_active = name
        self._active = name

    @contextlib.contextmanager
    def using(self, adapter: str | None):
        """Exclusive use of the model with one adapter on (or off, for 'base')."""
        name = self.resolve_adapter(adapter)
        with self._lock, torch.inference_mode():
            self._switch(name)
            yield name

    # ------------------------------------------------------------ model calls

    @property
    def device(self) -> torch.device:
        return self._head.weight.device

    @property
    def dtype(self) -> torch.dtype:
        return self._head.weight.dtype

    def to(self, device: str | torch.device) -> torch.device:
        """Move the model (base and adapters) to `device`; what was computed on the old device
        (prompt-head KV, stacked LoRA) is dropped and rebuilt there on first use."""
        device = torch.device(device)
        with self._lock:
            if self.device != device:
                self.model.to(device)
                self._prefixes.clear()
                self._row_loras.clear()
                self.decoder.clear()
                self.loaded.device = self.device
        return self.device

    def to_cuda_if_visible(self) -> torch.device:
        """The model on CUDA when a GPU is visible now, else where it is. For ZeroGPU, which
        attaches a GPU only while a `spaces.GPU` call runs: call it inside that call."""
        if self.device.type != "cuda" and torch.cuda.is_available():
            return self.to("cuda")
        return self.device

    def _tensor(self, rows) -> torch.Tensor:
        return torch.tensor(rows, dtype=torch.long, device=self.device)

    def _hidden(self, ids, mask=None, positions=None, cache=None) -> torch.Tensor:
        """Last hidden states (B, T, H); mask is a 4-D additive mask or None (causal)."""
        kwargs = {self._cache_kw: cache, "use_cache": cache is not None}
        out = self._inner(input_ids=ids, attention_mask=mask, position_ids=positions, **kwargs)
        return out.last_hidden_state

    def _new_cache(self):
        from transformers import DynamicCache

        return DynamicCache(config=self._lm.config)

    def _encode(self, text: str) -> list[int]:
        return self.tokenizer(text, add_special_tokens=False).input_ids

    def _sampling(self, do_sample, temperature, top_p, seed) -> _Sampling:
        if do_sample and not temperature > 0:
            raise InputError(f"temperature must be above 0 for sampling, not {temperature}.")
        if not 0 < top_p <= 1:
            raise InputError(f"top_p must be in (0, 1], not {top_p}.")
        if not do_sample:
            return _Sampling(False, temperature, top_p, None)
        seed = int.from_bytes(os.urandom(7), "little") if seed is None else int(seed)
        gen = torch.Generator(device="cpu").manual_seed(seed)  # the same stream on any device
        return _Sampling(True, temperature, top_p, seed, gen)

    # ------------------------------------------------------------ infilling (MAGNET)

    def _infill_job(self, text, marker, adapter, max_span_tokens, fixed_lengths) -> _InfillJob:
        pieces = split_blanks(text, marker, self.config.max_blanks)
        n = len(pieces) - 1
        maxes = _per_blank(max_span_tokens, n, "max_span_tokens")
        fixed = _per_blank(fixed_lengths, n, "fixed_lengths")
        limits = []
        for m, f in zip(maxes, fixed, strict=True):
            lim = f if f is not None else (m if m is not None else self.config.max_span_tokens)
            if not isinstance(lim, int) or lim < 1:
                raise InputError(f"A span length must be a whole number of at least 1, not {lim}.")
            limits.append(lim)
        roles = self.roles(adapter)
        stripped, gaps = _strip_gaps(pieces)
        piece_ids = [self._encode(p) for p in stripped]
        bos = self.bos(adapter)
        seq = build_hybrid(piece_ids, [[] for _ in range(n)], roles, bos, with_end=False)
        need = seq.context_length + max(limits)
        if need > self.max_input_tokens:
            raise InputTooLongError(
                f"The text is {seq.context_length} tokens long; with spans of up to "
                f"{max(limits)} tokens it needs {need} positions, more than the limit of "
                f"{self.max_input_tokens}. Shorten the text or the span length."
            )
        is_fixed = [f is not None for f in fixed]
        return _InfillJob(stripped, gaps, piece_ids, seq, limits, is_fixed, roles, bos)

    def special_ids(self, roles: TokenRoles) -> list[int]:
        """Every special or added token of the tokenizer, and the MAGNET roles: none of them
        is text, so none may be generated inside a span (except <span_end>, which ends it)."""
        added = self.tokenizer.added_tokens_decoder  # id -> AddedToken
        ids = set(self.tokenizer.all_special_ids) | {i for i, t in added.items() if t.special}
        ids |= roles.special_ids() | {roles.sentence_end, roles.pad}
        return sorted(i for i in ids if i != roles.span_end and i < len(self.tokenizer))

    def _span_steps(self, job: _InfillJob, s: _Sampling) -> Generator:
        """Decode all spans side by side: yields (active, generated), receives the logits of
        the active spans' next tokens; returns (generated, reasons).

        A span ends when the model predicts <span_end> ("end"), when its last tokens repeat
        the start of the text after its blank ("joined": it ran into the right context; the
        repeated tokens are removed), or at its maximum ("max") / fixed length ("fixed")."""
        n = len(job.limits)
        end = job.roles.span_end
        banned = self.special_ids(job.roles)
        join = self.config.stop_at_right_context
        rights = [job.piece_ids[k + 1][:JOIN_TOKENS] if join else [] for k in range(n)]
        generated: list[list[int]] = [[] for _ in range(n)]
        reasons = [""] * n
        active = list(range(n))
        while active:
            logits = (yield active, generated).float()
            logits[:, banned] = float("-inf")
            for row, k in enumerate(active):
                if len(generated[k]) < job.min_tokens or job.fixed[k]:
                    logits[row, end] = float("-inf")  # the span may not end yet
                if not generated[k] and rights[k] and not job.fixed[k]:
                    # a span that began with the text after its blank would be trimmed to
                    # nothing: the blank is there because something is missing
                    logits[row, rights[k][0]] = float("-inf")
            picks = _sample(logits, s).tolist()
            still = []
            for k, tok in zip(active, picks, strict=True):
                if tok == end:
                    reasons[k] = "end"
                    continue
                generated[k].append(tok)
                right = rights[k]
                if right and not job.fixed[k] and generated[k][-len(right) :] == right:
                    del generated[k][-len(right) :]
                    reasons[k] = "joined"
                elif len(generated[k]) >= job.limits[k]:
                    reasons[k] = "fixed" if job.fixed[k] else "max"
                else:
                    still.append(k)
            active = still
        return generated, reasons

    def _span_loop(self, job: _InfillJob, s: _Sampling, step: Callable) -> tuple:
        """Drive _span_steps with step(active, generated) -> logits (the reference path)."""
        steps = self._span_steps(job, s)
        t0 = time.perf_counter()
        encode_seconds = None
        try:
            active, generated = next(steps)
            while True:
                logits = step(active, generated)
                if encode_seconds is None:  # the first step encodes the context
                    encode_seconds = time.perf_counter() - t0
                active, generated = steps.send(logits)
        except StopIteration as stop:
            generated, reasons = stop.value
        decode_seconds = time.perf_counter() - t0 - encode_seconds
        return generated, reasons, encode_seconds, decode_seconds

    def _magnet_lane(self, job: _InfillJob, s: _Sampling) -> Generator:
        """The cached infill as a lane: context + <span_start>s encoded once (hybrid mask);
        then one new token per active span per step, each seeing the context and its span."""
        seq = job.seq
        n_ctx = seq.context_length
        segments = torch.tensor(seq.segments)
        see = allowed_mask("hybrid", torch.ones_like(segments)[None], segments[None])[0, 0]
        want = list(range(n_ctx, len(seq.input_ids)))
        key_seg = list(seq.segments)
        steps = self._span_steps(job, s)
        try:
            next(steps)
            logits = yield Feed(seq.input_ids, seq.position_ids, see, want)
            while True:
                active, generated = steps.send(logits)
                q_seg = torch.tensor([k + 1 for k in active])
                key_seg += q_seg.tolist()
                keys = torch.tensor(key_seg)
                see = (keys == 0)[None, :] | (keys[None, :] == q_seg[:, None])
                ids = [generated[k][-1] for k in active]
                pos = [seq.blank_positions[k] + len(generated[k]) for k in active]
                logits = yield Feed(ids, pos, see, list(range(len(active))))
        except StopIteration as stop:
            return stop.value

    def _reference_step(self, job: _InfillJob) -> Callable:
        """The slow path: the whole layout (context + all spans so far) re-encoded every step."""

        def step(active: list[int], generated: list[list[int]]) -> torch.Tensor:
            seq = build_hybrid(job.piece_ids, generated, job.roles, job.bos, with_end=False)
            ids = self._tensor([seq.input_ids])
            seg = self._tensor([seq.segments])
            mask = additive(allowed_mask("hybrid", torch.ones_like(ids), seg), self.dtype)
            h = self._hidden(ids, mask, self._tensor([seq.position_ids]))[0]
            last = [max(i for i, g in enumerate(seq.segments) if g == k + 1) for k in active]
            return self._head(h[last])

        return step

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
    ) -> InfillResult:
        """Fill every blank of text with a span that stops by itself (or at a max/fixed length).

        reference=True re-encodes the whole sequence at every step (slow; for tests/bench).
        """
        if not reference:
            return self._one(
                self._infill_lane(
                    text,
                    adapter,
                    marker,
                    max_span_tokens,
                    fixed_lengths,
                    do_sample,
                    temperature,
                    top_p,
                    seed,
                )
            )
        t0 = time.perf_counter()
        job = self._infill_job(text, marker, adapter, max_span_tokens, fixed_lengths)
        s = self._sampling(do_sample, temperature, top_p, seed)
        with self.using(adapter) as name:
            generated, reasons, enc, dec = self._span_loop(job, s, self._reference_step(job))
        return self._infill_result(text, job, name, generated, reasons, s, t0, enc, dec)

    def _infill_result(self, text, job, name, generated, reasons, s, t0, enc, dec):
        texts = [self.tokenizer.decode(g) for g in generated]
        filled, offsets = assemble(job.pieces, job.gaps, texts)
        spans = [
            FilledSpan(t, g, a, b, r)
            for t, g, (a, b), r in zip(texts, generated, offsets, reasons, strict=True)
        ]
        seconds = time.perf_counter() - t0
        ctx = job.seq.context_length
        return InfillResult(text, filled, spans, "magnet", name, ctx, seconds, enc, dec, s.seed)

    def _infill_lane(
        self,
        text,
        adapter,
        marker,
        max_span_tokens,
        fixed_lengths,
        do_sample,
        temperature,
        top_p,
        seed,
    ) -> Lane:
        """A MAGNET infill as a lane (validated now); its result is an InfillResult."""
        t0 = time.perf_counter()
        job = self._infill_job(text, marker, adapter, max_span_tokens, fixed_lengths)
        s = self._sampling(do_sample, temperature, top_p, seed)
        name = self.resolve_adapter(adapter)
        lane = Lane(name, None)

        def steps():
            generated, reasons = yield from self._magnet_lane(job, s)
            enc = lane.first_logits or 0.0
            dec = time.perf_counter() - t0 - enc
            return self._infill_result(text, job, name, generated, reasons, s, t0, enc, dec)

        lane.steps = steps()
        return lane

    def infill_reference(self, text: str, **kwargs) -> InfillResult:
        return self.infill(text, reference=True, **kwargs)

    # ------------------------------------------------------------ lanes: one batch, many jobs

    def _forward_rows(self, ids, positions, mask, cache, adapters: list[str]) -> torch.Tensor:
        """Hidden states of a batch whose rows may use different adapters.

        Every LoRA layer adds (x A_cat^T * row mask) B_cat^T, the adapters' A and B stacked
        once per set of adapters (_RowLora): 3 small products per layer whatever the number of
        adapters, the scale folded into A and B's product added in place; peft's own
        mixed batch (`adapter_names=`) indexes each adapter's rows in and out of every layer,
        which cost more than the decoding step itself. Falls back to peft's path where a layer
        is not plain LoRA (DoRA, dropout in training...)."""
        with self._lock, torch.inference_mode():
            if set(adapters) == {BASE} or self._peft is None:
                self._switch(BASE)
                return self._hidden(ids, mask, positions, cache)
            rows = self._row_lora(adapters)
            if rows is None and len(set(adapters)) == 1:
                self._switch(adapters[0])
                return self._hidden(ids, mask, positions, cache)
            if rows is not None:
                self._switch(BASE)  # peft's layers off; the stacked LoRA is added instead
                with rows.patched(adapters, self.dtype, self.device):
                    return self._hidden(ids, mask, positions, cache)
            lora = self._peft.base_model
            if self._layers_on is not True:
                lora.enable_adapter_layers()
                self._layers_on = True
            self._active = None  # mixed rows: the next single-adapter call re-switches
            names = ["__base__" if a == BASE else a for a in adapters]
            # peft's per-row adapters (the documented `adapter_names=` of PeftModel.forward),
            # entered around the decoder alone so no logits are computed for every position
            with lora._enable_peft_forward_hooks(adapter_names=names):
                return self._hidden(ids, mask, positions, cache)

    def _row_lora(self, adapters: list[str]) -> _RowLora | None:
        names = tuple(sorted({a for a in adapters if a != BASE}))
        if names not in self._row_loras:
            self._row_loras.clear()  # one set of stacks at a time (they copy LoRA weights)
            self._row_loras[names] = _RowLora.build(self._peft, names)
        return self._row_loras[names]

    def _logits(self, hidden: torch.Tensor) -> torch.Tensor:
        with torch.inference_mode():
            return self._head(hidden)

    def _steps(self, lanes: list[Lane]) -> Iterator[list[Lane]]:
        """Run lanes together; yields them after every batched forward."""
        pad = self.tokenizer.pad_token_id
        pad = pad if pad is not None else (self.tokenizer.eos_token_id or 0)
        pad_rows = self.config.pad_rows
        if pad_rows is None:
            pad_rows = 4 if self.device.type == "cpu" else 0
        if self.decoder.path(self.device) != "eager":  # static cache (and CUDA graphs)
            run = self.decoder.run_lanes
            return run(
                lanes, self._forward_rows, self._logits, pad, self.dtype, self.device, pad_rows
            )
        return run_lanes(
            lanes,
            self._forward_rows,
            self._logits,
            self._new_cache,
            pad,
            self.dtype,
            self.device,
            pad_rows,
            BASE,
        )

    def _run(self, lanes: list[Lane]) -> list:
        """Results of lanes run as one batch: each an InfillResult/Continuation or a MagnetError."""
        for _ in self._steps(lanes):
            pass
        return [lane.error if lane.error is not None else lane.result for lane in lanes]

    def _one(self, lane: Lane):
        (out,) = self._run([lane])
        if isinstance(out, MagnetError):
            raise out
        return out

    # ------------------------------------------------------------ causal generation

    def _check_prompt(self, n_prompt: int, n_new: int) -> None:
        if n_prompt + n_new > self.max_input_tokens:
            raise InputTooLongError(
                f"The prompt is {n_prompt} tokens long; with {n_new} new tokens it exceeds the "
                f"limit of {self.max_input_tokens} tokens. Shorten it or generate fewer tokens."
            )

    def _continue_lane(
        self, ids: list[int], max_new: int, s: _Sampling, stop: set[int], out: list[int]
    ) -> Generator:
        """Causal generation from a prompt; appends tokens to out; returns 'eos' or 'max'."""
        n = len(ids)
        logits = yield Feed(ids, list(range(n)), causal_see(0, n), [n - 1])
        for i in range(max_new):
            tok = int(_sample(logits, s)[0])
            if tok in stop:
                return "eos"
            out.append(tok)
            if i + 1 == max_new:
                break
            logits = yield Feed([tok], [n], causal_see(n, 1), [0])
            n += 1
        return "max"

    def _prompt_ids(self, prompt: str) -> list[int]:
        if not prompt or not prompt.strip():
            raise EmptyInputError("The prompt is empty; type the beginning of a text.")
        return self.tokenizer(prompt).input_ids  # the tokenizer's own BOS, if it adds one

    def _continuation_lanes(
        self, prompt, adapters, max_new_tokens, do_sample, temperature, top_p, seed
    ) -> tuple[list[Lane], list[list[int]], list[int]]:
        """Validated lanes for one prompt and several adapters; their token lists; prompt ids."""
        names = [self.resolve_adapter(a) for a in adapters]
        ids = self._prompt_ids(prompt)
        max_new = max_new_tokens or self.config.max_new_tokens
        self._check_prompt(len(ids), max_new)
        stop = {t for t in [self.tokenizer.eos_token_id] if t is not None}
        outs: list[list[int]] = [[] for _ in names]
        lanes = []
        for name, out in zip(names, outs, strict=True):
            s = self._sampling(do_sample, temperature, top_p, seed)
            lanes.append(Lane(name, self._continue_lane(ids, max_new, s, stop, out)))
        return lanes, outs, ids

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
        lanes, outs, ids = self._continuation_lanes(
            prompt, adapters, max_new_tokens, do_sample, temperature, top_p, seed
        )
        streams = [_TextStream(self.tokenizer, ids) for _ in lanes]

        def events():
            texts = [""] * len(lanes)
            fed = [0] * len(lanes)
            for _ in self._steps(lanes):
                for i, lane in enumerate(lanes):
                    for tok in outs[i][fed[i] :]:
                        texts[i] += streams[i].push(tok)
                    fed[i] = len(outs[i])
                    if lane.done and streams[i] is not None:
                        texts[i] += streams[i].flush()
                        streams[i] = None
                        if lane.error is not None:
                            raise lane.error
                yield [
                    (t, lane.result if lane.done else None)
                    for t, lane in zip(texts, lanes, strict=True)
                ]

        return events()

    def _continue_events(self, prompt, adapter, max_new_tokens, s) -> Iterator[tuple]:
        """Eagerly validated; yields (token id or None, text piece, stop reason or None)."""
        name = self.resolve_adapter(adapter)
        ids = self._prompt_ids(prompt)
        max_new = max_new_tokens or self.config.max_new_tokens
        self._check_prompt(len(ids), max_new)
        stop = {t for t in [self.tokenizer.eos_token_id] if t is not None}
        out: list[int] = []
        lane = Lane(name, self._continue_lane(ids, max_new, s, stop, out))

        def events():
            stream = _TextStream(self.tokenizer, ids)
            n = 0
            for _ in self._steps([lane]):
                for tok in out[n:]:
                    yield tok, stream.push(tok), None
                n = len(out)
            if lane.error is not None:
                raise lane.error
            yield None, stream.flush(), lane.result

        return events()

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
        s = self._sampling(do_sample, temperature, top_p, seed)
        events = self._continue_events(prompt, adapter, max_new_tokens, s)
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
        s = self._sampling(do_sample, temperature, top_p, seed)
        t0 = time.perf_counter()
        events = self._continue_events(prompt, adapter, max_new_tokens, s)
        ids: list[int] = []
        first = 0.0
        reason = "eos"
        for tok, _, stop in events:
            if tok is not None:
                ids.append(tok)
                first = first or time.perf_counter() - t0
            reason = stop or reason
        seconds = time.perf_counter() - t0
        prompt_ids = self._prompt_ids(prompt)
        text = _decode_after(self.tokenizer, prompt_ids[-4:], ids)
        name = self.resolve_adapter(adapter)
        n_prompt = len(prompt_ids)
        return Continuation(prompt, text, ids, name, n_prompt, seconds, first, reason, s.seed)

    # ------------------------------------------------------------ prompted infilling baselines

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
        style: str | None = None,
    ) -> InfillResult:
        """The paper's baseline: the base model (adapter off) asked to fill each blank in turn."""
        lane = self._prompted_lane(
            text, shots, marker, max_span_tokens, do_sample, temperature, top_p, seed, style
        )
        return self._one(lane)

    def _prompted_lane(
        self, text, shots, marker, max_span_tokens, do_sample, temperature, top_p, seed, style
    ) -> Lane:
        """A prompted infill as a lane (validated now). The fixed head of its prompt (the
        instruction and the examples) comes from the prefix cache, so only the query is encoded."""
        t0 = time.perf_counter()
        if shots not in range(len(prompts.EXAMPLES) + 1):
            raise InputError(f"shots must be 0 to {len(prompts.EXAMPLES)}, not {shots}.")
        pieces = split_blanks(text, marker, self.config.max_blanks)
        limit = max_span_tokens or self.config.max_span_tokens
        s = self._sampling(do_sample, temperature, top_p, seed)
        tok = self.tokenizer
        stop = {tok.eos_token_id, tok.convert_tokens_to_ids("<|im_end|>")}
        stop -= {None, tok.unk_token_id}  # <|im_end|> ends a chat turn where it exists
        prefix = self.prompt_prefix(shots, style)
        system = {0: "zero-shot", 5: "five-shot"}.get(shots, f"{shots}-shot")
        lane = Lane(BASE, None, prefix)

        def steps():
            answers: list[str] = []
            reasons: list[str] = []
            written: list[int] = []
            n_prompt = 0
            visible = [True] * len(prefix)  # one flag per key of this lane's row
            for k in range(len(pieces) - 1):
                query = prompts.render_query(pieces, answers, k)
                ids = tok(prompts.build_prompt(query, shots, tok, style), add_special_tokens=False)
                ids = ids.input_ids
                self._check_prompt(len(ids), limit)
                n_prompt = max(n_prompt, len(ids))
                # reuse the cached head where the tokens agree (at least one token is fed)
                common = min(_common_length(prefix.ids, ids), len(ids) - 1)
                visible = [i < common for i in range(len(visible))]  # earlier blanks: hidden
                new = ids[common:]
                logits = yield Feed(
                    new,
                    list(range(common, len(ids))),
                    causal_see(visible, len(new)),
                    [len(new) - 1],
                )
                visible += [True] * len(new)
                out, reason, n_written = yield from self._answer_steps(
                    logits, len(ids), limit, s, stop, visible
                )
                answer, joined = prompts.read_answer(out, pieces[k], pieces[k + 1])
                answers.append(answer)
                reasons.append("joined" if joined else reason)
                written.append(n_written)
            stripped, gaps = _strip_gaps(pieces)
            filled, offsets = assemble(stripped, gaps, answers)
            spans = [
                FilledSpan(a, self._encode(a) if a else [], x, y, r, w)
                for a, (x, y), r, w in zip(answers, offsets, reasons, written, strict=True)
            ]
            seconds = time.perf_counter() - t0
            enc = lane.first_logits or 0.0
            return InfillResult(
                text, filled, spans, system, BASE, n_prompt, seconds, enc, seconds - enc, s.seed
            )

        lane.steps = steps()
        return lane

    def _answer_steps(
        self, logits, pos: int, limit: int, s: _Sampling, stop: set[int], visible: list[bool]
    ) -> Generator:
        """Generate an answer until a stop token or a line break -> (text, reason, tokens
        written): reason 'end' when the model stopped, 'max' when the limit cut it.

        limit counts every generated token (leading blank lines and spaces too: they cost a
        step each); visible: the lane's keys this answer may attend to (grown in place)."""
        out: list[int] = []
        count = 0
        banned = [i for i in self.special_ids(self.roles(None)) if i not in stop]
        while True:
            logits = logits.float()
            logits[..., banned] = float("-inf")  # no special token is answer text
            tok = int(_sample(logits, s)[0])
            if tok in stop:
                reason = "end"
                break
            count += 1
            piece = self.tokenizer.decode([tok])
            # leading blank lines or spaces: the answer has not started yet
            if out or piece.strip():
                if "\n" in piece:
                    reason = "end"
                    break
                out.append(tok)
            if count >= limit:
                reason = "max"
                break
            logits = yield Feed([tok], [pos], causal_see(visible, 1), [0])
            visible.append(True)
            pos += 1
        return self.tokenizer.decode(out), reason, len(out)

    def prompt_prefix(self, shots: int, style: str | None = None) -> Prefix:
        """The KV of the fixed head of the prompted baseline's prompt (instruction, examples),
        computed once per (shots, style) with the adapter off; requests reuse it."""
        style = style or prompts.default_style(self.tokenizer)
        key = (shots, style)
        with self._lock:
            if key not in self._prefixes:
                heads = [
                    self.tokenizer(
                        prompts.build_prompt(q, shots, self.tokenizer, style),
                        add_special_tokens=False,
                    ).input_ids
                    for q in ("A ___ B.", "Zebra ___ quilt?")  # the head is what they share
                ]
                ids = heads[0][: _common_length(*heads)]
                cache = self._new_cache()
                if ids:
                    t = self._tensor([ids])
                    with self.using(BASE):
                        self._hidden(t, None, None, cache)
                keys = [layer.keys for layer in cache.layers] if ids else []
                values = [layer.values for layer in cache.layers] if ids else []
                self._prefixes[key] = Prefix(tuple(ids), keys, values)
            return self._prefixes[key]

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
    ) -> list:
        """Several infilling systems on one text in one batch: an adapter name (MAGNET-style
        infill with that adapter) or 'zero-shot' / 'five-shot' / 'N-shot' (the base model
        prompted). Returns per system an InfillResult, or the MagnetError that stopped it.
        Input errors common to all (no blank, empty text) are raised."""
        lanes = []
        for system in systems:
            args = (do_sample, temperature, top_p, seed)
            if system.endswith("-shot"):
                shots = {"zero": 0, "five": 5}.get(system[:-5])
                shots = int(system[:-5]) if shots is None and system[:-5].isdigit() else shots
                if shots is None:
                    raise InputError(f"Unknown system {system!r}; say e.g. 'five-shot'.")
                lane = self._prompted_lane(text, shots, marker, max_span_tokens, *args, None)
            else:
                lane = self._infill_lane(text, system, marker, max_span_tokens, None, *args)
            lanes.append(lane)
        return self._run(lanes)

    # ------------------------------------------------------------ embeddings

    def _sentence_plan(self, name: str) -> _SentencePlan:
        """MAGNET: [bos] instruction text <sentence_end>, bidirectional, last token.
        Other trained adapters: their recorded pooling and mode. Base: causal mean pooling."""
        meta = self.meta(name)
        if meta is None:
            return _SentencePlan("causal", "mean")
        bos = self.bos(name)
        prefix = ([] if bos is None else [bos]) + self._encode(meta.instruction)
        mode = "bidirectional" if meta.attention == "hybrid" else meta.attention
        return _SentencePlan(mode, meta.pooling, prefix, [meta.token_roles.sentence_end])

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

        pooling: None = the adapter's own (see _sentence_plan); 'last' or 'mean' overrides it
        (mean over the text and its end token, never the instruction), to compare poolings."""
        single = isinstance(texts, str)
        texts = [texts] if single else list(texts)
        name = self.resolve_adapter(adapter)
        plan = self._sentence_plan(name)
        if pooling is not None:
            if pooling not in POOLINGS:
                raise InputError(f"Pooling must be one of {', '.join(POOLINGS)}, not {pooling!r}.")
            plan = replace(plan, pooling=pooling)
        rows = self._sentence_rows(texts, plan)
        hidden = self._head.weight.shape[1]
        out = np.zeros((len(texts), hidden), dtype=np.float32)
        batches = _pack_rows([len(r) for r, _ in rows], batch_size)
        if show_progress_bar:
            from tqdm.auto import tqdm

            batches = tqdm(batches, desc=f"Embedding ({name})")
        for batch in batches:
            vecs = self._embed_batch(name, plan, [[rows[i] for i in row] for row in batch])
            if normalize_embeddings:
                vecs = torch.nn.functional.normalize(vecs, dim=-1)
            out[[i for row in batch for i in row]] = vecs.float().cpu().numpy()
        return out[0] if single else out

    def _sentence_rows(self, texts: list[str], plan: _SentencePlan) -> list[tuple[list[int], int]]:
        """(prefix + body + end token ids, where the body starts) per text. One tokenizer call
        for all texts: the fast tokenizer encodes a list in one go, several times faster than
        text by text."""
        if not texts:
            return []
        cap = self.config.embed_max_tokens
        empty = [] if plan.end else [self.tokenizer.eos_token_id]
        bodies = self.tokenizer(texts, add_special_tokens=False).input_ids
        start = len(plan.prefix)
        return [(plan.prefix + (b[:cap] or empty) + plan.end, start) for b in bodies]

    def _embed_batch(
        self, name: str, plan: _SentencePlan, packed: list[list[tuple]]
    ) -> torch.Tensor:
        """Pooled vectors of one batch, row by row and left to right in each row.

        packed: rows, each one or more (ids, body start) sentences side by side (_pack_rows).
        A sentence attends within itself only and its positions start at 0, so its vector is
        what it would get alone in a row; the padding that would have filled the row is real
        work instead. Causal rows of one sentence need no mask (right padding: a real token
        never sees a later pad; sdpa's causal kernel then also runs grouped-query attention
        without copying keys and values per head). LoRA runs fused (see _RowLora)."""
        if plan.mode not in ("causal", "bidirectional"):
            raise ValueError(
                f"sentence embeddings need causal or bidirectional attention, not {plan.mode!r}"
            )
        width = max(sum(len(ids) for ids, _ in row) for row in packed)
        pad = self.tokenizer.pad_token_id or 0
        ids, segments, positions, spans = [], [], [], []
        for r, row in enumerate(packed):
            flat, seg, pos = [], [], []
            for k, (toks, start) in enumerate(row, 1):
                spans.append((r, len(flat) + start, len(flat) + len(toks)))  # pooled columns
                flat += toks
                seg += [k] * len(toks)
                pos += range(len(toks))
            fill = width - len(flat)
            ids.append(flat + [pad] * fill)
            segments.append(seg + [0] * fill)
            positions.append(pos + [0] * fill)
        ids = self._tensor(ids)
        if plan.mode == "causal" and all(len(row) == 1 for row in packed):
            mask, pos_ids = None, None  # positions 0.. in every row
        else:
            allowed = _packed_allowed(self._tensor(segments), plan.mode == "causal")
            mask, pos_ids = additive(allowed, self.dtype), self._tensor(positions)
        h = self._forward_rows(ids, pos_ids, mask, None, [name] * len(packed))
        if plan.pooling == "last":
            rows, cols = (
                self._tensor([r for r, _, _ in spans]),
                self._tensor([e - 1 for *_, e in spans]),
            )
            return h[rows, cols]
        return torch.stack([h[r, a:e].mean(0) for r, a, e in spans])

    def token_layout(self, adapter: str | None) -> tuple[list[int], str]:
        """(tokens put before a text, attention mode) for token vectors: exactly what training
        used. The prefix is the BOS the trainer recorded (none for SmolLM2: `bos: null`), or,
        without a record, the one the tokenizer itself adds; never a token training lacked."""
        name = self.resolve_adapter(adapter)
        meta = self.meta(name)
        mode = "causal" if meta is None or meta.attention == "causal" else "bidirectional"
        bos = self.bos(name)
        return ([] if bos is None else [bos]), mode

    def embed_tokens(self, text: str, adapter: str | None = "magnet") -> TokenVectors:
        """One vector per token, in the layout training used (token_layout). Bidirectional
        adapters: token i's vector is the output at i - 1 (the MNTP convention); the first
        token, with nothing before it, takes its own output. Causal (base, adapters trained
        causally): the token's own output."""
        if not text or not text.strip():
            raise EmptyInputError("The text is empty.")
        name = self.resolve_adapter(adapter)
        prefix, mode = self.token_layout(name)
        enc = self.tokenizer(text, add_special_tokens=False, return_offsets_mapping=True)
        ids = enc.input_ids[: self.max_input_tokens - len(prefix)]
        t = self._tensor([prefix + ids])
        mask = additive(allowed_mask(mode, torch.ones_like(t)), self.dtype)
        with self.using(name):
            h = self._hidden(t, mask, None)[0]
        vecs = h[token_vector_index(len(prefix), len(ids), mode)]
        tokens = self.tokenizer.convert_ids_to_tokens(ids)
        offsets = [tuple(o) for o in enc.offset_mapping[: len(ids)]]
        return TokenVectors(tokens, list(ids), offsets, vecs.float().cpu().numpy())


def token_vector_index(n_prefix: int, n: int, mode: str) -> list[int]:
    """Which output position gives the vector of each of n tokens laid out after n_prefix
    tokens: its own (causal), or the one before it (bidirectional, MNTP: the output at i - 1
    was trained to predict token i), the very first token of a row taking its own."""
    if mode == "causal":
        return list(range(n_prefix, n_prefix + n))
    return [max(n_prefix + j - 1, 0) for j in range(n)]


def _pack_rows(lengths: Sequence[int], batch_size: int) -> list[list[list[int]]]:
    """Sentence indices as batches of at most batch_size rows, sentences side by side in a row.

    Longest first: a batch is as wide as its longest sentence, and shorter ones fill the rest
    of its rows (first fit, in decreasing length), so the tokens computed are nearly all real
    ones, where one sentence per row pads every row to the longest (STS-B, 48 sentences:
    1.8 padded tokens per real one). Attention per row costs no more than the padded row."""
    remaining = sorted(range(len(lengths)), key=lambda i: -lengths[i])
    batches = []
    while remaining:
        width = lengths[remaining[0]]
        rows: list[list[int]] = []
        free: list[int] = []
        left = []
        for i in remaining:
            n = lengths[i]
            r = next((r for r, f in enumerate(free) if n <= f), None)
            if r is None and len(rows) < batch_size:
                rows.append([])
                free.append(width)
                r = len(rows) - 1
            if r is None:
                left.append(i)
            else:
                rows[r].append(i)
                free[r] -= n
        batches.append(rows)
        remaining = left
    return batches


def _packed_allowed(segments: torch.Tensor, causal: bool) -> torch.Tensor:
    """(batch, 1, seq, seq) boolean mask of packed rows: segments (batch, seq) numbers the
    sentences of a row 1, 2, ... and padding 0. A token sees its own sentence (causal: up to
    itself); a padding query sees itself only, so no row of the softmax is empty."""
    q, k = segments[:, :, None], segments[:, None, :]
    allowed = (q == k) & (k > 0)
    n = segments.shape[1]
    eye = torch.eye(n, dtype=torch.bool, device=segments.device)
    if causal:
        allowed &= torch.ones(n, n, dtype=torch.bool, device=segments.device).tril()
    return (allowed | ((q == 0) & eye))[:, None]


class _RowLora:
    """The LoRA of several adapters stacked per layer, for batches whose rows use different
    adapters (or none): y = W x + ((x A^T) * m) B^T with A = [s_1 A_1; s_2 A_2; ...] and
    B = [B_1, B_2, ...]; m keeps, for each row, the rank block of that row's adapter only."""

    def __init__(self, layers: list[tuple], names: tuple[str, ...]):
        self.layers = layers  # (module, names present, stacked A (R, in), stacked B^T (R, out))
        self.names = names
        # row masks per (adapters of the rows, dtype, device), kept: a CUDA graph captured
        # with them reads them at every replay (static_decode)
        self._masks: dict[tuple, dict[tuple, torch.Tensor]] = {}

    @classmethod
    def build(cls, peft_model, names: tuple[str, ...]) -> _RowLora | None:
        from peft.tuners.lora import Linear as LoraLinear
        from peft.tuners.lora import LoraLayer

        layers = []
        for module in peft_model.modules():
            if not isinstance(module, LoraLayer):
                continue
            present = tuple(n for n in names if n in module.lora_A)
            if not present:
                continue
            if not isinstance(module, LoraLinear) or not all(
                _fusable(module, n, enabled=False) for n in present
            ):
                return None  # not plain LoRA: peft's own mixed batch handles it
            a = torch.cat([module.lora_A[n].weight * module.scaling[n] for n in present])
            b = torch.cat([module.lora_B[n].weight.t() for n in present])
            layers.append((module, present, a, b))
        return cls(layers, names)

    @contextlib.contextmanager
    def patched(self, adapters: list[str], dtype, device):
        """While open, the LoRA layers add the stacked LoRA of each row's adapter."""
        masks = self._masks.setdefault((tuple(adapters), dtype, device), {})
        for module, present, a, b in self.layers:
            if present not in masks:
                cols = [
                    torch.tensor([[float(row == n)] * module.r[n] for n in present]).flatten()
                    for row in adapters
                ]
                masks[present] = torch.stack(cols)[:, None, :].to(device=device, dtype=dtype)
            module.forward = functools.partial(_rows_lora_forward, module, a, b, masks[present])
        try:
            yield
        finally:
            for module, *_ in self.layers:
                del module.forward  # back to the class's forward


def _rows_lora_forward(module, a, b, mask, x: torch.Tensor, *args, **kwargs) -> torch.Tensor:
    out = module.base_layer(x, *args, **kwargs)
    h = torch.nn.functional.linear(x, a) * mask  # (batch, seq, R): each row its own block
    flat = out.view(-1, out.shape[-1])
    flat.addmm_(h.view(-1, h.shape[-1]), b)
    return out


def _fusable(module, name: str, enabled: bool = True) -> bool:
    """A plain unmerged LoRA Linear with adapter `name` (no DoRA or other variant, no bias on
    B, no dropout in effect): the case _lora_forward computes exactly. enabled=False: whether
    peft's adapter layers are on does not matter (_RowLora switches them off itself)."""
    if name not in module.lora_A or name not in module.lora_B:
        return False
    return (
        not module.merged
        and (not enabled or not module.disable_adapters)
        and not module.training
        and name not in getattr(module, "lora_variant", {})
        and module.lora_B[name].bias is None
        and module.lora_A[name].weight.dtype == module.base_layer.weight.dtype
    )


def _find_meta(ref: str) -> AdapterMeta | None:
    """magnet_config.json of a local adapter directory (Hub adapters: from the Hub cache)."""
    path = Path(ref).expanduser()
    if path.exists():
        return load_meta(path)
    if not is_hub_id(ref):  # neither a folder nor a Hub id: nothing to ask the Hub
        return None
    try:
        from huggingface_hub import hf_hub_download

        from .adapter_meta import META_FILE

        return load_meta(Path(hf_hub_download(ref, META_FILE, **hub_kwargs())).parent)
    except Exception:  # a plain PEFT adapter on the Hub, or no network: no metadata
        return None


# ---------------------------------------------------------------- quick speed check


def speed_check(engine: Engine, adapter: str | None, sentences: int = 256) -> dict[str, float]:
    """Infill and continuation tokens/s, embedding sentences/s on built-in data (rough: one run).

    Infill: a ~256-token Wikipedia context, one blank filled with a fixed 32-token span.
    """
    from .data import load_sts_b, wikipedia_paragraphs

    words = " ".join(wikipedia_paragraphs("heldout")[:3]).split()
    context = " ".join(words[:100]) + " [blank] " + " ".join(words[100:200])
    engine.infill(context, adapter=adapter, fixed_lengths=4)  # warm-up
    r = engine.infill(context, adapter=adapter, fixed_lengths=32)
    c = engine.generate(" ".join(words[:20]), adapter=adapter, max_new_tokens=64)
    pairs = load_sts_b("test")
    texts = list(dict.fromkeys(t for p in pairs for t in (p.sentence1, p.sentence2)))[:sentences]
    t0 = time.perf_counter()
    engine.embed_sentences(texts, adapter=adapter, batch_size=32)
    embed_s = time.perf_counter() - t0
    return {
        "infill_context_tokens": r.context_tokens,
        "infill_encode_s": r.encode_seconds,
        "infill_tokens_per_s": r.tokens_per_second,
        "continue_tokens_per_s": c.tokens_per_second,
        "embed_sentences_per_s": len(texts) / embed_s,
    }


def main(argv: list[str] | None = None) -> None:
    import argparse
    import json

    from .settings import add_model_args

    parser = argparse.ArgumentParser(description="Rough speed check of the inference engine.")
    add_model_args(parser)
    parser.add_argument("--adapter", default=None, help="adapter to time (default: base)")
    parser.add_argument("--sentences", type=int, default=256)
    parser.add_argument("--threads", type=int, default=None, help="torch CPU threads")
    args = parser.parse_args(argv)
    if args.threads:
        torch.set_num_threads(args.threads)
    engine = Engine.from_spec(ModelSpec.from_args(args))
    report = speed_check(engine, args.adapter, args.sentences)
    report.update(device=str(engine.device), dtype=str(engine.dtype))
    report["threads"] = torch.get_num_threads()
    print(json.dumps(report, indent=2))


if __name__ == "__main__":
    main()
