"""The inference engine on tiny random Llamas: cached vs reference infill, memorisation,
adapter round trip, adapter switching (also across threads), errors, sampling, streaming,
embeddings, prompted baselines."""

from __future__ import annotations

import itertools
from concurrent.futures import ThreadPoolExecutor

import numpy as np
import pytest
import torch
from peft import LoraConfig, get_peft_model
from reply_driver import drive_reply
from tiny_models import make_tiny_llama, make_tiny_tokenizer

from magnet_model import prompts
from magnet_model.adapter_meta import AdapterMeta, save_meta
from magnet_model.errors import InputError
from magnet_model.inference.engine import (
    EmptyInputError,
    Engine,
    EngineConfig,
    InputTooLongError,
    NoBlankError,
    TooManyBlanksError,
    UnknownAdapterError,
    assemble,
)
from magnet_model.inference.infill import infill_job, span_loop
from magnet_model.inference.prompted import ASKS, answer_steps
from magnet_model.inference.sampling import Sampling
from magnet_model.layout import IGNORE, build_hybrid
from magnet_model.loading import LoadedModel, attach_adapters
from magnet_model.masks import build_mask
from magnet_model.settings import ModelSpec
from magnet_model.tokens import choose_token_roles

TARGETS = ["q_proj", "k_proj", "v_proj", "o_proj", "gate_proj", "up_proj", "down_proj"]
TEXT = "the cat [blank] on the [blank] . the dog [blank] in the river ."


def loaded(model, tok, adapters=None) -> LoadedModel:
    cpu = torch.device("cpu")
    return LoadedModel(model, tok, ModelSpec(), cpu, torch.float32, "test", 0.0, adapters or {})


def lora(seed: int) -> LoraConfig:
    torch.manual_seed(seed)
    return LoraConfig(r=4, lora_alpha=16, target_modules=TARGETS, init_lora_weights=False)


def metas(tok) -> dict[str, AdapterMeta]:
    roles = choose_token_roles(tok)
    return {
        "magnet": AdapterMeta(token_roles=roles),
        "llm2vec": AdapterMeta(
            token_roles=roles, attention="bidirectional", pooling="mean", instruction=""
        ),
    }


def random_llama(tok):
    """Larger initial weights than the default 0.02, so greedy outputs vary with the input."""
    return make_tiny_llama(len(tok), initializer_range=0.5)


def peft_model(tok):
    """A tiny Llama with two random (non-trivial) LoRA adapters: magnet and llm2vec."""
    model = get_peft_model(random_llama(tok), lora(1), adapter_name="magnet")
    torch.manual_seed(2)
    model.add_adapter("llm2vec", lora(2))
    model.eval()
    return model


@pytest.fixture(scope="module")
def tok():
    return make_tiny_tokenizer()


@pytest.fixture(scope="module")
def engine(tok):
    return Engine(loaded(peft_model(tok), tok), metas=metas(tok))


@pytest.fixture(scope="module")
def plain(tok):
    """The same base weights as `engine`, never wrapped by peft."""
    return Engine(loaded(random_llama(tok), tok))


def ids_of(result):
    return [s.token_ids for s in result.spans]


# ---------------------------------------------------------------- cached vs reference


@pytest.mark.parametrize("adapter", ["magnet", None])
def test_cached_infill_equals_reference(engine, adapter):
    kw = dict(adapter=adapter, max_span_tokens=[6, 3, 9])
    # the default stop rule's causal readings too (stops.py): the same cuts on both paths
    fast = engine.infill(TEXT, **kw)
    slow = engine.infill_reference(TEXT, **kw)
    assert ids_of(fast) == ids_of(slow)
    assert [s.end_reason for s in fast.spans] == [s.end_reason for s in slow.spans]
    kw["fill"] = {"stop": "model"}
    fast = engine.infill(TEXT, **kw)
    slow = engine.infill_reference(TEXT, **kw)
    assert ids_of(fast) == ids_of(slow)
    assert [len(s.token_ids) for s in fast.spans] == [6, 3, 9]  # random model: never stops
    assert [s.end_reason for s in fast.spans] == ["max"] * 3
    # different context tokens give different spans: the right context is used
    other = engine.infill(TEXT.replace("river", "sea"), **kw)
    assert ids_of(other) != ids_of(fast)


def test_cached_infill_equals_reference_when_sampling(engine):
    kw = dict(max_span_tokens=5, do_sample=True, temperature=1.5, top_p=0.9, seed=7)
    assert ids_of(engine.infill(TEXT, **kw)) == ids_of(engine.infill_reference(TEXT, **kw))


def test_cached_path_does_not_reencode_the_context(engine, monkeypatch):
    """The context goes through the model once; later steps feed one token per open span."""
    fed = []
    inner = engine.runner.decoder
    orig = inner.forward

    def spy(*a, **kw):
        fed.append(kw["input_ids"].shape[1])
        return orig(*a, **kw)

    monkeypatch.setattr(inner, "forward", spy)
    r = engine.infill("the cat [blank] on the mat .", max_span_tokens=5, fill={"stop": "model"})
    context = r.context_tokens + 1  # + one <span_start>
    assert fed == [context, 1, 1, 1, 1]
    # the stop rule reads its candidates in one more forward, after the span is decoded
    fed.clear()
    kw = dict(max_span_tokens=5)
    engine.infill("the cat [blank] on the mat .", fill={"stop": "join", "branches": 1}, **kw)
    assert fed[:5] == [context, 1, 1, 1, 1] and len(fed) == 6 and fed[5] > context
    # three more first tokens: one row still, each branch a <span_start> copy and then one
    # token per step beside the greedy path
    fed.clear()
    engine.infill("the cat [blank] on the mat .", fill={"stop": "join", "branches": 4}, **kw)
    assert fed[:5] == [context, 1 + 3 * 2, 4, 4, 4] and len(fed) == 6


# ---------------------------------------------------------------- memorisation


def _training_rows(ids: list[int], roles):
    """Every span of 1-3 tokens, and every pair of one-token spans, of one sentence."""
    cuts = [[(s, n)] for n in (1, 2, 3) for s in range(len(ids) - n + 1)]
    cuts += [[(a, 1), (b, 1)] for a, b in itertools.combinations(range(len(ids)), 2) if b > a + 1]
    rows = []
    for cut in cuts:
        pieces, spans, at = [], [], 0
        for s, n in cut:
            pieces.append(ids[at:s])
            spans.append(ids[s : s + n])
            at = s + n
        pieces.append(ids[at:])
        rows.append(build_hybrid(pieces, spans, roles, bos=None, with_end=True))
    return rows


def _pad(rows, attr, value):
    width = max(len(r.input_ids) for r in rows)
    return torch.tensor([getattr(r, attr) + [value] * (width - len(r.input_ids)) for r in rows])


@pytest.fixture(scope="module")
def memoriser(tok):
    """A tiny Llama trained with MSG (hybrid mask, build_hybrid layout) on two sentences."""
    roles = choose_token_roles(tok)
    sentences = ["the cat sat on the mat .", "a dog ran to the old river ."]
    rows = [r for s in sentences for r in _training_rows(tok(s).input_ids, roles)]
    ids = _pad(rows, "input_ids", roles.pad)
    segments = _pad(rows, "segments", 0)
    positions = _pad(rows, "position_ids", 0)
    labels = _pad(rows, "labels", IGNORE)
    real = (_pad(rows, "segments", -1) >= 0).long()
    mask = build_mask("hybrid", real, segments)
    model = make_tiny_llama(len(tok), seed=3, hidden_size=64, intermediate_size=128)
    model.train()
    opt = torch.optim.AdamW(model.parameters(), lr=1e-2)
    # until memorised: how many steps that takes varies with the CPU's float rounding and the
    # thread count (150 steps ended anywhere from 0.002 to 0.19 on the same code)
    for _ in range(500):
        logits = model(input_ids=ids, attention_mask=mask, position_ids=positions).logits
        loss = torch.nn.functional.cross_entropy(logits.flatten(0, 1), labels.flatten())
        if loss.item() < 0.01:
            break
        opt.zero_grad()
        loss.backward()
        opt.step()
    model.eval()
    assert loss.item() < 0.01
    return Engine(loaded(model, tok))


@pytest.mark.parametrize(
    "text, spans",
    [
        ("the cat [blank] on the mat .", ["sat"]),
        ("the cat [blank] the mat .", ["sat on"]),
        ("the [blank] sat on the [blank] .", ["cat", "mat"]),
        ("a dog ran to the [blank] .", ["old river"]),
    ],
)
def test_trained_model_infills_a_memorised_sentence(memoriser, text, spans):
    for reference in (False, True):
        # the model's own end: trained in the hybrid layout only, it cannot read causally
        r = memoriser.infill(text, adapter=None, reference=reference, fill={"stop": "model"})
        assert [s.text for s in r.spans] == spans
        assert all(s.stopped for s in r.spans)  # each span ended by itself at <span_end>
    assert r.filled == text.replace("[blank]", "{}").format(*spans)
    assert [r.filled[s.start : s.end] for s in r.spans] == spans


def test_fixed_and_max_lengths(memoriser):
    r = memoriser.infill("the cat [blank] on the [blank] .", adapter=None, fixed_lengths=[3, None])
    assert len(r.spans[0].token_ids) == 3 and r.spans[0].end_reason == "fixed"
    assert r.spans[1].text == "mat" and r.spans[1].stopped
    r = memoriser.infill("a dog ran to the [blank] .", adapter=None, max_span_tokens=1)
    assert r.spans[0].text == "old" and r.spans[0].end_reason == "max"


def _scripted(engine, text, script, **kwargs):
    """Decode one blank of text with a stand-in model whose logits rank the tokens of
    script[step] (a list, best first) above all others: the decoder's rules, not a model."""
    span = kwargs.pop("max_span_tokens", 8)
    fill = engine.magnet_fill(kwargs)  # the engine's rules, these changed
    job = infill_job(engine.runner, text, "[blank]", "magnet", span, None, fill)
    vocab = len(engine.tokenizer)

    def step(active, generated):
        logits = torch.zeros(len(active), vocab)
        for row, k in enumerate(active):
            for rank, t in enumerate(script[len(generated[k])]):
                logits[row, t] = 100.0 - rank
        return logits

    generated, reasons, _, _ = span_loop(engine.runner, job, Sampling().start(), step)
    return generated[0], reasons[0]


def test_span_stops_where_it_runs_into_the_right_context(engine, tok):
    ids = lambda s: tok(s, add_special_tokens=False).input_ids  # noqa: E731
    cat, sat, on, the, mat = ids("cat sat on the mat")
    script = [[cat], [sat], [on], [the], [mat], [sat]]
    # the span repeats the first two tokens after the blank: they are removed and it stops
    assert _scripted(engine, "the [blank] on the mat .", script) == ([cat, sat], "joined")
    # a one-token right piece is matched whole
    assert _scripted(engine, "the [blank] on", script) == ([cat, sat], "joined")
    # a span may not begin with the text after its blank (it would be trimmed to nothing):
    # the next best first token is taken instead
    script = [[on, cat], [sat], [on], [the], [mat], [sat]]
    assert _scripted(engine, "the [blank] on the mat .", script) == ([cat, sat], "joined")
    script = [[cat], [sat], [on], [the], [mat], [sat]]
    # switched off (to measure the model alone): it runs on
    engine.config.stop_at_right_context = False
    try:
        got = _scripted(engine, "the [blank] on the mat .", script, max_span_tokens=6)
        assert got == ([cat, sat, on, the, mat, sat], "max")
    finally:
        engine.config.stop_at_right_context = True
    # no right context (blank at the end): only the length limit stops it
    got = _scripted(engine, "the [blank]", script, max_span_tokens=6)
    assert got == ([cat, sat, on, the, mat, sat], "max")


def test_no_special_token_is_generated_inside_a_span(engine, tok):
    roles = engine.runner.roles("magnet")
    cat, sat = tok("cat sat", add_special_tokens=False).input_ids
    specials = engine.runner.special_ids(roles)
    assert roles.span_end not in specials
    assert set(tok.all_special_ids) - {roles.span_end} <= set(specials)
    assert tok.convert_tokens_to_ids("<|im_start|>") in specials
    assert tok.eos_token_id in specials and roles.blank in specials
    # every special ranks above the words; only <span_end> may end the span
    script = [[*specials, cat], [*specials, sat], [*specials, roles.span_end, cat]]
    assert _scripted(engine, "the [blank] .", script) == ([cat, sat], "end")


# ---------------------------------------------------------------- adapters


def test_adapter_save_load_round_trip(tok, engine, tmp_path):
    engine.model.save_pretrained(tmp_path, selected_adapters=["magnet"])
    folder = tmp_path / "magnet"
    assert (folder / "adapter_config.json").is_file()
    save_meta(folder, metas(tok)["magnet"])
    fresh = attach_adapters(random_llama(tok), {"magnet": str(folder)})
    other = Engine(loaded(fresh, tok, {"magnet": str(folder)}))  # meta read from the folder
    assert other.runner.meta("magnet") == engine.runner.meta("magnet")
    assert ids_of(other.infill(TEXT)) == ids_of(engine.infill(TEXT))
    sents = ["the cat sat .", "a big red house on the hill"]
    assert np.array_equal(other.embed_sentences(sents), engine.embed_sentences(sents))
    x = torch.tensor([tok("the cat sat on the mat").input_ids])
    with engine.runner.using("magnet"):
        a = engine.model(input_ids=x).logits
    with other.runner.using("magnet"):
        b = other.model(input_ids=x).logits
    with engine.runner.using(None):
        off = engine.model(input_ids=x).logits
    assert torch.equal(a, b)
    assert not torch.allclose(a, off)  # the adapter is not a no-op


def test_switching_never_leaks(engine, plain):
    first = engine.infill(TEXT)
    base = engine.infill(TEXT, adapter="base")
    again = engine.infill(TEXT)
    assert ids_of(first) == ids_of(again)
    assert ids_of(base) != ids_of(first)
    assert ids_of(base) == ids_of(plain.infill(TEXT, adapter=None))
    assert engine.generate("the cat", max_new_tokens=6).token_ids == (
        plain.generate("the cat", max_new_tokens=6).token_ids
    )
    sents = ["the cat sat .", "two birds flew over the sea at night"]
    np.testing.assert_allclose(
        engine.embed_sentences(sents, adapter=None), plain.embed_sentences(sents, adapter=None)
    )
    mag, l2v = engine.embed_sentences(sents), engine.embed_sentences(sents, adapter="llm2vec")
    assert not np.allclose(mag, l2v)
    np.testing.assert_array_equal(mag, engine.embed_sentences(sents, adapter="magnet"))


def test_threads_and_interleaved_streams_do_not_mix(engine):
    def fill(name):
        return ids_of(engine.infill(TEXT, adapter=name, max_span_tokens=4))

    names = ["magnet", "base", "llm2vec", "magnet", None, "llm2vec"]
    alone = {n: fill(n) for n in names}
    with ThreadPoolExecutor(4) as pool:
        got = list(pool.map(fill, names))
    assert got == [alone[n] for n in names]
    # two streams advanced in turn, each switching the adapter at every step
    ref = {
        n: engine.generate("the dog", adapter=n, max_new_tokens=8).text for n in ("magnet", None)
    }
    a = engine.continue_text("the dog", adapter="magnet", max_new_tokens=8)
    b = engine.continue_text("the dog", adapter=None, max_new_tokens=8)
    out = {"magnet": "", None: ""}
    for pa, pb in itertools.zip_longest(a, b, fillvalue=""):
        out["magnet"] += pa
        out[None] += pb
    assert out == ref


def test_one_copy_of_base_weights(engine, plain):
    base_params = sum(p.numel() for p in plain.model.parameters())
    lora_params = sum(p.numel() for n, p in engine.model.named_parameters() if "lora_" in n)
    total = sum(p.numel() for p in engine.model.parameters())
    assert total == base_params + lora_params
    assert engine.runner.adapter_names == ["magnet", "llm2vec"]


# ---------------------------------------------------------------- errors


def test_input_errors_are_typed(engine):
    cases = [
        (EmptyInputError, lambda: engine.infill("   ")),
        (EmptyInputError, lambda: engine.infill("[blank]")),
        (NoBlankError, lambda: engine.infill("the cat sat")),
        (TooManyBlanksError, lambda: engine.infill("a [blank] " * 9)),
        (UnknownAdapterError, lambda: engine.infill(TEXT, adapter="nope")),
        (UnknownAdapterError, lambda: engine.embed_sentences(["a"], adapter="nope")),
        (EmptyInputError, lambda: engine.continue_text("")),
        (InputTooLongError, lambda: engine.continue_text("the " * 250, max_new_tokens=10)),
        (InputTooLongError, lambda: engine.infill("the " * 200 + "[blank]", max_span_tokens=60)),
        (InputError, lambda: engine.infill(TEXT, fixed_lengths=[1, 2])),
        (InputError, lambda: engine.infill(TEXT, max_span_tokens=0)),
        (InputError, lambda: engine.infill(TEXT, do_sample=True, temperature=0)),
        (InputError, lambda: engine.infill_prompted(TEXT, shots=9)),
    ]
    for kind, call in cases:
        with pytest.raises(kind) as e:
            call()
        assert isinstance(e.value, InputError) and str(e.value)
    capped = Engine(engine.loaded, EngineConfig(max_input_tokens=12))
    with pytest.raises(InputTooLongError, match="limit of 12"):
        capped.infill("the cat [blank] on the mat .", max_span_tokens=8)


# ---------------------------------------------------------------- sampling and streaming


def test_seeded_sampling_is_reproducible(engine):
    kw = dict(do_sample=True, temperature=1.5, max_span_tokens=6)
    assert ids_of(engine.infill(TEXT, seed=3, **kw)) == ids_of(engine.infill(TEXT, seed=3, **kw))
    draws = {str(ids_of(engine.infill(TEXT, seed=s, **kw))) for s in range(4)}
    assert len(draws) > 1
    gen = dict(do_sample=True, temperature=1.5, max_new_tokens=10)
    a = engine.generate("the cat", seed=5, **gen)
    assert a.token_ids == engine.generate("the cat", seed=5, **gen).token_ids
    assert a.seed == 5
    assert len({tuple(engine.generate("the cat", seed=s, **gen).token_ids) for s in range(4)}) > 1


def test_streaming_joins_to_the_whole_continuation(engine):
    for adapter, sample in [("magnet", False), (None, True)]:
        kw = dict(adapter=adapter, max_new_tokens=12, do_sample=sample, seed=1)
        pieces = list(engine.continue_text("the cat sat", **kw))
        whole = engine.generate("the cat sat", **kw)
        assert "".join(pieces) == whole.text
        assert len(whole.token_ids) == 12 and whole.stop_reason == "max"
        assert whole.text.startswith(" ")  # the seam after the prompt keeps its space


# ---------------------------------------------------------------- embeddings


@pytest.mark.parametrize("adapter", ["magnet", "llm2vec", None])
def test_sentence_embeddings_batched_equal_unbatched(engine, adapter):
    sents = ["a", "the cat sat on the mat", "", "two big dogs ran", "the sun . the moon !"]
    batched = engine.embed_sentences(sents, adapter=adapter, batch_size=2)
    one_by_one = np.stack([engine.embed_sentences(s, adapter=adapter) for s in sents])
    assert batched.shape == (5, 32) and batched.dtype == np.float32
    np.testing.assert_allclose(batched, one_by_one, atol=1e-5)
    np.testing.assert_allclose(np.linalg.norm(batched, axis=1), 1.0, rtol=1e-5)
    raw = engine.embed_sentences(sents[:2], adapter=adapter, normalize_embeddings=False)
    assert not np.allclose(np.linalg.norm(raw, axis=1), 1.0)
    assert engine.embed_sentences([], adapter=adapter).shape == (0, 32)


def test_magnet_sentence_is_last_token_with_instruction(engine, tok):
    meta = engine.runner.meta("magnet")
    ids = tok(meta.instruction, add_special_tokens=False).input_ids + tok("the cat").input_ids
    x = torch.tensor([ids + [meta.token_roles.sentence_end]])
    mask = build_mask("bidirectional", torch.ones_like(x))
    with engine.runner.using("magnet"):
        h = engine.runner.hidden_states(x, mask)[0, -1]
    got = engine.embed_sentences("the cat", normalize_embeddings=False)
    np.testing.assert_allclose(got, h.numpy(), atol=1e-5)


def test_token_embeddings_follow_the_mask(engine, tok):
    a = engine.embed_tokens("the cat sat on the mat")
    b = engine.embed_tokens("the cat sat on the log")
    assert a.tokens == ["the", "cat", "sat", "on", "the", "mat"]
    assert a.vectors.shape == (6, 32) and a.offsets[1] == (4, 7)
    # exactly the training layout: the text alone (the trainer recorded no BOS), and the MNTP
    # convention: token i's vector is the bidirectional output at i - 1; token 0 its own
    x = torch.tensor([a.token_ids])
    with engine.runner.using("magnet"):
        h = engine.runner.hidden_states(x, build_mask("bidirectional", x > -1))
    h = h[0]
    np.testing.assert_allclose(a.vectors, h[[0, 0, 1, 2, 3, 4]].numpy(), atol=1e-5)
    # bidirectional: changing the last word changes every earlier token's vector
    assert not np.allclose(a.vectors[:5], b.vectors[:5])
    # the base model is causal and uses each token's own output: the past does not move
    ca = engine.embed_tokens("the cat sat on the mat", None)
    cb = engine.embed_tokens("the cat sat on the log", None)
    np.testing.assert_allclose(ca.vectors[:5], cb.vectors[:5], atol=1e-6)
    assert not np.allclose(ca.vectors[5], cb.vectors[5])


def test_token_embeddings_use_the_recorded_bos_even_when_its_id_is_0(engine, tok):
    """A BOS of id 0 is a BOS (not 'missing' in an `x or y` chain): it goes in front."""
    meta = engine.runner.meta("magnet")
    saved = meta.training
    meta.training = {**saved, "bos": 0}
    try:
        assert engine.token_layout("magnet") == ([0], "bidirectional")
        a = engine.embed_tokens("the cat sat")
        x = torch.tensor([[0, *a.token_ids]])
        with engine.runner.using("magnet"):
            h = engine.runner.hidden_states(x, build_mask("bidirectional", x > -1))
        np.testing.assert_allclose(a.vectors, h[0, :-1].numpy(), atol=1e-5)
    finally:
        meta.training = saved


# ---------------------------------------------------------------- prompted baselines


def test_prompt_templates(tok):
    query = prompts.render_query(["the ", " sat and the ", " ran ."], ["cat"], 1)
    assert query == "the cat sat and the ___ ran ."
    plain_prompt = prompts.build_prompt(query, 5, tok)  # the tiny tokenizer has no chat template
    assert all(text in plain_prompt and answer in plain_prompt for text, answer in prompts.EXAMPLES)
    assert plain_prompt.endswith(f"Text: {query}\nAnswer:")
    assert "Text:" not in prompts.build_prompt(query, 0, tok).split(prompts.INSTRUCTION)[0]
    assert prompts.parse_answer(' "sat"\nmore', "the cat ", " on the mat.") == "sat"
    assert prompts.parse_answer("The cat sat on the mat.", "The cat ", " on the mat.") == "sat"
    assert prompts.parse_answer("Answer: rain", "heavy ", ", so") == "rain"


def _drive_answer(engine, picks: list[int], limit: int, stop: set[int]) -> tuple:
    """_answer_steps fed one-hot logits that make greedy decoding pick `picks` in turn."""
    vocab = len(engine.tokenizer)

    def one_hot(t: int) -> torch.Tensor:
        x = torch.zeros(1, vocab)
        x[0, t] = 1.0
        return x

    s = Sampling().start()
    steps = answer_steps(engine.runner, one_hot(picks[0]), 5, limit, s, stop, [True] * 5)
    try:
        next(steps)
        for t in picks[1:]:
            steps.send(one_hot(t))
    except StopIteration as done:
        return done.value
    raise AssertionError("the answer did not end")


def test_prompted_answer_cut_at_the_limit_says_max_even_after_leading_spaces(
    engine, tok, monkeypatch
):
    """Leading spaces cost steps too: an answer cut at the limit is 'max', not 'stopped'."""
    cat, sat, blank = tok(" cat sat mat", add_special_tokens=False).input_ids
    decode = tok.decode  # the tiny tokenizer has no blank token: let "mat" read as one
    monkeypatch.setattr(tok, "decode", lambda ids, **kw: " " if ids == [blank] else decode(ids))
    text, reason, written = _drive_answer(engine, [blank, cat, sat], limit=3, stop=set())
    assert (text, reason, written) == (decode([cat, sat]), "max", [cat, sat])
    eos = tok.eos_token_id
    text, reason, written = _drive_answer(engine, [cat, eos], limit=3, stop={eos})
    assert (reason, written) == ("end", [cat])


def test_prompted_answers_never_contain_a_special_token(engine, tok):
    """Logits that rank a special token first (then a word): the word is written."""
    vocab = len(engine.tokenizer)
    special = tok.convert_tokens_to_ids("<|im_start|>")
    cat, sat = tok(" cat sat", add_special_tokens=False).input_ids

    def ranked(*ts):
        x = torch.zeros(1, vocab)
        for rank, t in enumerate(ts):
            x[0, t] = 10.0 - rank
        return x

    s = Sampling().start()
    steps = answer_steps(engine.runner, ranked(special, cat), 5, 2, s, set(), [True] * 5)
    next(steps)
    with pytest.raises(StopIteration) as done:
        steps.send(ranked(special, sat))
    text, reason, written = done.value.value
    assert text == tok.decode([cat, sat]) and reason == "max" and written == [cat, sat]


def test_a_prompted_reply_cut_at_the_limit_is_capped_even_when_it_reads_as_joined(
    engine, tok, monkeypatch
):
    """The reply ran on into the right context: shown as 'joined' (the answer was read out of
    it) whether or not the cap cut it; capped says which, and the ids it wrote are kept."""
    from magnet_model.inference import prompted

    ids = tok(" sat on the mat", add_special_tokens=False).input_ids

    def scripted(reason: str):
        def reply(runner, logits, pos, limit, s, stop, visible, left="", right="", rules=None):
            return tok.decode(ids), reason, ids
            yield  # a generator, as answer_steps is

        return reply

    for reason, capped in (("max", True), ("end", False)):
        monkeypatch.setattr(prompted, "answer_steps", scripted(reason))
        (span,) = engine.infill_prompted("the cat [blank] on the mat", max_span_tokens=5).spans
        assert (span.text, span.end_reason, span.capped) == ("sat", "joined", capped)
        assert span.written_ids == ids and span.written == len(ids)


def test_prompted_answer_may_not_end_before_it_has_begun(engine, tok):
    """A reply that copies the text before the blank and then wants to stop (or a preamble
    followed by a line break) would leave the blank empty: that end is refused and the
    model's next choice is written."""
    eos = tok.eos_token_id
    the, cat, sat = tok("the cat sat", add_special_tokens=False).input_ids
    plan = {(5, the): [cat], (6, cat): [eos, sat], (7, sat): [eos]}
    text, reason, written = drive_reply(engine, [the], plan, "the cat ", " on the mat .", [])
    assert (reason, len(written)) == ("end", 3)
    assert prompts.read_answer(text, "the cat ", " on the mat .") == ("sat", False)


def test_prompted_reply_that_skips_the_blank_is_written_again(engine, tok):
    """The reply runs straight into the text after the blank (nothing for the blank): it is
    written again from the start, where the answer may not begin with the first token of the
    text after the blank; the first attempt's keys are hidden."""
    eos = tok.eos_token_id
    on, the, mat, sat = tok("on the mat sat", add_special_tokens=False).input_ids
    plan = {(5, on): [the], (6, the): [mat], (5, sat): [eos]}
    visible = [True] * 5
    text, reason, written = drive_reply(engine, [on, sat], plan, "the cat ", " on the mat", visible)
    assert (text, reason, len(written)) == ("sat", "end", 1)
    assert visible == [True] * 5 + [False] * 2 + [True]  # on, the: hidden (mat joined, unfed)


def test_prompted_chat_reply_is_asked_again_up_to_the_attempts_allowed(engine, tok, monkeypatch):
    """A reply that talks about the task instead of filling the blank ("the given sentence",
    as "I'm ready to help" or "SmolLM." do on the real model) is written again, up to ASKS
    attempts in all: each new reply starts with the words before the blank (fed as prompt: the
    plan's (5, a) is that feed), and its answer may not begin with a token that began an
    earlier chat reply. Played with three attempts (the default allows more)."""
    from magnet_model.inference import prompted

    assert ASKS >= 3
    monkeypatch.setattr(prompted, "ASKS", 3)
    eos = tok.eos_token_id
    ids = tok("the given sentence sat a this it is", add_special_tokens=False).input_ids
    the, given, sentence, sat, a, this, it, is_ = ids
    chat = {(5, the): [given], (6, given): [sentence], (7, sentence): [eos]}
    plan = chat | {(5, a): [the, sat], (7, sat): [eos]}
    text, reason, written = drive_reply(engine, [the], plan, "a dog ", " on the mat .", [])
    assert (text, reason, len(written)) == ("sat", "end", 1)
    # a second chat reply ("this given sentence") is asked again too; the third answers
    again = {(7, this): [given], (8, given): [sentence], (9, sentence): [eos], (7, sat): [eos]}
    plan = chat | again | {(5, a): [the, this, sat]}
    text, _, _ = drive_reply(engine, [the], plan, "a dog ", " on the mat .", [])
    assert text == "sat"
    # a chat reply at the last attempt is kept (the checks before a study flag it)
    third = {(7, it): [is_], (8, is_): [a], (9, a): [sentence], (10, sentence): [eos]}
    plan = chat | again | third | {(5, a): [the, this, it]}
    text, _, _ = drive_reply(engine, [the], plan, "a dog ", " on the mat .", [])
    assert text == "it is a sentence"


def test_prompted_reply_preamble_is_stripped():
    left, right = "After the winter, the farmer walked out to ", " before the rain came."
    for reply in ("Sure! Here is the missing text: the fields", "Certainly. the fields"):
        assert prompts.read_answer(reply, left, right) == ("the fields", False)
    assert prompts.is_chat_reply("I'm ready to help. What's your next question?", left + right)
    assert prompts.is_chat_reply("SmolLM.", left + right)
    assert not prompts.is_chat_reply("the fields", left + right)


def test_prompted_answer_of_quotes_alone_is_empty():
    """A stray quote left from a copied context is not an answer, nor part of one."""
    left, right = 'He said "stop." ', " Then he left."
    assert prompts.read_answer('"', left, right) == ("", False)
    assert prompts.read_answer('" She ran.', left, right) == ("She ran.", False)
    assert prompts.read_answer("students' books", "the ", " are here") == ("students' books", False)


def test_prompted_reply_running_into_the_right_context_is_joined():
    assert prompts.read_answer("sat on the mat . the dog", "the cat ", " on the mat .") == (
        "sat",
        True,
    )
    assert prompts.read_answer("sat", "the cat ", " on the mat .") == ("sat", False)


def test_infill_prompted_returns_spans_in_place(engine):
    for shots, name in [(0, "zero-shot"), (5, "five-shot")]:
        r = engine.infill_prompted(
            "the cat [blank] on the [blank] .", shots=shots, max_span_tokens=3
        )
        assert r.system == name and r.adapter == "base" and len(r.spans) == 2
        assert all(r.filled[s.start : s.end] == s.text.strip() for s in r.spans)
        assert r.filled.startswith("the cat ") and r.filled.endswith(" .")


def test_assemble_keeps_spacing_and_offsets():
    filled, offs = assemble(["The cat", " on the", "."], [" ", " "], [" sat", "mat "])
    assert filled == "The cat sat on the mat ."
    assert [filled[a:b] for a, b in offs] == ["sat", "mat"]


def test_sampling_draws_from_a_cpu_generator_whatever_the_device():
    """A seed means the same on CPU and CUDA: the generator lives on the CPU, not on the model's
    device (a CUDA generator gives another stream; Sampling knows no device at all), and the
    draw is the CPU generator's."""
    s = Sampling(True, 1.3, 0.9, 11).start()
    assert s.generator.device.type == "cpu" and s.seed == 11
    logits = torch.randn(3, 50, generator=torch.Generator().manual_seed(0))
    for top_p in (1.0, 0.9):
        s = Sampling(True, 1.3, top_p, 11).start()
        got = s.pick(logits)
        probs = torch.softmax(logits / 1.3, dim=-1)
        if top_p < 1.0:
            sp, idx = probs.sort(dim=-1, descending=True)
            sp = sp.masked_fill(sp.cumsum(-1) - sp > top_p, 0.0)
            probs = torch.zeros_like(probs).scatter(-1, idx, sp)
        want = torch.multinomial(probs, 1, generator=torch.Generator().manual_seed(11))
        assert got.tolist() == want.squeeze(-1).tolist() and got.device == logits.device


def test_a_seeded_output_is_the_cpu_generators_draw(engine, monkeypatch):
    """Replaying the engine's own probabilities through a fresh CPU generator with the shown
    seed gives the same tokens: the seed alone reproduces a sampled output."""
    seen = []
    real = Sampling.pick

    def spy(s, logits):
        out = real(s, logits)
        seen.append((logits.detach().clone(), out.tolist()))
        return out

    monkeypatch.setattr(Sampling, "pick", spy)
    kw = dict(seed=5, do_sample=True, temperature=1.5)
    calls = [
        (lambda: engine.generate("the cat", max_new_tokens=8, **kw), lambda r: r.token_ids),
        (lambda: engine.infill(TEXT, max_span_tokens=6, **kw), ids_of),
    ]
    for call, ids in calls:
        seen.clear()
        first = ids(call())
        replay, gen = list(seen), torch.Generator().manual_seed(5)
        assert replay
        for logits, picked in replay:
            probs = torch.softmax(logits.float() / 1.5, dim=-1)
            assert torch.multinomial(probs, 1, generator=gen).squeeze(-1).tolist() == picked
        assert ids(call()) == first


def test_fill_guard_stops_a_loop_inside_a_fill_and_can_be_turned_off(engine, tok):
    ids = lambda s: tok(s, add_special_tokens=False).input_ids  # noqa: E731
    cat, sat, on, dog = ids("cat sat on dog")
    # a model that wants "cat sat on" over and over; its second choice is "dog"
    script = [[cat, dog], [sat, dog], [on, dog]] * 3
    assert engine.runner.magnet_fill.no_repeat == 3  # on by default (ModelSpec)
    got, _ = _scripted(engine, "a [blank]", script, max_span_tokens=7)
    assert got == [cat, sat, on, cat, sat, dog, cat]  # "cat sat on" not twice: dog instead
    engine.config.fill = engine.magnet_fill({"no_repeat": 0})  # off: the model's own loop
    try:
        got, _ = _scripted(engine, "a [blank]", script, max_span_tokens=7)
        assert got == [cat, sat, on, cat, sat, on, cat]
    finally:
        engine.config.fill = None


def test_a_fill_between_sentences_ends_only_where_a_sentence_ends(engine, tok):
    ids = lambda s: tok(s, add_special_tokens=False).input_ids  # noqa: E731
    cat, sat, dot = ids("cat sat .")
    end = engine.runner.roles("magnet").span_end
    # a model that wants to stop after every token; its second choice writes "cat sat ."
    script = [[cat], [end, sat], [end, dot], [end, cat], [end, sat]]
    assert engine.runner.magnet_fill.close_sentences  # on by default (ModelSpec)
    # after a sentence, at the end: whole sentences go there, so it writes to the full stop
    assert _scripted(engine, "the dog ran . [blank]", script) == ([cat, sat, dot], "end")
    # inside a sentence the rule does not apply: the model stops where it likes
    assert _scripted(engine, "the [blank] on the mat .", script) == ([cat], "end")
    # off for this request, or for the engine: the model's own stop
    got = _scripted(engine, "the dog ran . [blank]", script, close_sentences=False)
    assert got == ([cat], "end")
    engine.config.fill = engine.magnet_fill({"close_sentences": False})
    try:
        assert _scripted(engine, "the dog ran . [blank]", script) == ([cat], "end")
    finally:
        engine.config.fill = None
    # no sentence end in sight: the fill runs to a sentence's length (and says so)
    script = [[cat], [end, sat], [end, sat], [end, cat]] + [[end, sat]] * 60
    got = _scripted(
        engine, "the dog ran . [blank]", script, max_span_tokens=4, sentence_tokens=6, no_repeat=0
    )
    assert got == ([cat, sat, sat, cat, sat, sat], "max")
    with pytest.raises(InputError, match="fill_close_sentences must be true or false"):
        engine.infill("the dog ran . [blank]", fill={"close_sentences": "yes"})


def test_a_blank_between_sentences_runs_past_the_span_cap_until_its_sentence_ends(engine, tok):
    """The span cap (the demo's slider) caps blanks inside a sentence; a removed sentence
    comes back whole up to MagnetFill.sentence_tokens (64 by default), the cap alone only with
    sentence_tokens 0."""
    ids = lambda s: tok(s, add_special_tokens=False).input_ids  # noqa: E731
    cat, sat, dot = ids("cat sat .")
    end = engine.runner.roles("magnet").span_end
    script = [[cat], [sat], [sat], [sat], [end, dot], [end, cat]]
    got = _scripted(engine, "the dog ran . [blank]", script, max_span_tokens=2, no_repeat=0)
    assert got == ([cat, sat, sat, sat, dot], "end")
    got = _scripted(engine, "the dog ran . [blank]", script, max_span_tokens=2, sentence_tokens=0)
    assert got == ([cat, sat], "max")
    # inside a sentence the cap holds
    assert _scripted(engine, "the [blank] sat .", script, max_span_tokens=2)[0] == [cat, sat]
    # the engine's call, end to end: a long enough fill for a blank between sentences
    job = infill_job(engine.runner, "the dog ran . [blank]", "[blank]", "magnet", 2, None)
    assert job.limits == [64]


def test_a_blank_stands_between_sentences_after_an_end_and_before_a_capital():
    from magnet_model.units import between_sentences

    assert between_sentences("It rained. ", " The roads flooded.")
    assert between_sentences("", "The roads flooded.")  # the first sentence
    assert between_sentences("It rained.", "")  # the last one
    assert between_sentences("Heading\n", "Then it rained.")
    assert between_sentences('He said: "Go." ', '"Now," she said.')
    assert between_sentences("It rained.", "1998 was wet.")
    assert not between_sentences("It rained", " The roads flooded.")
    assert not between_sentences("It rained.", " and the roads flooded.")
    assert not between_sentences("", "")  # a blank alone: nothing says what it holds


def test_fill_guard_bans_what_completes_a_repeat_but_never_a_word_continuation():
    from magnet_model.inference.guard import repeat_bans, word_continuations

    assert repeat_bans([1, 2, 3, 1, 2], 3) == [3]
    assert repeat_bans([1, 2, 3, 1, 2], 0) == []
    assert repeat_bans([1, 2, 1, 2, 1, 2], 3) == [1]
    assert repeat_bans([5, 5], 2) == [5]
    assert repeat_bans([1, 2, 3, 1, 2], 3, exempt=[False, False, False, True]) == []
    # a word said twice may not come a third time ("spokesman spokesman spokesman"), unless it
    # continues a word (the digits of "1999")
    assert repeat_bans([4, 7, 7], 3) == [7]
    assert repeat_bans([4, 7, 7], 3, exempt=[False] * 7 + [True]) == []
    assert repeat_bans([4, 7, 7], 0) == []

    from tokenizers import Tokenizer, decoders, models, pre_tokenizers
    from transformers import PreTrainedTokenizerFast

    vocab = {"Ġthe": 0, "ĠLM": 1, "L": 2, ",": 3, "Ġ,": 4, "ML": 5, "âĢĿ": 6, "Ċ": 7, "âĢ": 8}
    bpe = Tokenizer(models.BPE(vocab=vocab, merges=[]))
    bpe.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    bpe.decoder = decoders.ByteLevel()
    cont = word_continuations(PreTrainedTokenizerFast(tokenizer_object=bpe))
    # "L" and "ML" continue a word (never banned: no made-up words); ",": punctuation is banned,
    # and so are the closing quote and the newline, whose byte-level strings ("âĢĿ", "Ċ") look
    # like letters; a piece of one character ("âĢ", two of the quote's three bytes) is not cut
    assert cont == [False, False, True, False, False, True, False, False, True]
    assert word_continuations(make_tiny_tokenizer()) == [False] * len(make_tiny_tokenizer())


def test_a_continuation_can_be_guarded_against_loops_and_is_not_by_default(engine):
    def repeated(ids):
        grams = [tuple(ids[i : i + 3]) for i in range(len(ids) - 2)]
        return len(grams) - len(set(grams))

    free = engine.generate("the cat", "magnet", max_new_tokens=60)
    assert repeated(free.token_ids) > 0  # the raw tiny model loops, greedy
    guarded = engine.generate("the cat", "magnet", max_new_tokens=60, no_repeat=3)
    assert repeated(guarded.token_ids) == 0 and len(guarded.token_ids) > 3
    streamed = list(engine.compare_continue("the cat", ["magnet"], 60, no_repeat=3))[-1]
    assert streamed[0][0] == guarded.text
    with pytest.raises(InputError, match="no_repeat must be a whole number"):
        engine.generate("the cat", max_new_tokens=5, no_repeat=-1)


def test_an_unknown_decoding_setting_is_one_sentence_naming_the_known_ones(engine):
    with pytest.raises(InputError, match="MagnetFill has no setting 'branch'; its settings are"):
        engine.infill("the cat [blank] on the mat .", fill={"branch": 2})
    with pytest.raises(InputError, match="FillSettings has no setting 'max_span'"):
        engine.compare_infill("the cat [blank] on the mat .", ["magnet"], max_span=4)
    with pytest.raises(InputError, match="ContinueSettings has no setting 'no_repeats'"):
        engine.generate("the cat", max_new_tokens=4, no_repeats=3)
