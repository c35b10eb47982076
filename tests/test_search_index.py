"""`python -m magnet_model.inference.search index`: a big corpus embedded once into the cache the
app's Search tab reads, so the app then embeds only the query; the index is kept in memory."""

from __future__ import annotations

import numpy as np
import pytest
from search_standins import CountingEncoder

from magnet_model.inference import search
from magnet_model.inference.engine import Engine
from magnet_model.settings import ModelSpec

WORDS = "the cat sat on a mat king queen city bird flew over sea night fire water".split()


def test_index_embeds_once_then_the_app_path_only_reads(tmp_path):
    rng = np.random.default_rng(0)
    lines = [" ".join(rng.choice(WORDS, 8)) + f" {i}" for i in range(2500)]  # over the 2000 cap
    corpus_file = tmp_path / "big.txt"
    corpus_file.write_text("\n".join(lines))
    enc = CountingEncoder(WORDS)
    built = search.index_corpus(
        search.read_corpus_file(corpus_file), {"bow": enc}, tmp_path, show_progress_bar=False
    )
    assert enc.seen == 2500 and len(built["bow"]) == 2500

    # What the app does with the same file uploaded (caps raised by its settings):
    corpus = search.parse_corpus("big.txt", corpus_file.read_bytes(), max_passages=5000)
    assert search.cache_path(tmp_path, enc, corpus).is_file()
    index = search.corpus_index(enc, corpus, tmp_path)
    assert enc.seen == 2500  # nothing embedded again
    assert index is built["bow"]  # and the index is not rebuilt
    hit = search.top_k(enc.encode([lines[7]])[0], index, corpus, k=1)[0]
    assert hit.index == 7 or hit.score == pytest.approx(1.0, abs=1e-5)
    with pytest.raises(search.CorpusError, match="2500 passages; at most 2000"):
        search.parse_corpus("big.txt", corpus_file.read_bytes())  # the default cap


def test_index_cli_on_the_tiny_model(tiny_dir, tmp_path, capsys):
    lines = ["the cat sat on the mat .", "the bird flew over the sea .", "fire and water ."]
    corpus_file = tmp_path / "c.jsonl"
    corpus_file.write_text("\n".join(f'{{"text": "{t}"}}' for t in lines))
    flags = ["--base-model", str(tiny_dir), "--adapters", "none", "--device", "cpu"]
    argv = ["index", str(corpus_file), "--systems", "base", "--no-progress", *flags]
    assert search.main([*argv, "--cache-dir", str(tmp_path / "cache")]) == 0
    assert "base: VectorIndex(n=3" in capsys.readouterr().out

    spec = ModelSpec(base=str(tiny_dir), adapters={}, device="cpu", cache_dir=tmp_path / "cache")
    enc = search.EngineEncoder(Engine.from_spec(spec), "base")
    corpus = search.parse_corpus("c.jsonl", corpus_file.read_bytes())
    cached = np.load(search.cache_path(tmp_path / "cache", enc, corpus))
    np.testing.assert_allclose(cached, enc.encode(lines), atol=1e-5)


def test_index_cli_errors_are_one_line(tmp_path, capsys):
    missing = str(tmp_path / "nope.txt")
    assert search.main(["index", missing, "--systems", "minilm"]) == 2
    assert capsys.readouterr().err.startswith("error: ")


def test_prepare_embeds_the_default_corpus_the_app_then_finds(
    tiny_dir, tmp_path, capsys, monkeypatch
):
    """`make prepare`'s second step: the app's default corpus embedded with every search system
    that can run (an adapter that is not loaded is skipped, said once), into the cache the app's
    first search reads."""
    lines = ("the cat sat on the mat .", "the bird flew over the sea .", "fire and water .")
    corpus = search.Corpus("Default (test)", lines)
    monkeypatch.setattr(search, "default_corpus", lambda: corpus)
    flags = ["--base-model", str(tiny_dir), "--adapters", "none", "--device", "cpu"]
    argv = ["prepare", "--systems", "magnet,base", "--no-progress", *flags]
    assert search.main([*argv, "--cache-dir", str(tmp_path / "cache")]) == 0
    out = capsys.readouterr()
    assert "base: VectorIndex(n=3" in out.out and "magnet: skipped" in out.err
    assert "Default (test): vectors cached under" in out.err

    spec = ModelSpec(base=str(tiny_dir), adapters={}, device="cpu", cache_dir=tmp_path / "cache")
    enc = search.EngineEncoder(Engine.from_spec(spec), "base")
    assert search.is_cached(tmp_path / "cache", enc, corpus)


def test_the_cache_key_names_the_dtype(tiny_dir, tmp_path):
    """Vectors computed in float32 are not served to a bfloat16 engine (nor back). float32
    asked for, not the CPU default (which differs between machines)."""
    import torch

    spec = ModelSpec(
        base=str(tiny_dir), adapters={}, device="cpu", dtype="float32", cache_dir=tmp_path
    )
    engine = Engine.from_spec(spec)
    key32 = search.EngineEncoder(engine, "base").key
    engine.model.to(torch.bfloat16)
    assert search.EngineEncoder(engine, "base").key != key32


def test_a_search_waiting_for_the_warm_up_reports_its_count(tmp_path, monkeypatch):
    """The start-up embeds the corpus in a thread; a search that comes meanwhile waits for
    those vectors (nothing embedded twice) and its progress shows how far the warm-up is."""
    import threading

    monkeypatch.setattr(search, "WAIT_REPORT_S", 0.01)
    gate, started = threading.Event(), threading.Event()

    class GatedEncoder(CountingEncoder):
        def encode(self, texts, batch_size=16):
            if self.seen == 32:  # two batches in: hold the warm-up until the search waits
                started.set()
                assert gate.wait(10)
            return super().encode(texts, batch_size)

    corpus = search.Corpus("c", tuple(f"the cat sat {i}" for i in range(64)))
    enc = GatedEncoder(WORDS)
    warm = threading.Thread(target=search.corpus_vectors, args=(enc, corpus, tmp_path))
    warm.start()
    assert started.wait(10)
    seen: list[tuple[int, int]] = []

    def progress(done: int, total: int) -> None:
        seen.append((done, total))
        if len(seen) == 3:
            gate.set()

    vecs = search.corpus_vectors(enc, corpus, tmp_path, progress)
    warm.join(10)
    assert vecs.shape[0] == 64 and enc.seen == 64  # the search embedded nothing itself
    assert seen[0] == (32, 64)  # the warm-up's count, while the search waited
