"""Fills that raters should not meet unannounced: empty ones and overlong ones, per system.

A study shows each system's text with its fills written into the blanks. A fill with no word
in it leaves the rater a passage with a sentence simply missing; one far longer than what was
removed is a different task. Both are the system's honest output and are kept, but the admin
and the report say how many there are (pure: items and outputs in, counts out).

The rules, per fill of a regular item (attention checks are made by us, not by a system):
- empty: no letter or digit in it (blank, or quotes and punctuation alone);
- overlong: more than OVERLONG_RATIO times the words of the span it replaces, where the
  item keeps its original span(s).
An output counts once if any of its fills is empty (or overlong). Outputs stored without
their fills (only the filled text) cannot be checked and are counted as unchecked.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from .views import ItemIn, OutputIn

OVERLONG_RATIO = 3  # a fill of more than 3x the removed span's words is overlong


@dataclass(frozen=True)
class FillCounts:
    """One system's outputs on the regular items of a study."""

    system: str
    n_outputs: int
    empty: int  # outputs with an empty fill
    overlong: int  # outputs with a fill of more than OVERLONG_RATIO x the removed words
    unchecked: int = 0  # outputs stored without their fills

    @property
    def flagged(self) -> int:
        return self.empty + self.overlong

    def summary(self) -> str:
        """'zero-shot: 2 of 100 empty, 5 overlong' (and the unchecked ones, if any)."""
        line = f"{self.system}: {self.empty} of {self.n_outputs} empty, {self.overlong} overlong"
        return line + (f", {self.unchecked} unchecked" if self.unchecked else "")


def is_empty(fill: str) -> bool:
    return not any(c.isalnum() for c in fill)


def is_overlong(fill: str, original: str | None) -> bool:
    """More than OVERLONG_RATIO times the words of the original span (False when unknown)."""
    if not original or not original.split():
        return False
    return len(fill.split()) > OVERLONG_RATIO * len(original.split())


def _originals(item: ItemIn, n: int) -> list[str | None]:
    if item.original is None:
        return [None] * n
    spans = [item.original] if isinstance(item.original, str) else list(item.original)
    return (spans + [None] * n)[:n]


def fill_counts(items: Sequence[ItemIn], outputs: Sequence[OutputIn]) -> list[FillCounts]:
    """Per system (in the order first met), how many outputs of regular items are empty or
    overlong."""
    regular = {it.key: it for it in items if not it.is_gold}
    tally: dict[str, list[int]] = {}
    for o in outputs:
        item = regular.get(o.item_key)
        if item is None or o.gold_role is not None:
            continue
        t = tally.setdefault(o.system, [0, 0, 0, 0])
        t[0] += 1
        if o.fills is None:
            t[3] += 1
            continue
        fills = [str(f) for f in o.fills]
        originals = _originals(item, len(fills))
        t[1] += any(is_empty(f) for f in fills) or not fills
        t[2] += any(is_overlong(f, g) for f, g in zip(fills, originals, strict=True))
    return [FillCounts(s, *t) for s, t in tally.items()]


def fill_summary(counts: Sequence[FillCounts]) -> str:
    """One line for the admin: every system's empty and overlong outputs."""
    if not counts:
        return "No system output to check."
    rule = f"empty = no word; overlong = more than {OVERLONG_RATIO}x the removed span's words"
    return "Outputs: " + "; ".join(c.summary() for c in counts) + f" ({rule})."
