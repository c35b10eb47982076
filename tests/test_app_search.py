"""The Search tab's handler and magnet_model.inference.search: corpus formats, limits, the disk
cache."""

from __future__ import annotations

import json
from html.parser import HTMLParser

import gradio as gr
import numpy as np
import pytest
from app_fixtures import make_app
from search_standins import CountingEncoder
from tiny_models import tiny_engine

from magnet_model.inference import search

PASSAGES = [
    "the cat sat on the mat .",
    "the king and the queen were in the city .",
    "the bird flew over the sea at night .",
    "fire and water and earth and air .",
    "<script>alert(1)</script> the old man ran to the river .",
]
VOCAB = sorted({w for p in PASSAGES for w in p.split()})


@pytest.fixture
def app(engine, tmp_path):
    app = make_app(tmp_path, engine)
    app.encoders["minilm"] = CountingEncoder(VOCAB)
    return app


def table_cells(markup: str) -> tuple[list[str], list[list[str]]]:
    """The header cells and the body rows' cells of an HTML table, as the reader sees them."""

    class Cells(HTMLParser):
        def __init__(self):
            super().__init__()
            self.rows, self.cell = [], None

        def handle_starttag(self, tag, attrs):
            if tag == "tr":
                self.rows.append([])
            elif tag in ("td", "th"):
                self.cell = ""

        def handle_endtag(self, tag):
            if tag in ("td", "th"):
                self.rows[-1].append(self.cell)
                self.cell = None

        def handle_data(self, data):
            if self.cell is not None:
                self.cell += data

    parser = Cells()
    parser.feed(markup)
    return parser.rows[0], parser.rows[1:]


def upload(tmp_path, name: str, body: str) -> str:
    path = tmp_path / name
    path.write_text(body, encoding="utf-8")
    return str(path)


def test_search_four_systems_overlap_and_cache(app, tmp_path):
    corpus = upload(tmp_path, "c.txt", "\n".join(PASSAGES) + "\n\n")
    calls = []
    out = app.search(
        "the bird flew over the sea at night .", corpus, 3, lambda *a, **k: calls.append(a)
    )
    tables, overlap, note = out.tables, out.overlap, out.note
    assert len(tables) == 4
    assert all(len(t) == 3 and [r[0] for r in t] == [1, 2, 3] for t in tables)
    assert tables[1][0][2] == PASSAGES[2] and tables[1][0][1] == "1.000"  # three decimals
    for t in tables:
        assert t[0][1] >= t[1][1] >= t[2][1]
    headers, rows = table_cells(overlap)
    assert headers[0] == "system" and len(rows) == 4 and headers[1:] == [r[0] for r in rows]
    assert all(rows[i][i + 1] == "3" for i in range(4))  # each list with itself
    assert "between the top-3 lists" in overlap
    assert "c.txt: 5 passages; top 3" in note and calls  # progress was reported
    assert len(list((tmp_path / "cache" / "search").glob("*.npy"))) == 4

    seen = app.encoders["minilm"].seen
    again = app.search("fire and water", corpus, 2, lambda *a, **k: None)
    assert app.encoders["minilm"].seen == seen + 1  # the corpus came from the cache: only the query
    assert again.tables[1][0][2] == PASSAGES[3]


def test_search_without_adapters_marks_them_unavailable(tmp_path):
    app = make_app(tmp_path, tiny_engine(adapters=False))
    app.encoders["minilm"] = CountingEncoder(VOCAB)
    out = app.search(
        "the cat", upload(tmp_path, "c.txt", "\n".join(PASSAGES)), 2, lambda *a, **k: None
    )
    magnet, minilm, base, llm2vec = out.tables
    assert magnet[0][2].startswith("Unavailable") and llm2vec[0][2].startswith("Unavailable")
    assert len(minilm) == 2 and len(base) == 2
    assert len(table_cells(out.overlap)[1]) == 2  # overlap between the two systems that ran


@pytest.mark.parametrize(
    ("name", "body", "message"),
    [
        ("c.pdf", "x", "Upload a .txt"),
        ("c.txt", "\n \n", "no text"),
        ("c.jsonl", '{"text": "a"}\nnot json\n', "Line 2"),
        ("c.jsonl", '{"title": "a"}\n', "no 'text'"),
        ("c.csv", "title\nA\nB\n", "no 'text' column"),  # the tour's m8: once 3 passages
    ],
)
def test_bad_corpus_files_are_readable_errors(app, tmp_path, name, body, message):
    with pytest.raises(gr.Error, match=message):
        app.search("the cat", upload(tmp_path, name, body), 2, lambda *a, **k: None)


def test_oversized_upload_is_refused_before_reading(app, tmp_path):
    big = tmp_path / "big.txt"
    big.write_bytes(b"the cat\n" * (app.settings.max_upload_mb * 1024 * 1024 // 8 + 1))
    with pytest.raises(gr.Error, match="larger than"):
        app.search("the cat", str(big), 2, lambda *a, **k: None)


def test_upload_caps_come_from_the_settings(engine, tmp_path):
    """MAGNET_MAX_UPLOAD_MB raises the size cap of search (once a hard 5 MB in search.py) and
    MAGNET_MAX_PASSAGES the passage cap: a 5.2 MB file passes the size check at 6 MB and is
    then refused for its passage count."""
    app = make_app(tmp_path, engine, max_upload_mb=6, max_passages=3)
    lines = [f"{i} " + "word " * (1300 * 1024 // 5) for i in range(4)]
    big = upload(tmp_path, "big.txt", "\n".join(lines))
    assert (tmp_path / "big.txt").stat().st_size > 5 * 1024 * 1024
    with pytest.raises(gr.Error, match="4 passages; at most 3"):
        app.search("the cat", big, 2, lambda *a, **k: None)
    with pytest.raises(search.CorpusError, match="at most 1 MB"):
        search.parse_corpus("a.txt", b"a\n" * 2**20, max_bytes=2**20)
    assert len(search.parse_corpus("a.txt", b"a\nb\n", max_passages=None)) == 2


def test_empty_query_is_refused(app):
    with pytest.raises(gr.Error, match="empty"):
        app.search("  ", None, 2, lambda *a, **k: None)


def test_corpus_formats_csv_jsonl_txt():
    csv_ = search.parse_corpus("a.csv", b'id,text\n1,first passage\n2,"second, quoted"\n')
    assert csv_.passages == ("first passage", "second, quoted")
    for headless in (b"one\ntwo\n", b"title\nA\nB\n", b"id,title\n1,A\n"):  # no 'text' column
        with pytest.raises(search.CorpusError, match=r"^The \.csv file has no 'text' column"):
            search.parse_corpus("a.csv", headless)
    jl = search.parse_corpus("a.jsonl", json.dumps({"text": "x  y"}).encode() + b"\n")
    assert jl.passages == ("x y",)
    txt = search.parse_corpus("a.txt", b"\xef\xbb\xbfa\na\nb\n")  # BOM, duplicate
    assert txt.passages == ("a", "b") and txt.fingerprint != jl.fingerprint
    with pytest.raises(search.CorpusError, match="UTF-8"):
        search.parse_corpus("a.txt", b"\xff\xfe\x00")
    with pytest.raises(search.CorpusError, match="at most 3"):
        search.parse_corpus("a.txt", b"a\nb\nc\nd\n", max_passages=3)


def test_cut_passage_keeps_whole_sentences():
    text = "One two three. Four five six. " + "seven " * 100
    assert search.cut_passage(text, 40) == "One two three. Four five six."
    assert len(search.cut_passage("word " * 200, 50)) <= 50


def test_cache_key_changes_with_model_and_corpus(tmp_path, engine):
    a, b = search.Corpus("a", ("x",)), search.Corpus("b", ("y",))
    magnet = search.EngineEncoder(engine, "magnet")
    base = search.EngineEncoder(engine, "base")
    paths = {search.cache_path(tmp_path, e, c) for e in (magnet, base) for c in (a, b)}
    assert len(paths) == 4
    assert search.cache_path(tmp_path, magnet, a) == search.cache_path(
        tmp_path, magnet, search.Corpus("renamed", ("x",))
    )
    vecs = search.corpus_vectors(magnet, a, tmp_path)
    np.testing.assert_allclose(vecs, engine.embed_sentences(["x"], adapter="magnet"), atol=1e-6)


def test_the_search_cache_key_does_not_change_with_how_the_weights_were_loaded(engine):
    """Tour 4, n2: the key held the model's source description ("de-quantized into ..." on
    the first start, "cache ..." later), so the first start's vectors were never reused."""
    was = engine.loaded.source, getattr(engine.loaded, "weights", "")
    try:
        engine.loaded.weights = "/cache/models/SmolLM2-135M-Instruct-Q4_1-x"
        engine.loaded.source = "embedded (de-quantized into /cache/models/...)"
        first = search.EngineEncoder(engine, None).key
        engine.loaded.source = "embedded (cache /cache/models/...)"
        assert search.EngineEncoder(engine, None).key == first
        engine.loaded.weights = "/cache/models/another-model"
        assert search.EngineEncoder(engine, None).key != first
    finally:
        engine.loaded.source, engine.loaded.weights = was


def test_minilm_encoder_finds_the_paraphrase():
    enc = search.MiniLMEncoder()
    corpus = search.Corpus("t", ("A cat sits on a rug.", "Stock markets fell sharply today."))
    vecs = enc.encode(corpus.passages)
    hits = search.top_k(enc.encode(["The kitten is resting on the carpet."])[0], vecs, corpus, 2)
    assert hits[0].index == 0 and hits[0].score > hits[1].score
    assert np.allclose(np.linalg.norm(vecs, axis=1), 1.0, atol=1e-5)


def test_default_corpus_is_held_out_vital_extracts_and_wikipedia_passages():
    from magnet_model.data import vital_articles, wikipedia_paragraphs

    corpus = search.default_corpus()
    cut = lambda texts: {search.cut_passage(t) for t in texts}  # noqa: E731
    title_of = {search.cut_passage(a.extract): a.title for a in vital_articles("heldout")}
    held, trained = set(title_of), cut(a.extract for a in vital_articles("train"))
    extracts = [p for p in corpus.passages if p in held]
    passages = [p for p in corpus.passages if p in cut(wikipedia_paragraphs("heldout"))]
    assert len(extracts) == search.DEFAULT_EXTRACTS and len(passages) == search.DEFAULT_PASSAGES
    assert len(corpus) == len(extracts) + len(passages) and not trained & set(corpus.passages)
    assert all(len(p) <= search.DEFAULT_PASSAGE_CHARS for p in corpus.passages)
    titles = [title_of[p] for p in extracts]
    assert titles == sorted(titles) and titles[0] < "C" and titles[-1] > "S"  # spread evenly
    assert search.default_corpus().fingerprint == corpus.fingerprint
    assert f"{len(extracts)} vital-article extracts" in corpus.name


def test_the_default_corpus_is_embedded_at_start_so_the_first_search_embeds_the_query(
    app, monkeypatch
):
    from app import model_calls

    corpus = search.Corpus("Default (test)", tuple(PASSAGES))
    monkeypatch.setattr(model_calls, "_DEFAULT_CORPUS", [corpus])
    done = app.warm_search()
    assert set(done.values()) == {"embedded in 0 s"} and len(done) == 4
    assert app.warm_search() == dict.fromkeys(done, "cached")  # a second start embeds nothing

    minilm = app.encoders["minilm"]
    seen, calls = minilm.seen, []
    out = app.search("the bird", None, 2, lambda *a, **k: calls.append((a, k)))
    assert minilm.seen == seen + 1 and not calls  # only the query; no progress bar at all
    assert out.note.startswith("Default (test): 5 passages")


def test_one_honest_progress_bar_over_every_encoder(app, tmp_path):
    """Count and share of the same total: the passages still to embed, over all encoders
    (the review saw "(48/210) - 5.7%": a per-encoder count beside a share of all four)."""
    lines = [f"{p} {i}" for i in range(8) for p in PASSAGES]  # 40 passages, 3 batches each
    corpus = upload(tmp_path, "c.txt", "\n".join(lines))
    seen = []
    app.search("the cat", corpus, 2, lambda share, desc="": seen.append((share, desc)))
    shares = [s for s, _ in seen]
    assert shares == sorted(shares) and shares[-1] == 1.0 and shares[0] < 0.1
    for share, desc in seen:
        done, total = (int(x.replace(",", "")) for x in desc.split(": ")[1].split()[0].split("/"))
        assert total == 160 and done / total == pytest.approx(share)
