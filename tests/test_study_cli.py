"""`python -m app.study_cli --preset paper`: the Admin preset from the command line, resumable."""

from __future__ import annotations

import pytest
from tiny_models import tiny_engine

from annotation_db import AnnotationStore
from app import study_cli
from magnet_model.errors import MagnetError


def test_paper_preset_from_the_cli_resumes(tmp_path, monkeypatch, capsys):
    engine = tiny_engine()
    monkeypatch.setattr(study_cli, "load_engine", lambda spec: (engine, {}))
    calls = []
    real = engine.compare_infill

    def stops_once(text, systems, **kw):
        calls.append(kw["max_span_tokens"])
        if len(calls) == 2:
            raise MagnetError("interrupted")
        return real(text, systems, **{**kw, "max_span_tokens": 3})  # quick tiny-model fills

    monkeypatch.setattr(engine, "compare_infill", stops_once)
    db = str(tmp_path / "db.sqlite3")
    argv = ["--name", "paper-cli", "--n-items", "3", "--n-gold", "2", "--db-path", db]
    assert study_cli.main(argv) == 2
    err = capsys.readouterr().err
    assert "items x 3 raters" in err and "This study: 3 items x 3 raters, power" in err
    assert err.strip().endswith("error: interrupted")
    assert study_cli.main(argv) == 0
    assert "(3 outputs reused)" in capsys.readouterr().out
    assert calls == [study_cli.studies.PAPER.max_span_tokens] * 4  # 1 + failed + 2 resumed
    with AnnotationStore(path=db) as store:
        info = store.study("paper-cli")
        items, _ = store.items("paper-cli")
    assert (info.n_items, info.n_gold, info.raters_per_item) == (3, 2, 3)
    assert info.systems == sorted(study_cli.studies.INFILL_SYSTEMS)
    assert all(i.text.count("[blank]") == 1 for i in items)


def test_unknown_preset_is_refused():
    with pytest.raises(SystemExit):
        study_cli.main(["--preset", "nope", "--name", "x"])
