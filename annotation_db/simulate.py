"""Simulated raters driven through the real store and the real assignment.

A check of the statistics where the truth is known: each system has a true mean rate theta of
outputs being appropriate; each output's own probability q is drawn from a Beta around theta
(``icc`` = the correlation of two answers about the same output); an attentive rater answers
yes with probability q, except a share ``noise`` of the time when they answer at random. So an
attentive rater says yes to a system's output with probability (1 - noise) theta + noise / 2:
the rate a study estimates (``true_rates``). A share ``inattentive_share`` of the raters play
one of ``strategies`` instead (``STRATEGIES`` says what each does): careless ones answer without
reading (at random, "Yes" or "No" to everything, always the first or last output, the longest
or the shortest output), and skimmers read only where a check could be (``"position"``: every
item a check can stand on, which the placement makes all but the first; ``"gamble"``: until the
planned number of checks of the run was met, then skimming the rest of the run). Raters arrive
one after another, open their invite, ask ``next_item``, answer, ``submit`` — exactly what the
Rate tab does — until every item has its raters; then ``results`` computes what a researcher
would report. Each rater takes ``items_per_rater``
items, and the study states that number: the checks each rater meets among them are sized by
``attention.plan_checks`` (or ``checks_per_rater``) and placed by the store.

The fills look like the systems' (1-12 words, most with a capital, many with a full stop), and
the attention checks are made as the app makes them (``gold.held_out_gold_items`` from
held-out passages, styled like the systems' fills), so that a rater who goes by length meets
the checks a real study shows. Before, a simulated check's true text ("span104") was never
shorter than its wrong fills and often longer ("span7"), so "always the longest" was excluded
65% of the time against 81% for "always the first" (bench/bench_study_simulation.py).

``python bench/bench_study_simulation.py`` runs many such studies and tabulates how often the
intervals cover the truth; ``tests/annotation_db/test_adb_simulation.py`` runs a few.
"""

from __future__ import annotations

import random
from dataclasses import dataclass, field

from sqlalchemy import case, func, select

from .attention import CARELESS as ATTENTION_CARELESS
from .attention import DEFAULT_SLIP, AttentionSettings, planned_settings
from .gold import fill_blanks, held_out_gold_items
from .questions import ALL_BAD, TIE, Preference, first, parse_questions
from .results import StudyResults
from .schema import Assignment, Item, Output, Rater, Study
from .stats import wilson_interval
from .store import AnnotationStore
from .views import ItemIn, OutputIn

BLANK = "___"

# What a simulated rater who is not attentive does (``SimConfig.strategies``).
STRATEGIES: dict[str, str] = {
    "random": "answers every question at random",
    "always-yes": 'says "Yes" to every output and ties them (or picks the first)',
    "always-no": 'says "No" to every output and calls all bad (or picks the last)',
    "first": "accepts and prefers the first output, rejects the others",
    "last": "accepts and prefers the last output, rejects the others",
    "longest": "accepts and prefers the longest output, rejects the others",
    "shortest": "accepts and prefers the shortest output, rejects the others",
    "position": "skims (answers at random) every item that certainly is no check: the first",
    "gamble": "reads until the run's planned checks were met, then skims the rest of the run",
}
# Strategies that answer checks without reading them: the rule is meant to exclude these
# (attention.CARELESS: the rule's power is stated against them; careless_fail_rates).
CARELESS = ATTENTION_CARELESS
# Every strategy that answers without reading: those, and "always the shortest", which fails a
# check as often as "always the longest" (the true text stands at each place by length equally
# often, gold._places), so it is measured beside them but not added to the rule's mean (which
# would change the stated power of the studies already made).
UNREAD = (*CARELESS, "shortest")
# Words of the simulated fills: short and long, so that fills differ in length.
_WORDS = ("river city north mountain king old war music early new film team small west "
          "station house family league season long a of in").split()  # fmt: skip


@dataclass(frozen=True)
class SimConfig:
    rates: dict[str, float] = field(
        default_factory=lambda: {"magnet": 0.62, "five-shot": 0.54, "zero-shot": 0.2}
    )
    n_items: int = 20
    raters_per_item: int = 3
    icc: float = 0.3  # correlation of two answers about one output (Beta spread of q)
    noise: float = 0.1  # share of an attentive rater's answers given at random
    inattentive_share: float = 0.25  # raters who play one of `strategies` instead
    strategies: tuple[str, ...] = ("random",)  # such raters play them in turn (STRATEGIES)
    n_gold: int = 4  # attention-check items (a rater gets each at most once)
    items_per_rater: int = 10  # assignments a rater takes before leaving (gold included)
    exclude: bool = True  # leave out the raters the attention rule excludes
    slip: float = DEFAULT_SLIP  # the slip rate the study states, the app's default
    checks_per_rater: int | None = None  # None: attention.plan_checks sizes it
    questions: tuple[str, ...] = ("appropriate", "preference")
    n_resamples: int = 200  # bootstrap resamples of the pairwise statistics


@dataclass(frozen=True)
class SimOutcome:
    study: str
    config: SimConfig
    true_rates: dict[str, float]  # what an attentive rater says yes to, per system
    results: StudyResults
    inattentive: frozenset[int]  # rater ids
    excluded: frozenset[int]
    undecided: frozenset[int] = frozenset()
    strategy_of: dict[int, str] = field(default_factory=dict)  # rater id -> strategy/attentive
    skimmed: dict[int, tuple[int, int]] = field(default_factory=dict)  # id -> (skimmed, items)

    def _interval(self, system: str, every_rater: bool = False):  # noqa: ANN202 - Proportion
        rows = self.results.systems_all_raters if every_rater else self.results.systems
        return next(s for s in rows if s.system == system).appropriate

    def covered_every_rater(self, system: str) -> bool:
        """The interval computed from every rater (no exclusion) contains the true rate."""
        a = self._interval(system, every_rater=True)
        return a.low <= self.true_rates[system] <= a.high

    def covered(self, system: str) -> bool:
        """The reported interval of the system's rate contains its true rate."""
        a = next(s for s in self.results.systems if s.system == system).appropriate
        return a.low <= self.true_rates[system] <= a.high

    def covered_naive(self, system: str) -> bool:
        """Wilson's interval over all judgments as if they were independent contains it."""
        a = next(s for s in self.results.systems if s.system == system).appropriate
        w = wilson_interval(a.successes, a.n, self.results.confidence)
        return w.low <= self.true_rates[system] <= w.high

    def bt_order_correct(self) -> bool:
        want = sorted(self.true_rates, key=self.true_rates.get, reverse=True)
        return [b.system for b in self.results.bradley_terry] == want

    def alpha(self, question: str = "appropriate") -> float | None:
        return next(a.alpha for a in self.results.agreement if a.question == question)


def _beta(rng: random.Random, mean: float, icc: float) -> float:
    if icc <= 0:
        return mean
    a, b = mean * (1 - icc) / icc, (1 - mean) * (1 - icc) / icc
    return rng.betavariate(a, b)


def simulate_study(
    store: AnnotationStore, name: str, config: SimConfig, seed: int = 0
) -> SimOutcome:
    """Create one simulated study in ``store``, rate it to completion, return its results."""
    rng = random.Random(seed)
    c = config
    items, outputs, q, gold_items, gold_outputs = study_material(c, rng, seed)
    store.create_study(
        name,
        items + gold_items,
        outputs + gold_outputs,
        questions=list(c.questions),
        raters_per_item=c.raters_per_item,
        attention=study_attention(c),
    )
    # The simulator is the one place that may look behind the labels (admin side).
    q_of_text = _output_probabilities(store, name, q)  # each output's text is its own

    unknown = set(c.strategies) - set(STRATEGIES)
    if unknown:
        raise ValueError(f"unknown strategies {sorted(unknown)}; known: {sorted(STRATEGIES)}")
    gold_texts = {t for t, p in q_of_text.items() if p in (0.0, 1.0)}
    settings = study_attention(c)
    planned = settings.checks_per_rater or 0
    needed = c.n_items * c.raters_per_item
    done = 0
    inattentive: set[int] = set()
    strategy_of: dict[int, str] = {}
    skimmed: dict[int, tuple[int, int]] = {}
    n_raters = 0
    turn = rng.randrange(len(c.strategies))
    while done < needed:
        n_raters += 1
        if rng.random() < c.inattentive_share:  # the strategies take turns: an even mix
            strategy = c.strategies[(turn + len(inattentive)) % len(c.strategies)]
        else:
            strategy = "attentive"
        inv = store.invite(name, f"sim-{n_raters}")
        # The store draws each rater's order seed from `secrets`; fixing it from the
        # simulation's seed makes a simulated study repeatable (the assignment is unchanged).
        order_seed = rng.getrandbits(62)
        store.db.write(lambda s, rid=inv.rater_id, v=order_seed: _set_seed(s, rid, v))
        strategy_of[inv.rater_id] = strategy
        if strategy != "attentive":
            inattentive.add(inv.rater_id)
        checks_in_run, n_skimmed, n_done = 0, 0, 0
        for k in range(c.items_per_rater):
            item = store.next_item(inv.token)
            if item is None:
                break
            if k % settings.items_per_rater == 0:
                checks_in_run = 0
            texts = [o.text for o in item.outputs]
            is_check = any(t in gold_texts for t in texts)
            skim = (strategy == "position" and k == 0) or (
                strategy == "gamble" and checks_in_run >= planned
            )
            checks_in_run += is_check
            n_skimmed += skim and not is_check
            n_done += not is_check
            labels = [o.label for o in item.outputs]
            pref_q = first(item.questions, Preference)
            if strategy in UNREAD or skim:
                answers, pref = _careless(rng, "random" if skim else strategy, texts, pref_q)
            else:
                answers, best = _answer(rng, [q_of_text[t] for t in texts], c.noise)
                pref = best
            store.submit(
                inv.token,
                item.assignment_id,
                {lab: {"appropriate": a} for lab, a in zip(labels, answers, strict=True)},
                preference=(labels[pref] if isinstance(pref, int) else pref) if pref_q else None,
            )
        if strategy in ("position", "gamble"):
            skimmed[inv.rater_id] = (n_skimmed, n_done)
        done = store.db.read(lambda s: _judgments_done(s, name, c.raters_per_item))
    res = store.results(name, exclude=c.exclude, n_resamples=c.n_resamples, seed=seed)
    excluded = frozenset(a.rater_id for a in res.attention if a.excluded)
    undecided = frozenset(a.rater_id for a in res.attention if a.decision == "undecided")
    true_rates = {s: (1 - c.noise) * t + c.noise / 2 for s, t in c.rates.items()}
    return SimOutcome(
        name,
        c,
        true_rates,
        res,
        frozenset(inattentive),
        excluded,
        undecided,
        strategy_of,
        skimmed,
    )


def study_material(c: SimConfig, rng: random.Random, seed: int) -> tuple:
    """What a simulated study is made of -> (items, their outputs, each output's probability
    of a yes by (item key, system), the checks' items, their outputs): fills like the
    systems' (``_fill``), every text its own, and checks made as the app makes them, from
    held-out passages four times what they need, styled like the systems' fills."""
    items = [
        ItemIn(f"s{i}", f"Passage {i} before {BLANK} after.", [_fill(rng)], source=f"doc{i}")
        for i in range(c.n_items)
    ]
    q: dict[tuple[str, str], float] = {}
    outputs = []
    for it in items:
        fills: set[str] = set()
        for system, theta in c.rates.items():
            q[(it.key, system)] = _beta(rng, theta, c.icc)
            fill = _fill(rng)
            while fill in fills:  # every text of a study is its own (_output_probabilities)
                fill = _fill(rng)
            fills.add(fill)
            outputs.append(OutputIn(it.key, system, fill_blanks(it.text, [fill], BLANK), [fill]))
    n_outputs = max(len(c.rates), 2)
    held_out = [
        ItemIn(f"h{i}", f"Held-out passage {i} before {BLANK} after.", [_fill(rng)], f"held{i}")
        for i in range(4 * c.n_gold * n_outputs)
    ]
    gold_items, gold_outputs = held_out_gold_items(
        held_out,
        c.n_gold,
        blank=BLANK,
        n_outputs=n_outputs,
        seed=seed,
        styles=[o.fills for o in outputs],
    )
    return items, outputs, q, gold_items, gold_outputs


def study_attention(c: SimConfig) -> AttentionSettings:
    """The attention settings the simulated study states: its raters' items per rater, and
    the checks among them that the rule needs (``plan_checks``) unless the config names them."""
    n_outputs = max(len(c.rates), 2)
    settings, plan = planned_settings(
        c.items_per_rater, parse_questions(list(c.questions)), n_outputs, slip=c.slip
    )
    if c.checks_per_rater is None:
        return settings
    return AttentionSettings(
        settings.slip,
        settings.alpha,
        settings.power,
        c.items_per_rater,
        c.checks_per_rater,
        settings.against,
    )


def _judgments_done(s, name: str, k: int) -> int:  # noqa: ANN001 - a Session
    """Answered judgments of regular items, each item counted up to k (as progress does), in
    one query: the simulation asks after every rater."""
    per_item = (
        select(case((func.count(Assignment.id) > k, k), else_=func.count(Assignment.id)).label("n"))
        .join(Item, Item.id == Assignment.item_id)
        .join(Study, Study.id == Item.study_id)
        .where(Study.name == name, Item.is_gold.is_(False), Assignment.completed_at.is_not(None))
        .group_by(Assignment.item_id)
        .subquery()
    )
    return s.scalar(select(func.coalesce(func.sum(per_item.c.n), 0))) or 0


def _answer(rng: random.Random, probs: list[float], noise: float) -> tuple[list[bool], int]:
    """An attentive rater: yes/no per output and the index of the preferred output."""
    answers = [rng.random() < 0.5 if rng.random() < noise else rng.random() < p for p in probs]
    if rng.random() < noise:
        return answers, rng.randrange(len(probs))
    # the best output: one of those they judged appropriate, picked at random
    best = max(range(len(probs)), key=lambda i: (answers[i], rng.random()))
    return answers, best


def _careless(
    rng: random.Random, strategy: str, texts: list[str], pref_q: Preference | None
) -> tuple[list[bool], int | str]:
    """A rater who does not read: yes/no per output and the preference (an index of the
    outputs, or ``TIE`` / ``ALL_BAD``), as ``strategy`` answers (``STRATEGIES``)."""
    n = len(texts)
    tie = pref_q is not None and pref_q.allow_tie
    all_bad = pref_q is not None and pref_q.allow_all_bad
    if strategy == "random":
        choices: list[int | str] = [*range(n)] + [TIE] * tie + [ALL_BAD] * all_bad
        return [rng.random() < 0.5 for _ in texts], rng.choice(choices)
    if strategy == "always-yes":
        return [True] * n, TIE if tie else 0
    if strategy == "always-no":
        return [False] * n, ALL_BAD if all_bad else n - 1
    pick = {
        "first": lambda: 0,
        "last": lambda: n - 1,
        "longest": lambda: max(range(n), key=lambda i: (len(texts[i]), rng.random())),
        "shortest": lambda: min(range(n), key=lambda i: (len(texts[i]), rng.random())),
    }[strategy]()
    return [i == pick for i in range(n)], pick


def _fill(rng: random.Random) -> str:
    """A fill as the systems write one: 1-12 words, most with a capital, many with a full
    stop (the held-out originals are drawn alike)."""
    text = " ".join(rng.choice(_WORDS) for _ in range(rng.randint(1, 12)))
    if rng.random() < 0.6:
        text = text[0].upper() + text[1:]
    return text + rng.choice([".", ".", "", ","])


def _output_probabilities(
    store: AnnotationStore, name: str, q: dict[tuple[str, str], float]
) -> dict[str, float]:
    """Each output's probability of a yes from an attentive rater, by the output's text (the
    simulation makes every text of a study unique, so a rater's item needs no look-up)."""

    def fn(s) -> dict[str, float]:  # noqa: ANN001 - a Session
        rows = s.execute(
            select(Output.text, Output.system, Output.gold_role, Item.key)
            .join(Item)
            .join(Study)
            .where(Study.name == name)
        ).all()
        gold = {"original": 1.0, "corrupted": 0.0}
        out = {text: gold[role] if role else q[(key, system)] for text, system, role, key in rows}
        assert len(out) == len(rows), "two outputs of a simulated study share a text"
        return out

    return store.db.read(fn)


def _set_seed(s, rater_id: int, seed: int) -> None:  # noqa: ANN001 - a Session
    s.get(Rater, rater_id).seed = seed
