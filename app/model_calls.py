"""The model work of each comparison, one GPU call each (see gpu.py), and the search encoders.

On ZeroGPU these run in a forked worker: they return picklable values and raise gr.Error
(which spaces passes on as it is; any other exception would reach the visitor as a bare
"ZeroGPU worker error"). The demo tabs and the admin's study generation call them.
"""

from __future__ import annotations

import itertools
import threading
import time
from collections.abc import Iterator
from dataclasses import dataclass, replace

from magnet_model import systems
from magnet_model.decoding import FillSettings
from magnet_model.errors import MagnetError
from magnet_model.inference import search
from magnet_model.inference.blanks import split_blanks
from magnet_model.inference.engine import InfillResult
from magnet_model.metrics import repetition_stats
from magnet_model.systems import TITLES
from magnet_model.units import between_sentences

from . import render
from .gpu import continue_seconds, gpu, infill_seconds, search_seconds
from .outputs import ContinueColumn, ContinueView, SearchView
from .services import Services, Unavailable, as_gr_error, user_errors
from .studies import INFILL_SYSTEMS, MARKER

CONTINUE_SYSTEMS = systems.for_task("continue")
SEARCH_SYSTEMS = systems.for_task("search")  # in a 2 x 2 grid, two per row


@dataclass  # no fields of its own: the decorator makes __init__ call __post_init__
class ModelCalls(Services):
    """Each comparison's model work as one method, wrapped into one GPU call in
    __post_init__."""

    def __post_init__(self) -> None:
        """The model work of each comparison as one GPU call (see gpu.py), asking for a
        duration that fits it; bound methods, so only texts and plain values are pickled."""
        super().__post_init__()
        self.compare_infill = gpu(
            self._compare_infill,
            lambda text, systems, settings: infill_seconds(
                text.count(MARKER), self._longest_span(text, settings)
            ),
        )
        self.compare_infill_many = gpu(
            self._compare_infill_many,
            lambda requests: sum(
                infill_seconds(text.count(MARKER), self._longest_span(text, settings))
                for text, _, settings in requests
            ),
        )
        self.compare_continue = gpu(
            self._compare_continue, lambda prompt, kw: continue_seconds(kw["max_new_tokens"])
        )
        self.compare_search = gpu(
            self._compare_search,
            lambda query, corpus, k, progress=None: search_seconds(self._to_embed(corpus)),
        )

    def encoder(self, system: str) -> search.Encoder:
        """The search encoder of `system`, built once (a sentence encoder loads a model)."""
        if system not in self.encoders:
            self.encoders[system] = search.encoder_for(system, self.engine)
        return self.encoders[system]

    def warm_search(self) -> dict[str, str]:
        """Embed the default corpus with every search system that can run and has no cached
        vectors for it (`make prepare` usually did it already), so the first search only
        embeds its query. Run in a thread at start; returns what each system did (for the log).
        It does not yield to visitors' calls as a study job does: a search that comes meanwhile
        waits for these very vectors, and would wait on a warm-up waiting for it. The runner's
        lock is taken per batch, so other calls still run between batches."""
        corpus = default_corpus()
        done = {}
        for system in SEARCH_SYSTEMS:
            if why := self.availability(system):
                done[system] = f"unavailable ({why.reason})"
                continue
            try:
                enc = self.encoder(system)
                cached = search.is_cached(self.cache_dir, enc, corpus)
                t0 = time.perf_counter()
                # the vectors into memory, and the encoder's own weights loaded by one passage
                # (all-MiniLM-L6-v2 loads on first use): the first query finds both ready
                search.corpus_index(enc, corpus, self.cache_dir)
                enc.encode(corpus.passages[:1])
                took = time.perf_counter() - t0
                done[system] = "cached" if cached else f"embedded in {took:.0f} s"
            except MagnetError as e:
                done[system] = f"failed ({e})"  # the search itself says why, to the visitor
        return done

    def _to_embed(self, corpus: search.Corpus) -> int:
        """Passages the search of `corpus` has to embed: those of every encoder that can run
        and has no cached vectors for it yet."""
        todo = 0
        for system in SEARCH_SYSTEMS:
            if self.availability(system):
                continue
            try:
                cached = search.is_cached(self.cache_dir, self.encoder(system), corpus)
            except MagnetError:
                cached = False  # the search itself reports why this encoder cannot run
            todo += 0 if cached else len(corpus)
        return todo

    def _on_device(self) -> None:
        if self.cuda_inside_calls:
            self.engine.to_cuda_if_visible()

    def _longest_span(self, text: str, settings: FillSettings) -> int:
        """The most tokens one blank's fill may take: the request's cap, or, where a blank
        stands between sentences, a whole sentence's (MagnetFill.sentence_tokens)."""
        cap = settings.max_span_tokens or self.engine.config.max_span_tokens
        fill = self.engine.magnet_fill(settings.magnet)
        try:
            pieces = split_blanks(text, MARKER)
        except MagnetError:
            return cap  # the call itself says what is wrong with the text
        between = any(between_sentences(a, b) for a, b in itertools.pairwise(pieces))
        return max(cap, fill.sentence_tokens) if between and fill.close_sentences else cap

    def _infill_all(self, text: str, settings: FillSettings) -> list[InfillResult | Unavailable]:
        """All three infills of one comparison, run as one batch by the engine (one GPU
        call); Unavailable for a system that is not loaded or failed."""
        ready = [system for system in INFILL_SYSTEMS if not self.availability(system)]
        with self.model_gate.interactive():  # a study being generated waits for it
            out = self.compare_infill(text, ready, settings) if ready else []
        done = dict(zip(ready, out, strict=True))
        errors = [r for r in out if isinstance(r, MagnetError)]
        if errors and len(errors) == len(out):
            raise as_gr_error(errors[0]) from None
        results: list[InfillResult | Unavailable] = []
        for system in INFILL_SYSTEMS:
            r = done.get(system)
            if r is None:
                results.append(self.availability(system))
            elif isinstance(r, MagnetError):
                results.append(Unavailable(system, str(r)))
            else:
                results.append(r)
        return results

    def _compare_infill(self, text: str, systems: list[str], settings: FillSettings) -> list:
        """engine.compare_infill of the systems on one text: per system an InfillResult or
        the MagnetError that stopped it; an error of the input itself as gr.Error."""
        self._on_device()
        with user_errors():  # the input itself is bad: say so once
            return self.engine.compare_infill(text, systems, settings, marker=MARKER)

    def _compare_infill_many(self, requests: list) -> Iterator[tuple]:
        """engine.compare_infill_many of a batch of a study's items (one GPU call): (request,
        system index, InfillResult or MagnetError) as each output is done."""
        self._on_device()
        with user_errors():  # an item itself is bad: say so once
            yield from self.engine.compare_infill_many(requests, marker=MARKER)

    def _compare_continue(self, prompt: str, kw: dict) -> Iterator[ContinueView]:
        """The three continuations grow side by side: rows of one batch, one token each per
        step. Yields a column (text, stats) per system."""
        self._on_device()
        texts = {system: "" for system in CONTINUE_SYSTEMS}
        stats = {system: _stats("") for system in CONTINUE_SYSTEMS}
        running = []
        for system in CONTINUE_SYSTEMS:
            why = self.availability(system)
            if why:
                stats[system] = why.message
            else:
                running.append(system)
        adapters = [systems.get(system).adapter for system in running]
        with user_errors():
            steps = self.engine.compare_continue(prompt, adapters, **kw) if running else iter(())
        start = time.perf_counter()
        done: set[str] = set()
        guard = kw.get("no_repeat")
        ran = f" · loop guard on (no {guard}-gram twice)" if guard else " · no loop guard"
        try:
            for step in steps:
                for system, (text, reason) in zip(running, step, strict=True):
                    if system in done:
                        continue
                    texts[system] = text.lstrip()  # it continues the prompt: shown alone
                    stats[system] = _stats(text) + ran
                    if reason is not None:
                        done.add(system)
                        stats[system] += (
                            f" · done {time.perf_counter() - start:.1f} s into the shared batch"
                        )
                yield ContinueView([ContinueColumn(texts[s], stats[s]) for s in CONTINUE_SYSTEMS])
        except MagnetError as e:
            for system in running:
                if system not in done:
                    stats[system] = f"Stopped: {e}"
            yield ContinueView([ContinueColumn(texts[s], stats[s]) for s in CONTINUE_SYSTEMS])

    def _compare_search(
        self, query: str, corpus: search.Corpus, k: int, progress=None
    ) -> SearchView:
        """Top-k passages of every encoder; returns one table per system, the overlaps, a note."""
        self._on_device()
        hits: dict[str, list[search.Hit]] = {}
        tables, notes = [], []
        # one bar over all the passages still to embed (every encoder without cached vectors):
        # its count and its share are of the same total
        todo = self._to_embed(corpus) if progress is not None else 0
        # passages of an open study are never shown (blinding.py): left out of every ranking
        hidden = {i for i, p in enumerate(corpus.passages) if self.study_passages.matches(p)}
        before = 0  # passages of earlier encoders embedded in this call
        for system in SEARCH_SYSTEMS:
            why = self.availability(system)
            if why:
                tables.append([[None, None, why.message]])
                continue
            t0 = time.perf_counter()
            embedded = [0]

            def report(
                done: int, total: int, system: str = system, embedded=embedded, before=before
            ) -> None:
                embedded[0] = done
                if progress is not None and todo:
                    now = min(before + done, todo)
                    progress(
                        now / todo,
                        desc=f"Embedding the corpus with {TITLES[system]}: "
                        f"{now:,}/{todo:,} passages",
                    )

            with user_errors():
                enc = self.encoder(system)
                vecs = search.corpus_index(
                    enc, corpus, self.cache_dir, report, max_cache_bytes=self.search_cache_bytes
                )
                want = min(len(corpus), k + len(hidden))
                ranked = search.top_k(enc.encode([query])[0], vecs, corpus, want)
            found = [
                replace(h, rank=r)
                for r, h in enumerate((h for h in ranked if h.index not in hidden), start=1)
            ][:k]
            before += embedded[0]
            hits[system] = found
            tables.append([[h.rank, f"{h.score:.3f}", h.text] for h in found])  # even decimals
            notes.append(f"{TITLES[system]}: {time.perf_counter() - t0:.2f} s")
        names = list(hits)
        # short names: the matrix must fit a phone (the lists above carry the full titles)
        short = {n: systems.get(n).label for n in names}
        overlap = [[short[a], *[search.overlap(hits[a], hits[b]) for b in names]] for a in names]
        passages = render.plural(len(corpus), "passage")
        note = f"{corpus.name}: {passages}; top {k}. " + "; ".join(notes)
        if hidden:
            note += (
                f". {render.plural(len(hidden), 'passage')} of a rating study running now "
                f"{'is' if len(hidden) == 1 else 'are'} left out."
            )
        headers = ["system", *[short[b] for b in names]]
        shown = max((len(h) for h in hits.values()), default=k)  # a study's passages left out
        caption = f"Passages shared between the top-{shown} lists"
        return SearchView(tables, render.table_html(caption, headers, overlap), note)


_DEFAULT_CORPUS: list[search.Corpus] = []
_DEFAULT_CORPUS_LOCK = threading.Lock()


def default_corpus() -> search.Corpus:
    """The built-in held-out Wikipedia corpus, read once per process (a search arriving while
    the start-up reads it waits for that read)."""
    with _DEFAULT_CORPUS_LOCK:
        if not _DEFAULT_CORPUS:
            _DEFAULT_CORPUS.append(search.default_corpus())
        return _DEFAULT_CORPUS[0]


def _stats(text: str) -> str:
    s = repetition_stats(text)
    return (
        f"Rep-4 {s.rep_4:.2f} · Rep-Sen {s.rep_sen:.2f} · "
        f"distinct-1 {s.distinct_1:.2f} · distinct-2 {s.distinct_2:.2f} · {len(text.split())} words"
    )
