"""Every view of a study's results holds, whatever its counts (issue 58 point 1, tour M1).

The tour's study had both baselines at 0 of 12 once an attention check excluded a rater; the
Wilson interval's low end came out 2.8e-17 above the share of 0, the plot's error bar was
negative, and Results showed three "Error" pills. Hypothesis draws the counts here:

- the share and its interval alone, for every count from 0 to n in clusters of any size;
- the statistics, the Results table, its JSON and its plot (as Gradio draws it), from
  hand-made study data: any yes count per system, raters excluded by failed checks or kept, a
  system whose outputs nobody rated;
- a whole study through the store and the admin's views: one to three systems, items that
  show only some of them, any mix of the question kinds, attention checks or none, raters who
  answer "yes" or "no" to everything, as they find each system, or stop early, a rule strict
  enough to exclude after one failed check or not; then progress, Results, the HTML report
  and the CSV, JSONL and datasets exports;
- the demo's blind votes ("arena", listed in Admin beside the studies): any choices, ties,
  "all bad" and votes seen unblinded, through the same views.

No model: the outputs are written by hand.
"""

from __future__ import annotations

import json
import math
import random
import re
from dataclasses import dataclass
from itertools import count
from types import SimpleNamespace

import gradio as gr
import pytest
from app_fixtures import admin_request, make_app
from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st

from annotation_db import ItemIn, OutputIn, StudyProgress
from annotation_db.attention import AttentionSettings
from annotation_db.questions import appropriate, likert
from annotation_db.results import summarize
from annotation_db.stats import clustered_proportion, wilson_interval
from annotation_db.study_data import Judgment, OutputRow, RatingRow, StudyData
from app.admin.results import rates_plot, results_rows

SYSTEMS = ("magnet", "base-zero-shot", "base-five-shot")
QUESTIONS = ("appropriate", "likert:fluency", "preference", "comment")
NAN = re.compile(r"\bnan\b", re.IGNORECASE)


def _holds(p) -> None:
    """A share judged appropriate inside its own interval, inside [0, 1]."""
    assert 0 <= p.low <= p.share <= p.high <= 1, p


# ---------------------------------------------------------------- the share and its interval

clusters = st.lists(st.integers(1, 4).flatmap(lambda k: st.tuples(st.integers(0, k), st.just(k))))


@settings(max_examples=200, deadline=None, database=None)
@given(clusters=clusters, confidence=st.sampled_from([0.8, 0.9, 0.95, 0.99]))
def test_a_share_lies_inside_its_interval_for_every_count_from_0_to_n(clusters, confidence):
    """At 0 of n and n of n too (0 of 3 had a low end of 5.6e-17, 1 of 1 a high end of
    0.9999999999999999)."""
    yes, sizes = [y for y, _ in clusters], [k for _, k in clusters]
    p = clustered_proportion(yes, sizes, confidence)
    if p.n:
        _holds(p)
        _holds(wilson_interval(p.successes, p.n, confidence))
    else:
        assert math.isnan(p.share)


# ---------------------------------------------------------------- statistics, table, plot


@st.composite
def study_data(draw) -> StudyData:
    """Per system, outputs each judged by some of the raters (all yes, all no, or mixed);
    raters who fail every attention check they get (excluded under a rule at level 0.3) or
    pass them; systems nobody rated."""
    outputs, ratings, judgments = {}, [], []
    raters = {r: f"rater {r}" for r in range(1, draw(st.integers(1, 4)) + 1)}
    careless = draw(st.sets(st.sampled_from(sorted(raters))))
    for r in raters:
        for _ in range(draw(st.integers(0, 2))):
            judgments.append(Judgment(r, 10_000, True, r not in careless, None, None, [], 5.0))
    for system in draw(st.lists(st.sampled_from(SYSTEMS), min_size=1, unique=True)):
        verdict = draw(st.sampled_from([False, True, None]))  # no to all, yes to all, mixed
        for _ in range(draw(st.integers(0, 7))):
            oid = len(outputs) + 1
            outputs[oid] = OutputRow(oid, oid, system)
            for r in draw(st.lists(st.sampled_from(sorted(raters)), unique=True)):
                yes = draw(st.booleans()) if verdict is None else verdict
                answers = {"appropriate": yes, "fluency": draw(st.integers(1, 5))}
                ratings.append(RatingRow(r, oid, answers))
                judgments.append(Judgment(r, oid, False, None, None, None, [oid], 3.0))
    progress = StudyProgress("s", "open", len(outputs), 1, len(ratings), len(ratings), 0, 1.0, [])
    return StudyData(
        "s",
        [appropriate(), likert("fluency", "How fluent is it?")],
        raters,
        judgments,
        outputs,
        ratings,
        0,
        progress,
        AttentionSettings(alpha=0.3),
        check_outputs=3,
    )


@settings(max_examples=60, deadline=None, database=None)
@given(data=study_data(), exclude=st.booleans())
def test_the_results_table_json_and_plot_hold_for_any_counts(data, exclude):
    """What Results shows, from the statistics on: four cells per row and no "nan", JSON with
    no NaN, and the plot drawn as Gradio draws it."""
    res = summarize(data, exclude=exclude, n_resamples=50)
    for s in res.systems + res.systems_all_raters:
        if s.appropriate is not None and s.appropriate.n:
            _holds(s.appropriate)
    json.dumps(res.to_dict(), allow_nan=False)
    for row in results_rows(res):
        assert len(row) == 4 and not any(NAN.search(str(c)) for c in row), row
    plot = rates_plot(res)
    if plot is not None:
        assert gr.Plot().postprocess(plot) is not None


# ---------------------------------------------------------------- a whole study, every view

STUDIES = count()


@dataclass(frozen=True)
class Rater:
    verdicts: tuple[bool | None, ...]  # per system of SYSTEMS: always yes, always no, or mixed
    careful: bool  # passes the attention checks (else answers them as any other output)
    n_items: int  # answered before stopping (0: invited, nothing done)
    seed: int  # how a mixed verdict falls, output by output

    def likes(self, text: str) -> bool:
        if ("original" in text or "corrupted" in text) and self.careful:  # a check's output
            return "original" in text
        system = next(s for s in SYSTEMS if f"of {s} " in text)
        verdict = self.verdicts[SYSTEMS.index(system)]
        return random.Random(f"{self.seed}:{text}").random() < 0.5 if verdict is None else verdict


@dataclass(frozen=True)
class Plan:
    shown: tuple[tuple[str, ...], ...]  # per item, the systems it has outputs of
    questions: tuple[str, ...]
    n_gold: int
    alpha: float  # the attention rule's level: at 0.3 one failed check excludes
    raters: tuple[Rater, ...]


@st.composite
def plans(draw) -> Plan:
    systems = draw(st.lists(st.sampled_from(SYSTEMS), min_size=1, unique=True))
    item = st.lists(st.sampled_from(systems), min_size=1, unique=True).map(tuple)
    shown = tuple(draw(st.lists(item, min_size=1, max_size=7)))
    questions = tuple(draw(st.lists(st.sampled_from(QUESTIONS), min_size=1, unique=True)))
    checks_possible = len(shown[0]) >= 2 and len({len(s) for s in shown}) == 1
    n_gold = draw(st.integers(0, 2)) if checks_possible else 0
    every = len(shown) + n_gold
    rater = st.builds(
        Rater,
        st.tuples(*[st.sampled_from([False, True, None])] * len(SYSTEMS)),
        st.booleans(),
        st.one_of(st.just(every), st.integers(0, every)),
        st.integers(0, 99),
    )
    raters = tuple(draw(st.lists(rater, min_size=1, max_size=3)))
    return Plan(shown, questions, n_gold, draw(st.sampled_from([0.05, 0.3])), raters)


# The tour's study, shrunk: three systems, a careful rater who finds only MAGNET appropriate,
# one who says yes to everything and is excluded by a failed check: both baselines 0 of 3.
TOUR = Plan(
    shown=(SYSTEMS,) * 3,
    questions=("appropriate",),
    n_gold=1,
    alpha=0.3,
    raters=(Rater((True, False, False), True, 4, 0), Rater((True, True, True), False, 4, 0)),
)


@pytest.fixture(scope="module")
def app(tmp_path_factory):
    app = make_app(tmp_path_factory.mktemp("results"), SimpleNamespace())  # no model needed
    yield app
    app.store.close()


def _make_study(app, plan: Plan) -> str:
    name = f"s{next(STUDIES)}"
    items, outputs = [], []
    for i, systems in enumerate(plan.shown):
        items.append(ItemIn(f"item-{i}", f"Passage {i} has a [blank] in it.", ["truth"]))
        outputs += [
            OutputIn(f"item-{i}", s, f"Passage {i} has a fill of {s} in it.", [f"fill of {s}"])
            for s in systems
        ]
    for g in range(plan.n_gold):
        key = f"check-{g}"
        items.append(ItemIn(key, f"Check {g} reads a [blank] here.", ["truth"], is_gold=True))
        for j, s in enumerate(plan.shown[0]):
            role = "original" if j == 0 else "corrupted"
            text = f"Check {g} reads a {role} {j} of {s} here."
            outputs.append(OutputIn(key, s, text, [f"{role} {j} of {s}"], gold_role=role))
    app.store.create_study(
        name,
        items,
        outputs,
        questions=list(plan.questions),
        raters_per_item=len(plan.raters),
        attention=AttentionSettings(alpha=plan.alpha),
    )
    return name


def _rate(app, name: str, plan: Plan) -> None:
    invites = app.store.invite_many(name, [f"rater {i}" for i in range(len(plan.raters))])
    for rater, inv in zip(plan.raters, invites, strict=True):
        for _ in range(rater.n_items):
            item = app.store.next_item(inv.token)
            if item is None:
                break
            answers = {
                o.label: {
                    q.removeprefix("likert:"): (
                        rater.likes(o.text) if q == "appropriate" else 2 + 2 * rater.likes(o.text)
                    )
                    for q in plan.questions
                    if q not in ("preference", "comment")
                }
                for o in item.outputs
            }
            pref = None
            if "preference" in plan.questions:
                liked = [o.label for o in item.outputs if rater.likes(o.text)]
                pref = liked[0] if liked else ["tie", "all_bad"][rater.seed % 2]
            app.store.submit(inv.token, item.assignment_id, answers, preference=pref)


def _downloaded(app, link: str) -> str:
    ticket = re.search(r"\(admin-files/([^)]+)\)", link).group(1)
    return app.downloads.take(ticket).read_text(encoding="utf-8")


@settings(
    max_examples=20,
    deadline=None,
    database=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large],
)
@example(plan=TOUR, exclude=True)
@given(plan=plans(), exclude=st.booleans())
def test_every_results_view_holds_for_any_counts_exclusions_and_empty_systems(app, plan, exclude):
    name = _make_study(app, plan)
    _rate(app, name, plan)
    req = admin_request(app)

    assert len(app.admin_progress(req, name).rows) == len(plan.raters)

    shown = app.admin_results(req, name)
    json.dumps(shown.results, allow_nan=False)  # what gr.JSON gets: no NaN
    for key in ("systems", "systems_all_raters"):
        for s in shown.results[key]:
            if s["appropriate"] and s["appropriate"]["n"]:
                _holds(SimpleNamespace(**s["appropriate"]))
    for row in shown.table:
        assert len(row) == 4 and math.isfinite(row[1]), row
        assert not any(NAN.search(str(cell)) for cell in row[2:]), row
    if shown.plot is not None:
        assert gr.Plot().postprocess(shown.plot) is not None  # drawn as the page draws it

    page = _downloaded(app, app.admin_report(req, name, exclude))
    assert page.startswith("<!doctype html>") and page.rstrip().endswith("</html>")
    assert not NAN.search(re.sub(r"base64,[^']*", "", page))

    n_ratings = len(_downloaded(app, app.admin_export(req, name, "jsonl")).splitlines())
    csv_lines = _downloaded(app, app.admin_export(req, name, "csv")).splitlines()
    assert len(csv_lines) == n_ratings + 1 or n_ratings == 0
    folder = app.store.export(name, "datasets", app.downloads.new_path(f"{name}-datasets"))
    assert len((folder / "ratings.jsonl").read_text().splitlines()) == n_ratings


@settings(max_examples=10, deadline=None, database=None)
@given(
    votes=st.lists(
        st.tuples(
            st.lists(st.sampled_from(SYSTEMS), min_size=2, unique=True),
            st.sampled_from(["A", "B", "C", "tie", "all_bad"]),
            st.booleans(),
        ),
        min_size=1,
        max_size=6,
    )
)
def test_the_demos_votes_hold_in_every_results_view(app, votes):
    for systems, choice, seen in votes:
        if choice == "C" and len(systems) < 3:
            choice = "tie"
        outputs = [OutputIn("v", s, f"A fill of {s} .", [s]) for s in systems]
        app.store.record_blind_vote("A [blank] here.", outputs, choice, seen_unblinded=seen)
    req = admin_request(app)
    shown = app.admin_results(req, "arena")
    json.dumps(shown.results, allow_nan=False)
    assert all(len(row) == 4 and not any(NAN.search(str(c)) for c in row) for row in shown.table)
    page = _downloaded(app, app.admin_report(req, "arena", True))
    assert not NAN.search(re.sub(r"base64,[^']*", "", page))
    assert _downloaded(app, app.admin_export(req, "arena", "csv")).startswith("study,")
