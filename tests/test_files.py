"""The one JSON Lines reader and the errors its two callers (trainer corpus, search upload) give."""

from __future__ import annotations

import pytest

from magnet_model.errors import ConfigError
from magnet_model.files import BadLine, jsonl_records
from magnet_model.inference.search import CorpusError, parse_corpus
from magnet_model.training.train import TrainConfig, _read_rows


def test_records_are_numbered_from_one_and_blank_lines_skipped():
    text = '{"text": "a"}\n\n   \n[1, 2]\n"s"\n'
    assert list(jsonl_records(text)) == [(1, {"text": "a"}), (4, [1, 2]), (5, "s")]
    assert list(jsonl_records("")) == []


def test_a_line_that_is_not_json_names_its_number():
    records = jsonl_records('{"text": "a"}\n{"text": \n')
    assert next(records) == (1, {"text": "a"})
    with pytest.raises(BadLine) as err:
        next(records)
    assert err.value.line == 2 and err.value.reason.startswith("Expecting value")


def test_the_trainer_reads_text_and_paraphrase_columns_and_words_errors_as_flags(tmp_path):
    cfg = TrainConfig(output="o", text_column="t", paraphrase_column="p")
    path = tmp_path / "c.jsonl"
    path.write_text('{"t": " one ", "p": "uno"}\n\n{"t": 2}\n')
    assert _read_rows(path, cfg) == [("one", "uno"), ("2", None)]
    path.write_text('{"t": "one"}\n{"text": "two"}\n')
    with pytest.raises(ConfigError, match=r"c.jsonl:2 has no 't' field; choose it with --text"):
        _read_rows(path, cfg)
    path.write_text('{"t": "one"}\nnot json\n')
    with pytest.raises(ConfigError, match=r"c.jsonl:2 is not valid JSON \(Expecting value\)"):
        _read_rows(path, cfg)


def test_the_search_upload_reads_the_text_field_and_words_errors_for_the_uploader():
    corpus = parse_corpus("u.jsonl", b'{"text": "first"}\n\n{"text": "second", "id": 2}\n')
    assert corpus.passages == ("first", "second")
    with pytest.raises(CorpusError, match="Line 2 of the .jsonl file is not JSON."):
        parse_corpus("u.jsonl", b'{"text": "first"}\n{oops\n')
    with pytest.raises(CorpusError, match="Line 1 of the .jsonl file has no 'text' string."):
        parse_corpus("u.jsonl", b'{"text": 5}\n')
