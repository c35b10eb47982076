"""Side-by-side systems in one batch (magnet_model/inference/batching.py and the engine's lanes)
on a tiny random Llama: a batched comparison equals the separate calls, mixed adapters per row, the
prompt-head cache equals encoding the whole prompt, one failing system does not stop others."""

from __future__ import annotations

import pytest
import torch
from test_engine import TEXT, ids_of, loaded, metas, peft_model
from tiny_models import make_tiny_tokenizer

from magnet_model import prompts
from magnet_model.errors import MagnetError
from magnet_model.inference.batching import Feed, Lane, causal_see
from magnet_model.inference.engine import BASE, Engine, EngineConfig, InputTooLongError
from magnet_model.inference.prompted import common_length

SYSTEMS = ["magnet", "zero-shot", "five-shot"]


@pytest.fixture(scope="module")
def tok():
    return make_tiny_tokenizer()


@pytest.fixture(scope="module")
def engine(tok):
    return Engine(loaded(peft_model(tok), tok), metas=metas(tok))


def separate(engine, text, **kw):
    return [
        engine.infill(text, adapter="magnet", **kw),
        engine.infill_prompted(text, shots=0, **kw),
        engine.infill_prompted(text, shots=5, **kw),
    ]


@pytest.mark.parametrize("text", [TEXT, "the dog [blank] in the river ."])
def test_compare_infill_equals_separate_calls(engine, text):
    together = engine.compare_infill(text, SYSTEMS, max_span_tokens=4)
    alone = separate(engine, text, max_span_tokens=4)
    for a, b in zip(together, alone, strict=True):
        assert (a.system, a.adapter) == (b.system, b.adapter)
        assert ids_of(a) == ids_of(b) and a.filled == b.filled
        assert [s.end_reason for s in a.spans] == [s.end_reason for s in b.spans]


def test_compare_infill_when_sampling_equals_separate_seeded_calls(engine):
    kw = dict(max_span_tokens=4, do_sample=True, temperature=1.5, seed=7)
    together = engine.compare_infill(TEXT, SYSTEMS, **kw)
    alone = separate(engine, TEXT, **kw)
    assert [ids_of(r) for r in together] == [ids_of(r) for r in alone]
    assert all(r.seed == 7 for r in together)


def test_comparison_shares_forwards(engine, monkeypatch):
    """One forward per step serves every system: fewer forwards than the calls in turn."""
    calls = []
    inner = engine.runner.hidden_states

    def counting(ids, *args, **kwargs):
        calls.append(ids.shape[0])
        return inner(ids, *args, **kwargs)

    engine.prompt_prefix(0), engine.prompt_prefix(5)  # prompt heads cached beforehand
    monkeypatch.setattr(engine.runner, "hidden_states", counting)
    separate(engine, TEXT, max_span_tokens=4)
    n_separate = len(calls)
    calls.clear()
    engine.compare_infill(TEXT, SYSTEMS, max_span_tokens=4)
    assert len(calls) < n_separate * 0.6
    assert max(calls) == 4  # the three systems were rows of one batch, padded to 4 on CPU


def test_padding_rows_change_nothing(tok, engine):
    unpadded = Engine(loaded(peft_model(tok), tok), EngineConfig(pad_rows=0), metas(tok))
    a = engine.compare_infill(TEXT, SYSTEMS, max_span_tokens=4)
    b = unpadded.compare_infill(TEXT, SYSTEMS, max_span_tokens=4)
    assert [ids_of(r) for r in a] == [ids_of(r) for r in b]
    adapters = [BASE, "magnet", "llm2vec"]
    a = list(engine.compare_continue("the cat", adapters, max_new_tokens=6))[-1]
    b = list(unpadded.compare_continue("the cat", adapters, max_new_tokens=6))[-1]
    assert a == b


def test_compare_continue_mixes_adapters_per_row(engine):
    """base, magnet and llm2vec decode as rows of one batch, each with its own adapter."""
    adapters = [BASE, "magnet", "llm2vec"]
    prompt = "the cat sat on the"
    last = list(engine.compare_continue(prompt, adapters, max_new_tokens=8))[-1]
    alone = ["".join(engine.continue_text(prompt, adapter=a, max_new_tokens=8)) for a in adapters]
    assert [text for text, _ in last] == alone
    assert all(reason in ("max", "eos") for _, reason in last)
    assert len(set(alone)) > 1  # the adapters really differ, so mixing rows would show
    assert [r for r in engine.runner.row_loras.values() if r is not None]  # the stacked-LoRA path


def test_prompt_head_cache_equals_encoding_the_whole_prompt(engine, tok):
    prefix = engine.prompt_prefix(5)
    query = prompts.render_query(["the cat ", " on the mat ."], [], 0)
    ids = tok(prompts.build_prompt(query, 5, tok), add_special_tokens=False).input_ids
    p = common_length(prefix.ids, ids)  # the tiny vocabulary may share more than the head
    assert 100 < p < len(ids) and p >= len(prefix) - 8

    def one_feed(feed):
        logits = yield feed
        return logits

    n = len(ids)
    whole = Lane(BASE, one_feed(Feed(ids, list(range(n)), causal_see(0, n), [n - 1])))
    visible = [i < p for i in range(len(prefix))]
    tail = Feed(ids[p:], list(range(p, n)), causal_see(visible, n - p), [n - p - 1])
    cached = Lane(BASE, one_feed(tail), prefix)
    short = Lane("magnet", one_feed(Feed(ids[:5], list(range(5)), causal_see(0, 5), [4])))
    a, b, _ = engine.runner.run([whole, cached, short])  # padded rows, one with a prefix
    torch.testing.assert_close(a, b, atol=1e-4, rtol=1e-4)
    (alone,) = engine.runner.run([Lane(BASE, one_feed(tail), prefix)])
    torch.testing.assert_close(alone, b, atol=1e-4, rtol=1e-4)


def test_prompted_infill_feeds_only_the_query(engine, monkeypatch):
    engine.prompt_prefix(5)
    fed = []
    inner = engine.runner.hidden_states

    def counting(ids, *args, **kwargs):
        fed.append(ids.shape[1])
        return inner(ids, *args, **kwargs)

    monkeypatch.setattr(engine.runner, "hidden_states", counting)
    engine.infill_prompted("the dog [blank] in the river .", shots=5, max_span_tokens=2)
    assert fed[0] < len(engine.prompt_prefix(5)) / 2


def test_a_failing_system_does_not_stop_the_others(tok):
    eng = Engine(loaded(peft_model(tok), tok), EngineConfig(max_input_tokens=120), metas(tok))
    magnet, zero, five = eng.compare_infill("the dog [blank] in the river .", SYSTEMS)
    assert isinstance(five, InputTooLongError) and isinstance(five, MagnetError)
    assert magnet.spans and zero.spans
    with pytest.raises(InputTooLongError):
        eng.infill_prompted("the dog [blank] in the river .", shots=5)


def test_compare_infill_rejects_unknown_systems(engine):
    with pytest.raises(MagnetError):
        engine.compare_infill(TEXT, ["magnet", "seven-dwarfs"])


# ---------------------------------------------------------------- many texts in one batch

MANY_TEXTS = [
    TEXT,
    "the dog [blank] in the river .",
    "a bird [blank] over the [blank] .",
    "The cat sat . [blank] The dog ran .",
    "one two [blank] four",
]


def _requests(engine, sampled: bool):
    base = engine.fill_settings(max_span_tokens=4)
    return [
        (
            text,
            SYSTEMS,
            base.but(do_sample=True, temperature=1.5, seed=100 + i) if sampled else base,
        )
        for i, text in enumerate(MANY_TEXTS)
    ]


@pytest.mark.parametrize("sampled", [False, True])
def test_many_texts_in_one_batch_equal_each_text_alone(engine, sampled):
    """float32: the same tokens whatever the batch, each text with its own seed."""
    requests = _requests(engine, sampled)
    alone = [engine.compare_infill(t, s, settings) for t, s, settings in requests]
    for k in (1, 2, len(requests)):
        got: dict = {}
        for i, j, r in engine.compare_infill_many(requests, items_per_batch=k):
            assert (i, j) not in got  # each output once
            got[i, j] = r
        assert sorted(got) == [(i, j) for i in range(len(requests)) for j in range(3)]
        for i, results in enumerate(alone):
            for j, r in enumerate(results):
                assert ids_of(got[i, j]) == ids_of(r), (k, i, SYSTEMS[j])
                assert got[i, j].seed == r.seed


def test_a_batch_of_many_texts_shares_its_forwards(engine, monkeypatch):
    """K texts' lanes step together: far fewer forwards than the texts one at a time."""
    calls = []
    inner = engine.runner.hidden_states

    def spy(*a, **kw):
        calls.append(1)
        return inner(*a, **kw)

    monkeypatch.setattr(engine.runner, "hidden_states", spy)
    # (not the blank between sentences: the tiny model never ends a sentence, so that lane
    # alone runs 64 steps whatever the batch)
    requests = [r for r in _requests(engine, False) if "The cat sat ." not in r[0]]
    list(engine.compare_infill_many(requests, items_per_batch=1))
    one_at_a_time, calls[:] = len(calls), []
    list(engine.compare_infill_many(requests, items_per_batch=len(requests)))
    assert len(calls) < one_at_a_time / 2, (len(calls), one_at_a_time)


def test_a_bad_text_among_many_is_refused_before_its_batch_runs(engine):
    requests = _requests(engine, False) + [("no blank here", SYSTEMS, None)]
    with pytest.raises(MagnetError, match="blank"):
        list(engine.compare_infill_many(requests, items_per_batch=len(requests)))
