"""Decoding with a static KV cache, and on CUDA the decode step replayed as a CUDA graph.

The eager executor (batching.run_lanes) grows a transformers DynamicCache by concatenation
(every step copies the whole cache) and drops finished rows, so no two steps have the same
shapes. At batch 1 on a GPU the step is then bound by Python and kernel launches (~1,000 per
token), not by the GPU. Here the same lanes run with:

- a static cache: per layer one preallocated (rows, kv heads, length, head dim) buffer (a
  transformers StaticLayer whose update writes at the step's columns instead of a running
  counter), the row count fixed for the whole run (finished lanes keep their row and feed
  padding) and the length a power-of-two bucket that grows (a copy into a bucket twice as long)
  when a long generation outgrows it. Every step writes the same columns the eager executor
  would, and the 4-D mask hides everything a row may not see, so outputs are the eager ones.
- in "graph" mode on CUDA, each decode step of up to MAX_GRAPH_QUERIES new tokens per row
  (padded to a power of two) is captured once per (rows, queries, length, adapters) after two
  warm-up runs on a side stream, then replayed: one launch per step. Inputs are copied into
  the graph's static buffers; a bucket change captures anew. Longer feeds (a prompt, an
  infill context) run eagerly on the same static cache. A capture that fails (a layer that
  cannot be captured) is remembered and that step shape runs eagerly.

Modes (EngineConfig.decode, MAGNET_DECODE): "eager" (batching.run_lanes, the reference),
"static", "graph", "auto" (graph on CUDA; on a CPU the mode measured fastest by
bench/bench_decode.py, CPU_AUTO). "graph" without CUDA decodes with the static cache without
graphs (CUDA graphs exist only on CUDA); `StaticDecoder.stats` counts what each run used.

The buffers (a "slot": cache, graph inputs, graphs) are reused across requests; a run holds
its slot exclusively, so concurrent generations (threads, interleaved streams) never share one.
"""

from __future__ import annotations

import logging
import threading
from collections import Counter
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field

import torch
from transformers.cache_utils import Cache, StaticLayer

from ..settings import DECODES
from .batching import Feed, Forward, Lane, advance, start_lanes, step_inputs

log = logging.getLogger(__name__)

MODES = DECODES  # "auto", "eager", "static", "graph"
# What "auto" picks on a CPU: measured with bench/bench_decode.py (see docs/performance.md).
CPU_AUTO = "eager"
MAX_GRAPH_QUERIES = 8  # steps feeding more tokens per row than this run eagerly
MIN_LENGTH = 256  # the smallest cache length bucket
KEEP_SLOTS = 4  # idle slots kept for reuse


def resolve_mode(mode: str, device: torch.device) -> str:
    """The path a decode on `device` takes: "eager", "static" or "graph"."""
    if mode not in MODES:
        raise ValueError(f"decode must be one of {', '.join(MODES)}, not {mode!r}")
    if mode == "auto":
        return "graph" if device.type == "cuda" else CPU_AUTO
    if mode == "graph" and device.type != "cuda":
        return "static"  # CUDA graphs need CUDA: the static cache alone
    return mode


def _bucket(n: int, least: int = 1) -> int:
    """The power of two >= max(n, least)."""
    n = max(n, least)
    return 1 << (n - 1).bit_length()


class _ColumnLayer(StaticLayer):
    """A StaticLayer that writes the new keys/values at its cache's current columns (a tensor
    the executor sets per step) rather than after a running count: the same write whether the
    step runs eagerly, in a warm-up or replayed from a CUDA graph."""

    def __init__(self, max_cache_len: int, owner: ColumnCache):
        super().__init__(max_cache_len)
        self.owner = owner

    def update(self, key_states, value_states, *args, **kwargs):
        cols = self.owner.columns
        self.keys.index_copy_(2, cols, key_states)
        self.values.index_copy_(2, cols, value_states)
        return self.keys, self.values


class ColumnCache(Cache):
    """Preallocated keys and values (rows, kv heads, length, head dim) for every layer."""

    def __init__(self, config, rows: int, length: int, dtype, device):
        text = config.get_text_config(decoder=True)
        heads = getattr(text, "num_key_value_heads", None) or text.num_attention_heads
        dim = getattr(text, "head_dim", None) or text.hidden_size // text.num_attention_heads
        layers = [_ColumnLayer(length, self) for _ in range(text.num_hidden_layers)]
        super().__init__(layers=layers)
        empty = torch.empty(rows, heads, 0, dim, dtype=dtype, device=device)
        for layer in layers:
            layer.lazy_initialization(empty, empty)
        self.rows, self.length = rows, length
        self.columns = torch.zeros(0, dtype=torch.long, device=device)

    def copy_from(self, other: ColumnCache, width: int) -> None:
        for mine, theirs in zip(self.layers, other.layers, strict=True):
            mine.keys[:, :, :width] = theirs.keys[:, :, :width]
            mine.values[:, :, :width] = theirs.values[:, :, :width]


@dataclass
class _Inputs:
    """The static input buffers of one captured step shape."""

    ids: torch.Tensor
    pos: torch.Tensor
    mask: torch.Tensor
    columns: torch.Tensor


@dataclass
class _Slot:
    cache: ColumnCache
    dtype: torch.dtype
    device: torch.device
    inputs: dict[int, _Inputs] = field(default_factory=dict)  # per queries per row
    graphs: dict[tuple, tuple] = field(default_factory=dict)  # (q, adapters) -> (graph, out)
    failed: set = field(default_factory=set)  # (q, adapters) whose capture failed

    def fits(self, rows: int, need: int, dtype, device) -> bool:
        return (
            self.cache.rows == rows
            and self.cache.length >= need
            and self.dtype == dtype
            and self.device == device
        )


class StaticDecoder:
    """Runs lanes like batching.run_lanes, on a static cache (and CUDA graphs); see the module."""

    def __init__(self, config, mode: str = "auto", lock=None, min_length: int = MIN_LENGTH):
        resolve_mode(mode, torch.device("cpu"))  # validate now
        self.config = config  # the model's config: layers, heads, head dim
        self.mode = mode
        self.min_length = min_length
        self._lock = lock if lock is not None else threading.RLock()  # the model's lock
        self._free: list[_Slot] = []
        self._pool_lock = threading.Lock()
        self.stats: Counter = Counter()  # runs, steps, eager_steps, captures, replays, grown

    def path(self, device: torch.device) -> str:
        return resolve_mode(self.mode, device)

    @property
    def idle_slots(self) -> tuple:
        """The cache slots waiting for the next run (each a K/V buffer set and its graphs)."""
        with self._pool_lock:
            return tuple(self._free)

    def clear(self) -> None:
        """Drop every idle slot (their buffers and graphs), e.g. after the model moved."""
        with self._pool_lock:
            self._free.clear()

    # ------------------------------------------------------------ slots

    def _acquire(self, rows: int, need: int, dtype, device) -> _Slot:
        with self._pool_lock:
            fit = [s for s in self._free if s.fits(rows, need, dtype, device)]
            if fit:
                slot = min(fit, key=lambda s: s.cache.length)
                self._free.remove(slot)
                return slot
        length = _bucket(need, self.min_length)
        return _Slot(ColumnCache(self.config, rows, length, dtype, device), dtype, device)

    def _release(self, slot: _Slot) -> None:
        with self._pool_lock:
            self._free.append(slot)
            del self._free[:-KEEP_SLOTS]

    def _grow(self, slot: _Slot, width: int, need: int) -> _Slot:
        """A slot at least twice as long holding the first `width` columns of `slot`."""
        c = slot.cache
        bigger = self._acquire(c.rows, max(need, 2 * c.length), slot.dtype, slot.device)
        bigger.cache.copy_from(c, width)
        self.stats["grown"] += 1
        return bigger

    # ------------------------------------------------------------ running lanes

    def run_lanes(
        self,
        lanes: list[Lane],
        forward: Forward,
        head: Callable[[torch.Tensor, list[str]], torch.Tensor],  # hidden, adapter per row
        pad_id: int,
        dtype: torch.dtype,
        device: torch.device,
        pad_rows: int = 0,
        base_adapter: str = "base",
    ) -> Iterator[list[Lane]]:
        """batching.run_lanes on a static cache: yields the lanes after every step."""
        graphs = self.path(device) == "graph"
        feeds: dict[int, Feed] = {}
        with torch.inference_mode():
            live = start_lanes(lanes, feeds, pad_id, pad_rows, base_adapter)
        if not live:
            return
        width = max((len(lane.prefix) for lane in live if lane.prefix), default=0)
        first = max(len(feeds[id(lane)].ids) for lane in live)
        held = [self._acquire(len(live), width + first, dtype, device)]  # this run's slot
        self.stats["runs"] += 1
        try:
            with torch.inference_mode():
                _load_prefixes(held[0].cache, live, width)
            while any(not lane.done and not lane.filler for lane in live):
                with torch.inference_mode():
                    width = self._step(
                        held, live, feeds, width, forward, head, pad_id, dtype, pad_rows, graphs
                    )
                yield lanes
        finally:
            self._release(held[0])

    def _step(self, held, live, feeds, width, forward, head, pad_id, dtype, pad_rows, graphs):
        """One forward for all rows (finished lanes' rows feed padding); returns the new width.
        held: [the run's slot], replaced by a longer one (the old one freed) when it is full."""
        active = [r for r, lane in enumerate(live) if not lane.done]
        q = max(len(feeds[id(live[r])].ids) for r in active)
        graphed = graphs and q <= MAX_GRAPH_QUERIES
        if graphed:
            q = _bucket(q)
        slot = held[0]
        if width + q > slot.cache.length:
            held[0] = self._grow(slot, width, width + q)
            self._release(slot)  # only now: the run never releases a slot twice
            slot = held[0]
        length = slot.cache.length
        ids, pos, mask = step_inputs(live, active, feeds, q, width, length, pad_id, dtype)
        columns = torch.arange(width, width + q)
        adapters = tuple(lane.adapter for lane in live)
        if graphed:
            hidden = self._graph_forward(slot, forward, ids, pos, mask, columns, adapters)
        else:
            hidden = self._eager_forward(slot, forward, ids, pos, mask, columns, adapters)
        self.stats["steps"] += 1
        rows = [r for r in active for _ in feeds[id(live[r])].want]
        cols = [c for r in active for c in feeds[id(live[r])].want]
        n_want = len(rows)
        if 1 < n_want < pad_rows:  # as batching._step: the LM head gets the same padding
            rows, cols = (
                rows + [rows[0]] * (pad_rows - n_want),
                cols + [cols[0]] * (pad_rows - n_want),
            )
        wanted = [live[r].adapter for r in rows]
        logits = head(hidden[rows, cols], wanted)[:n_want].float() if rows else None
        at = 0
        for r in active:
            lane = live[r]
            n = len(feeds[id(lane)].want)
            advance(lane, feeds, logits[at : at + n] if n else None)
            at += n
        return width + q

    def _eager_forward(self, slot, forward, ids, pos, mask, columns, adapters):
        device = slot.device
        slot.cache.columns = columns.to(device)
        self.stats["eager_steps"] += 1
        return forward(ids.to(device), pos.to(device), mask.to(device), slot.cache, list(adapters))

    def _graph_forward(self, slot, forward, ids, pos, mask, columns, adapters):
        q = ids.shape[1]
        key = (q, adapters)
        if key in slot.failed:
            return self._eager_forward(slot, forward, ids, pos, mask, columns, adapters)
        inp = slot.inputs.get(q)
        if inp is None:
            dev = slot.device
            inp = _Inputs(
                torch.empty_like(ids, device=dev),
                torch.empty_like(pos, device=dev),
                torch.empty_like(mask, device=dev),
                torch.empty_like(columns, device=dev),
            )
            slot.inputs[q] = inp
        for buf, value in ((inp.ids, ids), (inp.pos, pos), (inp.mask, mask)):
            buf.copy_(value, non_blocking=True)
        inp.columns.copy_(columns, non_blocking=True)
        slot.cache.columns = inp.columns
        if key not in slot.graphs:
            try:
                # warm-up and capture write this step's keys/values at this step's columns:
                # the values the replay writes again
                slot.graphs[key] = self.capture(slot, forward, inp, adapters)
            except Exception as e:  # a layer that cannot be captured: that shape runs eagerly
                log.warning("CUDA graph capture failed (%s); this step shape runs eagerly", e)
                slot.failed.add(key)
                return self._eager_forward(slot, forward, ids, pos, mask, columns, adapters)
        graph, out = slot.graphs[key]
        graph.replay()
        self.stats["replays"] += 1
        return out

    def capture(self, slot, forward, inp: _Inputs, adapters) -> tuple:
        """(graph, its output) of one step on the slot's buffers: a torch.cuda.CUDAGraph
        after two warm-up runs. graph.replay() recomputes the output from the buffers' values
        (tests substitute a replay that re-runs the forward, to check the rest on a CPU)."""
        names = list(adapters)
        with self._lock:  # nothing else runs on the model while it is captured
            stream = torch.cuda.Stream(slot.device)
            stream.wait_stream(torch.cuda.current_stream(slot.device))
            with torch.cuda.stream(stream):
                for _ in range(2):  # lazy initialisations (cuBLAS, stacked LoRA) happen here
                    forward(inp.ids, inp.pos, inp.mask, slot.cache, names)
            torch.cuda.current_stream(slot.device).wait_stream(stream)
            graph = torch.cuda.CUDAGraph()
            with torch.cuda.graph(graph, capture_error_mode="thread_local"):
                out = forward(inp.ids, inp.pos, inp.mask, slot.cache, names)
        self.stats["captures"] += 1
        return graph, out


def _load_prefixes(cache: ColumnCache, lanes: list[Lane], width: int) -> None:
    """Each lane's prefix keys/values into its row's first columns."""
    if width == 0:
        return
    for r, lane in enumerate(lanes):
        if not lane.prefix:
            continue
        n = len(lane.prefix)
        for layer, k, v in zip(cache.layers, lane.prefix.keys, lane.prefix.values, strict=True):
            layer.keys[r : r + 1, :, :n] = k
            layer.values[r : r + 1, :, :n] = v
