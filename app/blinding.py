"""The passages of the open rating studies, which the public demo does not fill.

Study outputs are sampled with a hidden seed, but the systems' near-greedy fills recur under
sampling: pasting a study item into the Infill tab reproduced 3 of 18 study outputs exactly,
under their system names (security review 4, N15). So while a study is open, a demo text that
is a study passage, or shares a run of ``RUN_WORDS`` words with one (its items' texts and the
outputs raters see), is refused with a sentence saying why. Words are compared in lower case,
without punctuation and blank markers; a passage shorter than the run only as a whole.

The passages come from the store's API (list_studies, items); no SQL here. The index is
rebuilt when the set of open studies changes, looked at every ``refresh_s`` seconds at most.
"""

from __future__ import annotations

import re
import threading
import time
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field

from annotation_db import AnnotationStore

from .studies import MARKER

RUN_WORDS = 8  # a shared run of this many words makes a text a near copy
_WORD = re.compile(r"\w+")


def words(text: str) -> tuple[str, ...]:
    """The text's words, lower case, its blank markers left out (a run spans a blank)."""
    return tuple(_WORD.findall(text.replace(MARKER, " ").lower()))


def runs(ws: tuple[str, ...], n: int) -> Iterable[tuple[str, ...]]:
    return (ws[i : i + n] for i in range(len(ws) - n + 1))


@dataclass
class _Index:
    long: set[int] = field(default_factory=set)  # hashes of the RUN_WORDS-word runs
    # passages below RUN_WORDS words: only a copy of the whole one counts (their few words
    # turn up in any text)
    short: set[tuple[str, ...]] = field(default_factory=set)

    def add(self, text: str) -> None:
        ws = words(text)
        if len(ws) >= RUN_WORDS:
            self.long.update(hash(r) for r in runs(ws, RUN_WORDS))
        elif ws:
            self.short.add(ws)

    def hit(self, text: str) -> bool:
        ws = words(text)
        return ws in self.short or any(hash(r) in self.long for r in runs(ws, RUN_WORDS))


@dataclass
class StudyPassages:
    """Whether a text is (close to) a passage of an open study."""

    store: AnnotationStore
    refresh_s: float = 5.0
    clock: Callable[[], float] = time.monotonic
    _key: tuple = ()
    _index: _Index = field(default_factory=_Index)
    _checked: float = float("-inf")
    _lock: threading.Lock = field(default_factory=threading.Lock)

    def matches(self, text: str) -> bool:
        return self._current().hit(text)

    def _current(self) -> _Index:
        with self._lock:
            now = self.clock()
            if now - self._checked < self.refresh_s:
                return self._index
            self._checked = now
            studies = [s for s in self.store.list_studies() if s.kind == "study"]
            key = tuple((s.name, s.n_items, s.n_gold) for s in studies if s.status == "open")
            if key != self._key:
                index = _Index()
                for name, _, _ in key:
                    items, outputs = self.store.items(name)
                    for text in [i.text for i in items] + [o.text for o in outputs]:
                        index.add(text)
                self._key, self._index = key, index
            return self._index
