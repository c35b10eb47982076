"""Fills that raters should not meet unannounced, per system: what the admin checks before
inviting anyone, and what the report counts.

A study shows each system's text with its fills written into the blanks. Outputs are the
systems' honest outputs and are kept as made, but a study of fragments against chat replies
against whole sentences measures nothing; so the admin and the report say, per system, how many
outputs have each of these problems, with examples, and the admin can make a flagged output
again or drop its item before raters are invited (``AnnotationStore.revise_outputs``).

The rules, per fill of a regular item (attention checks are made by us, not by a system),
pure text (no model): the study's own ones live here, in the store's package, so that the app
(which imports this package) and the report (part of it) read the same rules; what a chat
reply, a copy and a repeat are comes from textrules, which magnet_model reads too.
- empty: no letter or digit in it (blank, or quotes and punctuation alone);
- overlong: more than OVERLONG_RATIO times the words of the span it replaces, where the item
  keeps its original span(s);
- unfinished: the span removed was a sentence (its original ends in . ! or ?) and the fill
  does not end in one (closing quotes and brackets aside): the rater reads a fragment running
  into the next sentence; or the removed sentence has a verb and the fill, though it ends in a
  full stop, has none ("The city of Calgary, Alberta.": textrules.has_verb; an exclamation
  or a question needs none);
- chat: a reply to the prompt instead of a fill: an assistant's phrase ("I'm ready to help",
  "Here is the missing text", "fill in the blank", a model's name such as "SmolLM") that the
  item's own text does not hold;
- copy: a run of COPY_WORDS words of the item's own text copied from it (a hyphen separates
  words, as a reader counts them);
- repeats: a run of REPEAT_NGRAM words that occurs twice in the fill, or a word three times in
  a row ("President President President").
An output counts once per problem if any of its fills has it. Outputs stored without their
fills (only the filled text) cannot be checked and are counted as unchecked.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field

# The chat, copy and repeat rules, shared with magnet_model (textrules: COPY_WORDS,
# REPEAT_NGRAM, MARKER the app's blank, which is no word of an item's text).
from textrules import (
    COPY_WORDS,
    ends_sentence,
    has_repeats,
    has_verb,
    is_chat_reply,
    is_copy,
    sentence_start,
    trails_off,
)
from textrules import MARKER as MARKER
from textrules import REPEAT_WORDS as REPEAT_NGRAM

from .views import ItemIn, OutputIn

OVERLONG_RATIO = 3  # a fill of more than 3x the removed span's words is overlong
N_EXAMPLES = 3  # examples kept per system and problem
EXAMPLE_CHARS = 160  # an example's fill is cut here

# (name, what it means for the admin), in the order they are shown
PROBLEMS: tuple[tuple[str, str], ...] = (
    ("empty", "no word in it"),
    ("overlong", f"more than {OVERLONG_RATIO}x the removed span's words"),
    ("unfinished", "a sentence was removed, the fill does not end one or has no verb"),
    ("chat", "a chat or meta reply, not a fill"),
    ("copy", f"copies {COPY_WORDS} or more words of the text around it"),
    ("repeats", f"repeats a run of {REPEAT_NGRAM} words or one word 3 times"),
)
PROBLEM_NAMES = tuple(p for p, _ in PROBLEMS)


@dataclass(frozen=True)
class FlaggedOutput:
    """One output with at least one problem: which item, which problems, its fill(s)."""

    item_key: str
    system: str
    problems: tuple[str, ...]
    fill: str  # the fills joined by " | ", cut at EXAMPLE_CHARS


@dataclass(frozen=True)
class FillCounts:
    """One system's outputs on the regular items of a study: how many have each problem."""

    system: str
    n_outputs: int
    counts: dict[str, int] = field(default_factory=dict)  # problem -> outputs with it
    unchecked: int = 0  # outputs stored without their fills
    examples: dict[str, list[FlaggedOutput]] = field(default_factory=dict)
    n_flagged: int = 0  # outputs with any problem

    def _n(self, problem: str) -> int:
        return self.counts.get(problem, 0)

    @property
    def empty(self) -> int:
        return self._n("empty")

    @property
    def overlong(self) -> int:
        return self._n("overlong")

    @property
    def unfinished(self) -> int:
        return self._n("unfinished")

    @property
    def chat(self) -> int:
        return self._n("chat")

    @property
    def copy(self) -> int:
        return self._n("copy")

    @property
    def repeats(self) -> int:
        return self._n("repeats")

    @property
    def flagged(self) -> int:
        return self.n_flagged

    def summary(self) -> str:
        """'zero-shot: 32 of 100 flagged (chat 30, copy 2); 0 empty, 0 overlong' -- every
        problem with a count, never only the two that happen to be zero."""
        found = [f"{p} {self.counts[p]}" for p in PROBLEM_NAMES if self.counts.get(p)]
        line = f"{self.system}: {self.n_flagged} of {self.n_outputs} flagged"
        line += f" ({', '.join(found)})" if found else " (none of the checks found a problem)"
        return line + (f", {self.unchecked} unchecked" if self.unchecked else "")


def is_empty(fill: str) -> bool:
    return not any(c.isalnum() for c in fill)


def is_overlong(fill: str, original: str | None) -> bool:
    """More than OVERLONG_RATIO times the words of the original span (False when unknown)."""
    if not original or not original.split():
        return False
    return len(fill.split()) > OVERLONG_RATIO * len(original.split())


def is_unfinished(fill: str, original: str | None, start: str = "") -> bool:
    """The removed span was a sentence and the fill does not end one, or is no clause at all
    where the original was one (False when unknown). `start`: the words of that sentence
    before the blank (textrules.sentence_start), read with the fill as a reader reads them
    ("Michael Fried, T. J." + "Greenberg." has the verb of the words before)."""
    if not original or not ends_sentence(original):
        return False
    if not ends_sentence(fill) or (trails_off(fill) and not trails_off(original)):
        return True
    statement = fill.rstrip().rstrip("\"'”’)]").endswith(".")  # "What a day!" needs no verb
    return statement and has_verb(f"{start} {original}") and not has_verb(f"{start} {fill}", True)


def fill_problems(
    fill: str, original: str | None, context: str, left: str | None = None
) -> set[str]:
    """Every problem of one fill (PROBLEMS' names); context: the item's text; left: the text
    before this blank (by default the context's before its first blank)."""
    if is_empty(fill):
        return {"empty"}
    if left is None:
        left = context.split(MARKER)[0] if MARKER in context else ""
    found = {
        "overlong": is_overlong(fill, original),
        "unfinished": is_unfinished(fill, original, sentence_start(left)),
        "chat": is_chat_reply(fill, context),
        "copy": is_copy(fill, context),
        "repeats": has_repeats(fill),
    }
    return {p for p, yes in found.items() if yes}


def _originals(item: ItemIn, n: int) -> list[str | None]:
    if item.original is None:
        return [None] * n
    spans = [item.original] if isinstance(item.original, str) else list(item.original)
    return (spans + [None] * n)[:n]


def output_problems(item: ItemIn, output: OutputIn) -> tuple[str, ...] | None:
    """The problems of one output of a regular item, in PROBLEMS' order (None: no fills)."""
    if output.fills is None:
        return None
    fills = [str(f) for f in output.fills]
    if not fills:
        return ("empty",)
    found: set[str] = set()
    lefts = item.text.split(MARKER)  # the text before each blank, from the blank before it
    for i, (f, g) in enumerate(zip(fills, _originals(item, len(fills)), strict=True)):
        found |= fill_problems(f, g, item.text, lefts[i] if i < len(lefts) else "")
    return tuple(p for p in PROBLEM_NAMES if p in found)


def flagged_outputs(items: Sequence[ItemIn], outputs: Sequence[OutputIn]) -> list[FlaggedOutput]:
    """Every output of a regular item with at least one problem, in the outputs' order."""
    regular = {it.key: it for it in items if not it.is_gold}
    out = []
    for o in outputs:
        item = regular.get(o.item_key)
        if item is None or o.gold_role is not None:
            continue
        found = output_problems(item, o)
        if found:
            fill = " | ".join(str(f) for f in o.fills or [])
            if len(fill) > EXAMPLE_CHARS:
                fill = fill[: EXAMPLE_CHARS - 1].rstrip() + "…"
            out.append(FlaggedOutput(o.item_key, o.system, found, fill))
    return out


def fill_counts(items: Sequence[ItemIn], outputs: Sequence[OutputIn]) -> list[FillCounts]:
    """Per system (in the order first met), how many outputs of regular items have each
    problem, with up to N_EXAMPLES examples of each."""
    regular = {it.key: it for it in items if not it.is_gold}
    n_out: dict[str, int] = {}
    unchecked: dict[str, int] = {}
    for o in outputs:
        if o.item_key in regular and o.gold_role is None:
            n_out[o.system] = n_out.get(o.system, 0) + 1
            unchecked[o.system] = unchecked.get(o.system, 0) + (o.fills is None)
    counts: dict[str, dict[str, int]] = {s: {} for s in n_out}
    examples: dict[str, dict[str, list[FlaggedOutput]]] = {s: {} for s in n_out}
    n_flagged = dict.fromkeys(n_out, 0)
    for f in flagged_outputs(items, outputs):
        n_flagged[f.system] += 1
        for p in f.problems:
            counts[f.system][p] = counts[f.system].get(p, 0) + 1
            shown = examples[f.system].setdefault(p, [])
            if len(shown) < N_EXAMPLES:
                shown.append(f)
    return [
        FillCounts(s, n, counts[s], unchecked[s], examples[s], n_flagged[s])
        for s, n in n_out.items()
    ]


def rules_line() -> str:
    """What each problem means, in one line."""
    return "; ".join(f"{p} = {why}" for p, why in PROBLEMS)


def fill_summary(counts: Sequence[FillCounts]) -> str:
    """One line for the admin: every system's flagged outputs by problem."""
    if not counts:
        return "No system output to check."
    return "Outputs checked: " + "; ".join(c.summary() for c in counts) + f" ({rules_line()})."
