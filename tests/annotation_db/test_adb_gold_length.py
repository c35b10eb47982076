"""A check's lengths say nothing (issue 58 point 5, security review 6 probe S3): where the true
text stands among a check's outputs when they are sorted by length is drawn, each place equally
often, so a rater who always accepts the shortest (or the longest) output passes one check in
n outputs, as one who always takes the first does.

Before, in the probe's seeded study (60 checks, ``seed_strat.py``), the true text was the
shortest of three outputs in 29 of 60 checks, and over studies built from real passages and
the three systems' real fills it was the shortest in 37% of checks and the longest in 27%: the
true text is chosen among passages whose own surface is the systems' (it is never restyled),
the wrong fills are matched to the drawn lengths more freely."""

from __future__ import annotations

import collections
import json
import random
from pathlib import Path

import pytest
from scipy.stats import chisquare

from annotation_db import ItemIn
from annotation_db.gold import held_out_gold_items

LABELLED = Path(__file__).resolve().parents[1] / "data" / "labelled_outputs.jsonl"


def _length(fills) -> int:
    """A fill's length as a reader sees it: its characters, its blanks together."""
    return len(" ".join(f.strip() for f in fills))


def _words(fills) -> int:
    return len(" ".join(fills).split())


def _places(outputs, length=_length) -> list[float]:
    """Per place by ``length`` (0 the shortest), how many checks have their true text there;
    a tie shares its places fairly (a tie of k outputs gives 1/k to each of its k places)."""
    counts: list[float] | None = None
    by: dict[str, list] = collections.defaultdict(list)
    for o in outputs:
        by[o.item_key].append(o)
    for outs in by.values():
        counts = counts or [0.0] * len(outs)
        true = next(length(o.fills) for o in outs if o.gold_role == "original")
        wrong = [length(o.fills) for o in outs if o.gold_role != "original"]
        below, tied = sum(w < true for w in wrong), sum(w == true for w in wrong)
        for k in range(below, below + tied + 1):
            counts[k] += 1 / (tied + 1)
    return counts or []


def _real_pool(rng: random.Random, passages, fills) -> tuple[list[ItemIn], list[list[str]]]:
    """A check pool of 120 real passages and 90 real fills to style it like, drawn by rng."""
    styles = [[f] for f in rng.sample(fills, 90)]
    pool = [
        ItemIn(f"p{i}", f"{r['left']} [blank] {r['right']}", [r["original"]], r["domain"])
        for i, r in enumerate(rng.sample(passages, 120))
    ]
    return pool, styles


def _real_material():
    """The labelled outputs (tests/data/labelled_outputs.jsonl): real held-out passages with
    their originals (sentences, phrases, words: as an uploaded items file may hold), and the
    three systems' real fills."""
    rows = [json.loads(line) for line in LABELLED.read_text(encoding="utf-8").splitlines()]
    rows = [r for r in rows if r["left"] is not None and r["right"] is not None]
    rows = [r for r in rows if r["original"] and r["fill"]]
    passages = list({r["original"]: r for r in rows}.values())
    return passages, [r["fill"] for r in rows]


def test_the_true_text_is_shortest_middle_and_longest_equally_often():
    """200 studies of 10 checks of 3 outputs (2000 checks) from real passages and the systems'
    real fills, a study's 90 fills as its styles and a pool four times what the checks need,
    as the app gives: the true text's place by length, in characters or in words (ties
    shared), is uniform (chi-square, p > 0.05). Before, in characters it was the shortest in
    750 and the longest in 544 (p = 2e-8)."""
    passages, fills = _real_material()
    counts, by_words = [0.0, 0.0, 0.0], [0.0, 0.0, 0.0]
    for seed in range(200):
        rng = random.Random(seed)
        pool, styles = _real_pool(rng, passages, fills)
        _, outs = held_out_gold_items(
            pool,
            10,
            blank="[blank]",
            lengths=[len(f[0].split()) for f in styles],
            n_outputs=3,
            seed=seed,
            styles=styles,
        )
        counts = [a + b for a, b in zip(counts, _places(outs), strict=True)]
        by_words = [a + b for a, b in zip(by_words, _places(outs, _words), strict=True)]
    assert sum(counts) == 2000
    assert chisquare(counts).pvalue > 0.05, counts
    assert max(counts) <= 2000 / 3 + 25, counts  # within a point of a third each
    assert chisquare(by_words).pvalue > 0.05, by_words


def _probe_study(seed: int, gold_seed: int):
    """The probe's seeded study exactly (``probes-s6/seed_strat.py DB strat 160 60 40``): 160
    items x 3 systems with fills of 1-6 words, 480 held-out passages, 60 checks."""
    animals = "fox heron badger otter wren lynx moose gull stoat crane".split()
    places = "river ridge meadow harbour forest quarry orchard canal valley dune".split()
    words = ("slowly quietly twice alone north again briskly home uphill early late far under "
             "the old bridge with its young and then rested").split()  # fmt: skip
    rng = random.Random(seed)

    def passage(i):
        return (
            f"Passage {i}: the {animals[i % 10]} walked along the {places[(i // 10) % 10]} "
            f"[blank] before the evening rain came down on {i} roofs."
        )

    def fill(n):
        return " ".join(rng.choice(words) for _ in range(n))

    styles = []
    for _ in range(160):
        fill(rng.randint(1, 5))  # the item's own original
        styles += [[fill(rng.randint(1, 6))] for _ in range(3)]
    pool = [
        ItemIn(f"p{i}", passage(i), [fill(rng.randint(1, 6))], "pool") for i in range(1000, 1480)
    ]
    return held_out_gold_items(
        pool, 60, blank="[blank]", n_outputs=3, seed=gold_seed, styles=styles
    )


def test_in_every_study_each_place_by_length_holds_a_share_of_the_checks():
    """A rater meets the checks of one study, so each study on its own gives the true text
    every place by length equally often (n/3 checks each, the rest drawn), not only many
    studies on average. The probe's study (its seeds 5 and 1): before, the true text was the
    shortest in 29 of its 60 checks (27 with ties shared)."""
    for seed, gold_seed in [(5, 1), (0, 0), (1, 7), (2, 3)]:
        _, outs = _probe_study(seed, gold_seed)
        counts = _places(outs)
        assert sum(counts) == 60 and max(counts) <= 21, (seed, gold_seed, counts)
    passages, fills = _real_material()
    for seed in range(20):
        rng = random.Random(seed)
        pool, styles = _real_pool(rng, passages, fills)
        _, outs = held_out_gold_items(
            pool, 10, blank="[blank]", n_outputs=3, seed=seed, styles=styles
        )
        assert max(_places(outs)) <= 4, (seed, _places(outs))


def test_no_check_shows_two_fills_that_read_the_same():
    """Restyled, two different held-out spans can read alike ("river," and "River." both as
    "River." after a system fill "The end."): a check never shows the same fill twice, so
    none of its wrong fills reads as its true text."""
    alike = ["river", "River.", "river,", "River", "the river", "The river.", "city", "City."]
    other = "stone hill lake road town field wood bridge tower gate wall mill".split()
    pool = [
        ItemIn(f"h{i}", f"Passage {i} with a [blank] in it.", [w], f"doc{i}")
        for i, w in enumerate([*alike, *other])
    ]
    styles = [["The end."], ["A capital."], ["Quite a long fill here."]] * 4
    for seed in range(40):
        _, outs = held_out_gold_items(
            pool, 3, blank="[blank]", n_outputs=3, seed=seed, styles=styles
        )
        by: dict[str, list[tuple[str, ...]]] = collections.defaultdict(list)
        for o in outs:
            by[o.item_key].append(tuple(f.strip() for f in o.fills))
        for key, fills in by.items():
            assert len(set(fills)) == len(fills), (seed, key, fills)


def test_a_rater_who_goes_by_length_fails_checks_as_the_rule_counts():
    """The rule's power assumes that a rater who always accepts the longest output (and one
    who always accepts the shortest, which the simulation plays beside it) passes one check in
    three: on 1500 checks from real passages and fills, shown in a random order, each fails
    two in three (the rule's rate for "longest"), as "first" does. Before, "shortest" failed
    63% (942 of 1500) and "longest" 73% (1092)."""
    from annotation_db.attention import careless_fail_rates, check_passed
    from annotation_db.questions import appropriate
    from annotation_db.simulate import _careless

    questions = [appropriate()]
    rate = careless_fail_rates(questions, 3)["longest"]
    passages, fills = _real_material()
    failed, n = collections.Counter(), 0
    for seed in range(150):
        rng = random.Random(seed)
        pool, styles = _real_pool(rng, passages, fills)
        _, outs = held_out_gold_items(
            pool, 10, blank="[blank]", n_outputs=3, seed=seed, styles=styles
        )
        by: dict[str, list] = collections.defaultdict(list)
        for o in outs:
            by[o.item_key].append(o)
        for check in by.values():
            rng.shuffle(check)  # the order the rater sees
            labels = [chr(65 + i) for i in range(len(check))]
            roles = {lab: o.gold_role for lab, o in zip(labels, check, strict=True)}
            n += 1
            for strategy in ("first", "longest", "shortest"):
                yes, _ = _careless(rng, strategy, [o.text for o in check], None)
                answers = {lab: {"appropriate": y} for lab, y in zip(labels, yes, strict=True)}
                failed[strategy] += not check_passed(questions, roles, answers, None)
    assert n == 1500
    for strategy in ("first", "longest", "shortest"):
        assert failed[strategy] / n == pytest.approx(rate, abs=0.025), (strategy, failed)
