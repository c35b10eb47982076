"""Study material for the Admin tab: items with blanks, and every system's outputs made ahead.

Text handling and bookkeeping only; the model calls go through the engine.
"""

from __future__ import annotations

import random
import re
from collections.abc import Callable, Sequence
from dataclasses import dataclass

from annotation_db import (
    AnnotationStore,
    InvalidInputError,
    ItemIn,
    OutputIn,
    StudyInfo,
    finish_draft,
    get_draft,
    list_drafts,
    make_gold_items,
    save_output,
    start_draft,
)
from annotation_db.questions import appropriate
from magnet_model.adapter_meta import adapter_revision
from magnet_model.engine import Engine, InfillResult
from magnet_model.errors import InputTooLongError
from magnet_model.passages import SENTENCE_SPAN_TOKENS, sentence_gaps

from .render import model_name

MARKER = "[blank]"
INFILL_SYSTEMS = ("magnet", "zero-shot", "five-shot")
ITEM_KINDS = ("words", "sentence")  # built-in items: 2-5 words blanked, or one whole sentence


@dataclass(frozen=True)
class Preset:
    """Everything a study form sets, so that one click reproduces a protocol."""

    item_kind: str
    n_items: int
    systems: tuple[str, ...]
    questions: tuple[str, ...]
    raters_per_item: int
    n_gold: int
    max_span_tokens: int
    instructions: str


# The paper's human evaluation (Khosla et al., ACL 2025): one sentence removed from each of 100
# short texts, MAGNET vs the base model prompted zero- and five-shot, raters asked whether each
# infill is "contextually appropriate" (yes/no). Agreement was not reported; 3 raters per item
# and attention checks make it measurable here.
PAPER_QUESTION = appropriate().prompt  # "Is the filled-in text contextually appropriate?"
PAPER = Preset(
    item_kind="sentence",
    n_items=100,
    systems=INFILL_SYSTEMS,
    questions=("appropriate",),
    raters_per_item=3,
    n_gold=10,
    max_span_tokens=SENTENCE_SPAN_TOKENS,
    instructions=(
        "Each text had one sentence removed; [blank] marks where it was. Every output shows "
        "the text with a sentence written into the gap (highlighted). For each output, answer: "
        "is the filled-in text contextually appropriate? Yes if the inserted sentence fits "
        "what comes before and after it; No if it contradicts, repeats, or does not connect "
        "them. Some items check attention: one of their outputs plainly does not fit."
    ),
)


def blank_words(text: str, rng: random.Random, min_words: int = 2, max_words: int = 5) -> tuple:
    """One run of words in the middle of text -> (text with MARKER, the words removed)."""
    words = text.split()
    if len(words) < max_words + 6:
        return None
    n = rng.randint(min_words, max_words)
    start = rng.randint(3, len(words) - n - 3)
    original = " ".join(words[start : start + n])
    blanked = " ".join([*words[:start], MARKER, *words[start + n :]])
    return blanked, original


def _whole_sentences(text: str) -> bool:
    """Begins like a sentence (a capital, a digit or a quote) and ends like one (. ! ? and
    perhaps a closing quote or bracket): what a rater reads must not start with ': ' or stop
    mid-sentence."""
    return bool(re.match(r"[\"'(A-Z0-9]", text)) and bool(re.search(r"[.!?][\"')]?$", text))


def builtin_items(n: int, seed: int = 0, max_chars: int = 400) -> list[ItemIn]:
    """n held-out Wikipedia passages, each with one span of 2-5 words blanked."""
    from magnet_model.data import wikipedia_paragraphs
    from magnet_model.search import cut_passage

    rng = random.Random(seed)
    paras = wikipedia_paragraphs("heldout")
    rng.shuffle(paras)
    items: list[ItemIn] = []
    for para in paras:
        passage = cut_passage(para, max_chars)
        if not _whole_sentences(passage):
            continue
        made = blank_words(passage, rng)
        if made:
            items.append(ItemIn(f"wiki-{len(items) + 1}", made[0], [made[1]], "wikipedia"))
        if len(items) >= n:
            break
    return items


def sentence_items(n: int, seed: int = 0) -> list[ItemIn]:
    """n held-out Wikipedia passages of 3-6 sentences, one middle sentence removed (the
    paper's protocol; ``magnet_model.passages``)."""
    return [
        ItemIn(g.key, g.text(MARKER), [g.removed], f"wikipedia:{g.source}")
        for g in sentence_gaps(n, seed)
    ]


def blank_uploaded(items: Sequence[ItemIn], seed: int = 0) -> list[ItemIn]:
    """Uploaded items keep their blanks; an item without MARKER gets one span blanked."""
    rng = random.Random(seed)
    out = []
    for it in items:
        if MARKER in it.text:
            out.append(it)
            continue
        made = blank_words(it.text, rng)
        if made:
            out.append(ItemIn(it.key, made[0], [made[1]], it.source, it.is_gold))
    return out


def provenance(engine: Engine, adapter: str) -> tuple[str, str]:
    """(model, adapter revision) stored with an output: the base model's name (no server
    path), and the adapter with a hash of its weights ('base' for the base model alone)."""
    model = model_name(engine.loaded.spec.base, engine.loaded.source)
    where = engine.loaded.adapters.get(adapter)
    return model, adapter if where is None else f"{adapter} {adapter_revision(where)}"


def _output(item: ItemIn, system: str, r: InfillResult, engine: Engine, decoding: dict):
    model, revision = provenance(engine, r.adapter)
    return OutputIn(
        item.key,
        system,
        r.filled,
        [s.text.strip() for s in r.spans],
        model=model,
        adapter_revision=revision,
        decoding=decoding,
        seed=r.seed,
    )


def study_items(
    kind: str,
    n_items: int,
    n_gold: int,
    n_systems: int,
    uploaded: Sequence[ItemIn] | None = None,
    seed: int = 0,
) -> tuple[list[ItemIn], list[ItemIn], list[OutputIn]]:
    """(items, attention-check items, their outputs). The checks are made from passages that
    are not items of the study (a rater must not meet a check's passage again as a regular
    item), with as many outputs as a regular item shows."""
    if uploaded is not None:
        every = blank_uploaded(uploaded)
    elif kind == "sentence":
        every = sentence_items(n_items + 2 * n_gold, seed)
    elif kind == "words":
        every = builtin_items(n_items + 2 * n_gold, seed)
    else:
        raise InvalidInputError(f"unknown kind of item {kind!r}; use one of {ITEM_KINDS}")
    items, spare = every[:n_items], every[n_items:]
    if not items:
        raise InvalidInputError("No usable item: texts need a [blank] or at least 11 words.")
    if n_gold > len([it for it in spare if it.original]):
        raise InvalidInputError(
            f"{n_gold} attention check(s) need {n_gold} more items with their original "
            f"span than the {len(items)} rated ones; upload more or lower the number."
        )
    gold_items, gold_outputs = make_gold_items(
        spare, n_gold, blank=MARKER, n_outputs=max(n_systems, 2), donors=items
    )
    return items, gold_items, gold_outputs


def unfinished(store: AnnotationStore) -> list[str]:
    """Names of studies whose outputs were being generated when the app stopped."""
    return [d.name for d in list_drafts(store)]


def check_sizes(engine: Engine, items: Sequence[ItemIn], max_span_tokens: int) -> None:
    """Every item's text and span fit the model, checked before any generation (a long
    uploaded item used to fail only when its turn came, minutes into the run)."""
    limit = engine.max_input_tokens
    for it in items:
        n = len(engine.tokenizer(it.text, add_special_tokens=False).input_ids)
        if n + max_span_tokens > limit:
            raise InputTooLongError(
                f"Item {it.key!r} is {n} tokens long; with spans of up to {max_span_tokens} "
                f"tokens it needs more than the model's {limit} positions. Shorten or drop it; "
                "nothing was generated."
            )


def build_study(
    engine: Engine,
    compare: Callable[[str, list[str], dict], list],
    store: AnnotationStore,
    name: str,
    make_items: Callable[[], tuple[list[ItemIn], list[ItemIn], list[OutputIn]]],
    systems: Sequence[str],
    *,
    questions: Sequence[str],
    raters_per_item: int,
    instructions: str,
    max_span_tokens: int,
    progress: Callable[[int, int], None] | None = None,
) -> tuple[StudyInfo, int]:
    """Generate every system's output for every item, then create the study.

    ``make_items()`` -> (items, attention-check items, their outputs); ``compare(text,
    systems, decoding)`` runs an item's systems as one batch (one GPU call). Each output is
    stored the moment it exists (``annotation_db.drafts``); if a study of this name was being
    generated when the app stopped, its stored items, checks, settings and outputs are used and
    only the missing outputs are made (``make_items`` is not called). Returns the study and how
    many outputs were already there.
    """
    name = (name or "").strip()
    if name in unfinished(store):
        draft = get_draft(store, name)
    else:
        items, gold_items, gold_outputs = make_items()
        check_sizes(engine, [*items, *gold_items], int(max_span_tokens))
        settings = {
            "questions": list(questions),
            "instructions": instructions,
            "raters_per_item": int(raters_per_item),
            "max_span_tokens": int(max_span_tokens),
        }
        draft = start_draft(
            store,
            name,
            items,
            list(systems),
            settings,
            extra_items=gold_items,
            extra_outputs=gold_outputs,
        )
    decoding = {"do_sample": False, "max_span_tokens": int(draft.settings["max_span_tokens"])}
    reused = done = len(draft.outputs)
    total = draft.n_needed
    if progress:
        progress(done, total)
    for item, todo in draft.missing:  # an item's missing systems run as one batch
        results = compare(item.text, todo, decoding)
        for system, r in zip(todo, results, strict=True):
            if isinstance(r, Exception):
                raise r
            save_output(store, name, _output(item, system, r, engine, decoding))
            done += 1
            if progress:
                progress(done, total)
    return finish_draft(store, name), reused
