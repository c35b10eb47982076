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
    calls, made = [], []
    real = engine.compare_infill_many

    def stops_once(requests, **kw):
        """Stops once, after the third output of the first batch."""
        calls.append([settings.max_span_tokens for _, _, settings in requests])
        quick = [(t, s, settings.but(max_span_tokens=3)) for t, s, settings in requests]
        for out in real(quick, **kw):  # quick tiny-model fills
            if len(made) == 3 and len(calls) == 1:
                raise MagnetError("interrupted")
            made.append(out)
            yield out

    monkeypatch.setattr(engine, "compare_infill_many", stops_once)
    db = str(tmp_path / "db.sqlite3")
    argv = ["--name", "paper-cli", "--n-items", "3", "--n-gold", "2", "--db-path", db]
    assert study_cli.main(argv) == 2
    err = capsys.readouterr().err
    assert "items x 3 raters" in err and "This study: 3 items x 3 raters, power" in err
    assert err.strip().endswith("error: interrupted")
    assert study_cli.main(argv) == 0
    assert "(3 outputs reused)" in capsys.readouterr().out
    cap = study_cli.studies.PAPER.max_span_tokens
    assert calls[0] == [cap] * 3 and set(calls[1]) == {cap} and len(calls) == 2
    with AnnotationStore(path=db) as store:
        info = store.study("paper-cli")
        items, _ = store.items("paper-cli")
    assert (info.n_items, info.n_gold, info.raters_per_item) == (3, 2, 3)
    assert info.systems == sorted(study_cli.studies.INFILL_SYSTEMS)
    assert all(i.text.count("[blank]") == 1 for i in items)


def test_unknown_preset_is_refused():
    with pytest.raises(SystemExit):
        study_cli.main(["--preset", "nope", "--name", "x"])
