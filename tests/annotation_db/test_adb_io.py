"""Import (JSONL/CSV), export (CSV/JSONL/datasets), backup and the CLI."""

from __future__ import annotations

import csv
import json
import sqlite3

import pytest

from annotation_db import (
    AnnotationStore,
    ImportFormatError,
    UnsupportedError,
    read_items,
    read_outputs,
    write_items,
)
from annotation_db.cli import main


def test_items_and_outputs_round_trip_jsonl_and_csv(tmp_path, adb):
    items, outputs = adb.make_items(3)
    for ext in ("jsonl", "csv"):
        write_items(tmp_path / f"items.{ext}", items)
        write_items(tmp_path / f"outputs.{ext}", outputs)
        got_items = read_items(tmp_path / f"items.{ext}")
        got_outputs = read_outputs(tmp_path / f"outputs.{ext}")
        assert [i.key for i in got_items] == [i.key for i in items]
        assert [list(i.original) for i in got_items] == [list(i.original) for i in items]
        assert [(o.system, o.text, o.seed, dict(o.decoding)) for o in got_outputs] == [
            (o.system, o.text, o.seed, dict(o.decoding)) for o in outputs
        ]


@pytest.mark.parametrize(
    "content, message",
    [
        ('{"key": "a", "text": "x ___"}\n{"key": "b", "text": \n', r"items.jsonl:2: invalid JSON"),
        ('["a", "b"]\n', "must be a JSON object"),
        ('{"key": "a"}\n', r"missing field\(s\) \['text'\]"),
        ('{"key": "a", "text": "t", "colour": 1}\n', "unknown field"),
        ('{"key": 5, "text": "t"}\n', "'key' must be a string"),
        ("\n\n", "no items"),
    ],
)
def test_invalid_jsonl_is_a_typed_error_naming_the_line(tmp_path, content, message):
    p = tmp_path / "items.jsonl"
    p.write_text(content)
    with pytest.raises(ImportFormatError, match=message):
        read_items(p)


def test_invalid_import_writes_nothing_via_cli(tmp_path, adb):
    items, outputs = adb.make_items(2)
    write_items(tmp_path / "items.jsonl", items)
    (tmp_path / "outputs.jsonl").write_text('{"item_key": "item-0", "system": "m", "text": 1}\n')
    db = tmp_path / "db.sqlite3"
    rc = main(
        [
            "--db-path",
            str(db),
            "create-study",
            "--name",
            "s",
            "--items",
            str(tmp_path / "items.jsonl"),
            "--outputs",
            str(tmp_path / "outputs.jsonl"),
        ]
    )
    assert rc == 2
    with AnnotationStore(path=db) as store:
        assert store.list_studies() == []


def _rated_store(path, adb):
    store = AnnotationStore(path=path)
    items, outputs = adb.make_items(3)
    store.create_study(
        "s",
        items,
        outputs,
        questions=["appropriate", "likert:fluency", "preference", "comment"],
        raters_per_item=1,
    )
    tok = store.invite("s", "ann").token
    while (item := store.next_item(tok)) is not None:
        store.submit(
            tok,
            item.assignment_id,
            adb.answer_all(item),
            preference="B",
            comment='ok, "quoted"\nnew line',
        )
    return store


def test_export_csv_jsonl_datasets(tmp_path, adb):
    store = _rated_store(tmp_path / "db.sqlite3", adb)
    rows = [
        json.loads(x)
        for x in store.export("s", "jsonl", tmp_path / "r.jsonl").read_text().splitlines()
    ]
    assert len(rows) == 9
    r = rows[0]
    assert r["system"] in adb.SYSTEMS and r["output_label"] == "A" and r["item_position"] == 1
    assert r["answers"] == {"appropriate": True, "fluency": 4}
    assert sum(x["preferred"] for x in rows) == 3
    assert all(x["preference"] == "B" for x in rows)
    with open(store.export("s", "csv", tmp_path / "r.csv"), newline="") as f:
        csv_rows = list(csv.DictReader(f))
    assert len(csv_rows) == 9 and csv_rows[0]["answer_fluency"] == "4"
    assert csv_rows[0]["comment"] == 'ok, "quoted"\nnew line'
    out = store.export("s", "datasets", tmp_path / "ds")
    assert {p.name for p in out.iterdir()} == {
        "README.md",
        "ratings.jsonl",
        "items.jsonl",
        "outputs.jsonl",
    }
    assert "config_name: ratings" in (out / "README.md").read_text()
    first = json.loads((out / "ratings.jsonl").read_text().splitlines()[0])
    assert first["answer_appropriate"] is True
    store.close()


def test_backup_is_a_consistent_standalone_copy(tmp_path, adb):
    store = _rated_store(tmp_path / "db.sqlite3", adb)
    dest = store.backup(tmp_path / "copy.sqlite3")
    con = sqlite3.connect(dest)
    assert con.execute("PRAGMA integrity_check").fetchone()[0] == "ok"
    assert con.execute("select count(*) from rating").fetchone()[0] == 9
    assert con.execute("PRAGMA journal_mode").fetchone()[0] == "delete"
    con.close()
    with pytest.raises(Exception, match="exists"):
        store.backup(dest)
    store.close()


def test_cli_backup_and_export(tmp_path, adb, capsys):
    db = tmp_path / "db.sqlite3"
    _rated_store(db, adb).close()
    assert main(["--db-path", str(db), "backup", str(tmp_path / "b.sqlite3")]) == 0
    assert (tmp_path / "b.sqlite3").exists()

    def export(study: str, out: str) -> int:
        return main(["--db-path", str(db), "export", "--study", study, "--format", "csv", out])

    assert export("s", str(tmp_path / "e.csv")) == 0
    assert (tmp_path / "e.csv").read_text().count("\n") > 9
    assert export("nope", str(tmp_path / "x.csv")) == 2
    assert "no study named 'nope'" in capsys.readouterr().err
    assert main(["--db-path", str(db), "results", "--study", "s"]) == 0
    assert '"system"' in capsys.readouterr().out


def test_backup_refuses_postgres(store):
    if store.is_sqlite:
        pytest.skip("Postgres-only check")
    with pytest.raises(UnsupportedError, match="pg_dump"):
        store.backup("/tmp/never.sqlite3")


def test_cli_create_invite_and_export_items_round_trip(tmp_path, adb, capsys):
    items, outputs = adb.make_items(3)
    write_items(tmp_path / "items.csv", items)
    write_items(tmp_path / "outputs.jsonl", outputs)
    db = ["--db-path", str(tmp_path / "db.sqlite3")]
    assert (
        main(
            [
                *db,
                "create-study",
                "--name",
                "s",
                "--items",
                str(tmp_path / "items.csv"),
                "--outputs",
                str(tmp_path / "outputs.jsonl"),
                "--raters-per-item",
                "2",
            ]
        )
        == 0
    )
    assert main([*db, "invite", "--study", "s", "Ann", "Bob"]) == 0
    out = capsys.readouterr().out
    tokens = [line.split("\t")[1] for line in out.splitlines() if "\t" in line]
    assert len(tokens) == 2
    with AnnotationStore(path=tmp_path / "db.sqlite3") as store:
        assert store.open_session(tokens[0]).display_name == "Ann"
    assert (
        main(
            [
                *db,
                "export-items",
                "--study",
                "s",
                str(tmp_path / "i2.jsonl"),
                str(tmp_path / "o2.csv"),
            ]
        )
        == 0
    )
    assert read_items(tmp_path / "i2.jsonl") == read_items(tmp_path / "items.csv")
    assert len(read_outputs(tmp_path / "o2.csv")) == 9
