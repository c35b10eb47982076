"""Alembic migrations: a new database is made at head, an old one (made before migrations) is
adopted with every row kept, a newer or older-than-baseline one is refused with one sentence."""

from __future__ import annotations

import os
import shutil
import sqlite3
import subprocess
import sys
from pathlib import Path

import pytest
from alembic.autogenerate import compare_metadata
from alembic.migration import MigrationContext
from alembic.script import ScriptDirectory
from sqlalchemy import JSON, bindparam, text

from annotation_db import AnnotationStore, StorageError, get_draft
from annotation_db.migrate import (
    BASELINE,
    alembic_config,
    current_revision,
    drop_schema,
    head_revision,
)
from annotation_db.schema import Base

OLD_DB = Path(__file__).parent / "data" / "annotations_before_alembic.sqlite3"
TABLES = ("study", "item", "output", "rater", "assignment", "rating", "study_draft")


def _counts(path: Path) -> dict[str, int]:
    con = sqlite3.connect(path)
    try:
        return {t: con.execute(f"SELECT count(*) FROM {t}").fetchone()[0] for t in TABLES}
    finally:
        con.close()


def _revision(store: AnnotationStore) -> str | None:
    return store.db.read(lambda s: current_revision(s.connection()))


def _schema_diff(store: AnnotationStore) -> list:
    """What Alembic's autogenerate would change to make the database match the models."""
    return store.db.read(
        lambda s: compare_metadata(MigrationContext.configure(s.connection()), Base.metadata)
    )


def test_old_database_file_is_upgraded_and_keeps_every_row(tmp_path):
    path = tmp_path / "old.sqlite3"
    shutil.copy(OLD_DB, path)
    before = _counts(path)
    assert before == {
        "study": 2,  # "pilot" and the arena
        "item": 4,
        "output": 8,
        "rater": 4,  # Ada, Bob, Cy and the arena visitor
        "assignment": 5,
        "rating": 10,
        "study_draft": 1,
    }
    with AnnotationStore(path=path) as store:
        assert _revision(store) == head_revision()
        assert _schema_diff(store) == []
        assert [s.name for s in store.list_studies()] == ["pilot", "arena"]
        res = store.results("pilot")
        assert res.n_judgments == 4 and [s.system for s in res.systems] == ["base", "magnet"]
        assert store.results("arena").preference_counts["choice"] == 1
        assert {r.display_name: r.done for r in store.progress("pilot").raters} == {
            "Ada": 2,
            "Bob": 2,
            "Cy": 0,
        }
        assert get_draft(store, "later").systems == ["magnet"]
        # the API writes to it: Cy gets a new link and answers an item
        cy = next(r for r in store.progress("pilot").raters if r.display_name == "Cy")
        token = store.new_link("pilot", cy.rater_id).token
        item = store.next_item(token)
        answers = {o.label: {"appropriate": True, "fluency": 3} for o in item.outputs}
        store.submit(token, item.assignment_id, answers, preference="A")
        assert store.results("pilot").n_judgments == 5
    after = _counts(path)
    assert after == {**before, "assignment": 6, "rating": 12}
    with AnnotationStore(path=path) as store:  # opening again changes nothing
        assert _revision(store) == head_revision()
    assert _counts(path) == after


def test_new_database_is_created_at_head_and_matches_the_models(store):
    assert _revision(store) == head_revision()
    # a model changed without a revision (or a revision without the model) fails here
    assert _schema_diff(store) == []


def test_database_made_before_migrations_is_adopted_on_both_backends(store, adb):
    """Today's create_all schema without alembic_version (as the code before migrations left
    it) is stamped with the baseline, not rebuilt: the rows stay."""
    items, outputs = adb.make_items(2)
    store.create_study("s", items, outputs, raters_per_item=1)
    store.invite("s", "Ada")
    store.db.write(lambda s: s.execute(text("DROP TABLE alembic_version")))
    assert _revision(store) is None
    with AnnotationStore(settings=store.settings) as again:
        assert _revision(again) == head_revision()
        assert again.study("s").n_items == 2 and again.study("s").n_raters == 1


def test_database_from_a_newer_version_is_refused(store):
    store.db.write(lambda s: s.execute(text("UPDATE alembic_version SET version_num = 'zz_new'")))
    with pytest.raises(StorageError, match="made by a newer annotation_db"):
        AnnotationStore(settings=store.settings)
    assert _revision(store) == "zz_new"  # left as it was


def test_database_older_than_the_baseline_is_refused(tmp_path):
    path = tmp_path / "older.sqlite3"
    shutil.copy(OLD_DB, path)
    con = sqlite3.connect(path)
    # as drafts were before they kept attention checks (f27ae59)
    con.execute("ALTER TABLE study_draft DROP COLUMN extra_items")
    con.commit()
    con.close()
    with pytest.raises(StorageError, match=r"first migration and lacks study_draft\.extra_items;"):
        AnnotationStore(path=path)
    assert "alembic_version" not in {
        r[0]
        for r in sqlite3.connect(path).execute("SELECT name FROM sqlite_master WHERE type='table'")
    }


def test_baseline_is_the_first_revision():
    assert ScriptDirectory.from_config(alembic_config()).get_base() == BASELINE


def test_drop_schema_lets_the_next_store_start_afresh(store, adb):
    items, outputs = adb.make_items(1)
    store.create_study("s", items, outputs)
    drop_schema(store.db.engine)
    with AnnotationStore(settings=store.settings) as again:
        assert again.list_studies() == [] and _revision(again) == head_revision()


def test_processes_opening_a_new_database_at_once_create_it_once(tmp_path):
    """The schema is made in one transaction: the others wait for it and find it at head."""
    path = tmp_path / "new.sqlite3"
    repo = str(Path(__file__).resolve().parents[2])
    env = {**os.environ, "PYTHONPATH": repo + os.pathsep + os.environ.get("PYTHONPATH", "")}
    child = (
        "import sys; from annotation_db import AnnotationStore; "
        "print(AnnotationStore(sys.argv[1]).list_studies())"
    )
    procs = [
        subprocess.Popen(
            [sys.executable, "-c", child, f"sqlite:///{path}"],
            env=env,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
        for _ in range(3)
    ]
    outs = [p.communicate(timeout=120) for p in procs]
    assert [(p.returncode, out) for p, (out, _) in zip(procs, outs, strict=True)] == [
        (0, "[]\n")
    ] * 3, [err for _, err in outs]
    con = sqlite3.connect(path)
    assert con.execute("SELECT version_num FROM alembic_version").fetchall() == [(head_revision(),)]
    con.close()
    with AnnotationStore(path=path) as store:
        assert _schema_diff(store) == []


def test_upgrade_scores_answered_checks_again_as_a_whole(store, adb):
    """A database whose checks were scored by the old rule (a check failed only when a wrong
    fill was accepted) is scored again on upgrade: a rater who said "No" to everything had
    passed; now every such check is failed. The old default slip rate goes to the new one."""
    from annotation_db.attention import AttentionSettings
    from annotation_db.gold import make_gold_items
    from annotation_db.views import ItemIn

    items, outputs = adb.make_items(6)
    spare = [
        ItemIn(f"p{i}", f"Passage {i} hides a ___ there.", [f"span{i}"], source=f"d{i}")
        for i in range(8)
    ]
    gold, gold_outputs = make_gold_items(spare, 4, blank="___", n_outputs=3, donors=items)
    store.create_study(
        "s",
        items + gold,
        outputs + gold_outputs,
        raters_per_item=1,
        questions=["appropriate"],
        attention=AttentionSettings(items_per_rater=10, checks_per_rater=4),
    )
    inv = store.invite("s", "Nay")
    while (item := store.next_item(inv.token)) is not None:
        nay = {o.label: {"appropriate": False} for o in item.outputs}
        store.submit(inv.token, item.assignment_id, nay)
    checks_sql = (
        "SELECT a.gold_passed FROM assignment a JOIN item i ON i.id = a.item_id "
        "WHERE i.is_gold AND a.completed_at IS NOT NULL"
    )
    now = store.db.read(lambda s: s.execute(text(checks_sql)).all())
    assert now and all(not p for (p,) in now)  # scored whole at submit

    def as_before(s):  # the old rule's verdicts, the old default, revision 0002
        s.execute(text("UPDATE assignment SET gold_passed = :t WHERE gold_passed IS NOT NULL"),
                  {"t": True})  # fmt: skip
        old = {"slip": 0.1, "alpha": 0.05, "power": 0.85, "items_per_rater": 10,
               "checks_per_rater": 4}  # fmt: skip
        s.execute(
            text("UPDATE study SET attention = :a WHERE name = 's'").bindparams(
                bindparam("a", type_=JSON)
            ),
            {"a": old},
        )
        s.execute(text("UPDATE alembic_version SET version_num = '0002_study_attention'"))

    store.db.write(as_before)
    with AnnotationStore(settings=store.settings) as again:
        assert _revision(again) == head_revision()
        verdicts = again.db.read(lambda s: s.execute(text(checks_sql)).all())
        assert len(verdicts) >= 3 and all(not p for (p,) in verdicts)
        nay = next(r for r in again.progress("s").raters if r.display_name == "Nay")
        assert nay.gold_failed == nay.gold_done >= 3
        assert again.results("s").attention_rule["slip"] == 0.2
