"""Attention checks: gold items where one output is the original text and the others corrupted
fills (the hidden spans of other documents), so a careful rater can always tell them apart.

A check must look like any other item: it shows as many outputs as the regular items do, and
its passage is not one of the study's items (a rater who saw the passage twice, once with the
true words, would spot the check). Build checks from passages kept out of the study.
"""

from __future__ import annotations

import random
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
            d_orig = _spans(donor)
            wrong = [d_orig[i % len(d_orig)] for i in range(len(orig))]
            outs.append(
                OutputIn(
                    key,
                    GOLD_CORRUPTED if n_outputs == 2 else f"{GOLD_CORRUPTED}-{j + 1}",
                    fill_blanks(it.text, wrong, blank),
                    wrong,
                    gold_role="corrupted",
                )
            )
    return gold_items, outs
