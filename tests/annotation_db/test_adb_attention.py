"""Attention checks: a check scored as a whole (no constant answer passes it), a rule with
stated error rates, checks sized per rater, placement that gives each rater at least that many
at positions nobody can predict (never first, never alone, different checks for different
raters), and results shown with and without the rule."""

from __future__ import annotations

import itertools

import pytest
from scipy.stats import binom

from annotation_db import InvalidInputError, ItemIn
from annotation_db.attention import (
    EXCLUDED,
    EXTRA_CHECK_RATE,
    KEPT,
    UNDECIDED,
    AttentionRule,
    AttentionSettings,
    careless_fail_rates,
    chance_fail_rate,
    check_offsets,
    check_passed,
    plan_checks,
    rule_for,
)
from annotation_db.gold import make_gold_items
from annotation_db.questions import appropriate, likert, preference
from annotation_db.results import Judgment, StudyData, attention_checks, summarize
from annotation_db.views import StudyProgress

PAPER_RULE = rule_for([appropriate()], 3)  # slip 0.2, three outputs: chance 7/8


# ---------------------------------------------------------------- the rule


def _every_answer(questions, n_outputs):
    """Every way to answer a check of ``n_outputs`` outputs (label "A" the original), each
    equally likely for a rater answering at random: (per_output answers, preference)."""
    labels = [chr(65 + i) for i in range(n_outputs)]
    per_q = []
    for q in questions:
        if q.per_output:
            values = [True, False] if q.kind == "appropriate" else list(range(1, 6))
            per_q.append([(q.name, combo) for combo in itertools.product(values, repeat=n_outputs)])
    prefs = [None]
    for q in questions:
        if q.kind == "preference":
            prefs = labels + ["tie", "all_bad"]
    for combos in itertools.product(*per_q):
        per_output = {lab: {name: vals[i] for name, vals in combos} for i, lab in enumerate(labels)}
        for pref in prefs:
            yield per_output, pref


@pytest.mark.parametrize(
    "questions,n_outputs",
    [
        ([appropriate()], 2),
        ([appropriate()], 3),
        ([likert("fluency", "?")], 2),
        ([likert("fluency", "?")], 3),
        ([preference()], 3),
        ([appropriate(), preference()], 3),
        ([appropriate(), likert("fluency", "?"), preference()], 2),
    ],
)
def test_the_chance_rate_is_the_share_of_all_random_answers_that_fail(questions, n_outputs):
    """The rule's chance rate is exactly what answering at random fails, counted over every
    possible answer to the check as the store scores it."""
    roles = {chr(65 + i): "original" if i == 0 else "corrupted" for i in range(n_outputs)}
    answers = list(_every_answer(questions, n_outputs))
    failed = sum(not check_passed(questions, roles, per, pref) for per, pref in answers)
    assert chance_fail_rate(questions, n_outputs) == pytest.approx(failed / len(answers))


def test_no_constant_answer_passes_a_check():
    """ "No" to everything, "Yes" to everything, one score everywhere, a tie or "all bad":
    each fails; the right answers pass."""
    qs = [appropriate(), likert("fluency", "?"), preference()]
    roles = {"A": "corrupted", "B": "original", "C": "corrupted"}
    for yes in (True, False):
        for score in range(1, 6):
            per = {lab: {"appropriate": yes, "fluency": score} for lab in roles}
            for pref in ("A", "B", "C", "tie", "all_bad"):
                assert not check_passed(qs, roles, per, pref)
    right = {
        "A": {"appropriate": False, "fluency": 2},
        "B": {"appropriate": True, "fluency": 4},
        "C": {"appropriate": False, "fluency": 3},
    }
    assert check_passed(qs, roles, right, "B")
    assert not check_passed(qs, roles, right, "tie")
    assert not check_passed(qs, roles, {**right, "C": {"appropriate": False, "fluency": 4}}, "B")
    # appropriate only: the original rejected alone is a failure too
    only = [appropriate()]
    assert not check_passed(only, roles, {**right, "B": {"appropriate": False}}, None)
    with pytest.raises(InvalidInputError, match="cannot tell them apart"):
        rule_for([], 3)  # no question a check can be failed on


def test_the_rule_is_a_binomial_likelihood_ratio_with_exact_error_rates():
    r = PAPER_RULE
    assert (r.slip, r.chance) == (0.2, pytest.approx(7 / 8))
    for m in range(1, 12):
        t = r.threshold(m)
        if t is None:  # one check: a single slip is too likely (20% > 5%) to exclude on
            assert binom.sf(m - 1, m, 0.2) > 0.05
            continue
        assert binom.sf(t - 1, m, 0.2) <= 0.05 < binom.sf(t - 2, m, 0.2)  # the smallest such t
        assert r.false_exclusion(m) == pytest.approx(binom.sf(t - 1, m, 0.2))
        assert r.detection(m) == pytest.approx(binom.sf(t - 1, m, 7 / 8))
        # the likelihood ratio grows with the failures: f >= t is "LR >= LR(t)"
        lrs = [r.log_lr(m, f) for f in range(m + 1)]
        assert lrs == sorted(lrs)
    assert r.threshold(1) is None and r.threshold(4) == 3
    assert r.checks_needed() == 4
    assert r.detection(4) == pytest.approx(0.9211, abs=1e-4)
    assert r.false_exclusion(4) == pytest.approx(0.0272, abs=1e-4)


def test_each_rater_is_excluded_kept_or_undecided():
    r = PAPER_RULE
    assert r.decide(4, 3) == EXCLUDED
    assert r.decide(4, 2) == KEPT  # four checks: the rule had its power
    assert r.decide(2, 2) == EXCLUDED  # 4% for an attentive rater: excluded at any count
    assert r.decide(3, 2) == UNDECIDED  # too few checks to tell
    assert r.decide(0, 0) == UNDECIDED
    sentence = r.describe()
    assert "4 checks, 3 or more failed" in sentence and "2.7%" in sentence and "92.1%" in sentence
    with pytest.raises(InvalidInputError, match="between 0 and 1"):
        AttentionRule(slip=0)


def test_the_planner_sizes_checks_per_rater_and_says_what_fewer_cost():
    plan = plan_checks(12, PAPER_RULE)
    assert (plan.checks_per_rater, plan.regular_per_rater, plan.reached) == (4, 8, True)
    assert "2 checks catch 77%" in plan.summary() and "3 checks catch 67%" in plan.summary()
    assert "none is surely free of a check" in plan.summary()
    tight = plan_checks(2, rule_for([appropriate()], 2))  # 1 check at most: nothing excludes
    assert not tight.reached and "Give each rater more items" in tight.summary()
    with pytest.raises(InvalidInputError, match="no regular item"):
        AttentionSettings(items_per_rater=5, checks_per_rater=5)


@pytest.mark.parametrize(
    "questions", [[appropriate()], [appropriate(), preference()], [preference()]]
)
def test_each_careless_way_of_answering_fails_checks_as_the_rule_counts(questions):
    """The failure rates the rule's power is stated against are those of the simulated
    careless raters (simulate._careless) on checks whose true text stands anywhere."""
    import random

    from annotation_db.simulate import CARELESS, _careless

    rng, labels, n = random.Random(0), ["A", "B", "C"], 3000
    pref = next((q for q in questions if q.KIND == "preference"), None)
    for strategy, rate in careless_fail_rates(questions, 3).items():
        failed = 0
        for _ in range(n):
            true = rng.randrange(3)
            texts = ["x" * rng.randint(5, 40) for _ in labels]
            yes, pick = _careless(rng, strategy, texts, pref)
            roles = {lab: "original" if i == true else "corrupted" for i, lab in enumerate(labels)}
            answers = {lab: {"appropriate": yes[i]} for i, lab in enumerate(labels)}
            chosen = labels[pick] if isinstance(pick, int) else pick
            failed += not check_passed(questions, roles, answers, chosen if pref else None)
        assert failed / n == pytest.approx(rate, abs=0.03), strategy
    assert tuple(careless_fail_rates(questions, 3)) == CARELESS


def test_the_power_is_stated_against_every_careless_rater_and_costs_checks():
    """Against careless raters of every kind the rule needs more checks than against random
    ones (always the first output passes one check in three); its power is their mean."""
    careless = rule_for([appropriate()], 3, against="careless")
    rates = careless_fail_rates([appropriate()], 3)
    assert careless.careless == tuple(rates.values())
    for m in (4, 7):
        t = careless.threshold(m)
        want = sum(binom.sf(t - 1, m, c) for c in rates.values()) / len(rates)
        assert careless.detection(m) == pytest.approx(want)
        assert careless.detection_random(m) == pytest.approx(PAPER_RULE.detection(m))
    assert careless.checks_needed() == 7 > PAPER_RULE.checks_needed() == 4
    plan = plan_checks(20, careless)
    assert plan.checks_per_rater == 7 and "a careless one" in plan.summary()
    with pytest.raises(InvalidInputError, match="careless or random"):
        rule_for([appropriate()], 3, against="lazy")


def test_a_study_states_its_power_against_careless_raters_and_an_old_one_keeps_its_rule():
    assert AttentionSettings().against == "careless"
    old = AttentionSettings.from_dict({"slip": 0.2, "items_per_rater": 12, "checks_per_rater": 4})
    assert old.against == "random" and not old.rule([appropriate()], 3).careless
    assert AttentionSettings.from_dict(None).against == "random"
    new = AttentionSettings.from_dict(
        AttentionSettings(items_per_rater=20, checks_per_rater=7).to_dict()
    )
    assert new.against == "careless" and new.rule([appropriate()], 3).careless


# ---------------------------------------------------------------- placement


def test_check_offsets_never_open_the_page_and_give_at_least_the_planned_checks():
    for seed in range(200):
        first = check_offsets(seed, 0, 12, 5)
        assert len(first) >= 5 and 0 not in first and max(first) < 12
        later = check_offsets(seed, 1, 12, 5)
        assert len(later) >= 5 and max(later) < 12
        assert check_offsets(seed, 1, 12, 5) == later  # drawn once per rater and run


def test_no_item_but_the_first_is_surely_free_of_a_check():
    """A rater who knows the placement and recognises every check they meet cannot tell that
    an item is no check from the positions seen so far: over many raters, whatever checks were
    met before an item (even all the planned ones), that item is a check at least
    EXTRA_CHECK_RATE of the time, never 0. One check per slice of the run (the old rule)
    left 57% of regular items surely free."""
    n, m = 12, 4
    seen_then: dict[tuple[int, frozenset[int]], list[bool]] = {}
    for seed in range(20000):
        offsets = check_offsets(seed, 0, n, m)
        for pos in range(1, n):
            before = frozenset(p for p in offsets if p < pos)
            seen_then.setdefault((pos, before), []).append(pos in offsets)
    enough = {k: v for k, v in seen_then.items() if len(v) >= 100}
    assert len(enough) > 50
    for (pos, before), outcomes in enough.items():
        share = sum(outcomes) / len(outcomes)
        assert share >= EXTRA_CHECK_RATE, (pos, sorted(before), share)
    # once the planned number was met, later items are still checks a fair share of the time
    after = [x for (_pos, before), v in enough.items() if len(before) >= m for x in v]
    assert len(after) > 1000 and 0.1 < sum(after) / len(after) < 0.5


def _study(store, adb, *, n_items, n_gold, k, attention=None, name="s"):
    items, outputs = adb.make_items(n_items)
    g_items, g_outs = make_gold_items(
        adb.make_passages(n_gold * 3), n_gold, blank="___", n_outputs=3
    )
    store.create_study(
        name,
        items + g_items,
        outputs + g_outs,
        raters_per_item=k,
        questions=["appropriate"],
        attention=attention,
    )
    return {o.text for o in g_outs}


def _walk(store, token, gold_texts, limit=None):
    """Positions of the checks and their texts, answering until nothing is left or limit."""
    checks, position = [], 0
    while (limit is None or position < limit) and (item := store.next_item(token)) is not None:
        position += 1
        if {o.text for o in item.outputs} & gold_texts:
            checks.append((position, item.text))
        ans = {o.label: {"appropriate": True} for o in item.outputs}
        store.submit(token, item.assignment_id, ans)
    return position, checks


def test_every_rater_gets_the_planned_checks_among_their_items(sqlite_store, adb):
    """6 checks in the study, 3 per rater among 8 items: each rater who does 8 items meets at
    least 3 (an extra one now and then: each other position is a check with probability
    EXTRA_CHECK_RATE, so no upper bound below the study's 6 holds every time), none as the
    first item, and raters meet different checks."""
    settings = AttentionSettings(items_per_rater=8, checks_per_rater=3)
    gold = _study(sqlite_store, adb, n_items=40, n_gold=6, k=3, attention=settings)
    firsts, sets = [], []
    for inv in sqlite_store.invite_many("s", [f"r{i}" for i in range(12)]):
        n, checks = _walk(sqlite_store, inv.token, gold, limit=8)
        assert n == 8 and len(checks) >= 3, checks
        assert all(pos != 1 for pos, _ in checks)
        firsts.append(checks[0][1])
        sets.append(frozenset(t for _, t in checks))
    assert len(set(firsts)) >= 4  # the least-used check first: raters differ
    assert len(set(sets)) >= 3


def test_a_late_rater_never_gets_a_page_of_checks_alone(sqlite_store, adb):
    gold = _study(sqlite_store, adb, n_items=4, n_gold=2, k=1)
    early = sqlite_store.invite("s", "early")
    n, checks = _walk(sqlite_store, early.token, gold)
    assert n == 6 and len(checks) == 2
    assert sqlite_store.study("s").judgments_open == 0  # what the admin is told at invite
    late = sqlite_store.invite("s", "late")
    assert sqlite_store.next_item(late.token) is None  # no checks alone
    assert sqlite_store.rater_progress(late.token).done == 0


def test_checks_planned_after_the_last_regular_item_still_come(sqlite_store, adb):
    """6 items and 2 checks for one rater whose schedule puts both checks at the end: they
    follow the 6 regular items (checks may come in a row while they do not outnumber the
    regular items)."""
    from annotation_db.schema import Rater

    settings = AttentionSettings(items_per_rater=8, checks_per_rater=2)
    seed = next(s for s in range(10_000) if check_offsets(s, 0, 8, 2) == {6, 7})
    gold = _study(sqlite_store, adb, n_items=6, n_gold=2, k=1, attention=settings)
    inv = sqlite_store.invite("s", "r")
    sqlite_store.db.write(lambda s: setattr(s.get(Rater, inv.rater_id), "seed", seed))
    n, checks = _walk(sqlite_store, inv.token, gold)
    assert n == 8 and [pos for pos, _ in checks] == [7, 8]
    assert sqlite_store.rater_progress(inv.token).done == 8


def test_a_rater_whose_items_run_out_gets_no_tail_of_checks(sqlite_store, adb):
    """Two raters share 3 items (1 rater each) in a study of 10 checks: whoever runs out of
    regular items is not handed the remaining checks one after another; the checks that come
    after their last regular item never make the checks outnumber the regular items."""
    settings = AttentionSettings(items_per_rater=12, checks_per_rater=5)
    for study in ("s1", "s2", "s3", "s4", "s5"):  # raters' check places are drawn: five draws
        gold = _study(sqlite_store, adb, n_items=3, n_gold=10, k=1, attention=settings, name=study)
        a, b = sqlite_store.invite_many(study, ["a", "b"])
        na, ca = _walk(sqlite_store, a.token, gold, limit=2)
        nb, cb = _walk(sqlite_store, b.token, gold)
        na2, ca2 = _walk(sqlite_store, a.token, gold)
        ca += [(na + pos, text) for pos, text in ca2]  # a's second walk counted on from na
        for n, checks in ((na + na2, ca), (nb, cb)):
            at = {pos for pos, _ in checks}
            regular = [p for p in range(1, n + 1) if p not in at]
            assert regular and regular[0] == 1  # a regular item, and it comes first
            if max(at, default=0) > regular[-1]:  # checks after the last regular item
                assert len(checks) <= len(regular), checks


# ---------------------------------------------------------------- results


def _j(rater, item=1, *, gold=False, passed=None):
    return Judgment(rater, item, gold, passed, None, None, [1, 2], 10.0)


def test_results_apply_the_rule_and_show_every_rater_beside_it():
    from annotation_db.results import OutputRow, RatingRow

    outputs = {1: OutputRow(1, 10, "a"), 2: OutputRow(2, 10, "b")}
    raters = {1: "careful", 2: "careless", 3: "brief"}
    judgments = [_j(1, 100 + i, gold=True, passed=i != 0) for i in range(5)]  # 1 of 5 failed
    judgments += [_j(2, 100 + i, gold=True, passed=i == 0) for i in range(5)]  # 4 of 5 failed
    judgments += [_j(3, 100, gold=True, passed=False)]  # 1 of 1: too few to tell
    judgments += [_j(r, 10) for r in raters]
    ratings = [RatingRow(r, 1, {"appropriate": r != 2}) for r in raters]
    progress = StudyProgress("s", "open", 1, 3, 3, 3, 1, 1.0, [])
    data = StudyData("s", [appropriate()], raters, judgments, outputs, ratings, 0, progress,
                     attention=AttentionSettings(against="random"), check_outputs=3)  # fmt: skip
    table, excluded = attention_checks(raters, judgments, PAPER_RULE)
    assert excluded == {2}
    assert [a.decision for a in table] == [KEPT, EXCLUDED, UNDECIDED]
    res = summarize(data, n_resamples=100)
    assert (res.n_raters_excluded, res.n_raters_undecided) == (1, 1)
    assert {s.system: s.appropriate.share for s in res.systems}["a"] == 1.0
    assert {s.system: s.appropriate.share for s in res.systems_all_raters}["a"] == 2 / 3
    assert res.attention_rule["checks_needed"] == 4
    assert "likelihood ratio" in res.attention_rule["description"]
    every = summarize(data, exclude=False, n_resamples=100)
    assert every.n_raters_excluded == 0 and every.systems[0].appropriate.share == 2 / 3
    assert [a.decision for a in every.attention] == [KEPT, EXCLUDED, UNDECIDED]  # still said
    strict = summarize(data, slip=0.3, n_resamples=100)  # the researcher's own slip rate
    assert strict.attention_rule["slip"] == 0.3


# ---------------------------------------------------------------- checks look like items

WORDS = ("river city north mountain king old war music early new film team small west "
         "station house family league season long").split()  # fmt: skip


def _system_fills(rng, n):
    """Fills written the way the systems write them (the probe's study: most start with a
    capital and read like sentences; some end mid-phrase, a few have a leading space)."""
    out = []
    for _ in range(n):
        words = [rng.choice(WORDS) for _ in range(rng.randint(1, 12))]
        text = " ".join(words)
        if rng.random() < 0.67:
            text = text[0].upper() + text[1:]
        text += rng.choice([".", ".", "", ",", "!"])
        if rng.random() < 0.1:
            text = " " + text
        out.append([text])
    return out


def _pool(rng, n):
    """Held-out passages whose hidden spans are cut as real text is: many word runs mid-
    sentence (lower case, no final punctuation: what gave the checks away before they were
    restyled), whole sentences (a capital and a full stop), runs before a comma."""
    pool = []
    for i in range(n):
        span = " ".join(rng.choice(WORDS) for _ in range(rng.randint(1, 12)))
        r = rng.random()
        if r < 0.45:
            span = span[0].upper() + span[1:] + "."
        elif r < 0.55:
            span += ","
        pool.append(ItemIn(f"h{i}", f"Some {i} text [blank] goes on.", [span], f"src{i}"))
    return pool


def _features(fills):
    from annotation_db.gold import surface

    rows = []
    for f in fills:
        lead, upper, tail = surface(f)
        rows.append((bool(upper), bool(tail), bool(lead), len(f.split()), len(f)))
    return rows


def _fisher_and_mw(check_rows, system_rows):
    from scipy.stats import fisher_exact, mannwhitneyu

    ps = {}
    for k, name in enumerate(("capital", "final punctuation", "leading space")):
        a, b = sum(r[k] for r in check_rows), sum(r[k] for r in system_rows)
        table = [[a, len(check_rows) - a], [b, len(system_rows) - b]]
        ps[name] = fisher_exact(table).pvalue
    for k, name in ((3, "words"), (4, "characters")):
        ps[name] = mannwhitneyu([r[k] for r in check_rows], [r[k] for r in system_rows]).pvalue
    return ps


def _generated_studies(styled: bool, n_studies=40):
    """Check fills and system fills pooled over generated studies (30 items x 3 systems, 4
    checks of 3 outputs each), as the probe compared them in one study."""
    import random

    from annotation_db.gold import held_out_gold_items

    checks, systems = [], []
    for seed in range(n_studies):
        rng = random.Random(seed)
        fills = _system_fills(rng, 90)
        lengths = [len(f[0].split()) for f in fills]
        _, outs = held_out_gold_items(
            _pool(rng, 60), 4, blank="[blank]", lengths=lengths, n_outputs=3, seed=seed,
            styles=fills if styled else (),
        )  # fmt: skip
        checks += [f for o in outs for f in o.fills]
        systems += [f[0] for f in fills]
    return _features(checks), _features(systems)


def test_check_fills_cannot_be_told_from_system_fills_by_their_surface():
    """Fisher's exact test on capital-initial, final punctuation and leading space, and
    Mann-Whitney on words and characters, over 40 generated studies (480 check fills against
    3600 system fills): no feature tells them apart (p > 0.01), though the true texts are shown
    as written (chosen among passages whose surface is the systems'). Without the styling the
    same test finds the capitals at once, so it has the power to."""
    check_rows, system_rows = _generated_studies(styled=True)
    ps = _fisher_and_mw(check_rows, system_rows)
    assert all(p > 0.01 for p in ps.values()), ps
    raw = _fisher_and_mw(*_generated_studies(styled=False))
    assert raw["capital"] < 1e-6 and raw["final punctuation"] < 1e-6, raw


def test_the_true_text_of_a_check_is_shown_as_written():
    """Restyling the true text broke it for readers ("back seat. of the car", "51% Of the
    total", "mediterranean Sea"): on such passages the true text is shown exactly as written,
    while the wrong fills take the systems' surface."""
    from annotation_db.gold import held_out_gold_items

    real = [
        ("The children fell asleep in the [blank] of the car.", "back seat"),
        ("In 2011, [blank] of the total population were female.", "51%"),
        ("The river reaches the [blank] near the delta.", "Mediterranean Sea"),
        ("Commuters hope the bridge will [blank] for thousands of them.", "shorten the journey"),
        ("Brønsted acid-base reactions are [blank] transfers.", "proton"),
        ("In mid career and later, he [blank] many papers.", "published"),
    ]
    pool = [ItemIn(f"r{i}", t, [o], f"doc{i}") for i, (t, o) in enumerate(real)]
    styles = [["A capital fill."], ["Another one!"]] * 10
    for seed in range(10):
        items, outs = held_out_gold_items(
            pool, 2, blank="[blank]", n_outputs=3, seed=seed, styles=styles
        )
        originals = {it.key: it.original for it in items}
        for o in outs:
            if o.gold_role == "original":
                assert [f.strip() for f in o.fills] == originals[o.item_key]
            else:
                for f in o.fills:  # the systems' surface: a capital, their punctuation
                    letters = [c for c in f if c.isalpha()]
                    assert (not letters or letters[0].isupper()) and f.strip()[-1] in ".!", f


def test_restyle_copies_case_punctuation_and_leading_space():
    from annotation_db.gold import restyle

    assert restyle("will then pause,", "The dog barked.") == "Will then pause."
    assert restyle("Paris is big.", " and then") == " paris is big"
    assert restyle("'quoted' words", "Also!") == "'Quoted' words!"
