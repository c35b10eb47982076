"""Property tests of the 4-D masks on a tiny random Llama.

Change one input token and see which outputs move: exactly those the mask lets the token
reach (through every layer) must change, and no other. Rows of a batch have mixed lengths,
padded left or right, so padding handling is exercised too.
"""

from __future__ import annotations

import random

import pytest
import torch
from tiny_models import make_tiny_llama

from magnet_model.layout import build_hybrid
from magnet_model.masks import allowed_mask, build_mask, position_ids_for
from magnet_model.tokens import choose_token_roles

CHANGED = 1e-4  # an output that the token reaches moves by more than this
SAME = 2e-5  # an output it cannot reach stays equal up to float noise (sdpa online softmax)


@pytest.fixture(scope="module")
def tok():
    from tiny_models import make_tiny_tokenizer

    return make_tiny_tokenizer()


@pytest.fixture(scope="module", params=["sdpa", "eager"])
def model(request, tok):
    # A larger init than the default makes every reachable change clearly visible.
    return make_tiny_llama(len(tok), attn_implementation=request.param, initializer_range=0.3)


def pad_rows(rows: list[list[int]], side: str, value: int = 0) -> torch.Tensor:
    width = max(len(r) for r in rows)
    out = []
    for r in rows:
        fill = [value] * (width - len(r))
        out.append(fill + r if side == "left" else r + fill)
    return torch.tensor(out)


def hybrid_row(rng: random.Random, roles, words: list[int]) -> tuple[list[int], list[int], list]:
    """A random hybrid layout: 1-2 spans cut from a random text, as training builds it."""
    n = rng.randint(8, 14)
    text = [rng.choice(words) for _ in range(n)]
    start = rng.randint(0, 3)
    end = start + rng.randint(1, 3)
    if rng.random() < 0.5 and end + 2 < n:
        cuts = [(start, end), (end + 1, min(n, end + 1 + rng.randint(1, 3)))]
    else:
        cuts = [(start, end)]
    pieces, spans, prev = [], [], 0
    for a, b in cuts:
        pieces.append(text[prev:a])
        spans.append(text[a:b])
        prev = b
    pieces.append(text[prev:])
    seq = build_hybrid(pieces, spans, roles, bos=1, with_end=False)
    return seq.input_ids, seq.segments, seq.position_ids


def reach(allowed: torch.Tensor, layers: int) -> torch.Tensor:
    """reach[b, q, k]: output q depends on input k through `layers` attention hops."""
    a = allowed[:, 0].float()
    r = a.clone()
    for _ in range(layers - 1):
        r = ((r @ a) > 0).float()
    return r > 0


def outputs(model, ids, attention_mask, mode, segments=None, position_ids=None):
    mask = build_mask(mode, attention_mask, segments, torch.float32)
    if position_ids is None:
        position_ids = position_ids_for(attention_mask)
    with torch.no_grad():
        out = model.model(input_ids=ids, attention_mask=mask, position_ids=position_ids)
    return out.last_hidden_state


def check_one_token_changes(model, ids, attention_mask, mode, segments=None, position_ids=None):
    """For every (row, position): perturb that token, compare all outputs to the reach set."""
    expected = reach(allowed_mask(mode, attention_mask, segments), model.config.num_hidden_layers)
    b, n = ids.shape
    extra = (attention_mask, segments, position_ids)
    for row in range(b):
        # one forward: row 0 unchanged, row 1 + j has token j perturbed (same kernels for all)
        batch = ids[row].repeat(n + 1, 1)
        idx = torch.arange(n)
        batch[idx + 1, idx] = (batch[idx + 1, idx] + 17) % model.config.vocab_size
        am, seg, pos = (None if t is None else t[row].repeat(n + 1, 1) for t in extra)
        out = outputs(model, batch, am, mode, seg, pos)
        diff = (out[1:] - out[0]).abs().amax(-1)  # (changed position j, output q)
        want = expected[row].T  # want[j, q]: q reaches j
        assert (diff[want] > CHANGED).all(), f"{mode}: a reachable output did not change"
        assert (diff[~want] < SAME).all(), f"{mode}: an output changed that the mask hides"
    return expected


@pytest.mark.parametrize("side", ["left", "right"])
def test_causal_nothing_influences_the_past(model, side):
    ids = pad_rows([[5, 11, 33, 37, 20, 34, 16], [11, 35, 39]], side, value=2)
    am = pad_rows([[1] * 7, [1] * 3], side)
    expected = check_one_token_changes(model, ids, am, "causal")
    real = am.bool()
    for row in range(2):
        pos = torch.nonzero(real[row]).flatten()
        # among real tokens: q reaches k iff k <= q
        sub = expected[row][pos][:, pos]
        assert torch.equal(sub, torch.ones_like(sub).tril())


@pytest.mark.parametrize("side", ["left", "right"])
def test_bidirectional_every_real_token_reaches_every_real_token(model, side):
    ids = pad_rows([[5, 11, 33, 37, 20, 34], [11, 35, 39, 40]], side, value=2)
    am = pad_rows([[1] * 6, [1] * 4], side)
    expected = check_one_token_changes(model, ids, am, "bidirectional")
    for row in range(2):
        real = am[row].bool()
        assert expected[row][real][:, real].all()
        assert not expected[row][real][:, ~real].any()  # padding reaches no real output


@pytest.mark.parametrize("side", ["left", "right"])
@pytest.mark.parametrize("seed", [0, 1, 2])
def test_hybrid_span_tokens_never_reach_context_or_other_spans(model, tok, side, seed):
    rng = random.Random(seed)
    roles = choose_token_roles(tok)
    words = list(range(11, 100))
    rows = [hybrid_row(rng, roles, words) for _ in range(2)]
    ids = pad_rows([r[0] for r in rows], side, value=roles.pad)
    am = pad_rows([[1] * len(r[0]) for r in rows], side)
    seg = pad_rows([r[1] for r in rows], side)
    pos = pad_rows([r[2] for r in rows], side)
    expected = check_one_token_changes(model, ids, am, "hybrid", seg, pos)
    for row in range(2):
        real, s = am[row].bool(), seg[row]
        context = real & (s == 0)
        for k in range(1, int(s.max()) + 1):
            span = real & (s == k)
            others = real & (s > 0) & (s != k)
            e = expected[row]
            assert not e[context][:, span].any(), "a span token reached a context output"
            assert not e[others][:, span].any(), "a span token reached another span"
            assert e[span][:, context].all(), "span tokens must read all context"
            sub = e[span][:, span]
            assert torch.equal(sub, torch.ones_like(sub).tril()), "spans are causal"
        assert e[context][:, context].all(), "context is bidirectional"


def test_four_d_causal_mask_reproduces_the_models_own_causal_attention(model):
    ids = torch.tensor([[5, 11, 33, 37, 20, 34]])
    am = torch.ones_like(ids)
    ours = outputs(model, ids, am, "causal")
    with torch.no_grad():
        theirs = model.model(input_ids=ids, attention_mask=am).last_hidden_state
    torch.testing.assert_close(ours, theirs, atol=1e-5, rtol=1e-5)
