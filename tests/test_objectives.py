"""The losses: finite, gradients only where the masks allow, and they go down in training."""

from __future__ import annotations

import math
import random

import pytest
import torch
from tiny_models import TINY_CORPUS as CORPUS
from tiny_models import make_tiny_llama, make_tiny_tokenizer

from magnet_model.errors import ConfigError
from magnet_model.layout import IGNORE
from magnet_model.pooling import pool
from magnet_model.tokens import choose_token_roles
from magnet_model.training.objectives import (
    attention_dropout,
    decoder_parts,
    info_nce,
    masked_view_losses,
    masked_view_terms,
    sscl_loss,
    structure_loss,
    token_loss,
)
from magnet_model.training.views import (
    ViewConfig,
    collate_masked,
    collate_sentences,
    masked_example,
    replacement_vocab,
)


@pytest.fixture(scope="module")
def tok():
    return make_tiny_tokenizer()


@pytest.fixture(scope="module")
def roles(tok):
    return choose_token_roles(tok)


@pytest.fixture(scope="module")
def corpus_ids(tok):
    return [tok(t).input_ids for t in CORPUS]


def masked_batch(tok, roles, corpus_ids, seed=0, mntp=True, msg=True):
    rng = random.Random(seed)
    vocab = replacement_vocab(len(tok), roles, set(tok.all_special_ids))
    cfg = ViewConfig(max_spans=2)
    exs = [masked_example(ids, roles, vocab, cfg, rng, mntp=mntp, msg=msg) for ids in corpus_ids]
    return collate_masked(exs, roles.pad)


def sentence_batch(tok, roles, corpus_ids):
    instruction = tok("given the sentence , find its representation :").input_ids
    return collate_sentences(corpus_ids, corpus_ids, instruction, roles)


class EmbeddingGrads:
    """Keeps the input embeddings of the next forward so their gradient can be read."""

    def __init__(self, model):
        self.out = None
        decoder, _ = decoder_parts(model)
        self.handle = decoder.embed_tokens.register_forward_hook(self.hook)

    def hook(self, _module, _inputs, out):
        out.retain_grad()
        self.out = out

    def per_token(self) -> torch.Tensor:
        self.handle.remove()
        return self.out.grad.abs().amax(-1)  # (B, T)


def test_losses_are_finite_and_near_log_vocab_on_a_random_model(tok, roles, corpus_ids):
    model = make_tiny_llama(len(tok))
    losses = masked_view_losses(model, masked_batch(tok, roles, corpus_ids))
    assert set(losses) == {"mntp", "msg"}
    for loss in losses.values():
        assert math.isfinite(loss.item())
        assert abs(loss.item() - math.log(len(tok))) < 1.0
    model.train()
    with attention_dropout(model, 0.3):
        sscl = sscl_loss(model, sentence_batch(tok, roles, corpus_ids))
    assert math.isfinite(sscl.item()) and sscl.item() >= 0


def test_lm_head_sees_only_labelled_positions(tok, roles, corpus_ids):
    model = make_tiny_llama(len(tok))
    batch = masked_batch(tok, roles, corpus_ids)
    rows = []
    _, head = decoder_parts(model)
    handle = head.register_forward_hook(lambda _m, inputs, _o: rows.append(inputs[0].shape[0]))
    masked_view_losses(model, batch)
    handle.remove()
    assert rows == [(batch.mntp_labels != IGNORE).sum(), (batch.msg_labels != IGNORE).sum()]
    assert sum(rows) < batch.input_ids.numel() / 2


def test_mntp_gradient_never_reaches_span_tokens_or_padding(tok, roles, corpus_ids):
    model = make_tiny_llama(len(tok))
    batch = masked_batch(tok, roles, corpus_ids)
    grads = EmbeddingGrads(model)
    masked_view_losses(model, batch)["mntp"].backward()
    g = grads.per_token()
    real = batch.attention_mask.bool()
    assert (g[real & (batch.segments > 0)] == 0).all(), "context never attends to spans"
    assert (g[~real] == 0).all(), "padding is never attended to"
    assert (g[real & (batch.segments == 0)] > 0).all(), "bidirectional context: all of it"


def test_msg_gradient_of_one_span_never_reaches_another_span(tok, roles, corpus_ids):
    model = make_tiny_llama(len(tok))
    batch = masked_batch(tok, roles, corpus_ids, seed=1, mntp=False)
    assert (batch.segments == 2).any(), "the batch needs texts with two spans"
    only_span1 = batch.msg_labels.masked_fill(batch.segments != 1, IGNORE)
    batch.msg_labels = only_span1
    grads = EmbeddingGrads(model)
    masked_view_losses(model, batch)["msg"].backward()
    g = grads.per_token()
    real = batch.attention_mask.bool()
    assert (g[real & (batch.segments == 2)] == 0).all()
    assert (g[~real] == 0).all()
    assert (g[real & (batch.segments <= 1)] > 0).all()


def test_sscl_gradient_reaches_every_real_token_and_no_padding(tok, roles, corpus_ids):
    model = make_tiny_llama(len(tok))
    batch = sentence_batch(tok, roles, corpus_ids)
    grads = EmbeddingGrads(model)
    sscl_loss(model, batch, mode="bidirectional", pooling="last").backward()
    g = grads.per_token()
    real = batch.attention_mask.bool()
    assert (g[real] > 0).all()
    assert (g[~real] == 0).all()


def test_last_pooling_takes_the_sentence_end_state_of_each_row(tok, roles, corpus_ids):
    batch = sentence_batch(tok, roles, corpus_ids)
    hidden = torch.randn(*batch.input_ids.shape, 8, requires_grad=True)
    z = pool(hidden, batch.pool_mask, "last")
    z.sum().backward()
    last = batch.attention_mask.sum(1) - 1  # right padding: <sentence_end> is the last real one
    picked = hidden.grad.abs().sum(-1).nonzero()
    assert picked[:, 1].tolist() == last.tolist()
    assert (batch.input_ids[torch.arange(len(last)), last] == roles.sentence_end).all()


def test_mean_pooling_averages_pooled_tokens_only():
    hidden = torch.arange(12.0).reshape(1, 4, 3)
    pooled = pool(hidden, torch.tensor([[0, 1, 1, 0]]), "mean")
    torch.testing.assert_close(pooled, hidden[0, 1:3].mean(0, keepdim=True))
    with pytest.raises(ValueError):
        pool(hidden, torch.tensor([[0, 1, 1, 0]]), "cls")


def test_info_nce_matches_its_formula():
    torch.manual_seed(0)
    z1, z2 = torch.randn(4, 6), torch.randn(4, 6)
    a = torch.nn.functional.normalize(z1, dim=-1)
    b = torch.nn.functional.normalize(z2, dim=-1)
    logits = a @ b.T / 0.05
    manual = -(logits.diag() - logits.logsumexp(1)).mean()
    torch.testing.assert_close(info_nce(z1, z2, 0.05), manual)
    assert info_nce(torch.eye(4), torch.eye(4)).item() < 1e-6  # own positive, far negatives


def test_token_loss_is_none_without_labels():
    hidden = torch.randn(2, 3, 4)
    assert token_loss(hidden, torch.full((2, 3), IGNORE), torch.nn.Linear(4, 5)) is None


def test_attention_dropout_makes_two_passes_differ_and_is_restored(tok, roles, corpus_ids):
    model = make_tiny_llama(len(tok))
    model.train()
    batch = sentence_batch(tok, roles, corpus_ids)
    # without dropout (config 0) the two halves (x, x) embed identically: loss is minimal
    with torch.no_grad():
        z0 = sscl_loss(model, batch)
        with attention_dropout(model, 0.3) as n:
            assert n == model.config.num_hidden_layers
            z1 = sscl_loss(model, batch)
    assert z1.item() > z0.item()
    attn = decoder_parts(model)[0].layers[0].self_attn
    assert attn.attention_dropout == 0.0


def test_attention_dropout_reaches_an_int_setting_and_refuses_a_model_without_one(
    tok, roles, corpus_ids
):
    model = make_tiny_llama(len(tok))
    attns = [layer.self_attn for layer in decoder_parts(model)[0].layers]
    for a in attns:
        a.attention_dropout = 0  # an int in a config: still an attention dropout setting
    with attention_dropout(model, 0.3) as n:
        assert n == len(attns) and all(a.attention_dropout == 0.3 for a in attns)
    assert all(a.attention_dropout == 0 for a in attns)
    for a in attns:
        del a.attention_dropout  # a model whose attention has no such setting
    with pytest.raises(ConfigError, match="dropout noise"), attention_dropout(model, 0.3):
        pass
    with attention_dropout(model, 0.0) as n:  # no noise asked for (paraphrase positives)
        assert n == 0


def test_span_end_weight_weighs_the_end_target_and_logs_its_nll(tok, roles, corpus_ids):
    model = make_tiny_llama(len(tok))
    batch = masked_batch(tok, roles, corpus_ids)
    n_end = int((batch.msg_labels == roles.span_end).sum())
    n_msg = int((batch.msg_labels != IGNORE).sum())
    assert 0 < n_end < n_msg
    with torch.no_grad():
        plain = masked_view_losses(model, batch)
        one = masked_view_losses(model, batch, end_token=roles.span_end, end_weight=1.0)
        five = masked_view_losses(model, batch, end_token=roles.span_end, end_weight=5.0)
    assert "msg_end" not in plain
    torch.testing.assert_close(one["msg"], plain["msg"])  # weight 1: the plain mean
    # the weighted mean: (sum_other + 5 * sum_end) / (n_other + 5 * n_end)
    end_sum = one["msg_end"] * n_end
    other_sum = one["msg"] * n_msg - end_sum
    expected = (other_sum + 5 * end_sum) / (n_msg - n_end + 5 * n_end)
    torch.testing.assert_close(five["msg"], expected)
    torch.testing.assert_close(five["msg_end"], one["msg_end"])


def test_masked_view_terms_split_two_halves_into_sums_that_add_up(tok, roles, corpus_ids):
    """What ranks do: each half's sums and counts, added, give the whole batch's means."""
    model = make_tiny_llama(len(tok))
    batch = masked_batch(tok, roles, corpus_ids)
    half = batch.input_ids.shape[0] // 2
    parts = [
        type(batch)(**{k: v[rows] for k, v in vars(batch).items()})
        for rows in (slice(0, half), slice(half, None))
    ]
    kw = {"end_token": roles.span_end, "end_weight": 3.0}
    with torch.no_grad():
        whole = masked_view_losses(model, batch, **kw)
        terms = [masked_view_terms(model, part, **kw) for part in parts]
    assert set(whole) == {"mntp", "msg", "msg_end"}
    for k, mean in whole.items():
        total = sum(t[k][0] for t in terms if k in t)
        count = sum(t[k][1] for t in terms if k in t)
        torch.testing.assert_close(total / count, mean, rtol=1e-5, atol=1e-6)


def test_info_nce_with_gathered_negatives_is_the_whole_batch_loss():
    """Each rank's queries against every rank's positives: the mean over ranks is the loss of
    the whole batch in one process."""
    torch.manual_seed(0)
    z1, z2 = torch.randn(6, 8), torch.randn(6, 8)
    whole = info_nce(z1, z2, 0.1)
    every = torch.nn.functional.normalize(z2, dim=-1)
    parts = [
        info_nce(z1[r : r + 3], z2[r : r + 3], 0.1, gather=lambda _: every, offset=r)
        for r in (0, 3)
    ]
    torch.testing.assert_close((parts[0] + parts[1]) / 2, whole)
    alone = info_nce(z1[:3], z2[:3], 0.1)  # without the other rank's negatives: another loss
    assert not torch.isclose(alone, parts[0])


def train_steps(model, loss_fn, steps=40, lr=1e-2) -> list[float]:
    torch.manual_seed(0)
    model.train()
    opt = torch.optim.AdamW(model.parameters(), lr=lr)
    history = []
    for step in range(steps):
        loss = loss_fn(step)
        opt.zero_grad()
        loss.backward()
        opt.step()
        history.append(loss.item())
    return history


def went_down(history: list[float], factor: float) -> bool:
    return sum(history[-5:]) / 5 < factor * sum(history[:5]) / 5


@pytest.mark.parametrize("name", ["mntp", "msg"])
def test_token_losses_go_down_on_a_tiny_corpus(tok, roles, corpus_ids, name):
    model = make_tiny_llama(len(tok))

    def loss_fn(step):
        batch = masked_batch(tok, roles, corpus_ids, seed=step % 4)  # 4 views of each text
        return masked_view_losses(model, batch)[name]

    history = train_steps(model, loss_fn)
    assert went_down(history, 0.65), history


def test_sscl_loss_goes_down_on_a_tiny_corpus(tok, roles, corpus_ids):
    model = make_tiny_llama(len(tok))
    batch = sentence_batch(tok, roles, corpus_ids)

    def loss_fn(step):
        with attention_dropout(model, 0.3):
            return sscl_loss(model, batch)

    history = train_steps(model, loss_fn)
    assert went_down(history, 0.5), history


def test_losses_run_under_bf16_autocast_as_on_gpu(tok, roles, corpus_ids):
    """The trainer's CUDA path (bf16 autocast, bf16 4-D mask), exercised with CPU autocast."""
    model = make_tiny_llama(len(tok))
    model.train()
    with torch.autocast("cpu", dtype=torch.bfloat16):
        losses = masked_view_losses(
            model, masked_batch(tok, roles, corpus_ids), "hybrid", torch.bfloat16
        )
        with attention_dropout(model, 0.3):
            losses["sscl"] = sscl_loss(
                model, sentence_batch(tok, roles, corpus_ids), mask_dtype=torch.bfloat16
            )
    for loss in losses.values():
        assert loss.dtype == torch.float32 and math.isfinite(loss.item())
    sum(losses.values()).backward()
    assert all(p.grad is not None for p in model.parameters() if p.requires_grad)


def test_structure_term_reads_which_texts_sit_nearer_which_not_a_shared_direction():
    g = torch.Generator().manual_seed(0)
    anchor = torch.randn(6, 16, generator=g)
    assert structure_loss(anchor.clone(), anchor, 0.05).abs() < 1e-6
    # lengths do not count
    assert structure_loss(anchor * (torch.rand(6, 1, generator=g) + 0.5), anchor, 0.05) < 1e-5
    # the same vectors in another order: every text's neighbours changed
    swapped = structure_loss(anchor[[1, 0, 3, 2, 5, 4]], anchor, 0.05)
    assert swapped > 1.0
    # a direction added to every vector moves each 1 - cos far more than the structure term
    shared = anchor + 3 * anchor.norm(dim=-1).mean() * torch.randn(16, generator=g)
    cos = 1 - torch.nn.functional.cosine_similarity(shared, anchor, dim=-1).mean()
    assert cos > 0.5 and structure_loss(shared, anchor, 1.0) < cos / 10
    # the gradient reaches the run's vectors, never the anchor's
    moved = anchor[[1, 0, 3, 2, 5, 4]].clone().requires_grad_()
    structure_loss(moved, anchor, 0.05).backward()
    assert moved.grad.abs().sum() > 0
    assert structure_loss(anchor[:2], anchor[:2], 0.05) == 0  # no structure in two rows


def test_structure_term_descends_to_the_anchors_neighbourhoods():
    g = torch.Generator().manual_seed(1)
    anchor = torch.randn(8, 16, generator=g)
    moving = torch.randn(8, 16, generator=g).requires_grad_()
    start = structure_loss(moving, anchor, 0.1).item()
    opt = torch.optim.SGD([moving], lr=0.5)
    for _ in range(200):
        opt.zero_grad()
        structure_loss(moving, anchor, 0.1).backward()
        opt.step()
    assert start > 0.5 and structure_loss(moving, anchor, 0.1).item() < start / 20
