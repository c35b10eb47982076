"""The prompted baselines' fills and scores are computed once per set of conditions and then
reused (evaluation/baselines.py), so evaluating a new adapter costs only its own work."""

from __future__ import annotations

import json

import pytest
import torch
from tiny_models import tiny_engine

from magnet_model.decoding import PromptedFill
from magnet_model.evaluation import baselines
from magnet_model.evaluation.baselines import BaselineCache
from magnet_model.evaluation.scoring import span_cases

TEXT = "the cat sat on the [blank] . the dog ran in the river ."


@pytest.fixture(scope="module")
def engine():
    return tiny_engine()


def test_a_second_run_reuses_the_fills_and_scores_without_the_model(engine, tmp_path, monkeypatch):
    passage = " ".join([TEXT.replace("[blank]", "mat")] * 3)
    cases = span_cases(engine.tokenizer, [passage, passage], 2, 0, 48)
    assert len(cases) == 2
    first = BaselineCache(engine, tmp_path)
    made = first.fill(TEXT, 0, 8)
    nll = first.span_nll(cases, 5, 2)
    assert (first.hits, first.misses) == (0, 1 + len(cases))

    def no_model(*a, **k):
        raise AssertionError("the model ran for a cached baseline")

    monkeypatch.setattr(engine, "compare_infill_many", no_model)
    monkeypatch.setattr(baselines.scoring, "prompted_span_nll", no_model)
    again = BaselineCache(engine, tmp_path)
    assert again.fill(TEXT, 0, 8) == made  # every field, the spans' ids and end reasons too
    assert again.span_nll(cases, 5, 2) == nll
    assert (again.hits, again.misses) == (1 + len(cases), 0)
    # another request is not in the cache: the model runs (here: refuses)
    with pytest.raises(AssertionError, match="the model ran"):
        again.fill(TEXT, 5, 8)


def test_a_format_or_copy_guard_of_its_own_is_another_entry(engine, tmp_path, monkeypatch):
    cache = BaselineCache(engine, tmp_path)
    plain = cache.fill(TEXT, 5, 8)  # the engine's default: auto, guard of 6 words
    assert cache.fill(TEXT, 5, 8, "plain") == plain  # auto is plain on this tokenizer
    assert cache.misses == 1
    cache.fill(TEXT, 5, 8, "plain-prefix")
    cache.fill(TEXT, 5, 8, "plain", 0)
    assert (cache.hits, cache.misses) == (1, 3)
    monkeypatch.setattr(engine.config, "prompted", PromptedFill("plain-prefix"))
    cache.fill(TEXT, 5, 8)  # the engine's format changed: its entry, made above
    assert (cache.hits, cache.misses) == (2, 3)


def test_a_sampled_fill_is_keyed_by_its_sampling_and_seed_apart_from_greedy(engine, tmp_path):
    def wrote(r):  # the reply as written, before the answer was read out of it
        return r.spans[0].written_ids or r.spans[0].token_ids

    cache = BaselineCache(engine, tmp_path)
    cache.fill(TEXT, 0, 8)
    sampled = cache.fill(TEXT, 0, 8, sample=(5.0, 1.0, 1))  # hot: the tiny model's text varies
    assert cache.misses == 2  # sampling never reads the greedy entry
    direct = engine.infill_prompted(
        TEXT, shots=0, max_span_tokens=8, do_sample=True, temperature=5.0, top_p=1.0, seed=1
    )
    assert wrote(sampled) == wrote(direct)  # decoded as asked, with that seed
    others = [wrote(cache.fill(TEXT, 0, 8, sample=(5.0, 1.0, seed))) for seed in (2, 3, 4)]
    assert cache.misses == 5 and any(ids != wrote(sampled) for ids in others)
    assert cache.fill(TEXT, 0, 8, sample=(5.0, 1.0, 1)) == sampled and cache.hits == 1


def test_other_conditions_never_read_an_entry(engine, tmp_path, monkeypatch):
    BaselineCache(engine, tmp_path).fill(TEXT, 0, 8)
    (file,) = tmp_path.iterdir()
    assert BaselineCache(tiny_engine(), tmp_path).path == file  # the same seeded weights
    other = tiny_engine()
    with torch.no_grad():  # the same model but for one weight
        other.runner.lm.get_input_embeddings().weight[1, 0] += 0.5
    assert BaselineCache(other, tmp_path).path != file
    # a change to the prompts' code gives new keys too
    monkeypatch.setattr(baselines, "CODE", (*baselines.CODE, "evaluation/stats.py"))
    assert BaselineCache(engine, tmp_path).path != file


def test_a_torn_last_line_is_skipped_and_no_folder_keeps_nothing(engine, tmp_path):
    cache = BaselineCache(engine, tmp_path)
    cache.fill(TEXT, 0, 8)
    with cache.path.open("a") as f:
        f.write('{"key": "abc", "value": [1, ')  # a run killed while writing
    reread = BaselineCache(engine, tmp_path)
    assert len(reread.entries) == 1
    reread.fill(TEXT, 0, 8)
    assert reread.hits == 1
    lines = cache.path.read_text().splitlines()
    assert json.loads(lines[0])["key"]
    off = BaselineCache(engine, None)
    off.fill(TEXT, 0, 8)
    assert off.path is None and off.misses == 1


def test_many_fills_run_as_one_batch_give_each_fill_alone(engine, tmp_path):
    texts = [TEXT, "the dog [blank] in the river .", "one two [blank] four"]
    many = BaselineCache(engine, tmp_path / "many").fill_many(texts, 5, 8)
    alone = [engine.infill_prompted(t, shots=5, max_span_tokens=8) for t in texts]
    assert [r.spans[0].token_ids for r in many] == [r.spans[0].token_ids for r in alone]
    again = BaselineCache(engine, tmp_path / "many")
    assert again.fill_many(texts[::-1], 5, 8) == many[::-1] and again.hits == 3
