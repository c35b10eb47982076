"""Progress and results: the raters' progress, the results as a table in words (n on every
row), as JSON, and as a plot of the share judged appropriate per system.
"""

from __future__ import annotations

import gradio as gr

from annotation_db import fill_summary
from annotation_db.report import bar_length, plot_label
from annotation_db.results import not_enough
from magnet_model.systems import TITLES

from ..outputs import AdminProgress, AdminResults
from ..services import user_errors
from .base import AdminBase
from .view import admin_view


class ResultViews(AdminBase):
    """Progress and results of a study."""

    @admin_view("Showing the progress")
    def admin_progress(self, request: gr.Request | None, study: str) -> AdminProgress:
        self._admin(request)
        with user_errors():
            p = self.store.progress(study)
        rows = [
            [r.rater_id, r.display_name, r.done, r.open, r.remaining, r.gold_done, r.gold_failed]
            + ["revoked" if r.revoked else "active"]
            for r in p.raters
        ]
        summary = (
            f"{p.judgments_done} of {p.judgments_needed} judgments ({p.share_done:.0%}); "
            f"{p.items_complete} of {p.n_items} items complete; status {p.status}. "
            + fill_summary(self.store.fill_counts(study))
        )
        return AdminProgress(summary, rows)

    @admin_view("Showing the results")
    def admin_results(self, request: gr.Request | None, study: str) -> AdminResults:
        """-> a table with n on every row, the results as JSON, a plot of the appropriate
        share per system with intervals."""
        self._admin(request)
        with user_errors():
            res = self.store.results(study)
        return AdminResults(results_rows(res), res.to_dict(), rates_plot(res))


def _interval(low, high, note: str | None, fmt: str) -> str:
    """'[low, high]', or the note that stands where there are too few judgments."""
    if note or low is None or high is None or low != low:  # NaN: no interval
        return note or "no interval"
    return f"[{fmt.format(low)}, {fmt.format(high)}]"


def _number(x, fmt: str) -> str:
    """x in fmt, or a dash where there is no number (None, NaN: no ratings yet)."""
    return "–" if x is None or x != x else fmt.format(x)


def results_rows(res) -> list[list]:
    """[what, n, estimate, 95% interval] for every number of a study's results, in words;
    below the minimum n the interval column says "not enough votes"."""
    rows: list[list] = []
    every = {s.system: s.appropriate for s in res.systems_all_raters}
    for s in res.systems:
        title = TITLES.get(s.system, s.system)
        if s.appropriate is not None:
            rows.append(_share_row(f"{title}: judged appropriate", s.appropriate, res.min_n))
            if res.n_raters_excluded and every.get(s.system) is not None:
                what = f"{title}: judged appropriate, every rater (no exclusion)"
                rows.append(_share_row(what, every[s.system], res.min_n))
        for q, m in s.likert.items():
            iv = _interval(m.low, m.high, not_enough(m.n, res.min_n), "{:.2f}")
            mean = f"{m.mean:.2f}" if m.n else "–"
            rows.append([f"{title}: {q.replace('_', ' ')} (mean)", m.n, mean, iv])
    for p in res.pairwise:
        a, b = TITLES.get(p.system_a, p.system_a), TITLES.get(p.system_b, p.system_b)
        iv = _interval(p.low, p.high, p.note, "{:.0%}")
        rows.append([f"{a} beats {b} (ties count half)", p.n, _number(p.win_rate_a, "{:.0%}"), iv])
    for b in res.bradley_terry:
        title = TITLES.get(b.system, b.system)
        iv = _interval(b.low, b.high, b.note, "{:+.2f}")
        rows.append([f"{title}: Bradley–Terry strength", b.n, _number(b.score, "{:+.2f}"), iv])
    rows += _attention_rows(res)
    return rows


def _share_row(what: str, a, min_n: int) -> list:  # noqa: ANN001 - a Proportion
    # the same rule as every other row (the table's caption): an interval from min_n on
    iv = _interval(a.low, a.high, not_enough(a.n, min_n), "{:.0%}")
    iv = iv if a.n else "no ratings yet"
    return [what, a.n, _number(a.share if a.n else None, "{:.0%}"), iv]  # never "nan%"


def _attention_rows(res) -> list[list]:
    """The attention rule in words, and how many raters it excluded and left undecided."""
    rule = res.attention_rule
    n = res.n_raters_included + res.n_raters_excluded
    if rule is None:
        return [["Attention checks: these questions cannot tell a random rater", n, "–", "–"]]
    applied = "" if res.exclude else " (not applied to the rows above)"
    return [
        [f"Raters excluded by the attention rule{applied}", n, res.n_raters_excluded,
         rule["description"]],
        ["Raters undecided (too few checks to tell; counted)", n, res.n_raters_undecided, "–"],
    ]  # fmt: skip


def rates_plot(res):
    """Share judged appropriate per system with its interval (matplotlib figure), or None when
    no system has a yes/no answer yet. A share of 0 is a bar of height 0; an error bar is never
    negative (bar_length)."""
    rows = [s for s in res.systems if s.appropriate is not None and s.appropriate.n]
    if not rows:
        return None
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(figsize=(5, 3))
    shares = [s.appropriate.share for s in rows]
    err = [
        [bar_length(s.appropriate.low, s.appropriate.share) for s in rows],
        [bar_length(s.appropriate.share, s.appropriate.high) for s in rows],
    ]
    names = [f"{plot_label(TITLES.get(s.system, s.system))}\nn = {s.appropriate.n}" for s in rows]
    ax.bar(names, shares, yerr=err, capsize=4)
    ax.set_ylim(0, 1)
    ax.set_ylabel("judged appropriate")
    fig.tight_layout()
    plt.close(fig)
    return fig
