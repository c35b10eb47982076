"""Study material for the Admin tab: items with blanks, and every system's outputs made ahead.

Text handling and bookkeeping only; the model calls go through the engine.
"""

from __future__ import annotations

import random
import re
from collections.abc import Callable, Sequence

from annotation_db import ItemIn, OutputIn
from magnet_model.adapter_meta import adapter_revision
from magnet_model.engine import Engine, InfillResult

from .render import model_name

MARKER = "[blank]"
INFILL_SYSTEMS = ("magnet", "zero-shot", "five-shot")


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


def generate_outputs(
    engine: Engine,
    compare: Callable[[str, list[str], dict], list],
    items: Sequence[ItemIn],
    systems: Sequence[str],
    max_span_tokens: int,
    progress: Callable[[int, int], None] | None = None,
) -> list[OutputIn]:
    """Greedy outputs of every system for every item (progress(done, total) after each).
    compare(text, systems, decoding) runs an item's systems as one batch (one GPU call)."""
    decoding = {"do_sample": False, "max_span_tokens": max_span_tokens}
    total, done = len(items) * len(systems), 0
    outputs = []
    for item in items:
        results = compare(item.text, list(systems), decoding)
        for system, r in zip(systems, results, strict=True):
            if isinstance(r, Exception):
                raise r
            outputs.append(_output(item, system, r, engine, decoding))
            done += 1
            if progress:
                progress(done, total)
    return outputs
