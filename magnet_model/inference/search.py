"""Similarity search over a small corpus: passages, encoders, an on-disk embedding cache, top-k.

The app's Search tab compares encoders on the same corpus: MAGNET / base pooling / llm2vec
(Engine.embed_sentences with an adapter) and all-MiniLM-L6-v2 (sentence-transformers).
Corpus vectors are computed once per (model, adapter, corpus) and cached as .npy files under
<cache dir>/search/, so the second search over a corpus only embeds the query.

    corpus = default_corpus()                          # held-out Wikipedia text
    enc = EngineEncoder(engine, "magnet")              # or MiniLMEncoder()
    vecs = corpus_vectors(enc, corpus, cache_dir)      # cached
    hits = top_k(enc.encode([query])[0], vecs, k=5)

A large corpus is embedded once, ahead of time, into the same cache the app reads:

    python -m magnet_model.inference.search index corpus.jsonl --systems magnet,minilm [model flags]

Then the app (with MAGNET_MAX_PASSAGES and MAGNET_MAX_UPLOAD_MB raised to fit the file) only
embeds the query when that file is uploaded; above EXACT_MAX_VECTORS passages `corpus_index`
builds the faiss IVF index once per process and keeps it for the next queries.

The default corpus is embedded ahead of time by `make prepare` (and the Docker build), so the
app's first search only embeds the query:

    python -m magnet_model.inference.search prepare [model flags]
"""

from __future__ import annotations

import argparse
import contextlib
import csv
import hashlib
import io
import os
import re
import sys
import threading
from collections import OrderedDict
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from .. import systems
from ..errors import InputError, MagnetError
from ..files import BadLine, jsonl_records
from ..settings import ModelSpec, add_model_args
from .vector_index import VectorIndex

# The default corpus: held-out Wikipedia text (never trained on), vital-article extracts and
# passages of the held-out articles, small enough to embed with every system on a CPU on first
# use (docs/app.md gives the measured time; then the disk cache answers).
DEFAULT_EXTRACTS = 150
DEFAULT_PASSAGES = 60
DEFAULT_PASSAGE_CHARS = 300  # passages are cut at a sentence end below this length
MAX_UPLOAD_BYTES = 5 * 1024 * 1024
MAX_PASSAGES = 2000
MAX_PASSAGE_CHARS = 2000
MINILM = "all-MiniLM-L6-v2"
INDEXES_KEPT = 4  # VectorIndex objects corpus_index keeps in memory (an IVF costs seconds)
# a sentence ends after . ! or ?, but not after an initial ("C. S. Lewis")
_SENTENCE_END = re.compile(r"(?<=[.!?])(?<!\b[A-Z]\.)\s+")


class CorpusError(InputError):
    """An uploaded corpus that cannot be used (format, size, no text)."""


@dataclass(frozen=True)
class Corpus:
    name: str
    passages: tuple[str, ...]

    @property
    def fingerprint(self) -> str:
        """Hash of the passages (not the name): the cache key of their vectors."""
        h = hashlib.sha256()
        for p in self.passages:
            h.update(p.encode("utf-8"))
            h.update(b"\0")
        return h.hexdigest()[:16]

    def __len__(self) -> int:
        return len(self.passages)


@dataclass(frozen=True)
class Hit:
    rank: int
    index: int
    score: float
    text: str


def cut_passage(text: str, max_chars: int = DEFAULT_PASSAGE_CHARS) -> str:
    """Whole sentences up to max_chars (the first sentence, cut at a word, if it is longer)."""
    text = " ".join(text.split())
    if len(text) <= max_chars:
        return text
    out = ""
    for sentence in _SENTENCE_END.split(text):
        if len(out) + len(sentence) + 1 > max_chars:
            break
        out = f"{out} {sentence}".strip()
    return out or text[:max_chars].rsplit(" ", 1)[0]


def _spread(items: list, n: int) -> list:
    """n items spread evenly over the list, in its order."""
    return items[:: max(1, len(items) // n)][:n] if n > 0 else []


def default_corpus(
    n_extracts: int = DEFAULT_EXTRACTS,
    n_passages: int = DEFAULT_PASSAGES,
    max_chars: int = DEFAULT_PASSAGE_CHARS,
) -> Corpus:
    """Held-out text only: n_extracts vital-article extracts spread over the held-out split
    (by title, so over the alphabet) and n_passages paragraphs spread over the held-out
    Wikipedia articles, each cut at a sentence end below max_chars."""
    from ..data import vital_articles, wikipedia_paragraphs

    extracts = _spread([a.extract for a in vital_articles("heldout")], n_extracts)
    paras = _spread(wikipedia_paragraphs("heldout"), n_passages)
    picked = list(dict.fromkeys(cut_passage(p, max_chars) for p in extracts + paras))
    name = f"Wikipedia, held out ({len(extracts)} vital-article extracts, {len(paras)} passages)"
    return Corpus(name, tuple(picked))


def parse_corpus(
    name: str,
    data: bytes,
    max_passages: int | None = MAX_PASSAGES,
    max_bytes: int | None = MAX_UPLOAD_BYTES,
) -> Corpus:
    """An uploaded .txt (one passage per line), .csv (a 'text' column, else the first) or
    .jsonl (a 'text' field per line) -> Corpus; readable CorpusError otherwise. The app passes
    its MAGNET_MAX_PASSAGES / MAGNET_MAX_UPLOAD_MB; None: no limit (`index` on a local file)."""
    if max_bytes is not None and len(data) > max_bytes:
        raise CorpusError(
            f"The file is {len(data) / 2**20:.1f} MB; at most {max_bytes / 2**20:.0f} MB."
        )
    try:
        text = data.decode("utf-8-sig")
    except UnicodeDecodeError:
        raise CorpusError("The file is not UTF-8 text.") from None
    ext = Path(name).suffix.lower()
    if ext == ".txt":
        rows = text.splitlines()
    elif ext == ".csv":
        rows = _csv_texts(text)
    elif ext == ".jsonl":
        rows = _jsonl_texts(text)
    else:
        raise CorpusError(f"Upload a .txt, .csv or .jsonl file, not '{ext or name}'.")
    passages = [" ".join(r.split())[:MAX_PASSAGE_CHARS] for r in rows]
    passages = list(dict.fromkeys(p for p in passages if p))
    if not passages:
        raise CorpusError("The file has no text passages.")
    if max_passages is not None and len(passages) > max_passages:
        raise CorpusError(f"The file has {len(passages)} passages; at most {max_passages}.")
    return Corpus(Path(name).name, tuple(passages))


def _csv_texts(text: str) -> list[str]:
    reader = csv.reader(io.StringIO(text))
    try:
        rows = list(reader)
    except csv.Error as e:  # e.g. a cell over the csv module's 128 KB field limit
        raise CorpusError(f"Line {reader.line_num} of the .csv file cannot be read: {e}.") from None
    if not rows:
        return []
    header = [h.strip().lower() for h in rows[0]]
    if "text" not in header:
        raise CorpusError(
            "The .csv file has no 'text' column: name the column of passages 'text' in its "
            "first row (or upload a .txt file, one passage per line)."
        )
    col = header.index("text")
    return [r[col] for r in rows[1:] if len(r) > col]


def _jsonl_texts(text: str) -> list[str]:
    out = []
    try:
        for i, rec in jsonl_records(text):
            if not isinstance(rec, dict) or not isinstance(rec.get("text"), str):
                raise CorpusError(f"Line {i} of the .jsonl file has no 'text' string.")
            out.append(rec["text"])
    except BadLine as e:
        raise CorpusError(f"Line {e.line} of the .jsonl file is not JSON.") from None
    return out


# ---------------------------------------------------------------- encoders


class Encoder:
    """texts -> L2-normalised vectors (n, d). `key` names the model for the cache."""

    key: str

    def encode(self, texts: Sequence[str], batch_size: int = 16) -> np.ndarray:
        raise NotImplementedError


class EngineEncoder(Encoder):
    """Sentence vectors of the engine's base model with one adapter (or none: 'base')."""

    def __init__(self, engine, adapter: str | None):  # engine: magnet_model.inference.engine.Engine
        self.engine = engine
        self.adapter = engine.runner.resolve_adapter(adapter)
        ref = engine.loaded.adapters.get(self.adapter, "")
        stamp = _file_stamp(ref)
        numbers = f"{engine.runner.dtype}|{getattr(engine.loaded, 'packing', None) or ''}"
        # the weights, not the source's description: that says "de-quantized into ..." on the
        # first start and "cache ..." later, and the first start's vectors were never reused
        base = getattr(engine.loaded, "weights", "") or engine.loaded.source
        self.key = f"{base}|{self.adapter}|{stamp}|{numbers}"

    def encode(self, texts: Sequence[str], batch_size: int = 16) -> np.ndarray:
        return self.engine.embed_sentences(list(texts), adapter=self.adapter, batch_size=batch_size)


class MiniLMEncoder(Encoder):
    """all-MiniLM-L6-v2 from its installed package, loaded on first use (on the CPU)."""

    _lock = threading.Lock()

    def __init__(self, path: str | os.PathLike | None = None, device: str = "cpu"):
        from .. import assets

        self.path = Path(path) if path else assets.minilm_dir()
        self.device = device
        self.key = f"{MINILM}|{self.path}"
        self._model = None

    def _load(self):
        with self._lock:
            if self._model is None:
                from sentence_transformers import SentenceTransformer

                self._model = SentenceTransformer(str(self.path), device=self.device)
        return self._model

    def encode(self, texts: Sequence[str], batch_size: int = 16) -> np.ndarray:
        vecs = self._load().encode(
            list(texts), batch_size=batch_size, normalize_embeddings=True, show_progress_bar=False
        )
        return np.asarray(vecs, dtype=np.float32)


def _file_stamp(ref: str) -> str:
    """Size and mtime of a local adapter's weights, so a retrained adapter gets fresh vectors."""
    if not ref:
        return ""
    path = Path(ref).expanduser()
    files = sorted(path.glob("adapter_model.*")) if path.is_dir() else []
    return ";".join(f"{f.stat().st_size}:{int(f.stat().st_mtime)}" for f in files) or ref


# ---------------------------------------------------------------- cache and search


def cache_path(cache_dir: str | os.PathLike, encoder: Encoder, corpus: Corpus) -> Path:
    model = hashlib.sha256(encoder.key.encode("utf-8")).hexdigest()[:16]
    return Path(cache_dir) / "search" / f"{model}-{corpus.fingerprint}.npy"


def corpus_vectors(
    encoder: Encoder,
    corpus: Corpus,
    cache_dir: str | os.PathLike,
    progress: Callable[[int, int], None] | None = None,
    batch_size: int = 16,
    max_cache_bytes: int | None = None,
) -> np.ndarray:
    """Vectors of every passage, from the disk cache or computed once (progress(done, total)).
    ``max_cache_bytes``: after a new file, the least recently used ones go until the cache
    fits (every uploaded corpus adds files; None: no cap)."""
    path = cache_path(cache_dir, encoder, corpus)
    # one computation per file in this process: a search that comes while the app's start-up
    # embeds the same corpus waits for those vectors instead of computing them a second time,
    # and its progress reports the count that computation has reached
    with _computing(path, progress, len(corpus)):
        vecs = _cached(path, len(corpus))
        if vecs is None:
            vecs = _compute(encoder, corpus, path, progress, batch_size)
            if max_cache_bytes is not None:
                prune_cache(path.parent, max_cache_bytes, keep=path)
    return vecs


def _cached(path: Path, n: int) -> np.ndarray | None:
    if path.is_file():
        try:
            vecs = np.load(path)
            if vecs.shape[0] == n:
                _touch(path)
                return vecs
        except (OSError, ValueError):
            pass  # a damaged cache file is recomputed
    return None


_LOCKS: dict[str, threading.Lock] = {}
_LOCKS_LOCK = threading.Lock()
_DONE: dict[str, int] = {}  # passages embedded so far by the computation running for a file
WAIT_REPORT_S = 0.5  # how often a search waiting for another's computation reports its count


@contextlib.contextmanager
def _computing(path: Path, progress: Callable[[int, int], None] | None = None, total: int = 0):
    """Hold the file's lock; while another thread holds it (the start-up's warm-up embedding
    this corpus), report that computation's count through ``progress`` every WAIT_REPORT_S."""
    with _LOCKS_LOCK:
        lock = _LOCKS.setdefault(str(path), threading.Lock())
    while not lock.acquire(timeout=WAIT_REPORT_S if progress else -1):
        progress(min(_DONE.get(str(path), 0), total), total)
    try:
        yield
    finally:
        _DONE.pop(str(path), None)
        lock.release()


def _compute(encoder, corpus, path: Path, progress, batch_size: int) -> np.ndarray:
    parts, total = [], len(corpus)
    for start in range(0, total, batch_size):
        _DONE[str(path)] = start  # for a search that waits for these vectors (_computing)
        if progress:
            progress(start, total)
        parts.append(encoder.encode(corpus.passages[start : start + batch_size], batch_size))
    if progress:
        progress(total, total)
    vecs = np.concatenate(parts).astype(np.float32)
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_suffix(f".{os.getpid()}.tmp.npy")
    np.save(tmp, vecs)
    os.replace(tmp, path)  # atomic: a concurrent reader never sees half a file
    return vecs


def is_cached(cache_dir: str | os.PathLike, encoder: Encoder, corpus: Corpus) -> bool:
    """Whether the corpus's vectors for this encoder are in the disk cache."""
    return cache_path(cache_dir, encoder, corpus).is_file()


def _touch(path: Path) -> None:
    with contextlib.suppress(OSError):
        os.utime(path)  # "recently used", for prune_cache


def prune_cache(folder: str | os.PathLike, max_bytes: int, keep: Path | None = None) -> list[Path]:
    """Delete the least recently used cache files until the folder holds at most ``max_bytes``
    (``keep`` stays, even alone over the cap); returns what was deleted."""
    files = []
    for p in Path(folder).glob("*.npy"):
        try:
            st = p.stat()
        except OSError:
            continue  # deleted meanwhile
        files.append((st.st_mtime, st.st_size, p))
    total = sum(size for _, size, _ in files)
    gone = []
    for _, size, p in sorted(files, key=lambda f: f[0]):
        if total <= max_bytes:
            break
        if keep is not None and p == keep:
            continue
        p.unlink(missing_ok=True)
        total -= size
        gone.append(p)
    return gone


_INDEXES: OrderedDict[tuple[str, int], VectorIndex] = OrderedDict()
_INDEXES_LOCK = threading.Lock()


def corpus_index(
    encoder: Encoder, corpus: Corpus, cache_dir: str | os.PathLike, *args, **kwargs
) -> VectorIndex:
    """corpus_vectors (same arguments: progress, batch_size, max_cache_bytes) as a VectorIndex,
    kept in memory for the next query (the last INDEXES_KEPT corpora), so a large corpus's IVF
    index is built once per process."""
    path = cache_path(cache_dir, encoder, corpus)
    key = (str(path), len(corpus))
    with _INDEXES_LOCK:
        if key in _INDEXES and path.is_file():
            _INDEXES.move_to_end(key)
            return _INDEXES[key]
    index = VectorIndex(corpus_vectors(encoder, corpus, cache_dir, *args, **kwargs))
    with _INDEXES_LOCK:
        _INDEXES[key] = index
        while len(_INDEXES) > INDEXES_KEPT:
            _INDEXES.popitem(last=False)
    return index


def top_k(query: np.ndarray, vectors, corpus: Corpus, k: int = 5) -> list[Hit]:
    """The k passages with the highest cosine similarity (vectors are normalised).

    vectors: the (n, d) array of the corpus (searched exactly up to EXACT_MAX_VECTORS) or a
    VectorIndex built once over a large collection (corpus_index)."""
    index = vectors if isinstance(vectors, VectorIndex) else VectorIndex(vectors)
    if len(index) != len(corpus):
        raise MagnetError(f"There are {len(index)} vectors for {len(corpus)} passages.")
    scores, ids = index.search(query, max(1, k))
    return [
        Hit(r, int(i), float(s), corpus.passages[i])
        for r, (s, i) in enumerate(zip(scores[0], ids[0], strict=True), 1)
    ]


def overlap(a: Sequence[Hit], b: Sequence[Hit]) -> int:
    """How many passages two result lists share."""
    return len({h.index for h in a} & {h.index for h in b})


# ---------------------------------------------------------------- CLI: embed a corpus once


def encoder_for(system: str, engine=None) -> Encoder:
    """The Encoder of a search system (magnet_model.systems): the sentence encoder for an
    encoder row, else the engine's sentence vectors with that adapter (or none, for base)."""
    row = systems.get(system)
    if row.kind == systems.ENCODER:
        return MiniLMEncoder()
    if row.kind == systems.PROMPTED:
        raise InputError(f"{system} is a prompt for infilling, not an encoder.")
    return EngineEncoder(engine, system)


def read_corpus_file(path: str | os.PathLike) -> Corpus:
    """A corpus file read as an upload is, without the app's caps."""
    path = Path(path)
    return parse_corpus(path.name, path.read_bytes(), max_passages=None, max_bytes=None)


def index_corpus(
    corpus: Corpus,
    encoders: dict[str, Encoder],
    cache_dir: str | os.PathLike,
    batch_size: int = 16,
    show_progress_bar: bool = True,
) -> dict[str, VectorIndex]:
    """Embed `corpus` with each encoder into the search cache under `cache_dir`, one progress
    bar per encoder (vectors already cached are read, not recomputed)."""
    from tqdm.auto import tqdm

    out = {}
    for name, encoder in encoders.items():
        with tqdm(
            total=len(corpus), desc=name, unit="passage", disable=not show_progress_bar
        ) as bar:

            def report(done: int, total: int, bar=bar) -> None:
                bar.update(done - bar.n)

            out[name] = corpus_index(encoder, corpus, cache_dir, report, batch_size)
    return out


def build_parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(
        prog="python -m magnet_model.inference.search",
        description="Embed a search corpus once, into the cache the app's Search tab reads.",
    )
    sub = p.add_subparsers(dest="cmd", required=True)
    ix = sub.add_parser("index", help="embed CORPUS (.txt, .csv or .jsonl) with each system")
    ix.add_argument("corpus", help="one passage per line (.txt), a 'text' column or field")
    pre = sub.add_parser(
        "prepare",
        help="embed the app's default corpus with every search system (make prepare runs it)",
    )
    for cmd, default in ((ix, "magnet,minilm"), (pre, ",".join(systems.for_task("search")))):
        cmd.add_argument(
            "--systems",
            default=default,
            help=f"comma-separated, of {', '.join(systems.for_task('search'))} (adapters by name)",
        )
        cmd.add_argument("--batch-size", type=int, default=16)
        cmd.add_argument("--threads", type=int, default=None, help="torch CPU threads")
        cmd.add_argument("--no-progress", action="store_true", help="no progress bar")
        add_model_args(cmd)
    return p


def main(argv: list[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    try:
        from ..loading import load_model  # the model stack loads only for these commands
        from .engine import Engine

        spec = ModelSpec.from_args(args)
        names = [n.strip() for n in args.systems.split(",") if n.strip()]
        engine = None
        if any(systems.get(n).uses_llm for n in names):
            # as the app loads it: an adapter that does not load is left out, not fatal
            engine = Engine(load_model(spec, skip_failed_adapters=args.cmd == "prepare"))
        if args.cmd == "prepare":
            corpus = default_corpus()
            names = _runnable(names, engine)
        else:
            corpus = read_corpus_file(args.corpus)
        encoders = {n: encoder_for(n, engine) for n in names}
        built = index_corpus(
            corpus, encoders, spec.cache_dir, args.batch_size, not args.no_progress
        )
    except (MagnetError, OSError) as e:
        print(f"error: {e}", file=sys.stderr)
        return 2
    for name, index in built.items():
        print(f"{name}: {index!r}")
    print(
        f"{corpus.name}: vectors cached under {Path(spec.cache_dir) / 'search'}.", file=sys.stderr
    )
    return 0


def _runnable(names: list[str], engine) -> list[str]:
    """The systems the app would run: an adapter that is not loaded is skipped, said once."""
    loaded = set(engine.runner.adapter_names) if engine is not None else set()
    keep = []
    for name in names:
        adapter = systems.get(name).adapter
        if adapter is not None and adapter not in loaded:
            why = engine.loaded.failed.get(adapter) if engine is not None else None
            print(f"{name}: skipped ({why or 'adapter not loaded'})", file=sys.stderr)
        else:
            keep.append(name)
    return keep


if __name__ == "__main__":
    sys.exit(main())
