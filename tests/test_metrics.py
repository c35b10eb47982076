import pytest

from magnet_model.metrics import (
    distinct_n,
    ngrams,
    rep_n,
    rep_sen,
    repetition_stats,
    split_sentences,
)


def test_ngrams_of_words_and_ids():
    assert ngrams("a b c", 2) == [("a", "b"), ("b", "c")]
    assert ngrams([1, 2, 3], 3) == [(1, 2, 3)]
    assert ngrams([1, 2], 3) == []


def test_rep_4_counts_repeated_4grams():
    assert rep_n("a b c d e f", 4) == 0.0
    # 8 words -> 5 four-grams: abcd, bcda, cdab, dabc, abcd -> 4 unique
    assert rep_n("a b c d a b c d", 4) == pytest.approx(1 - 4 / 5)
    assert rep_n([7] * 10, 4) == pytest.approx(1 - 1 / 7)
    assert rep_n("too short", 4) == 0.0


def test_distinct_n_is_one_minus_rep():
    text = "the cat sat on the cat sat on the mat"
    assert distinct_n(text, 2) == pytest.approx(1 - rep_n(text, 2))
    assert distinct_n("", 1) == 0.0


def test_sentence_split_and_rep_sen():
    text = "It rains. It rains! The sun shines?\nIt  RAINS."
    assert split_sentences(text) == ["It rains.", "It rains!", "The sun shines?", "It  RAINS."]
    # "It rains." repeats once (case and spacing ignored); "It rains!" differs by punctuation
    assert rep_sen(text) == pytest.approx(1 / 4)
    assert rep_sen("One. Two. Three.") == 0.0
    assert rep_sen("") == 0.0
    assert rep_sen("Same. Same. Same.") == pytest.approx(2 / 3)


def test_repetition_stats_dict():
    stats = repetition_stats("a b c d a b c d").to_dict()
    assert set(stats) == {"rep_4", "rep_sen", "distinct_1", "distinct_2"}
    assert stats["distinct_1"] == pytest.approx(4 / 8)
