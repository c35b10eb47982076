"""Several decoding jobs ("lanes") in one batch: one forward per step for all of them.

At batch 1 on a CPU (and on a GPU at small batch), a decoding step costs reading every weight
once; three rows cost about what one row costs. So a side-by-side comparison (MAGNET infill,
base prompted zero-shot and five-shot; or three continuations with different adapters) runs as
one batch of lanes instead of three calls in turn.

A lane is a generator. It yields a `Feed` (the tokens it appends to its own row of the KV cache
this step, their positions, what each may attend to among the lane's keys, and which of them
need logits back), receives those logits through `send`, and returns its result. Lanes may
differ in everything: adapter (peft runs different LoRA adapters on different rows of one
batch), attention pattern (hybrid for MAGNET, causal for the baselines), number of tokens per
step, and a precomputed prefix (the KV of a fixed prompt head, e.g. the five-shot examples).

The executor pads rows to the step's longest feed. A lane's keys therefore sit at scattered
columns of the shared cache; it keeps their global column indices, and the 4-D mask of a step
lets each row see exactly its lane's visible keys. Padding queries see only themselves (never
an empty softmax row). Finished lanes leave the batch (their cache rows are dropped).
"""

from __future__ import annotations

import time
from collections.abc import Callable, Generator, Iterator
from dataclasses import dataclass, field

import torch

from ..errors import MagnetError
from ..masks import additive, causal_see  # causal_see: the steps' masks (re-exported)


@dataclass
class Feed:
    """What one lane appends in one step.

    see: bool (Q, K + Q): what each new token may attend to among the lane's K earlier keys
    followed by the Q new ones. want: indices into ids whose logits the lane needs back.
    """

    ids: list[int]
    positions: list[int]
    see: torch.Tensor
    want: list[int]


@dataclass
class Prefix:
    """The cached keys/values of a fixed head of a prompt: per layer (1, heads, P, dim)."""

    ids: tuple[int, ...]
    keys: list[torch.Tensor]
    values: list[torch.Tensor]

    def __len__(self) -> int:
        return len(self.ids)


@dataclass
class Lane:
    adapter: str
    steps: Generator  # yields Feed, receives logits (len(want), vocab), returns the result
    prefix: Prefix | None = None
    started: float = 0.0
    first_logits: float | None = None  # seconds from start to the first logits
    result: object = None
    error: MagnetError | None = None
    done: bool = False
    columns: list[int] = field(default_factory=list)  # global cache column of each local key
    filler: bool = False  # a padding row (see run_lanes' pad_rows)


# forward(ids (B,Q), positions (B,Q), mask (B,1,Q,K), cache, adapters per row) -> hidden (B,Q,H)
Forward = Callable[[torch.Tensor, torch.Tensor, torch.Tensor, object, list[str]], torch.Tensor]


def run_lanes(
    lanes: list[Lane],
    forward: Forward,
    head: Callable[[torch.Tensor, list[str]], torch.Tensor],  # hidden, adapter per row
    new_cache: Callable[[], object],
    pad_id: int,
    dtype: torch.dtype,
    device: torch.device,
    pad_rows: int = 0,
    base_adapter: str = "base",
) -> Iterator[list[Lane]]:
    """Step all lanes together; yields the lanes after every step (for streaming).

    A MagnetError raised inside a lane ends that lane only (lane.error); the others go on.
    pad_rows: while 2 or more lanes run, fill the batch up to this many rows with padding rows
    (MKL's fp32 product of 2 or 3 rows costs more than of 4 on the CPUs measured in
    bench/bench_side_by_side.py; 0 = never).
    """
    cache = new_cache()
    feeds: dict[int, Feed] = {}
    with torch.inference_mode():  # lanes edit logits in place: no autograd anywhere here
        live = start_lanes(lanes, feeds, pad_id, pad_rows, base_adapter)
        width = _load_prefixes(cache, live, dtype, device)
    while any(not lane.filler for lane in live):
        with torch.inference_mode():
            live, width = _step(
                live, feeds, cache, width, forward, head, pad_id, dtype, device, pad_rows
            )
        yield lanes


def start_lanes(
    lanes: list[Lane], feeds: dict, pad_id: int, pad_rows: int, base_adapter: str
) -> list[Lane]:
    """Start every lane (its first feed); the live ones, with padding rows added while 2 or
    more run and fewer than pad_rows. Call under torch.inference_mode()."""
    t0 = time.perf_counter()
    for lane in lanes:
        lane.started = t0
        lane.columns = list(range(len(lane.prefix))) if lane.prefix else []
        advance(lane, feeds, None)
    live = [lane for lane in lanes if not lane.done]
    if 1 < len(live) < pad_rows:
        same = len({lane.adapter for lane in live}) == 1
        adapter = live[0].adapter if same else base_adapter  # never turn on a mixed batch
        for _ in range(pad_rows - len(live)):
            live.append(Lane(adapter, filler(pad_id), filler=True))
            advance(live[-1], feeds, None)
    return live


def step_inputs(live, rows, feeds, q, width, length, pad_id, dtype) -> tuple:
    """Token ids, positions and the additive mask (B, 1, q, length) of one step: the given rows
    of `live` take their lane's feed (its columns recorded); every other position is padding
    that sees only itself, at columns width..width+q."""
    b = len(live)
    ids = torch.full((b, q), pad_id, dtype=torch.long)
    pos = torch.zeros((b, q), dtype=torch.long)
    allowed = torch.zeros((b, q, length), dtype=torch.bool)
    allowed[:, torch.arange(q), width + torch.arange(q)] = True  # padding sees itself
    for r in rows:
        lane = live[r]
        f = feeds[id(lane)]
        n = len(f.ids)
        ids[r, :n] = torch.tensor(f.ids)
        pos[r, :n] = torch.tensor(f.positions)
        lane.columns += range(width, width + n)
        allowed[r, :n] = False
        allowed[r, :n, torch.tensor(lane.columns, dtype=torch.long)] = f.see
    return ids, pos, additive(allowed[:, None], dtype)


def _step(live, feeds, cache, width, forward, head, pad_id, dtype, device, pad_rows) -> tuple:
    """One batched forward for every live lane; returns the lanes still live, the new width."""
    q = max(len(feeds[id(lane)].ids) for lane in live)
    ids, pos, mask = step_inputs(live, range(len(live)), feeds, q, width, width + q, pad_id, dtype)
    mask = mask.to(device)
    adapters = [lane.adapter for lane in live]
    hidden = forward(ids.to(device), pos.to(device), mask, cache, adapters)
    rows = [r for r, lane in enumerate(live) for _ in feeds[id(lane)].want]
    cols = [c for lane in live for c in feeds[id(lane)].want]
    n_want = len(rows)
    if 1 < n_want < pad_rows:  # the LM head is the largest matrix: same padding
        rows, cols = rows + [rows[0]] * (pad_rows - n_want), cols + [cols[0]] * (pad_rows - n_want)
    wanted = [live[r].adapter for r in rows]
    logits = head(hidden[rows, cols], wanted)[:n_want].float() if rows else None
    at = 0
    for lane in live:
        n = len(feeds[id(lane)].want)
        advance(lane, feeds, logits[at : at + n] if n else None)
        at += n
    keep = [r for r, lane in enumerate(live) if not lane.done]
    if sum(not live[r].filler for r in keep) <= 1:  # one lane left: padding rows only cost
        keep = [r for r in keep if not live[r].filler]
    if 0 < len(keep) < len(live):
        index = torch.tensor(keep, device=device)
        for layer in cache.layers:  # DynamicLayer.batch_select_indices: drop finished rows
            layer.batch_select_indices(index)
    return [live[r] for r in keep], width + q


def filler(pad_id: int):
    """A padding row: one pad token per step that attends to itself only."""
    k = 0
    while True:
        yield Feed([pad_id], [0], causal_see([False] * k, 1), [])
        k += 1


def advance(lane: Lane, feeds: dict, logits) -> None:
    """Send logits to a lane (None: start it); store its next feed or its end."""
    now = time.perf_counter()
    if logits is not None and lane.first_logits is None:
        lane.first_logits = now - lane.started
    try:
        feeds[id(lane)] = lane.steps.send(logits) if logits is not None else next(lane.steps)
        return
    except StopIteration as stop:
        lane.result = stop.value
    except MagnetError as e:
        lane.error = e
    lane.done = True
    feeds.pop(id(lane), None)


def _load_prefixes(cache, lanes: list[Lane], dtype, device) -> int:
    """Put each lane's prefix KV into its row of the cache (zeros where shorter); its width."""
    width = max((len(lane.prefix) for lane in lanes if lane.prefix), default=0)
    if width == 0:
        return 0
    some = next(lane.prefix for lane in lanes if lane.prefix)
    for layer in range(len(some.keys)):
        ks, vs = [], []
        for lane in lanes:
            k0, v0 = some.keys[layer], some.values[layer]
            k = torch.zeros(1, k0.shape[1], width, k0.shape[3], dtype=k0.dtype, device=device)
            v = torch.zeros(1, v0.shape[1], width, v0.shape[3], dtype=v0.dtype, device=device)
            if lane.prefix:
                n = len(lane.prefix)
                k[:, :, :n] = lane.prefix.keys[layer]
                v[:, :, :n] = lane.prefix.values[layer]
            ks.append(k)
            vs.append(v)
        cache.update(torch.cat(ks), torch.cat(vs), layer)
    return width
