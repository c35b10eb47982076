"""A study's flagged outputs before raters come: made again (each item's systems with the
study's decoding and a new seed, many items a batch) or their items dropped, each action on
exactly the set the admin was shown (FlaggedSet)."""

from __future__ import annotations

import hashlib
import secrets
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass

from annotation_db import AnnotationStore, OutputIn, flagged_outputs, revise_outputs
from magnet_model.decoding import FillSettings
from magnet_model.inference.engine import Engine

from .studies import make_output, replay


def flagged(store: AnnotationStore, name: str, problems: Sequence[str]) -> list:
    """The study's outputs flagged with any of ``problems`` (annotation_db.fills)."""
    items, outputs = store.items(name)
    wanted = set(problems)
    return [f for f in flagged_outputs(items, outputs) if wanted & set(f.problems)]


def regenerate_flagged(
    engine: Engine,
    compare: Callable[[list[tuple[str, list[str], FillSettings]]], Iterator[tuple]],
    store: AnnotationStore,
    name: str,
    problems: Sequence[str],
    progress: Callable[[int, int], None] | None = None,
) -> tuple[int, int]:
    """Make every output flagged with one of ``problems`` once more, with the study's decoding
    and a new seed, and store them in place of the old ones (``annotation_db.revise_outputs``,
    refused once raters are invited). -> (outputs made again, how many of them are still
    flagged with one of those problems)."""
    items, outputs = store.items(name)
    wanted = set(problems)
    todo: dict[str, list[str]] = {}
    for f in flagged_outputs(items, outputs):
        if wanted & set(f.problems):
            todo.setdefault(f.item_key, []).append(f.system)
    by_key = {it.key: it for it in items}
    stored = {(o.item_key, o.system): o for o in outputs}
    new: list[OutputIn] = []
    todo_items = list(todo.items())
    k = engine.items_per_batch()
    for start in range(0, len(todo_items), k):  # K items' flagged outputs as one batch
        if progress:
            progress(start, len(todo_items))
        batch = todo_items[start : start + k]
        decodings = [dict(stored[(key, names[0])].decoding or {}) for key, names in batch]
        requests = []
        for (key, names), decoding in zip(batch, decodings, strict=True):
            run = replay(engine, decoding)
            if run.do_sample:
                run = run.but(seed=secrets.randbits(56))  # a new draw, stored with the output
            requests.append((by_key[key].text, names, run))
        for i, j, r in compare(requests):
            if isinstance(r, Exception):
                raise r
            key, names = batch[i]
            new.append(make_output(by_key[key], names[j], r, engine, decodings[i]))
    if new:
        revise_outputs(store, name, replace=new)
    remade = {(o.item_key, o.system) for o in new}
    still = [f for f in flagged(store, name, problems) if (f.item_key, f.system) in remade]
    return len(new), len(still)


@dataclass(frozen=True)
class FlaggedSet:
    """What one action on flagged outputs would touch, before it runs: the items, how many
    outputs per (problem, system), and a token naming exactly this set (a confirmation must
    carry it, so that what is done is what was shown)."""

    study: str
    problems: tuple[str, ...]
    keys: tuple[str, ...]  # items with an output flagged with one of the problems
    per_problem: dict[tuple[str, str], int]  # (problem, system) -> outputs
    n_items: int  # the study's regular items now
    n_outputs: int = 0  # outputs flagged with any of the problems
    outputs: str = ""  # a digest of every output now: a preview of older outputs is stale

    @property
    def token(self) -> str:
        said = "\n".join([self.study, *sorted(self.problems), "", *sorted(self.keys), self.outputs])
        return hashlib.sha256(said.encode("utf-8")).hexdigest()[:20]

    def describe(self, titles: dict[str, str]) -> str:
        """Per problem, the outputs flagged with it per system, in words."""
        by_problem: dict[str, list[str]] = {}
        for (problem, system), n in sorted(self.per_problem.items()):
            by_problem.setdefault(problem, []).append(f"{titles.get(system, system)} {n}")
        return "; ".join(f"{p}: {', '.join(v)}" for p, v in by_problem.items())


def flagged_set(store: AnnotationStore, name: str, problems: Sequence[str]) -> FlaggedSet:
    """The items and outputs flagged with any of ``problems`` now (nothing is changed)."""
    items, outputs = store.items(name)
    wanted = set(problems)
    found = [f for f in flagged_outputs(items, outputs) if wanted & set(f.problems)]
    digest = hashlib.sha256()
    for o in sorted(outputs, key=lambda o: (o.item_key, o.system)):
        digest.update(f"{o.item_key}\0{o.system}\0{o.text}\0{o.seed}\n".encode())
    per: dict[tuple[str, str], int] = {}
    for f in found:
        for p in wanted & set(f.problems):
            per[(p, f.system)] = per.get((p, f.system), 0) + 1
    keys = tuple(dict.fromkeys(f.item_key for f in found))
    n_items = store.study(name).n_items
    return FlaggedSet(
        name, tuple(sorted(wanted)), keys, per, n_items, len(found), digest.hexdigest()[:20]
    )


def drop_flagged(store: AnnotationStore, name: str, problems: Sequence[str]) -> list[str]:
    """Drop every item with an output flagged with one of ``problems`` -> their keys."""
    keys = list(dict.fromkeys(f.item_key for f in flagged(store, name, problems)))
    if keys:
        revise_outputs(store, name, drop=keys)
    return keys
