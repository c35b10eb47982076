"""Attention checks: gold items where one output is the original text and the others corrupted
fills (the hidden spans of other documents), so a careful rater can always tell them apart.

A check must look like any other item: it shows as many outputs as the regular items do, and
its passage is not one of the study's items (a rater who saw the passage twice, once with the
true words, would spot the check). Build checks from passages kept out of the study.

``held_out_gold_items`` is the stricter builder the app uses: every fill of every check comes
from its own held-out passage (a wrong fill is never a rated item's hidden original and never
shown in two checks), and the fills' lengths follow those of the study's system outputs, so a
check cannot be told by how long its fills are. Given the systems' fills (``styles``), each
check fill also takes the surface of one of them (``restyle``): the case of its first letter,
its final punctuation and its leading space, so a check cannot be told by how its fills start
or end either (a probe told them by capitals: 2 of 12 check fills against 24 of 36 system
fills started with one).
"""

from __future__ import annotations

import random
import re
from collections.abc import Sequence

from .errors import InvalidInputError
from .views import ItemIn, OutputIn

GOLD_ORIGINAL = "gold:original"
GOLD_CORRUPTED = "gold:corrupted"


def fill_blanks(text: str, spans: Sequence[str], blank: str) -> str:
    """Replace each ``blank`` marker in turn with the next span."""
    if text.count(blank) != len(spans):
        raise InvalidInputError(
            f"text has {text.count(blank)} blank(s) {blank!r} but {len(spans)} span(s) were given"
        )
    out = text
    for s in spans:
        out = out.replace(blank, s, 1)
    return out


def _spans(it: ItemIn) -> list[str]:
    return [it.original] if isinstance(it.original, str) else list(it.original)


def make_gold_items(
    passages: Sequence[ItemIn],
    n: int,
    *,
    blank: str,
    seed: int = 0,
    prefix: str = "gold-",
    n_outputs: int = 2,
    donors: Sequence[ItemIn] = (),
) -> tuple[list[ItemIn], list[OutputIn]]:
    """Build ``n`` attention-check items from ``passages`` that carry their original span(s).

    ``passages`` must not be items of the study (``create_study`` refuses a check whose text is
    one of its items). Each check has ``n_outputs`` outputs, as many as a regular item shows:
    the original and ``n_outputs - 1`` corrupted fills, each taking the spans of a different
    document (from ``passages``, then ``donors``, another source first), so they read fluently
    but do not fit the context.
    """
    if n < 1:
        return [], []
    if n_outputs < 2:
        raise InvalidInputError("an attention check needs at least two outputs")
    pool = [it for it in passages if it.original and not it.is_gold]
    if len(pool) < n:
        raise InvalidInputError(
            f"{n} attention check(s) need {n} passages with an original span that are not in "
            f"the study; {len(pool)} given"
        )
    spare = [d for d in donors if d.original and not d.is_gold]
    rng = random.Random(seed)
    chosen = rng.sample(pool, n)
    gold_items, outs = [], []
    for it in chosen:
        orig = _spans(it)
        others = [d for d in [*pool, *spare] if d.key != it.key and _spans(d) != orig]
        ranked = [d for d in others if d.source != it.source] + [
            d for d in others if d.source == it.source
        ]
        if len(ranked) < n_outputs - 1:
            raise InvalidInputError(
                f"attention checks with {n_outputs} outputs need {n_outputs - 1} other "
                "documents to take wrong spans from; give more passages"
            )
        head = ranked[: max(n_outputs - 1, min(len(ranked), 4 * n_outputs))]
        key = f"{prefix}{it.key}"
        gold_items.append(ItemIn(key, it.text, orig, it.source, is_gold=True))
        outs.append(
            OutputIn(
                key, GOLD_ORIGINAL, fill_blanks(it.text, orig, blank), orig, gold_role="original"
            )
        )
        for j, donor in enumerate(rng.sample(head, n_outputs - 1)):
            outs.append(_wrong_output(key, it.text, orig, _spans(donor), j, n_outputs, blank))
    return gold_items, outs


def _wrong_output(
    key: str, text: str, orig: list[str], donor: list[str], j: int, n_outputs: int, blank: str
) -> OutputIn:
    """The j-th wrong output of a check: the donor passage's spans in the check's blanks."""
    wrong = [donor[i % len(donor)] for i in range(len(orig))]
    system = GOLD_CORRUPTED if n_outputs == 2 else f"{GOLD_CORRUPTED}-{j + 1}"
    return OutputIn(key, system, fill_blanks(text, wrong, blank), wrong, gold_role="corrupted")


_TAIL = re.compile(r"[^\w\s]+$")


def surface(fill: str) -> tuple[str, bool | None, str]:
    """A fill's surface: (leading whitespace, whether its first letter is a capital (None: no
    letter), its final run of punctuation)."""
    body = fill.strip()
    first = next((c for c in body if c.isalpha()), None)
    tail = _TAIL.search(body)
    return (
        fill[: len(fill) - len(fill.lstrip())],
        None if first is None else first.isupper(),
        (tail.group() if tail else ""),
    )


def restyle(span: str, like: str) -> str:
    """``span`` with the surface of ``like``: its leading space, the case of its first letter
    and its final punctuation (the span's own final punctuation is dropped)."""
    lead, upper, tail = surface(like)
    body = span.strip()
    body = _TAIL.sub("", body).rstrip() or body
    i = next((k for k, c in enumerate(body) if c.isalpha()), None)
    if i is not None and upper is not None:
        body = body[:i] + (body[i].upper() if upper else body[i].lower()) + body[i + 1 :]
    return lead + body + tail


def _words(spans: Sequence[str]) -> int:
    return sum(len(s.split()) for s in spans)


def _targets(lengths: Sequence[int], n: int, rng: random.Random) -> list[int]:
    """n word counts drawn like ``lengths``, stratified: the i-th is a random one of the i-th
    n-th of ``lengths`` in sorted order; returned in random order."""
    ordered = sorted(lengths) or [1]
    out = [
        ordered[min(int((i + rng.random()) / n * len(ordered)), len(ordered) - 1)] for i in range(n)
    ]
    rng.shuffle(out)
    return out


def held_out_gold_items(
    pool: Sequence[ItemIn],
    n: int,
    *,
    blank: str,
    lengths: Sequence[int] = (),
    n_outputs: int = 2,
    seed: int = 0,
    prefix: str = "gold-",
    styles: Sequence[Sequence[str]] = (),
) -> tuple[list[ItemIn], list[OutputIn]]:
    """``n`` attention checks of ``n_outputs`` outputs each, every fill from its own passage.

    ``pool``: held-out passages with their original span(s), none of them an item of the
    study. Each check is one pool passage with its original, and ``n_outputs - 1`` wrong
    fills: the originals of other pool passages, each used once in the whole study. Which
    passage plays which part is chosen so that the fills' word counts follow ``lengths`` (the
    word counts of the study's system fills): a check's fills are as long as an item's.
    ``styles``: the fills of the study's system outputs (one list per output). Given, each
    check output takes one of them as its model, drawn like the lengths: its word count is the
    target; the wrong fills are ``restyle``-d like the model's (case, final punctuation,
    leading space), and the true text, which must read as written (a restyled one read "back
    seat. of the car", "51% Of the total", "mediterranean Sea"), is never changed: the passage
    that plays it is chosen among those whose own surface is the model's. ``lengths`` is then
    not needed.
    """
    if n < 1:
        return [], []
    if n_outputs < 2:
        raise InvalidInputError("an attention check needs at least two outputs")
    free = [it for it in pool if it.original and not it.is_gold]
    need = n * n_outputs
    if len(free) < need:
        raise InvalidInputError(
            f"{n} attention check(s) with {n_outputs} outputs need {need} held-out passages "
            f"with their original span (one per fill, none of them rated); {len(free)} given: "
            "give more passages or fewer checks"
        )
    rng = random.Random(seed)
    rng.shuffle(free)  # ties in length are broken at random
    models = [list(m) for m in styles if m]
    if models:
        models = _stratified(models, need, rng)
        targets = [_words(m) for m in models]
    else:
        targets = _targets(lengths, need, rng)
    seen_spans: set[tuple[str, ...]] = set()

    def take(target: int, avoid_source: str | None, like: list[str] | None = None) -> ItemIn:
        """The free passage nearest the target length (and, with ``like``, first of all one
        whose spans have the surface of ``like``'s fills: case and final punctuation)."""

        def off(it: ItemIn) -> int:
            if like is None:
                return 0
            spans = _spans(it)
            return sum(
                surface(sp)[1:] != surface(like[i % len(like)])[1:] for i, sp in enumerate(spans)
            )

        best = min(
            (it for it in free if tuple(_spans(it)) not in seen_spans),
            key=lambda it: (off(it), abs(_words(_spans(it)) - target), it.source == avoid_source),
            default=None,
        )
        if best is None:
            raise InvalidInputError(
                f"{n} attention check(s) need {need} different original spans; the held-out "
                "passages repeat some: give more passages or fewer checks"
            )
        free.remove(best)
        seen_spans.add(tuple(_spans(best)))
        return best

    def styled(spans: list[str], k: int) -> list[str]:
        if not models:
            return spans
        model = models[k]
        return [restyle(sp, model[i % len(model)]) for i, sp in enumerate(spans)]

    gold_items, outs = [], []
    for c in range(n):
        mine = targets[c * n_outputs : (c + 1) * n_outputs]
        it = take(mine[0], None, models[c * n_outputs] if models else None)  # its surface
        orig = _spans(it)
        key = f"{prefix}{it.key}"
        gold_items.append(ItemIn(key, it.text, orig, it.source, is_gold=True))
        # the true text as written: only a leading space like the model's (which a reader
        # does not see), never its case or punctuation
        model = models[c * n_outputs] if models else None
        shown = [
            (surface(model[i % len(model)])[0] + sp.lstrip()) if model else sp
            for i, sp in enumerate(orig)
        ]
        outs.append(
            OutputIn(
                key, GOLD_ORIGINAL, fill_blanks(it.text, shown, blank), shown, gold_role="original"
            )
        )
        for j, target in enumerate(mine[1:]):
            donor = styled(_spans(take(target, it.source)), c * n_outputs + j + 1)
            outs.append(_wrong_output(key, it.text, orig, donor, j, n_outputs, blank))
    return gold_items, outs


def _stratified(models: list[list[str]], n: int, rng: random.Random) -> list[list[str]]:
    """n of ``models`` drawn as ``_targets`` draws lengths: the i-th a random one of the i-th
    n-th of them in order of word count; returned in random order."""
    ordered = sorted(models, key=_words)
    out = [
        ordered[min(int((i + rng.random()) / n * len(ordered)), len(ordered) - 1)] for i in range(n)
    ]
    rng.shuffle(out)
    return out
