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
fills started with one). Nor by which of its outputs is the shortest: where the true text
stands among a check's fills sorted by length is drawn, each place equally often in a study
(``_places``), and the wrong fills are taken shorter or longer than it to match (a probe found
it the shortest in 29 of 60 checks, so that "always the shortest" passed half of them).
"""

from __future__ import annotations

import bisect
import functools
import random
import re
from collections.abc import Callable, Sequence

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


@functools.lru_cache(maxsize=8192)  # a study's checks ask it of each passage many times
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


def fill_length(spans: Sequence[str]) -> int:
    """A fill's length as a reader sees it: its characters, its blanks' spans together (a
    leading space, which nobody sees, not counted). What "the shortest output" means to a
    rater who does not read."""
    return len(" ".join(s.strip() for s in spans))


def _read(spans: Sequence[str]) -> tuple[str, ...]:
    """A fill as a reader tells it from another: its spans without spaces around them."""
    return tuple(s.strip() for s in spans)


def _places(n: int, n_outputs: int, rng: random.Random) -> list[int]:
    """Where the true text of each of ``n`` checks stands among its ``n_outputs`` fills sorted
    by length (0: the shortest): each place ``n // n_outputs`` times, the rest drawn without
    repeats, in random order; so in every study, not only on average, a rater who always
    takes the shortest (or the longest) fill meets the true text there one check in
    ``n_outputs``, give or take one."""
    out = [c % n_outputs for c in range(n - n % n_outputs)]
    out += rng.sample(range(n_outputs), n % n_outputs)
    rng.shuffle(out)
    return out


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

    Length says nothing about which output is true: each check draws the place of its true
    text among its fills sorted by length (``_places``: every place equally often in the
    study), the true text takes the target of that place, and each wrong fill is taken among
    the passages that, as shown, are shorter than the true text (the places below) or longer
    (above), in characters (``fill_length``) and, where one is, not the other way in words.
    Before, the true text, chosen for its surface first, was the shortest in 37% of checks
    built from real passages and the systems' fills, the longest in 27%."""
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
    places = _places(n, n_outputs, rng)
    seen_spans: set[tuple[str, ...]] = set()

    def take(
        target: int,
        avoid_source: str | None,
        first: Callable[[ItemIn], tuple] | None = None,
        fits: Callable[[ItemIn], int] | None = None,
    ) -> ItemIn:
        """The free passage that best meets ``first`` (a key, lowest first) or else ``fits``
        (how badly it misses: 0 not at all; the nearest that misses least), then nearest the
        target length, then (for a wrong fill) from another source than the check's."""
        near = sorted(
            (it for it in free if tuple(_spans(it)) not in seen_spans),
            key=lambda it: (abs(_words(_spans(it)) - target), it.source == avoid_source),
        )
        if not near:
            raise InvalidInputError(
                f"{n} attention check(s) need {need} different original spans; the held-out "
                "passages repeat some: give more passages or fewer checks"
            )
        if first is not None:
            best = min(near, key=first)  # the nearest of those that meet it best
        elif fits is None:
            best = near[0]
        else:  # the nearest that fits, looked for lazily: most often one of the first few
            best = next((it for it in near if fits(it) == 0), None) or min(near, key=fits)
        free.remove(best)
        seen_spans.add(tuple(_spans(best)))
        return best

    def truth_key(like: list[str] | None, shorter: int, longer: int) -> Callable:
        """For the true text: first a passage that leaves ``shorter`` free passages shorter
        than it and ``longer`` longer (so that it can stand at its drawn place), then one
        whose spans have the surface of ``like``'s fills (case and final punctuation)."""
        sizes = sorted(
            fill_length(_spans(it)) for it in free if tuple(_spans(it)) not in seen_spans
        )

        def key(it: ItemIn) -> tuple:
            size = fill_length(_spans(it))
            room = (
                bisect.bisect_left(sizes, size) >= shorter
                and len(sizes) - bisect.bisect_right(sizes, size) >= longer
            )
            if like is None:
                return (not room, 0)
            off = sum(
                surface(sp)[1:] != surface(like[i % len(like)])[1:]
                for i, sp in enumerate(_spans(it))
            )
            return (not room, off)

        return key

    def shown_wrong(spans: list[str], k: int, n_blanks: int) -> list[str]:
        """A wrong fill as check output ``k`` shows it: restyled like its model, one span per
        blank of the check."""
        if models:
            model = models[k]
            spans = [restyle(sp, model[i % len(model)]) for i, sp in enumerate(spans)]
        return [spans[i % len(spans)] for i in range(n_blanks)]

    def side(k: int, n_blanks: int, shown: list[list[str]], *, shorter: bool) -> Callable:
        """For wrong output ``k``: how a passage's fill, as shown, misses being shorter than
        the true text (``shown[0]``) or longer: 0 when it is, in characters and not longer in
        words (or not shorter); 1 when in characters only; 2 when not; 3 when it reads as one
        of the check's fills already ``shown`` (restyled, "river," and "River." both read
        "River.")."""
        true = shown[0]
        size, words = fill_length(true), _words(true)
        taken = {_read(f) for f in shown}

        def fits(it: ItemIn) -> int:
            mine = shown_wrong(_spans(it), k, n_blanks)
            if _read(mine) in taken:
                return 3
            by_size = fill_length(mine) < size if shorter else fill_length(mine) > size
            by_words = _words(mine) <= words if shorter else _words(mine) >= words
            return 0 if by_size and by_words else 1 if by_size else 2

        return fits

    gold_items, outs = [], []
    for c in range(n):
        # the check's outputs in order of their target lengths; the true text takes the drawn
        # place, the wrong fills the places below and above it
        ks = sorted(
            range(c * n_outputs, (c + 1) * n_outputs), key=lambda k: (targets[k], rng.random())
        )
        place = places[c]
        k_true, below, above = ks[place], ks[:place], ks[place + 1 :]
        model = models[k_true] if models else None
        it = take(targets[k_true], None, first=truth_key(model, len(below), len(above)))
        orig = _spans(it)
        key = f"{prefix}{it.key}"
        gold_items.append(ItemIn(key, it.text, orig, it.source, is_gold=True))
        # the true text as written: only a leading space like the model's (which a reader
        # does not see), never its case or punctuation
        shown = [
            (surface(model[i % len(model)])[0] + sp.lstrip()) if model else sp
            for i, sp in enumerate(orig)
        ]
        outs.append(
            OutputIn(
                key, GOLD_ORIGINAL, fill_blanks(it.text, shown, blank), shown, gold_role="original"
            )
        )
        wrong: list[list[str]] = []
        for k in [*below, *above]:
            fits = side(k, len(orig), [shown, *wrong], shorter=k in below)
            donor = take(targets[k], it.source, fits=fits)
            wrong.append(shown_wrong(_spans(donor), k, len(orig)))
        rng.shuffle(wrong)  # which wrong output is the shorter one says nothing either
        for j, spans in enumerate(wrong):
            system = GOLD_CORRUPTED if n_outputs == 2 else f"{GOLD_CORRUPTED}-{j + 1}"
            outs.append(
                OutputIn(
                    key, system, fill_blanks(it.text, spans, blank), spans, gold_role="corrupted"
                )
            )
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
