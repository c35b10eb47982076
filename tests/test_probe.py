"""The CoNLL probe: word -> first sub-token alignment, batched token vectors equal to the
engine's own embed_tokens, and the probe's scores on features with a known answer."""

from __future__ import annotations

import numpy as np
import pytest
from tiny_models import tiny_engine

from magnet_model.data import ConllSentence
from magnet_model.evaluation import probe


@pytest.fixture(scope="module")
def engine():
    return tiny_engine()


def test_first_subtokens_with_byte_level_offsets():
    # "Hello world, EU" as byte-level BPE splits it: Hello | Ġworld | , | ĠE | U
    text, starts = probe.word_starts(["Hello", "world,", "EU"])
    assert text == "Hello world, EU" and starts == [0, 6, 13]
    offsets = [(0, 5), (5, 11), (11, 12), (12, 14), (14, 15)]
    assert probe.first_subtokens(offsets, starts) == [0, 1, 3]


def test_first_subtokens_with_word_level_offsets_and_truncation():
    offsets = [(0, 3), (4, 7), (7, 8)]  # "the cat." -> the | cat | .   (then truncated)
    assert probe.first_subtokens(offsets, [0, 4, 7, 9]) == [0, 1, 2, -1]


@pytest.mark.parametrize("adapter", [None, "magnet", "llm2vec"])
def test_batched_token_vectors_equal_embed_tokens(engine, adapter):
    texts = ["the cat sat on the mat .", "a dog", "the old king ran to the river , then the sea"]
    batched = probe.token_vectors(engine, texts, adapter, batch_size=2)
    for text, (offsets, vecs) in zip(texts, batched, strict=True):
        one = engine.embed_tokens(text, adapter=adapter)
        assert offsets == one.offsets
        np.testing.assert_allclose(vecs, one.vectors, rtol=1e-4, atol=1e-5)


def test_word_features_take_one_vector_per_word(engine):
    sents = probe.conll_subset("train", 12, seed=0)
    x, tags = probe.word_features(engine, sents, "magnet", batch_size=5)
    n_words = sum(len(s.words) for s in sents)
    assert x.shape == (n_words, engine.runner.hidden_size)
    assert tags["pos"] == [t for s in sents for t in s.pos]
    assert tags["ner"] == [t for s in sents for t in s.ner]
    # the first word of the first sentence is its first token's vector
    first = engine.embed_tokens(" ".join(sents[0].words), adapter="magnet").vectors[0]
    np.testing.assert_allclose(x[0], first, rtol=1e-4, atol=1e-5)


def test_conll_subset_is_seeded_and_ordered():
    a, b = probe.conll_subset("test", 30, seed=0), probe.conll_subset("test", 30, seed=0)
    c = probe.conll_subset("test", 30, seed=1)
    assert a == b and a != c and len(a) == 30
    everything = probe.conll_subset("test", 10**9, seed=0)
    rest = iter(everything)  # a is a subsequence of the file (duplicates make index() useless)
    assert all(any(s == e for e in rest) for s in a)


def test_probe_learns_a_linear_signal_and_scores_ner_without_o():
    rng = np.random.default_rng(0)
    tags = np.array(["O", "B-PER", "I-PER", "B-LOC"])
    y = rng.integers(0, 4, 400)
    x = rng.normal(size=(400, 16))
    x[np.arange(400), y] += 4.0  # the tag is written in one coordinate: linearly separable
    good = probe.fit_and_score("ner", x[:300], list(tags[y[:300]]), x[300:], list(tags[y[300:]]))
    assert good.accuracy > 0.95 and good.f1 > 0.95 and good.classes == 4
    noise = rng.normal(size=(400, 16))
    bad = probe.fit_and_score(
        "ner", noise[:300], list(tags[y[:300]]), noise[300:], list(tags[y[300:]])
    )
    assert bad.accuracy < 0.5 and bad.f1 < good.f1
    assert bad.train_words == 300 and bad.test_words == 100


def test_probe_with_one_class_predicts_it():
    x = np.zeros((5, 3))
    score = probe.fit_and_score("pos", x, ["NN"] * 5, x[:2], ["NN", "VB"])
    assert score.accuracy == 0.5 and score.f1 is None


def test_run_probe_on_the_tiny_engine(engine):
    train = [ConllSentence(("the", "cat"), ("DT", "NN"), ("B-NP", "I-NP"), ("O", "O"))] * 3
    train += [ConllSentence(("paris",), ("NNP",), ("B-NP",), ("B-LOC",))] * 3
    test = [ConllSentence(("the", "paris"), ("DT", "NNP"), ("B-NP", "I-NP"), ("O", "B-LOC"))]
    scores = probe.run_probe(engine, train, test, "llm2vec")
    assert set(scores) == {"pos", "chunk", "ner"}
    assert scores["pos"].train_words == 9 and scores["pos"].test_words == 2
    assert all(0.0 <= s.accuracy <= 1.0 for s in scores.values())
