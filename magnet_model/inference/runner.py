"""The model behind every task: base + adapters, one lock, adapter switching, forward of rows.

Public hidden states, logits and the KV cache factory (new_cache) are what the task modules
(infill, prompted, generation, embedding) build on.

Adapters: None or "base" = adapter off; any name loaded by loading.load_model. Every forward
runs under one lock with the adapter for that call switched on, so calls from several threads
(Gradio) never see another call's adapter or cache. Rows of one batch may use different
adapters (forward_rows, with multi_lora.py).
"""

from __future__ import annotations

import contextlib
import inspect
import threading
import unicodedata
from collections.abc import Iterator
from dataclasses import dataclass

import torch

from ..adapter_meta import AdapterMeta, find_meta
from ..decoding import MagnetFill, PromptedFill
from ..errors import ConfigError, InputTooLongError, MagnetError, UnknownAdapterError
from ..head_rows import tie_of, undertrained
from ..layout import GapRule
from ..loading import LoadedModel
from ..role_rows import RoleRows
from ..span_end import SpanEnd
from ..tokens import TokenRoles, bos_of, choose_token_roles
from .batching import Lane, run_lanes
from .guard import word_continuations
from .multi_lora import RowLora, peft_rows
from .static_decode import StaticDecoder

BASE = "base"


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
    # MAGNET fills' rules (decoding.MagnetFill: loop guard, sentence rule, stop rule, first
    # tokens, ...); None: the model spec's (MAGNET_FILL_*, --fill-*)
    fill: MagnetFill | None = None
    # the prompted baselines' rules (decoding.PromptedFill: prompt format, copy guard);
    # None: the model spec's (MAGNET_PROMPT_FORMAT, MAGNET_PROMPT_NO_COPY)
    prompted: PromptedFill | None = None
    # comparisons of many texts (studies, the evaluator) step this many texts' lanes together
    # (Engine.compare_infill_many); None: batch_items(device), measured
    items_per_batch: int | None = None
    # decoding path: "auto", "eager", "static" (static KV cache) or "graph" (static cache and
    # CUDA graphs; on a CPU: static); None: the model spec's (MAGNET_DECODE, --decode;
    # default "auto"). See static_decode.py.
    decode: str | None = None


def batch_items(device: torch.device) -> int:
    """How many texts' lanes a comparison of many steps together by default, measured with
    bench/bench_study_batches.py (docs/performance.md): a decoding step's fixed cost, not
    its rows, is what a small model pays for on these devices."""
    return 16 if device.type == "cuda" else 8


class Runner:
    """One LoadedModel: adapters, the lock, forwards of rows. Public for the task modules and
    for code that needs the model's states (scoring, probes, benchmarks)."""

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
        self.peft = self.model if hasattr(self.model, "peft_config") else None
        self.lm = self.peft.get_base_model() if self.peft is not None else self.model
        self.decoder = self.lm.get_decoder()  # hidden states without the LM head
        self.head = self.lm.get_output_embeddings()
        params = inspect.signature(self.decoder.forward).parameters
        self._cache_kw = "cache" if "cache" in params else "past_key_values"
        self.lock = threading.RLock()
        self._active: str | None = None  # adapter state the model is in (None: unknown)
        self._layers_on: bool | None = None  # peft adapter layers enabled (None: unknown)
        self._peft_active: str | None = None  # peft's active adapter as last set here
        self.metas = {n: find_meta(ref) for n, ref in loaded.adapters.items()}
        self.metas.update(metas or {})
        # trained rows of the role tokens, per adapter that has them (role_rows.py)
        self.role_rows: dict[str, RoleRows] = {}
        for name, ref in loaded.adapters.items():
            rows = RoleRows.load(ref)
            if rows is not None:
                self.role_rows[name] = rows.to(self.head.weight.device)
        self._default_roles: TokenRoles | None = None
        self._undertrained: list[int] | None = None  # head rows never trained (head_rows)
        self._never_text: list[int] | None = None  # never in any generated text
        self._ties: dict[int, tuple[int, ...]] = {}  # token -> its head-row tie
        self._row_loras: dict[tuple, RowLora | None] = {}  # stacked LoRA for mixed batches
        self._continuations: list[bool] | None = None  # guard.word_continuations
        self._cut_points: list[bool] | None = None  # stops.cut_points
        cap = getattr(self.lm.config, "max_position_embeddings", None) or 2048
        self.max_input_tokens = min(self.config.max_input_tokens or cap, cap)
        decode = self.config.decode or loaded.spec.decode
        self.static_decoder = StaticDecoder(self.lm.config, decode, self.lock)

    # ------------------------------------------------------------ adapters

    @property
    def adapter_names(self) -> list[str]:
        """Loaded adapters, without 'base' (which is always available)."""
        return list(self.peft.peft_config) if self.peft is not None else []

    def resolve_adapter(self, adapter: str | None) -> str:
        if adapter is None or adapter == BASE:
            return BASE
        if adapter in self.adapter_names:
            return adapter
        known = ", ".join([BASE, *self.adapter_names])
        raise UnknownAdapterError(f"No adapter named '{adapter}' is loaded; available: {known}.")

    def meta(self, adapter: str | None) -> AdapterMeta | None:
        name = self.resolve_adapter(adapter)
        return None if name == BASE else self.metas.get(name)

    def roles(self, adapter: str | None) -> TokenRoles:
        meta = self.meta(adapter)
        if meta is not None:
            return meta.token_roles
        if self._default_roles is None:
            self._default_roles = choose_token_roles(self.tokenizer, self.lm)
        return self._default_roles

    def gap_rule(self, adapter: str | None) -> GapRule:
        """Where the adapter was trained to find the text after a blank (layout.GapRule)."""
        meta = self.meta(adapter)
        return meta.gap if meta is not None else GapRule()

    def bos(self, adapter: str | None) -> int | None:
        """The BOS used in layouts: the trainer's record if any, else what the tokenizer adds."""
        meta = self.meta(adapter)
        if meta is not None and "bos" in meta.training:
            return meta.training["bos"]
        return bos_of(self.tokenizer)

    def special_ids(self, roles: TokenRoles) -> list[int]:
        """The tokens that are never text, so none may be generated in a fill (except
        <span_end>, which ends a span): every special or added token of the tokenizer, the
        MAGNET roles, the tokens whose head row ties with <span_end>'s, and the tokens whose
        head row was never trained (head_rows.undertrained)."""
        added = self.tokenizer.added_tokens_decoder  # id -> AddedToken
        ids = set(self.tokenizer.all_special_ids) | {i for i, t in added.items() if t.special}
        ids |= roles.special_ids() | {roles.sentence_end, roles.pad}
        ids |= set(self.never_text_ids) | set(self.tie(roles.span_end))
        return sorted(i for i in ids if i != roles.span_end and i < len(self.tokenizer))

    @property
    def magnet_fill(self) -> MagnetFill:
        """MAGNET fills' rules: the engine's setting, else the model spec's."""
        return self.config.fill or self.loaded.spec.magnet_fill()

    @property
    def prompted_fill(self) -> PromptedFill:
        """The prompted baselines' rules: the engine's setting, else the model spec's."""
        return self.config.prompted or self.loaded.spec.prompted_fill()

    @property
    def cut_points(self) -> list[bool]:
        """stops.cut_points of this tokenizer (computed once)."""
        if self._cut_points is None:
            from .stops import cut_points

            self._cut_points = cut_points(self.tokenizer)
        return self._cut_points

    @property
    def word_continuations(self) -> list[bool]:
        """guard.word_continuations of this tokenizer (computed once)."""
        if self._continuations is None:
            self._continuations = word_continuations(self.tokenizer)
        return self._continuations

    @property
    def undertrained_ids(self) -> list[int]:
        """Tokens whose head row the pre-training never (or hardly) moved (computed once)."""
        if self._undertrained is None:
            with self.lock:
                self._undertrained = undertrained(self.head.weight)
        return self._undertrained

    @property
    def never_text_ids(self) -> list[int]:
        """Tokens no generated text may hold, whatever the system: the never-trained rows, and
        the tokens that write a control character (other than tab and line breaks)."""
        if self._never_text is None:
            with self.lock:
                control = [
                    i
                    for i in range(len(self.tokenizer))
                    if any(
                        unicodedata.category(c) == "Cc" and c not in "\t\n\r"
                        for c in self.tokenizer.decode([i])
                    )
                ]
                self._never_text = sorted(set(self.undertrained_ids) | set(control))
        return self._never_text

    def tie(self, token: int) -> tuple[int, ...]:
        """The token and every token whose head row (near-)duplicates its row."""
        if token not in self._ties:
            with self.lock:
                self._ties[token] = tuple(tie_of(self.head.weight, token))
        return self._ties[token]

    def span_end(self, adapter: str | None) -> SpanEnd:
        """How the adapter's <span_end> logit is read (span_end.SpanEnd): its tie, and the
        calibration bias recorded in its magnet_config.json (none: 0)."""
        roles, meta = self.roles(adapter), self.meta(adapter)
        calibration = dict(meta.calibration) if meta is not None else {}
        bias = float(calibration.get("span_end_bias", 0.0))
        return SpanEnd(roles.span_end, self.tie(roles.span_end), bias, calibration)

    def encode(self, text: str) -> list[int]:
        """Token ids of text without special tokens; a special token's name typed in the text
        (e.g. "<filename>", a MAGNET role) is text, not that token."""
        return self.tokenizer(text, add_special_tokens=False, split_special_tokens=True).input_ids

    def check_length(self, n_prompt: int, n_new: int) -> None:
        if n_prompt + n_new > self.max_input_tokens:
            raise InputTooLongError(
                f"The prompt is {n_prompt} tokens long; with {n_new} new tokens it exceeds the "
                f"limit of {self.max_input_tokens} tokens. Shorten it or generate fewer tokens."
            )

    def _switch(self, name: str) -> None:
        """Adapter layers off for 'base', else on with `name` active. Each peft call walks
        every module (~80 ms on SmolLM2 on a CPU), so only what changed is called."""
        if self._active == name or self.peft is None:
            return
        lora = self.peft.base_model
        if name == BASE:
            if self._layers_on is not False:
                lora.disable_adapter_layers()
            self._layers_on = False
        else:
            if self._layers_on is not True:
                lora.enable_adapter_layers()
            self._layers_on = True
            if self._peft_active != name:
                self.peft.set_adapter(name, inference_mode=True)
                self._peft_active = name
        self._active = name

    @contextlib.contextmanager
    def using(self, adapter: str | None):
        """Exclusive use of the model with one adapter on (or off, for 'base')."""
        name = self.resolve_adapter(adapter)
        with self.lock, torch.inference_mode():
            self._switch(name)
            yield name

    # ------------------------------------------------------------ device

    @property
    def device(self) -> torch.device:
        return self.head.weight.device

    @property
    def dtype(self) -> torch.dtype:
        return self.head.weight.dtype

    @property
    def hidden_size(self) -> int:
        return self.head.weight.shape[1]

    def to(self, device: str | torch.device) -> bool:
        """Move the model (base and adapters) to `device`; the stacked LoRA computed on the old
        device is dropped. Returns whether it moved."""
        device = torch.device(device)
        with self.lock:
            if self.device == device:
                return False
            if self.loaded.packing is not None:
                raise ConfigError(
                    f"The base weights are packed for the CPU ({self.loaded.packing}, "
                    "magnet_model/packed.py) and cannot move; load with --dtype float32 or "
                    "bfloat16 to move the model."
                )
            self.model.to(device)
            for rows in self.role_rows.values():
                rows.to(device)
            self._row_loras.clear()
            self.static_decoder.clear()
            self.loaded.device = self.device
            return True

    def tensor(self, rows) -> torch.Tensor:
        """Token ids (or masks, positions) as a long tensor on the model's device."""
        return torch.tensor(rows, dtype=torch.long, device=self.device)

    # ------------------------------------------------------------ forwards

    def hidden_states(
        self, ids, mask=None, positions=None, cache=None, adapters: list[str] | None = None
    ) -> torch.Tensor:
        """Last hidden states (B, T, H) of the decoder (no LM head) with the adapter now on;
        mask is a 4-D additive mask or None (causal). Call inside `using`. adapters: each
        row's adapter (default: the one now on), for its trained role rows (role_rows.py)."""
        kwargs = {self._cache_kw: cache, "use_cache": cache is not None}
        inputs = {"input_ids": ids}
        embeds = self._role_embeds(ids, adapters)
        if embeds is not None:
            inputs = {"inputs_embeds": embeds}
        out = self.decoder(attention_mask=mask, position_ids=positions, **inputs, **kwargs)
        return out.last_hidden_state

    def logits(self, hidden: torch.Tensor, adapters: list[str] | None = None) -> torch.Tensor:
        """The LM head on hidden states (..., H) -> (..., vocab); adapters: the adapter of each
        row of hidden (default: the one now on), for its trained role rows."""
        with torch.inference_mode():
            out = self.head(hidden)
            for rows, sel in self._row_groups(adapters):
                out = rows.logits(hidden, out, sel)
            return out

    def _row_groups(self, adapters: list[str] | None) -> list[tuple[RoleRows, object]]:
        """(role rows, which rows of the batch use them: a bool tensor, None = all) for each
        adapter of the batch that has trained role rows."""
        if not self.role_rows:
            return []
        if adapters is None:
            rows = self.role_rows.get(self._active) if self._active else None
            return [(rows, None)] if rows is not None else []
        groups = []
        for name, rows in self.role_rows.items():
            sel = torch.tensor([a == name for a in adapters], device=self.device)
            if bool(sel.any()):
                groups.append((rows, None if bool(sel.all()) else sel))
        return groups

    def _role_embeds(self, ids: torch.Tensor, adapters: list[str] | None):
        """Input embeddings with the role rows of each row's adapter, or None when no row of
        the batch has trained role rows (the decoder then embeds the ids itself)."""
        groups = self._row_groups(adapters)
        if not groups:
            return None
        embeds = self.lm.get_input_embeddings()(ids)
        for rows, sel in groups:
            embeds = rows.embed(ids, embeds, sel)
        return embeds

    def new_cache(self):
        """An empty KV cache for one batch of lanes: the one place caches are made."""
        from transformers import DynamicCache

        return DynamicCache(config=self.lm.config)

    def forward_rows(self, ids, positions, mask, cache, adapters: list[str]) -> torch.Tensor:
        """Hidden states of a batch whose rows may use different adapters: one adapter as a
        plain switch; several with the stacked LoRA (multi_lora.RowLora), or peft's own mixed
        batch where a layer is not plain LoRA (DoRA, dropout in training...)."""
        with self.lock, torch.inference_mode():
            if set(adapters) == {BASE} or self.peft is None:
                self._switch(BASE)
                return self.hidden_states(ids, mask, positions, cache, adapters)
            rows = self.row_lora(adapters)
            if rows is None and len(set(adapters)) == 1:
                self._switch(adapters[0])
                return self.hidden_states(ids, mask, positions, cache, adapters)
            if rows is not None:
                self._switch(BASE)  # peft's layers off; the stacked LoRA is added instead
                with rows.patched(adapters, self.dtype, self.device):
                    return self.hidden_states(ids, mask, positions, cache, adapters)
            lora = self.peft.base_model
            if self._layers_on is not True:
                lora.enable_adapter_layers()
                self._layers_on = True
            self._active = None  # mixed rows: the next single-adapter call re-switches
            with peft_rows(lora, ["__base__" if a == BASE else a for a in adapters]):
                return self.hidden_states(ids, mask, positions, cache, adapters)

    def row_lora(self, adapters: list[str]) -> RowLora | None:
        """The stacked LoRA of the adapters of a batch's rows (built once per set of them;
        None where peft's own mixed batch is needed)."""
        names = tuple(sorted({a for a in adapters if a != BASE}))
        if names not in self._row_loras:
            self._row_loras.clear()  # one set of stacks at a time (they copy LoRA weights)
            self._row_loras[names] = RowLora.build(self.peft, names)
        return self._row_loras[names]

    @property
    def row_loras(self) -> dict[tuple, RowLora | None]:
        """The stacked LoRA built for the last mix of adapters (empty after a move)."""
        return self._row_loras

    # ------------------------------------------------------------ lanes

    def steps(self, lanes: list[Lane]) -> Iterator[list[Lane]]:
        """Run lanes together (batching.run_lanes); yields them after every batched forward."""
        pad = self.tokenizer.pad_token_id
        pad = pad if pad is not None else (self.tokenizer.eos_token_id or 0)
        pad_rows = self.config.pad_rows
        if pad_rows is None:
            pad_rows = 4 if self.device.type == "cpu" else 0
        if self.static_decoder.path(self.device) != "eager":  # static cache (and CUDA graphs)
            run = self.static_decoder.run_lanes
            return run(
                lanes, self.forward_rows, self.logits, pad, self.dtype, self.device, pad_rows
            )
        return run_lanes(
            lanes,
            self.forward_rows,
            self.logits,
            self.new_cache,
            pad,
            self.dtype,
            self.device,
            pad_rows,
            BASE,
        )

    def run(self, lanes: list[Lane]) -> list:
        """Results of lanes run as one batch: each a lane's result or the MagnetError that
        stopped it."""
        for _ in self.steps(lanes):
            pass
        return [lane.error if lane.error is not None else lane.result for lane in lanes]

    def run_one(self, lane: Lane):
        (out,) = self.run([lane])
        if isinstance(out, MagnetError):
            raise out
        return out
