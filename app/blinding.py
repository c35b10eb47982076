"""Keeping a running study blind: the demo's model tabs pause while a study has raters, and
the demo never fills, continues or shows a passage of an open study.

Study outputs are sampled with a hidden seed, but the systems' near-greedy fills recur under
sampling: pasting a study item into the Infill tab reproduced 3 of 18 study outputs exactly,
under their system names (security review 4). Matching the text the visitor typed cannot hold
by itself: look-alike letters, zero-width spaces and dropped words got 70 of 72 such calls
served, and the named demo fills still told which system wrote 61% of the study's outputs
(security review 5). So the rule holds whatever a rater types:

1. **The pause.** While a study is open and has invited raters (``live``), the Infill,
   Continue and Search tabs answer every call with one sentence instead of running a model;
   the rater page and Admin stay. The admin may keep the demo on for a given study, knowing
   what it costs (``DemoPolicy``, kept in a file beside the database); Admin says which rule is
   in force.
2. **A second line**, for open studies without raters yet and for studies the admin let the
   demo run beside: a demo text that is a passage of an open study, or shares a run of
   ``RUN_WORDS`` words with one, or the words right around its blank, is refused; Search hides
   the corpus passages that match one. Texts are compared by their ``skeleton``: NFKC, format
   characters (zero-width spaces) removed, look-alike letters mapped to the Latin letter they
   imitate (Unicode's confusables, from the confusable-homoglyphs package), lower case. The
   refusal does not say how close a text may come.

The passages come from the store's API (list_studies, items); no SQL here. The index is rebuilt
when the set of open studies changes, looked at every ``refresh_s`` seconds at most.
"""

from __future__ import annotations

import json
import logging
import os
import re
import threading
import time
import unicodedata
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from functools import cache
from pathlib import Path

from annotation_db import AnnotationStore

from .studies import MARKER

log = logging.getLogger("app")

RUN_WORDS = 8  # a shared run of this many words makes a text a near copy
NEAR_WORDS = 3  # the words on each side of a blank: the same ones around it are its item
POLICY_FILE = "demo-during-studies.json"  # in the store's data folder
_WORD = re.compile(r"\w+")


@cache
def _lookalikes() -> dict[int, str]:
    """Every character that Unicode's confusables table lists as looking like an ASCII letter
    or digit, mapped to it (Cyrillic "а" to "a", Greek "ο" to "o", ...)."""
    from confusable_homoglyphs import confusables

    table: dict[int, str] = {}
    for char, glyphs in confusables.confusables_data.items():
        if len(char) != 1 or char.isascii():
            continue
        latin = next((g["c"] for g in glyphs if len(g["c"]) == 1 and g["c"].isascii()), None)
        if latin is not None and latin.isalnum():
            table[ord(char)] = latin
    return table


def skeleton(text: str) -> str:
    """What a text looks like, whatever characters spell it: NFKC, without format characters
    (zero-width spaces and joiners, bidirectional marks), look-alike letters as the Latin ones
    they imitate, lower case."""
    text = unicodedata.normalize("NFKC", text)
    text = "".join(ch for ch in text if unicodedata.category(ch) != "Cf")
    return text.translate(_lookalikes()).lower()


def words(text: str) -> tuple[str, ...]:
    """The text's words, by skeleton, its blank markers left out (a run spans a blank)."""
    return tuple(_WORD.findall(skeleton(text.replace(MARKER, " "))))


def runs(ws: tuple[str, ...], n: int) -> Iterable[tuple[str, ...]]:
    return (ws[i : i + n] for i in range(len(ws) - n + 1))


def around_blanks(text: str) -> list[tuple[tuple[str, ...], tuple[str, ...]]]:
    """For each blank of the text: the NEAR_WORDS words before it and after it (skeletons)."""
    parts = text.split(MARKER)
    out = []
    for i in range(len(parts) - 1):
        before = tuple(_WORD.findall(skeleton(parts[i])))[-NEAR_WORDS:]
        after = tuple(_WORD.findall(skeleton(parts[i + 1])))[:NEAR_WORDS]
        if len(before) + len(after) >= 2 * NEAR_WORDS - 1:  # not at an edge: a few words
            # there would turn up in any text
            out.append((before, after))
    return out


@dataclass
class _Index:
    long: set[int] = field(default_factory=set)  # hashes of the RUN_WORDS-word runs
    # passages below RUN_WORDS words: only a copy of the whole one counts (their few words
    # turn up in any text)
    short: set[tuple[str, ...]] = field(default_factory=set)
    near: set[tuple[tuple[str, ...], tuple[str, ...]]] = field(default_factory=set)

    def add(self, text: str) -> None:
        ws = words(text)
        if len(ws) >= RUN_WORDS:
            self.long.update(hash(r) for r in runs(ws, RUN_WORDS))
        elif ws:
            self.short.add(ws)
        self.near.update(around_blanks(text))

    def hit(self, text: str) -> bool:
        ws = words(text)
        if ws in self.short or any(hash(r) in self.long for r in runs(ws, RUN_WORDS)):
            return True
        return any(b in self.near for b in around_blanks(text))


@dataclass
class StudyPassages:
    """Whether a text is (close to) a passage of an open study, and which studies are live
    (open, with invited raters)."""

    store: AnnotationStore
    refresh_s: float = 5.0
    clock: Callable[[], float] = time.monotonic
    _key: tuple = ()
    _index: _Index = field(default_factory=_Index)
    _live: tuple[str, ...] = ()
    _checked: float = float("-inf")
    _lock: threading.Lock = field(default_factory=threading.Lock)

    def matches(self, text: str) -> bool:
        return self._current().hit(text)

    def invalidate(self) -> None:
        """Look at the studies again at the next question (after an admin's change)."""
        with self._lock:
            self._checked = float("-inf")

    def live(self) -> tuple[str, ...]:
        """The open studies that have invited raters, by name."""
        self._current()
        return self._live

    def _current(self) -> _Index:
        with self._lock:
            now = self.clock()
            if now - self._checked < self.refresh_s:
                return self._index
            self._checked = now
            studies = [s for s in self.store.list_studies() if s.kind == "study"]
            opened = [s for s in studies if s.status == "open"]
            self._live = tuple(s.name for s in opened if s.n_raters > 0)
            key = tuple((s.name, s.n_items, s.n_gold) for s in opened)
            if key != self._key:
                index = _Index()
                for name, _, _ in key:
                    items, outputs = self.store.items(name)
                    for text in [i.text for i in items] + [o.text for o in outputs]:
                        index.add(text)
                self._key, self._index = key, index
            return self._index


@dataclass
class DemoPolicy:
    """The studies beside which the admin keeps the demo on, kept in ``path`` (a JSON list;
    None: in memory only). A file that cannot be read counts as no such study (the safe side)
    and is said in the log."""

    path: Path | None = None
    _allowed: set[str] = field(default_factory=set)
    _lock: threading.Lock = field(default_factory=threading.Lock)

    def __post_init__(self) -> None:
        if self.path is None or not self.path.exists():
            return
        try:
            names = json.loads(self.path.read_text(encoding="utf-8"))
            self._allowed = {n for n in names if isinstance(n, str)}
        except (OSError, ValueError, TypeError) as e:
            log.warning("%s could not be read (%s): the demo pauses for every study", self.path, e)

    def allowed(self) -> frozenset[str]:
        with self._lock:
            return frozenset(self._allowed)

    def allow(self, study: str, on: bool) -> None:
        """Keep the demo on beside ``study`` (or not), and write the file at once (atomically:
        a crash leaves the old file or the new one)."""
        with self._lock:
            changed = set(self._allowed)
            (changed.add if on else changed.discard)(study)
            if self.path is not None:
                self.path.parent.mkdir(parents=True, exist_ok=True)
                tmp = self.path.with_suffix(".tmp")
                tmp.write_text(json.dumps(sorted(changed)), encoding="utf-8")
                os.replace(tmp, self.path)
            self._allowed = changed
