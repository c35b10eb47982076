"""Named handler results: one dataclass field per output component (or per group of them),
turned into the tuple Gradio expects in one place.

A handler returns, say, ``InfillView(columns=[...], state=..., vote_row=..., reveal=...)`` and
tests read its fields by name. The layout wires the same names: ``InfillView.wire(columns=...,
state=state, vote_row=row, reveal=reveal)`` is the list of components in field order (a
missing or unknown name fails when the page is built), and ``gradio_fn(handler)`` is what
Gradio calls: the handler's result as ``values()``, in that same order.

A field made with ``group()`` holds a sequence (the columns of a comparison, the output slots
of the rater page); its items are single outputs or Outputs of their own, flattened in order.
"""

from __future__ import annotations

import functools
import inspect
from dataclasses import dataclass, field, fields
from typing import Any

import gradio as gr


def group() -> Any:
    """A field that holds a sequence of outputs (or of Outputs), one per repeated block."""
    return field(metadata={"group": True})


@dataclass
class Outputs:
    """Base class of the named results; subclasses are dataclasses."""

    def values(self) -> tuple:
        """The flat tuple of output values, in the order ``wire`` lists the components."""
        out: list = []
        for f in fields(self):
            value = getattr(self, f.name)
            for item in value if f.metadata.get("group") else [value]:
                if isinstance(item, Outputs):
                    out.extend(item.values())
                else:
                    out.append(item)
        return tuple(out)

    @classmethod
    def wire(cls, **components) -> list:
        """The components of each field, by name, as the flat list of an event's outputs.
        A group field takes a list (of components, or of the lists ``wire`` of its item
        class returned)."""
        names = [f.name for f in fields(cls)]
        if set(components) != set(names):
            missing, extra = set(names) - set(components), set(components) - set(names)
            raise TypeError(
                f"{cls.__name__}.wire: missing {missing or '{}'}, unknown {extra or '{}'}"
            )
        out: list = []
        for f in fields(cls):
            given = components[f.name]
            for item in given if f.metadata.get("group") else [given]:
                out.extend(item if isinstance(item, list) else [item])
        return out


def as_values(result) -> tuple:
    """A handler's result as the tuple of output values (a plain tuple passes as it is)."""
    return result.values() if isinstance(result, Outputs) else tuple(result)


def gradio_fn(handler):
    """What an event calls: ``handler`` with its Outputs turned into the tuple of values.
    Name, parameters and defaults stay the handler's (Gradio reads them for the API, for
    gr.Request and for gr.Progress); a generator handler stays a generator."""
    if inspect.isgeneratorfunction(handler):

        @functools.wraps(handler)
        def stream(*args, **kwargs):
            for result in handler(*args, **kwargs):
                yield as_values(result)

        return stream

    @functools.wraps(handler)
    def run(*args, **kwargs):
        return as_values(handler(*args, **kwargs))

    return run


def said_in(handler, n_outputs: int, at: int):
    """What an event off the queue calls: ``handler``'s values, or, when it refuses (gr.Error),
    its sentence in output ``at`` with every other output left as it was.

    Gradio shows no toast for an error of an event that skips the queue (its page drops the
    error's "visible" flag) and marks every output with a bare "Error" pill; so these events
    say why in an output of their own. ``at == n_outputs``: that output comes after the
    handler's own, and is emptied when the handler succeeds. Name and parameters stay the
    handler's (Gradio reads them for gr.Request and gr.Progress)."""

    @functools.wraps(handler)
    def run(*args, **kwargs):
        try:
            result = handler(*args, **kwargs)
        except gr.Error as e:
            out = [gr.skip()] * max(n_outputs, at + 1)
            out[at] = str(e.message)
            return tuple(out) if len(out) > 1 else out[0]
        values = list(as_values(result)) if n_outputs > 1 else [result]
        if at == n_outputs:
            values.append("")
        return tuple(values) if len(values) > 1 else values[0]

    run.says_refusals_in = at  # for the layout's tests
    return run


# ---------------------------------------------------------------- the handlers' results


@dataclass
class InfillColumn(Outputs):
    title: str  # Markdown: the system's name, or A/B/C in a blind comparison
    filled: str  # HTML: the text with the fills marked ("" when unavailable)
    info: str  # Markdown: tokens and why each span ended, time; or why unavailable


@dataclass
class InfillView(Outputs):
    """Infill tab: a column per system, then the blind vote's state, row and reveal text."""

    columns: list[InfillColumn] = group()
    state: dict | None = None  # gr.State of a blind comparison (None: not blind)
    vote_row: Any = None  # gr.update: the vote row's visibility
    reveal: str = ""


@dataclass
class VoteView(Outputs):
    """Infill tab after a blind vote: the names, the state, and per column its new title and
    info (the system's name and its time and lengths; gr.skip() where nothing changes)."""

    reveal: str
    state: dict | None  # {"voted": True}: this comparison's vote is counted
    titles: list = group()
    infos: list = group()


@dataclass
class ContinueColumn(Outputs):
    text: str  # the continuation so far
    stats: str  # repetition statistics, time; or why unavailable / stopped


@dataclass
class ContinueView(Outputs):
    """Continue tab, one step of the stream: a column per system."""

    columns: list[ContinueColumn] = group()


@dataclass
class SearchView(Outputs):
    """Search tab: a table per encoder, their overlaps, the corpus and timing note."""

    tables: list = group()  # per system: rows [rank, cosine, passage]
    overlap: str = ""  # HTML: how many passages each pair of top-k lists shares
    note: str = ""


@dataclass
class RaterSlot(Outputs):
    """One output of the item on the rater page."""

    visible: Any  # gr.update of the slot's group (shown or not)
    title: str | None
    shown: str | None  # HTML: the item's text with this output's fills marked
    appropriate: Any  # gr.update of the yes/no question
    likert: list = group()  # gr.update per 1-5 question


@dataclass
class RaterView(Outputs):
    """The rater page: study and instructions, progress, one item and its questions."""

    head: Any  # gr.update: study and instructions (hidden while no link is open)
    status: str
    shown_item: str  # the opaque id of the item shown, sent back with the answers
    item_text: Any  # gr.update: the text with its blank
    slots: list[RaterSlot] = group()
    preference: Any = None  # gr.update of the "which is best" question
    comment: Any = None
    submit: Any = None
    title: str = "Rating"  # the browser tab's title: the study's name, never a system's


@dataclass
class RaterPage(Outputs):
    """The rater page when it loads: the token it was opened with, and its view."""

    token: str
    view: RaterView


@dataclass
class AdminPanel(Outputs):
    """Admin tab after a login or logout (the login itself is the cookie route's)."""

    panel: Any  # gr.update: the admin panel's visibility
    message: Any  # the login line (gr.skip(): keep what the login route said)
    studies: Any  # gr.update of the study dropdown (gr.skip() when not logged in)
    unfinished: str  # studies stopped while generating
    logout: Any = None  # gr.update: "Log out" shown only when logged in (tour q5)


@dataclass
class StudyForm(Outputs):
    """The new-study form's values (a preset fills them all)."""

    name: str
    item_kind: str
    n_items: int
    systems: list[str]
    questions: list[str]
    raters_per_item: int
    n_gold: int
    max_span_tokens: int
    instructions: str


@dataclass
class AdminInvites(Outputs):
    """New invite links: the table of links, and the sentence naming the study they open; or,
    before the first invite to a study with flagged outputs, the question whether to invite
    anyway (the token of what was shown waits in ``pending``, the button asks)."""

    rows: Any  # [[rater, invite link], ...] (gr.skip() while asking)
    message: str
    pending: str  # gr.State: the flagged set the admin was told of ("" when none)
    button: Any  # the invite button's label (gr.update)


@dataclass
class OutputCheck(Outputs):
    """The outputs' check before inviting, and what an action on flagged outputs did."""

    report: str  # Markdown: per system, the problems' counts and examples
    message: str


@dataclass
class DropStep(Outputs):
    """Dropping items with flagged outputs in two steps: first what it would drop, with the
    button asking to drop exactly that (its token in ``pending``), then the drop."""

    report: Any  # Markdown: the outputs' check (gr.skip() while asking)
    message: str
    pending: str  # gr.State: the token of the set shown ("" when nothing waits for a yes)
    button: Any  # the drop button's label (gr.update)


@dataclass
class AdminProgress(Outputs):
    summary: str
    rows: list[list]  # per rater: id, name, done, open, remaining, checks, failed, invite


@dataclass
class AdminResults(Outputs):
    table: list[list]  # [result, n, estimate, 95% interval]
    results: dict  # every number, as JSON
    plot: Any  # matplotlib figure of the appropriate share per system, or None
