"""The static-cache decode path (magnet_model/inference/static_decode.py) against the eager
executor on a tiny random Llama: the same tokens for greedy and sampled continuation, MAGNET
infill with one and several blanks (stopping at <span_end>), batched lanes with different
adapters and prompt lengths; the cache length bucket growing mid-generation; the CUDA-graph
bookkeeping (static input buffers, one capture per shape, a new capture after the bucket grew)
with a stand-in for the graph on CPU; the documented CPU fallback of "graph"; MAGNET_DECODE."""

from __future__ import annotations

import contextlib
import itertools
from collections import Counter

import pytest
import torch
from test_engine import TEXT, ids_of, loaded, metas, peft_model
from tiny_models import make_tiny_tokenizer

from magnet_model.decoding import ContinueSettings
from magnet_model.errors import ConfigError
from magnet_model.inference import static_decode
from magnet_model.inference.engine import BASE, Engine, EngineConfig
from magnet_model.inference.generation import continuation_lanes
from magnet_model.settings import ModelSpec

SYSTEMS = ["magnet", "zero-shot", "five-shot"]
LONG = "the king of france was in paris on the first day of the war ."
CPU = torch.device("cpu")


@pytest.fixture(scope="module")
def tok():
    return make_tiny_tokenizer()


@pytest.fixture(scope="module")
def engine(tok):
    eng = Engine(loaded(peft_model(tok), tok), EngineConfig(decode="static"), metas(tok))
    eng.runner.static_decoder.min_length = 16  # small buckets: generations here outgrow them
    return eng


@contextlib.contextmanager
def decode(engine, mode):
    """The engine decoding with `mode` ("eager" is batching.run_lanes); yields the steps
    the static decoder ran meanwhile."""
    old = engine.runner.static_decoder.mode
    engine.runner.static_decoder.mode = mode
    before = engine.runner.static_decoder.stats.copy()
    counts = Counter()
    try:
        yield counts
    finally:
        engine.runner.static_decoder.mode = old
        counts.update(engine.runner.static_decoder.stats - before)


def both(engine, call):
    """call() with the eager path and with the static path; (eager, static, static stats)."""
    with decode(engine, "eager") as eager_stats:
        a = call()
    with decode(engine, "static") as stats:
        b = call()
    assert not eager_stats  # the eager path never touched the static decoder
    assert stats["steps"] > 0  # and the static one really ran
    return a, b, stats


@pytest.mark.parametrize("adapter", [None, "magnet"])
def test_greedy_continuation_is_identical_and_outgrows_its_bucket(engine, adapter):
    a, b, stats = both(
        engine, lambda: engine.generate("the cat", adapter=adapter, max_new_tokens=40)
    )
    assert a.token_ids == b.token_ids and len(a.token_ids) == 40
    assert stats["grown"] >= 2  # 16 -> 32 -> 64 columns, the cache copied each time
    free = (
        engine.runner.static_decoder.idle_slots
    )  # the run gave back each slot it held exactly once
    assert free and len({id(slot) for slot in free}) == len(free)


def test_sampled_outputs_with_a_seed_are_identical(engine):
    kw = dict(do_sample=True, temperature=1.5, top_p=0.9, seed=11)
    a, b, _ = both(engine, lambda: engine.generate("the dog", max_new_tokens=20, **kw))
    assert a.token_ids == b.token_ids
    a, b, _ = both(engine, lambda: engine.infill(TEXT, max_span_tokens=5, **kw))
    assert ids_of(a) == ids_of(b)


@contextlib.contextmanager
def stopping_head(engine, tok):
    """The LM head, with <span_end> made the best token wherever the first hidden unit is
    above its median: spans stop by themselves at lengths the hidden states decide."""
    end = engine.runner.roles("magnet").span_end
    head = engine.runner.logits

    def logits(hidden, adapters=None):
        out = head(hidden, adapters).clone()
        stop = hidden[:, 0] > 0.0
        out[stop, end] = out[stop].max(-1).values + 1.0
        return out

    engine.runner.logits = logits  # the lanes read the runner's head at each run
    try:
        yield
    finally:
        del engine.runner.logits


@pytest.mark.parametrize(
    "text", ["the cat [blank] on the mat .", TEXT, "[blank] the dog [blank] in the [blank]"]
)
def test_magnet_infill_is_identical_and_stops_at_span_end(engine, tok, text):
    with stopping_head(engine, tok):
        a, b, _ = both(engine, lambda: engine.infill(text, max_span_tokens=12))
    assert ids_of(a) == ids_of(b) and a.filled == b.filled
    assert [s.end_reason for s in a.spans] == [s.end_reason for s in b.spans]
    reasons = {s.end_reason for s in a.spans}
    # without the stand-in head the random model never stops; with it, some spans do
    assert "end" in reasons or len(a.spans) == 1


def test_span_end_stops_occur(engine, tok):
    with stopping_head(engine, tok):
        a, b, _ = both(engine, lambda: engine.infill(TEXT, max_span_tokens=12))
        c, d, _ = both(
            engine,
            lambda: engine.infill("[blank] the dog [blank] in the [blank]", max_span_tokens=12),
        )
    reasons = [s.end_reason for r in (a, c) for s in r.spans]
    assert "end" in reasons and len({len(s.token_ids) for r in (a, c) for s in r.spans}) > 1
    assert [ids_of(r) for r in (a, c)] == [ids_of(r) for r in (b, d)]


def test_side_by_side_lanes_are_identical(engine):
    a, b, _ = both(engine, lambda: engine.compare_infill(TEXT, SYSTEMS, max_span_tokens=4))
    assert [ids_of(r) for r in a] == [ids_of(r) for r in b]
    assert [r.filled for r in a] == [r.filled for r in b]
    adapters = [BASE, "magnet", "llm2vec"]
    a, b, _ = both(engine, lambda: list(engine.compare_continue("the cat sat", adapters, 12))[-1])
    assert a == b and len({t for t, _ in a}) == 3


def test_lanes_with_different_prompt_lengths_and_adapters(engine):
    def run():
        lanes, outs = [], []
        for prompt, adapter, n in [
            ("the cat", "magnet", 9),
            ("the king of france was in paris on the first day", BASE, 14),
            ("a small bird flew over the river", "llm2vec", 5),
        ]:
            ls, o, _ = continuation_lanes(engine.runner, prompt, [adapter], ContinueSettings(n))
            lanes += ls
            outs += o
        engine.runner.run(lanes)
        return outs

    a, b, stats = both(engine, run)
    assert a == b and [len(o) for o in a] == [9, 14, 5]
    assert stats["runs"] == 1  # one batch for the three lanes


def test_interleaved_streams_keep_their_own_cache(engine):
    with decode(engine, "eager"):
        ref = [
            engine.generate("the dog", adapter=n, max_new_tokens=20).text for n in ("magnet", None)
        ]
    with decode(engine, "static") as stats:
        a = engine.continue_text("the dog", adapter="magnet", max_new_tokens=20)
        b = engine.continue_text("the dog", adapter=None, max_new_tokens=20)
        out = ["", ""]
        for pa, pb in itertools.zip_longest(a, b, fillvalue=""):
            out[0] += pa
            out[1] += pb
    assert out == ref and stats["runs"] == 2


def test_graph_mode_without_cuda_decodes_with_the_static_cache(engine):
    assert static_decode.resolve_mode("graph", CPU) == "static"
    assert static_decode.resolve_mode("auto", CPU) == static_decode.CPU_AUTO
    assert static_decode.resolve_mode("auto", torch.device("cuda")) == "graph"
    assert static_decode.resolve_mode("eager", torch.device("cuda")) == "eager"
    with pytest.raises(ValueError):
        static_decode.resolve_mode("fast", CPU)
    with decode(engine, "eager"):
        a = engine.generate("the cat", max_new_tokens=10)
    with decode(engine, "graph") as stats:
        b = engine.generate("the cat", max_new_tokens=10)
    assert a.token_ids == b.token_ids
    assert stats["steps"] == 10 and stats["eager_steps"] == 10 and not stats["captures"]


class _Replay:
    """A stand-in for a captured CUDA graph on CPU: replay() runs the step again on the
    captured buffers (the cache object and input tensors of capture time), writing its
    output in place; reading anything else would show as different tokens."""

    def __init__(self, step):
        self.step = step
        self.out = step()

    def replay(self):
        self.out.copy_(self.step())


@pytest.fixture
def cpu_graphs(engine, monkeypatch):
    """The decoder believing it is on CUDA, with _Replay as its graph."""
    dec = engine.runner.static_decoder

    def capture(slot, forward, inp, adapters):
        cache = slot.cache
        g = _Replay(lambda: forward(inp.ids, inp.pos, inp.mask, cache, list(adapters)).clone())
        dec.stats["captures"] += 1
        return g, g.out

    monkeypatch.setattr(dec, "capture", capture)
    monkeypatch.setattr(dec, "path", lambda device: "static" if dec.mode == "eager" else "graph")
    monkeypatch.setattr(dec, "_free", [])  # fresh slots: every shape is captured here
    return dec


def test_graph_bookkeeping_gives_the_eager_tokens(engine, cpu_graphs):
    with decode(engine, "eager"):
        a = engine.generate(LONG, adapter="magnet", max_new_tokens=40)
        fill = engine.infill(TEXT, max_span_tokens=[6, 3, 9], fill={"branches": 1})
        branched = engine.infill(TEXT, max_span_tokens=[6, 3, 9], fill={"branches": 4})
        lanes = engine.compare_infill(TEXT, SYSTEMS, max_span_tokens=4)
    # no slot left by earlier tests (the stop rule's readings grow buckets): a fresh one
    engine.runner.static_decoder.clear()
    with decode(engine, "graph") as stats:
        b = engine.generate(LONG, adapter="magnet", max_new_tokens=40)
    assert a.token_ids == b.token_ids
    # the prompt (more than MAX_GRAPH_QUERIES tokens) runs eagerly, the 39 one-token steps
    # are replays; the bucket grew and the new bucket captured the step anew
    assert stats["eager_steps"] == 1 and stats["replays"] == 39
    assert stats["grown"] >= 1 and stats["captures"] == stats["grown"] + 1
    with decode(engine, "graph") as stats:
        again = engine.infill(TEXT, max_span_tokens=[6, 3, 9], fill={"branches": 1})
    assert ids_of(again) == ids_of(fill)
    # 3 open spans feed 3 tokens, padded to 4; then 2 (a power of two) and 1
    assert stats["captures"] >= 2 and stats["replays"] == 8
    with decode(engine, "graph"):  # several first tokens per blank: the same paths
        assert ids_of(
            engine.infill(TEXT, max_span_tokens=[6, 3, 9], fill={"branches": 4})
        ) == ids_of(branched)
    with decode(engine, "graph") as stats:
        together = engine.compare_infill(TEXT, SYSTEMS, max_span_tokens=4)
    assert [ids_of(r) for r in together] == [ids_of(r) for r in lanes]
    assert stats["replays"] > 0


def test_a_failed_capture_falls_back_to_eager_steps(engine, cpu_graphs, monkeypatch):
    def broken(*args):
        raise RuntimeError("operation not permitted when stream is capturing")

    monkeypatch.setattr(cpu_graphs, "capture", broken)
    with decode(engine, "eager"):
        a = engine.generate("the cat", max_new_tokens=8)
    with decode(engine, "graph") as stats:
        b = engine.generate("the cat", max_new_tokens=8)
    assert a.token_ids == b.token_ids and not stats["replays"] and stats["eager_steps"] == 8


def test_decode_setting(monkeypatch):
    monkeypatch.setenv("MAGNET_DECODE", "static")
    assert ModelSpec.from_env().decode == "static"
    monkeypatch.setenv("MAGNET_DECODE", "")
    assert ModelSpec.from_env().decode == "auto"
    monkeypatch.setenv("MAGNET_DECODE", "turbo")
    with pytest.raises(ConfigError, match="MAGNET_DECODE must be one of"):
        ModelSpec.from_env()


def test_engine_takes_the_spec_setting_unless_the_config_says(tok, engine):
    model = engine.model
    spec = ModelSpec(decode="eager")
    lm = loaded(model, tok)
    lm.spec = spec
    assert Engine(lm).runner.static_decoder.mode == "eager"
    assert Engine(lm, EngineConfig(decode="graph")).runner.static_decoder.mode == "graph"
