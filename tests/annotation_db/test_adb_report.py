"""The HTML study report: self-contained (figures as embedded PNG, nothing fetched), every
section present, user text escaped; written by the CLI."""

from __future__ import annotations

import base64
import re

from annotation_db import ItemIn, OutputIn, make_gold_items
from annotation_db.cli import main as cli_main

EVIL = "<script>alert('x')</script>"


def _rated_study(store):
    items = [
        ItemIn(f"i{i}", f"Passage {i} with ___ inside.", [f"word{i}"], f"d{i}") for i in range(5)
    ]
    items.append(ItemIn("evil", f"{EVIL} ___ here.", ["ok"], "d9"))
    outputs = [
        OutputIn(it.key, sysname, it.text.replace("___", f"{sysname}-fill"), [f"{sysname}-fill"])
        for it in items
        for sysname in ("magnet", "five-shot", "zero-shot")
    ]
    spare = [
        ItemIn(f"g{i}", f"Spare passage {i} with ___ inside.", [f"gold{i}"], f"e{i}")
        for i in range(2)
    ]
    g_items, g_outs = make_gold_items(spare, 2, blank="___", seed=0, n_outputs=3, donors=items)
    store.create_study(
        "rep",
        items + g_items,
        outputs + g_outs,
        questions=["appropriate", "likert:fluency", "preference"],
        raters_per_item=3,
    )
    for n, inv in enumerate(store.invite_many("rep", ["ann", EVIL, "bob"])):
        careful = n == 2  # bob reads: he accepts, rates above and prefers a check's true text
        while (item := store.next_item(inv.token)) is not None:
            spare = item.text.startswith("Spare passage ")  # a check: its own span is true
            own = f"gold{item.text.split()[2]}" if spare else None
            true = [o.label for o in item.outputs if spare and own in o.text]
            ans = {
                o.label: {
                    "appropriate": o.label in true if true and careful else (j + n) % 2 == 0,
                    "fluency": (5 if o.label in true else 1)
                    if true and careful
                    else 1 + (j + n) % 5,
                }
                for j, o in enumerate(item.outputs)
            }
            pref = true[0] if true and careful else item.outputs[n % len(item.outputs)].label
            store.submit(inv.token, item.assignment_id, ans, preference=pref)


def test_report_is_self_contained_and_complete(sqlite_store, tmp_path, capsys):
    _rated_study(sqlite_store)
    out = tmp_path / "report.html"
    db = str(tmp_path / "annotations.sqlite3")  # the sqlite_store fixture's file
    code = cli_main(["--db-path", db, "report", "rep", "--out", str(out), "--slip-rate", "0.2"])
    assert code == 0 and str(out) in capsys.readouterr().out
    page = out.read_text(encoding="utf-8")
    for section in (
        "Judged appropriate, per system",
        "Pairwise win rates",
        "Bradley–Terry strengths",
        "Krippendorff",
        "Attention checks",
        "What the attention rule changed",
        "slips on 20% of checks",
        "Rater timing",
        "Example items",
        "fluency",
    ):
        assert section in page, section
    for system in ("magnet", "five-shot", "zero-shot"):
        assert system in page
    assert "magnet-fill" in page and "word0" in page  # an example with its original span
    # self-contained: no external resource, figures are decodable PNGs
    assert not re.search(r"""(src|href)=['"]?(https?:)?//""", page)
    pngs = re.findall(r"data:image/png;base64,([A-Za-z0-9+/=]+)", page)
    assert len(pngs) >= 3
    assert all(base64.b64decode(p)[:8] == b"\x89PNG\r\n\x1a\n" for p in pngs)
    # user text is shown as text
    assert "<script" not in page and "&lt;script&gt;" in page
    # a dozen preference judgments per pair: no interval, the results' note instead
    assert "not enough votes for an interval" in page


def test_report_is_laid_out_at_a_phones_width(sqlite_store, tmp_path):
    """A phone shows the page at its own width (not 980 px of tiny text); wide tables scroll
    inside themselves and figures shrink to the screen."""
    from annotation_db.report import write_report

    _rated_study(sqlite_store)
    page = write_report(sqlite_store, "rep", tmp_path / "r.html").read_text(encoding="utf-8")
    assert "<meta name='viewport' content='width=device-width, initial-scale=1'>" in page
    assert "overflow-x:auto" in page and "img{max-width:100%" in page


def test_the_questions_line_names_a_kind_only_when_the_name_does_not(sqlite_store, tmp_path):
    """Tour p2: "appropriate (appropriate): Is ... appropriate?"."""
    from annotation_db.report import write_report

    _rated_study(sqlite_store)
    page = write_report(sqlite_store, "rep", tmp_path / "r.html").read_text(encoding="utf-8")
    assert "<b>appropriate</b>: " in page and "(appropriate)" not in page
    assert "<b>fluency</b> (likert): " in page


def test_report_of_unknown_study_is_one_line(sqlite_store, tmp_path, capsys):
    db = str(tmp_path / "annotations.sqlite3")
    assert cli_main(["--db-path", db, "report", "nope", "--out", str(tmp_path / "r.html")]) == 2
    err = capsys.readouterr().err
    assert err.startswith("error:") and err.count("\n") == 1
    assert not (tmp_path / "r.html").exists()


def test_the_report_names_systems_by_their_titles_in_the_given_order(sqlite_store, tmp_path):
    from annotation_db.report import write_report

    _rated_study(sqlite_store)
    titles = {"magnet": "MAGNET", "zero-shot": "Base, zero-shot", "five-shot": "Base, five-shot"}
    page = write_report(sqlite_store, "rep", tmp_path / "r.html", titles=titles).read_text()
    rates = page[page.index("Judged appropriate, per system") :]
    rows = re.findall(r"<tr><td>([^<]+)</td><td class=num>", rates[: rates.index("</table>")])
    assert rows == ["MAGNET", "Base, zero-shot", "Base, five-shot"]
    assert "<td>five-shot</td>" not in page and "<td>Base, five-shot</td>" in page
    assert "6 regular items and 2 attention checks" in page  # 5 passages + the hostile one
    plain = write_report(sqlite_store, "rep", tmp_path / "p.html").read_text()
    assert "<td>five-shot</td>" in plain  # no titles given: the keys
