"""Attention checks: gold items where one output is the original text and one a corrupted
fill (the hidden span of another document), so a careful rater can always tell them apart."""

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


def make_gold_items(
    items: Sequence[ItemIn], n: int, *, blank: str, seed: int = 0, prefix: str = "gold-"
) -> tuple[list[ItemIn], list[OutputIn]]:
    """Build ``n`` attention-check items from items that carry their original span(s).

    The corrupted fill of each takes the spans of a different item (from another source when
    possible), so it reads fluently but does not fit the context.
    """
    pool = [it for it in items if it.original and not it.is_gold]
    if n < 1:
        return [], []
    if len(pool) < 2:
        raise InvalidInputError("attention checks need at least two items with an original span")
    rng = random.Random(seed)
    chosen = rng.sample(pool, min(n, len(pool)))
    gold_items, outs = [], []
    for it in chosen:
        orig = [it.original] if isinstance(it.original, str) else list(it.original)
        donors = [d for d in pool if d.key != it.key and d.source != it.source] or [
            d for d in pool if d.key != it.key
        ]
        donor = rng.choice(donors)
        d_orig = [donor.original] if isinstance(donor.original, str) else list(donor.original)
        wrong = [d_orig[i % len(d_orig)] for i in range(len(orig))]
        key = f"{prefix}{it.key}"
        gold_items.append(ItemIn(key, it.text, orig, it.source, is_gold=True))
        outs.append(
            OutputIn(
                key, GOLD_ORIGINAL, fill_blanks(it.text, orig, blank), orig, gold_role="original"
            )
        )
        outs.append(
            OutputIn(
                key,
                GOLD_CORRUPTED,
                fill_blanks(it.text, wrong, blank),
                wrong,
                gold_role="corrupted",
            )
        )
    return gold_items, outs
