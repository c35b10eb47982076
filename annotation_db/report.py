"""A study's report: one self-contained HTML file (figures embedded as PNG, nothing fetched).

Per-system rates with intervals, the fills' problems per system (empty, overlong,
unfinished, chat replies, copies, repeats) with examples, pairwise win rates,
Bradley-Terry with intervals, alpha per question, attention-check exclusions, rater timing, and
example items with each system's fill. Every text that came from a user (study, items,
outputs, rater names) is escaped.

    python -m annotation_db report STUDY --out report.html [--no-exclusion] [--slip-rate 0.2]
"""

from __future__ import annotations

import base64
import html
import io
import os
from collections import defaultdict
from collections.abc import Mapping
from datetime import UTC, datetime
from pathlib import Path
from typing import TYPE_CHECKING

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402
from sqlalchemy import select  # noqa: E402

from .fills import PROBLEM_NAMES, PROBLEMS, fill_counts  # noqa: E402
from .results import StudyResults  # noqa: E402
from .schema import Assignment, Item, Rater, Study  # noqa: E402

if TYPE_CHECKING:
    from .store import AnnotationStore

N_EXAMPLES = 5
CSS = """
body{font-family:system-ui,sans-serif;max-width:60rem;margin:2rem auto;padding:0 1rem;
color:#222;line-height:1.45}
table{border-collapse:collapse;margin:.5rem 0 1.5rem;display:block;overflow-x:auto;
max-width:100%}
th,td{border:1px solid #ccc;padding:.25rem .6rem;text-align:left;vertical-align:top}
th{background:#f3f3f3} td.num{text-align:right;font-variant-numeric:tabular-nums}
.fill{background:#fde68a;padding:0 .15rem} .note{color:#555;font-size:.9rem}
img{max-width:100%;height:auto} .excluded{color:#b91c1c}
@media (max-width:40rem){body{margin:1rem auto;font-size:1rem}th,td{padding:.2rem .4rem}}
"""


def _question(q) -> str:
    """A question as 'name: prompt', with the kind only when the name does not already say it (not
    "appropriate (appropriate): ...")."""
    kind = "" if q.kind == q.name else f" ({html.escape(q.kind)})"
    return f"<b>{html.escape(q.name)}</b>{kind}: {html.escape(q.prompt)}"


def write_report(
    store: AnnotationStore,
    study: str,
    out: str | os.PathLike[str],
    *,
    exclude: bool = True,
    slip: float | None = None,
    n_resamples: int = 1000,
    seed: int = 0,
    titles: Mapping[str, str] | None = None,
) -> Path:
    """Write the study's HTML report to ``out`` and return its path. ``titles``: how readers
    know the systems (a system key -> its title), in the order the report lists them."""
    html_text = render_report(
        store,
        study,
        exclude=exclude,
        slip=slip,
        n_resamples=n_resamples,
        seed=seed,
        titles=titles,
    )
    path = Path(out)
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(html_text, encoding="utf-8")
    return path


def render_report(
    store: AnnotationStore,
    study: str,
    *,
    exclude: bool = True,
    slip: float | None = None,
    n_resamples: int = 1000,
    seed: int = 0,
    titles: Mapping[str, str] | None = None,
) -> str:
    nm = Names(dict(titles or {}))
    info = store.study(study)
    res = store.results(study, exclude=exclude, slip=slip, n_resamples=n_resamples, seed=seed)
    items, outputs = store.items(study)
    seconds = store.db.read(lambda s: _seconds_per_item(s, study))
    e = html.escape
    parts = [
        "<!doctype html><html lang='en'><head><meta charset='utf-8'>",
        # a phone lays the page out at its own width, not 980 px of tiny text
        "<meta name='viewport' content='width=device-width, initial-scale=1'>",
        f"<title>Study report: {e(info.name)}</title><style>{CSS}</style></head><body>",
        f"<h1>Study report: {e(info.name)}</h1>",
        "<p class='note'>Generated "
        f"{datetime.now(UTC).strftime('%Y-%m-%d %H:%M UTC')} by annotation_db. Status "
        f"{e(info.status)}; {info.n_items} regular items and "
        f"{info.n_gold} attention check{'' if info.n_gold == 1 else 's'}; "
        f"{info.raters_per_item} raters per item; {info.n_raters} raters invited; "
        f"{res.progress.judgments_done} of {res.progress.judgments_needed} judgments done "
        f"({res.progress.share_done:.0%}).</p>",
        "<p>Questions: " + "; ".join(_question(q) for q in info.questions) + "</p>",
    ]
    if info.instructions:
        parts.append(f"<details><summary>Instructions</summary><pre>{e(info.instructions)}</pre>")
        parts.append("</details>")
    parts += _rates(res, nm)
    parts += _exclusion_effect(res, nm)
    parts += _fills(items, outputs, nm)
    parts += _likert(res, nm)
    parts += _preferences(res, nm)
    parts += _agreement(res)
    parts += _attention(res)
    parts += _timing(res, seconds)
    parts += _examples(items, outputs, nm)
    parts.append("</body></html>")
    return "\n".join(parts)


# ---------------------------------------------------------------------- sections


class Names:
    """Systems as readers know them: their titles (escaped), listed in the titles' order
    (systems without a title after them, by key)."""

    def __init__(self, titles: dict[str, str]) -> None:
        self.titles = titles
        self.order = {k: i for i, k in enumerate(titles)}

    def __call__(self, system: str) -> str:
        return html.escape(self.plain(system))

    def plain(self, system: str) -> str:
        return self.titles.get(system, system)

    def key(self, system: str) -> tuple[int, str]:
        return (self.order.get(system, len(self.order)), system)


def plot_label(text: str) -> str:
    """``text`` as a Matplotlib label shows it: a '$' would start mathtext, and a system named
    ``$\\undefinedmacro{x}$`` made every figure (and the whole report) fail."""
    return text.replace("$", r"\$")


def _pct(x: float | None) -> str:
    return "–" if x is None or x != x else f"{x:.1%}"


def _num(x: float | None, fmt: str = ".2f") -> str:
    return "–" if x is None or x != x else format(x, fmt)


def _rates(res: StudyResults, nm: Names) -> list[str]:
    rows = [s for s in res.systems if s.appropriate is not None and s.appropriate.n]
    rows.sort(key=lambda s: nm.key(s.system))
    out = [f"<h2>Judged appropriate, per system ({res.confidence:.0%} intervals)</h2>"]
    if not rows:
        return [*out, "<p>No yes/no answers yet.</p>"]
    out.append(
        "<table><tr><th>system</th><th>appropriate</th><th>interval</th><th>yes / judgments"
        "</th><th>outputs</th><th>design effect</th></tr>"
    )
    for s in rows:
        a = s.appropriate
        out.append(
            f"<tr><td>{nm(s.system)}</td><td class=num>{_pct(a.share)}</td>"
            f"<td class=num>{_pct(a.low)} – {_pct(a.high)}</td><td class=num>{a.successes} / "
            f"{a.n}</td><td class=num>{s.n_outputs}</td>"
            f"<td class=num>{a.design_effect:.2f}</td></tr>"
        )
    out.append("</table>")
    out.append(
        "<p class='note'>Wilson intervals at the effective sample size: the raters of one "
        "output are one cluster, so k raters who agree count as fewer than k independent "
        "judgments (design effect = variance / binomial variance, at least 1).</p>"
    )
    fig, ax = plt.subplots(figsize=(6, 3))
    ax.bar(
        [plot_label(nm.plain(s.system)) for s in rows],
        [s.appropriate.share for s in rows],
        yerr=[
            [bar_length(s.appropriate.low, s.appropriate.share) for s in rows],
            [bar_length(s.appropriate.share, s.appropriate.high) for s in rows],
        ],
        capsize=5,
        color="#4f81bd",
    )
    ax.set_ylim(0, 1)
    ax.set_ylabel("judged appropriate")
    out.append(_img(fig, "Share judged appropriate per system with intervals"))
    return out


def _fills(items, outputs, nm: Names) -> list[str]:  # noqa: ANN001 - ItemIn / OutputIn lists
    """Per system, how many outputs raters saw with each problem (fills.py), and examples."""
    counts = sorted(fill_counts(items, outputs), key=lambda c: nm.key(c.system))
    if not counts:
        return []
    head = "".join(f"<th>{p}</th>" for p in PROBLEM_NAMES)
    out = [
        "<h2>Problems of the fills, per system</h2>",
        f"<table><tr><th>system</th><th>outputs</th><th>flagged</th>{head}</tr>",
    ]
    for c in counts:
        unchecked = f" ({c.unchecked} stored without fills)" if c.unchecked else ""
        cells = "".join(f"<td class=num>{c.counts.get(p, 0)}</td>" for p in PROBLEM_NAMES)
        out.append(
            f"<tr><td>{nm(c.system)}</td><td class=num>{c.n_outputs}{unchecked}</td>"
            f"<td class=num>{c.flagged}</td>{cells}</tr>"
        )
    out.append("</table>")
    rules = "; ".join(f"<b>{p}</b>: {html.escape(why)}" for p, why in PROBLEMS)
    out.append(
        "<p class='note'>Outputs of regular items; an output counts once per problem any of "
        f"its fills has. {rules}.</p>"
    )
    examples = [
        f"<li>{nm(c.system)}, <b>{p}</b>: "
        + "; ".join(
            f"{html.escape(f.item_key)}: <span class=fill>{html.escape(f.fill)}</span>"
            for f in c.examples[p]
        )
        + "</li>"
        for c in counts
        for p in PROBLEM_NAMES
        if c.examples.get(p)
    ]
    if examples:
        out.append("<p>Examples:</p><ul>" + "".join(examples) + "</ul>")
    return out


def _likert(res: StudyResults, nm: Names) -> list[str]:
    names = sorted({q for s in res.systems for q in s.likert})
    if not names:
        return []
    out = ["<h2>Scales (mean, bootstrap interval over items)</h2><table><tr><th>system</th>"]
    out[-1] += "".join(f"<th>{html.escape(n)}</th>" for n in names) + "</tr>"
    for s in sorted(res.systems, key=lambda s: nm.key(s.system)):
        cells = []
        for n in names:
            m = s.likert.get(n)
            cells.append(
                f"<td class=num>{_num(m.mean)} ({_num(m.low)} – {_num(m.high)})</td>"
                if m
                else "<td>–</td>"
            )
        out.append(f"<tr><td>{nm(s.system)}</td>{''.join(cells)}</tr>")
    out.append("</table>")
    return out


def _preferences(res: StudyResults, nm: Names) -> list[str]:
    out = ["<h2>Preferences</h2>"]
    if not res.pairwise:
        return [*out, "<p>No preference judgments.</p>"]
    pc = res.preference_counts
    out.append(
        f"<p>{pc.get('choice', 0)} choices, {pc.get('tie', 0)} ties, "
        f"{pc.get('all_bad', 0)} 'all bad' (left out of win rates).</p>"
    )
    out.append(
        "<h3>Pairwise win rates (ties count half)</h3><table><tr><th>system A</th>"
        "<th>system B</th><th>A wins</th><th>interval</th><th>judgments</th></tr>"
    )
    for p in res.pairwise:
        out.append(
            f"<tr><td>{nm(p.system_a)}</td><td>{nm(p.system_b)}</td>"
            f"<td class=num>{_pct(p.win_rate_a)}</td><td class=num>"
            f"{_interval(p.low, p.high, _pct, p.note)}</td><td class=num>{p.n:g}</td></tr>"
        )
    out.append("</table>")
    bt = res.bradley_terry
    out.append(
        "<h3>Bradley–Terry strengths (log scale, mean 0; bootstrap intervals)</h3>"
        "<table><tr><th>system</th><th>strength</th><th>interval</th><th>judgments</th></tr>"
    )
    for b in bt:
        out.append(
            f"<tr><td>{nm(b.system)}</td><td class=num>{_num(b.score)}</td>"
            f"<td class=num>{_interval(b.low, b.high, _num, b.note)}</td>"
            f"<td class=num>{b.n}</td></tr>"
        )
    out.append("</table>")
    fig, ax = plt.subplots(figsize=(6, 0.6 + 0.45 * len(bt)))
    ys = list(range(len(bt)))[::-1]
    ax.errorbar(
        [b.score for b in bt],
        ys,
        xerr=[[bar_length(b.low, b.score) for b in bt], [bar_length(b.score, b.high) for b in bt]],
        fmt="o",
        capsize=4,
    )
    ax.set_yticks(ys, [plot_label(nm.plain(b.system)) for b in bt])
    ax.axvline(0, color="#999", lw=0.8)
    ax.set_xlabel("Bradley–Terry log-strength")
    out.append(_img(fig, "Bradley-Terry strengths with intervals"))
    return out


def _agreement(res: StudyResults) -> list[str]:
    out = [
        "<h2>Agreement (Krippendorff's alpha)</h2><table><tr><th>question</th><th>level</th>"
        "<th>alpha</th><th>units rated twice or more</th><th>raters</th></tr>"
    ]
    for a in res.agreement:
        out.append(
            f"<tr><td>{html.escape(a.question)}</td><td>{a.level}</td>"
            f"<td class=num>{_num(a.alpha, '.3f')}</td><td class=num>{a.n_units}</td>"
            f"<td class=num>{a.n_raters}</td></tr>"
        )
    out.append("</table>")
    if not res.agreement:
        out.append("<p>No question with agreement.</p>")
    return out


def _exclusion_effect(res: StudyResults, nm: Names) -> list[str]:
    """Each system's share judged appropriate with the rule's exclusions and with every rater,
    side by side: what the rule changed."""
    every = {s.system: s.appropriate for s in res.systems_all_raters}
    rows = [s for s in res.systems if s.appropriate is not None and every.get(s.system)]
    rows.sort(key=lambda s: nm.key(s.system))
    if not rows:
        return []
    applied = "with the excluded raters left out" if res.exclude else "nobody left out (asked)"
    out = [
        "<h3>What the attention rule changed</h3>",
        f"<p class='note'>{res.n_raters_excluded} rater(s) excluded, "
        f"{res.n_raters_undecided} undecided (kept). First column: {applied}; second: every "
        "rater counted.</p>",
        "<table><tr><th>system</th><th>appropriate, rule applied</th><th>every rater</th>"
        "<th>change</th></tr>",
    ]
    for s in rows:
        a, b = s.appropriate, every[s.system]
        change = (a.share - b.share) * 100 if a.n and b.n else None
        out.append(
            f"<tr><td>{nm(s.system)}</td>"
            f"<td class=num>{_pct(a.share)} ({_pct(a.low)} – {_pct(a.high)}), n = {a.n}</td>"
            f"<td class=num>{_pct(b.share)} ({_pct(b.low)} – {_pct(b.high)}), n = {b.n}</td>"
            f"<td class=num>{_num(change, '+.1f')} points</td></tr>"
        )
    out.append("</table>")
    return out


def _attention(res: StudyResults) -> list[str]:
    rule = res.attention_rule
    if rule is None:
        said = (
            "This study's questions give a check nothing a random rater would fail more "
            "often than an attentive one: nobody is excluded."
        )
    else:
        said = html.escape(rule["description"])
        if not res.exclude:
            said += " This report applies no exclusion (asked): every rater is counted."
    out = [
        "<h2>Attention checks</h2>",
        f"<p>{said}</p>",
        f"<p>{res.n_raters_excluded} of {res.n_raters_excluded + res.n_raters_included} raters "
        f"excluded, {res.n_raters_undecided} undecided (too few checks to tell; kept and "
        "counted here).</p>",
        "<table><tr><th>rater</th><th>checks done</th><th>failed</th><th>log likelihood ratio"
        "</th><th>decision</th></tr>",
    ]
    for a in res.attention:
        cls = " class=excluded" if a.excluded else ""
        out.append(
            f"<tr{cls}><td>{html.escape(a.display_name)}</td><td class=num>{a.gold_done}</td>"
            f"<td class=num>{a.gold_failed}</td><td class=num>{_num(a.log_lr)}</td>"
            f"<td>{a.decision}</td></tr>"
        )
    out.append("</table>")
    return out


def _timing(res: StudyResults, seconds: dict[str, list[float]]) -> list[str]:
    t = res.time_per_item
    out = [
        "<h2>Rater timing</h2>",
        f"<p>Seconds per item (included raters, {t.n} items): median {_num(t.median_s, '.1f')}, "
        f"mean {_num(t.mean_s, '.1f')}, 90th percentile {_num(t.p90_s, '.1f')}.</p>",
    ]
    if not seconds:
        return out
    out.append("<table><tr><th>rater</th><th>items</th><th>median s</th><th>fastest s</th></tr>")
    for name, secs in sorted(seconds.items()):
        srt = sorted(secs)
        out.append(
            f"<tr><td>{html.escape(name)}</td><td class=num>{len(srt)}</td>"
            f"<td class=num>{srt[len(srt) // 2]:.1f}</td><td class=num>{srt[0]:.1f}</td></tr>"
        )
    out.append("</table>")
    fig, ax = plt.subplots(figsize=(6, 2.6))
    ax.hist([x for v in seconds.values() for x in v], bins=20, color="#9bbb59")
    ax.set_xlabel("seconds per item")
    ax.set_ylabel("items")
    out.append(_img(fig, "Histogram of seconds per item"))
    return out


def _examples(items, outputs, nm: Names) -> list[str]:  # noqa: ANN001 - ItemIn / OutputIn
    regular = [it for it in items if not it.is_gold][:N_EXAMPLES]
    if not regular:
        return []
    by_item = defaultdict(list)
    for o in outputs:
        by_item[o.item_key].append(o)
    out = [f"<h2>Example items (the first {len(regular)})</h2>"]
    for it in regular:
        original = it.original if isinstance(it.original, str) else " / ".join(it.original or [])
        out.append(f"<h3>{html.escape(it.key)}</h3><p>{html.escape(it.text)}</p>")
        out.append("<table><tr><th>system</th><th>fill</th></tr>")
        if original:
            out.append(f"<tr><td><i>original</i></td><td>{html.escape(original)}</td></tr>")
        for o in sorted(by_item[it.key], key=lambda o: nm.key(o.system)):
            fill = " / ".join(o.fills) if o.fills else o.text
            out.append(
                f"<tr><td>{nm(o.system)}</td><td><span class=fill>"
                f"{html.escape(fill)}</span></td></tr>"
            )
        out.append("</table>")
    return out


# ---------------------------------------------------------------------- helpers


def _interval(lo: float | None, hi: float | None, fmt, note: str | None) -> str:  # noqa: ANN001
    """'lo – hi', or the results' note where there were too few judgments for an interval."""
    if lo is None or hi is None:
        return html.escape(note or "–")
    return f"{fmt(lo)} – {fmt(hi)}"


def bar_length(lo: float | None, hi: float | None) -> float:
    """Length of an error bar from lo up to hi, never negative (Matplotlib refuses a negative
    one, and the whole figure with it): 0 when undefined (no interval below the minimum number
    of judgments, NaN), or when an interval does not reach the point estimate (a percentile
    bootstrap with few judgments)."""
    if lo is None or hi is None:
        return 0.0
    d = hi - lo
    return d if d == d and d > 0 else 0.0


def _img(fig, alt: str) -> str:  # noqa: ANN001 - a matplotlib Figure
    fig.tight_layout()
    buf = io.BytesIO()
    fig.savefig(buf, format="png", dpi=110)
    plt.close(fig)
    data = base64.b64encode(buf.getvalue()).decode("ascii")
    return f"<p><img alt='{html.escape(alt)}' src='data:image/png;base64,{data}'></p>"


def _seconds_per_item(s, study: str) -> dict[str, list[float]]:  # noqa: ANN001 - a Session
    """Seconds from shown to answered of each answered regular item, per rater name."""
    rows = s.execute(
        select(Rater.display_name, Rater.id, Assignment.shown_at, Assignment.completed_at)
        .join(Rater, Rater.id == Assignment.rater_id)
        .join(Item, Item.id == Assignment.item_id)
        .join(Study, Study.id == Item.study_id)
        .where(
            Study.name == study,
            Item.is_gold.is_(False),
            Assignment.completed_at.is_not(None),
            Assignment.shown_at.is_not(None),
        )
    ).all()
    out: dict[str, list[float]] = defaultdict(list)
    for name, rid, shown, done in rows:
        out[f"{name} (#{rid})"].append(max(0.0, (done - shown).total_seconds()))
    return dict(out)
