"""A free blank inside a sentence is filled from several first tokens (inference/infill.py,
`fill_branches`), side by side in one row, and the stop rule keeps the best stop of all of
them (inference/stops.py)."""

from __future__ import annotations

from dataclasses import dataclass
from types import SimpleNamespace

import pytest
import torch
from test_engine import TEXT, loaded, metas, peft_model
from tiny_models import make_tiny_tokenizer

from magnet_model.errors import ConfigError, InputError
from magnet_model.inference import infill
from magnet_model.inference.engine import Engine
from magnet_model.inference.infill import infill_job, infill_lane
from magnet_model.inference.sampling import Sampling
from magnet_model.inference.stops import stop_steps
from magnet_model.settings import ModelSpec

VOCAB = 50


@pytest.fixture(scope="module")
def engine():
    tok = make_tiny_tokenizer()
    return Engine(loaded(peft_model(tok), tok), metas=metas(tok))


@pytest.fixture
def paths(monkeypatch):
    """Every decoded span (greedy paths and branches) with its blank, as the stop rule
    receives them, per fill made while the fixture is on."""
    seen = []
    real = infill.stop_steps

    def spy(runner, job, generated, reasons):
        seen.append([(job.blank_of[j], job.layer[j], list(g)) for j, g in enumerate(generated)])
        return real(runner, job, generated, reasons)

    monkeypatch.setattr(infill, "stop_steps", spy)
    return seen


@dataclass
class FirstToken(Sampling):
    """Greedy, the first pick of a one-blank fill forced to `first`."""

    first: int = 0
    picks: list | None = None

    def pick(self, logits: torch.Tensor) -> torch.Tensor:
        out = logits.argmax(-1)
        if not self.picks:
            out[0] = self.first
            self.picks = [1]
        return out


def test_each_branch_is_the_fill_that_starts_with_its_token(engine, paths):
    text = "the cat [blank] on the mat ."
    engine.infill(text, max_span_tokens=6, fill={"branches": 4})
    (spans,) = paths
    assert [layer for _, layer, _ in spans] == [0, 1, 2, 3]
    firsts = [g[0] for _, _, g in spans]
    assert len(set(firsts)) == 4  # four different first tokens
    paths.clear()
    for _, layer, g in spans[1:]:
        # the same blank filled alone, its first token forced, the rest greedy
        fill = engine.magnet_fill({"stop": "model", "branches": 1})
        job = infill_job(engine.runner, text, "[blank]", "magnet", 6, None, fill)
        lane = infill_lane(engine.runner, job, "magnet", FirstToken(first=g[0]))
        engine.runner.run_one(lane)
        assert paths[-1][0][2] == g, f"branch {layer}"


def test_branching_fills_are_the_same_on_the_cached_and_the_reference_path(engine, paths):
    for kw in (dict(), dict(do_sample=True, temperature=1.5, top_p=0.9, seed=11)):
        fast = engine.infill(TEXT, max_span_tokens=[6, 3, 9], fill={"branches": 3}, **kw)
        slow = engine.infill_reference(TEXT, max_span_tokens=[6, 3, 9], fill={"branches": 3}, **kw)
        assert paths[-2] == paths[-1]  # every branch of every blank, token for token
        assert len(paths[-1]) == 9  # three blanks inside sentences, three paths each
        assert [s.token_ids for s in fast.spans] == [s.token_ids for s in slow.spans]
        assert [s.end_reason for s in fast.spans] == [s.end_reason for s in slow.spans]
    # the same seed draws the same branches
    again = engine.infill(TEXT, max_span_tokens=[6, 3, 9], fill={"branches": 3}, **kw)
    assert [s.token_ids for s in again.spans] == [s.token_ids for s in fast.spans]


@pytest.mark.parametrize(
    "text, kw, branches",
    [
        ("the cat [blank] on the mat .", {}, [True]),
        ("The cat sat . [blank] The dog ran .", {}, [False]),  # between sentences
        ("the cat [blank] on the mat .", dict(fixed_lengths=3), [False]),  # the user's length
        ("the cat sat on [blank]", {}, [False]),  # no text after it to read
        ("the cat [blank] on the mat .", dict(stop="model"), [False]),  # no rule to choose
        ("the cat [blank] on the mat .", dict(branches=1), [False]),
    ],
)
def test_which_blanks_branch(engine, text, kw, branches):
    kw = {"branches": 4, **kw}
    fixed = kw.pop("fixed_lengths", None)
    job = infill_job(engine.runner, text, "[blank]", "magnet", 6, fixed, engine.magnet_fill(kw))
    assert job.branch_at == branches


def test_the_kept_fill_is_the_best_stop_of_all_paths():
    right = [40, 41, 42]
    greedy, other = [10, 11, 12], [20]
    trace_g = [(-0.1, -3.0), (-0.1, -2.0), (-0.1, -2.0), (-0.5, -0.5)]
    trace_o = [(-1.0, -3.0), (-0.2, -0.2)]
    job = SimpleNamespace(
        fill=SimpleNamespace(stop="join"), bos=None, piece_ids=[[1, 2, 3], right],
        trace=[trace_g, trace_o],
        fixed=[False], min_tokens=1, blank_of=[0, 0],
    )  # fmt: skip
    runner = SimpleNamespace(cut_points=[True] * VOCAB, max_input_tokens=1000)
    steps = stop_steps(runner, job, [greedy, other], ["end", "end"])
    ids, pos, see, want = next(steps)
    # one reading: the greedy path's three stops and the other path's one
    assert len(want) == 4 * len(right)
    logits = torch.zeros(len(want), VOCAB)
    for j in range(len(right)):  # the text after the blank follows the other path best
        logits[3 * len(right) + j, right[j]] = 20.0
    with pytest.raises(StopIteration) as done:
        steps.send(logits)
    out, reasons = done.value.value
    assert out == [other] and reasons == ["end"]  # taken whole: it ended by itself
    assert job.trace == [trace_o]  # the kept path's trace


@pytest.mark.parametrize("bad", [0, 9, True, "4"])
def test_a_bad_number_of_branches_is_one_clear_sentence(engine, bad):
    with pytest.raises(InputError, match="fill_branches must be a whole number from 1"):
        engine.infill("the cat [blank] on the mat .", fill={"branches": bad})


def test_the_branches_setting_reaches_the_spec(monkeypatch):
    assert ModelSpec.from_env().fill_branches == 4
    monkeypatch.setenv("MAGNET_FILL_BRANCHES", "1")
    assert ModelSpec.from_env().fill_branches == 1
    monkeypatch.setenv("MAGNET_FILL_BRANCHES", "12")
    with pytest.raises(ConfigError, match="12"):
        ModelSpec.from_env()
    with pytest.raises(ConfigError, match="fill_branches must be"):
        ModelSpec(fill_branches=0).validate()
