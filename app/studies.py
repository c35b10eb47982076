"""Study material for the Admin tab: items with blanks, and every system's outputs made ahead.

Text handling and bookkeeping only; the model calls go through the engine.
"""

from __future__ import annotations

import hashlib
import random
import re
import secrets
from collections.abc import Callable, Iterator, Sequence
from dataclasses import asdict, dataclass

from annotation_db import (
    AnnotationStore,
    InvalidInputError,
    ItemIn,
    OutputIn,
    StudyInfo,
    fill_blanks,
    finish_draft,
    get_draft,
    held_out_gold_items,
    list_drafts,
    save_output,
    start_draft,
)
from annotation_db.attention import (
    AttentionSettings,
    CheckPlan,
    plan_checks,
    planned_settings,
    rule_for,
)
from annotation_db.questions import appropriate, parse_questions
from magnet_model import systems
from magnet_model.adapter_meta import adapter_revision
from magnet_model.decoding import FillSettings
from magnet_model.errors import InputTooLongError
from magnet_model.inference.engine import Engine, InfillResult
from magnet_model.passages import SENTENCE_SPAN_TOKENS, sentence_gaps

from .render import model_name, plural

MARKER = "[blank]"
INFILL_SYSTEMS = systems.for_task("infill")  # MAGNET and the prompted baselines


def in_order(names: Sequence[str]) -> list[str]:
    """System names in the one order the app shows them (the demo's columns: MAGNET, then
    the prompted baselines), unknown names after them as given."""
    rank = {s: i for i, s in enumerate(INFILL_SYSTEMS)}
    return sorted(names, key=lambda s: rank.get(s, len(rank)))


ITEM_KINDS = ("words", "sentence")  # built-in items: 2-5 words blanked, or one whole sentence
# Study outputs are sampled (as the arena's blind runs are), each item with a seed derived from
# a per-study secret, so that pasting an item into the demo does not reproduce its outputs and
# so tell which system wrote which. The seeds are stored with the outputs (admin exports only).
STUDY_TEMPERATURE, STUDY_TOP_P = 0.7, 0.9
# Attention checks: held-out passages per fill of a check, to choose lengths from.
CHECK_POOL_FACTOR = 4
CHECK_SPAN_WORDS = (1, 15)  # a built-in check's span: as long as a system's fill may be
# Items a rater is expected to do (a paid batch); the checks among them are sized for it.
ITEMS_PER_RATER = 20
# The checks the exclusion rule needs among those items for three systems and the yes/no
# question (the form's default; the Paper protocol's pool is larger): the planner's number.
FORM_PLAN = plan_checks(ITEMS_PER_RATER, rule_for([appropriate()], 3, against="careless"))
FORM_CHECKS = FORM_PLAN.checks_per_rater


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
    items_per_rater: int = ITEMS_PER_RATER


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
    # per rater among 12 items as many as attention.plan_checks needs (the rule's 85% power
    # at 5% attentive raters excluded); 10 in the study, so that raters meet different ones
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


def builtin_items(
    n: int, seed: int = 0, max_chars: int = 400, words: tuple[int, int] = (2, 5)
) -> list[ItemIn]:
    """n held-out Wikipedia passages, each with one span of 2-5 words (``words``) blanked."""
    from magnet_model.data import wikipedia_paragraphs
    from magnet_model.inference.search import cut_passage

    rng = random.Random(seed)
    paras = wikipedia_paragraphs("heldout")
    rng.shuffle(paras)
    items: list[ItemIn] = []
    for para in paras:
        passage = cut_passage(para, max_chars)
        if not _whole_sentences(passage):
            continue
        made = blank_words(passage, rng, *words)
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


def make_output(item: ItemIn, system: str, r: InfillResult, engine: Engine, decoding: dict):
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


@dataclass(frozen=True)
class StudyMaterial:
    """What a study is made of before any output exists: the items to rate, and the held-out
    passages its attention checks are made from once the outputs exist (their fills must be as
    long as the systems' fills, ``annotation_db.held_out_gold_items``)."""

    items: list[ItemIn]
    check_pool: list[ItemIn]
    n_gold: int
    n_outputs: int
    # built-in word spans: each pool passage is blanked anew at a length the systems wrote
    reblank: bool = False


def study_items(
    kind: str,
    n_items: int,
    n_gold: int,
    n_systems: int,
    uploaded: Sequence[ItemIn] | None = None,
    seed: int = 0,
) -> StudyMaterial:
    """The items and the attention checks' pool. The pool's passages are not items of the
    study, and none has a rated item's passage or original span: a rater must not meet a
    check's passage again as a regular item, nor see a rated item's hidden original as a wrong
    fill. Refused here, before any generation, when the pool is too small."""
    n_outputs = max(n_systems, 2)  # as many outputs as a regular item shows
    need = n_gold * n_outputs  # one held-out passage per fill of every check
    want = max(need * CHECK_POOL_FACTOR, need + 20) if n_gold else 0
    if uploaded is not None:
        every = blank_uploaded(uploaded)
        items, pool = every[:n_items], every[n_items:]
    elif kind == "sentence":
        every = sentence_items(n_items + want, seed)
        items, pool = every[:n_items], every[n_items:]
    elif kind == "words":
        items = builtin_items(n_items, seed)
        # the same passages in the same order, blanked anew; those rated are dropped below
        pool = builtin_items(n_items + want, seed, words=CHECK_SPAN_WORDS) if want else []
    else:
        raise InvalidInputError(f"unknown kind of item {kind!r}; use one of {ITEM_KINDS}")
    if not items:
        raise InvalidInputError("No usable item: texts need a [blank] or at least 11 words.")
    rated_passages = {_passage(it) for it in items}
    rated_spans = {s.strip() for it in items for s in _spans(it)}
    pool = [
        it
        for it in pool
        if it.original
        and _passage(it) not in rated_passages
        and not any(s.strip() in rated_spans for s in _spans(it))
    ]
    if n_gold and len(pool) < need:
        raise InvalidInputError(
            f"{n_gold} attention check(s) with {n_outputs} outputs need {need} passages with "
            f"their original span besides the {len(items)} rated ones (one per fill, so that no "
            f"wrong fill is a rated item's original); there are {len(pool)}: upload more "
            "or lower the number."
        )
    reblank = uploaded is None and kind == "words"
    return StudyMaterial(items, pool, n_gold, n_outputs, reblank=reblank)


@dataclass(frozen=True)
class UploadPlan:
    """What an uploaded file allows, said before Create: how many usable items it holds, and
    the largest plan it allows with the checks asked for (fewer checks where it cannot)."""

    usable: int  # items the file gives (texts with a blank, or long enough to blank)
    n_items: int  # rated items of the plan offered
    n_gold: int  # attention checks of the plan offered
    asked: int  # the checks the form asked for

    def say(self) -> str:
        if not self.usable:
            return "The file gives no usable item: texts need a [blank] or at least 11 words."
        line = f"The file gives {plural(self.usable, 'usable item')}."
        if self.n_gold == self.asked:
            return f"{line} The form is set to {self.n_items} items and {self.n_gold} checks."
        return (
            f"{line} {plural(self.asked, 'attention check')} would need more passages with "
            f"their original span besides the rated ones (one per fill of each check) than it "
            f"holds: the form is set to the largest plan it allows with checks, "
            f"{plural(self.n_items, 'item')} and {plural(self.n_gold, 'check')}"
            + (
                f"; or rate all {self.usable} with 0 checks (nobody can then be excluded)."
                if self.n_gold
                else " (nobody can then be excluded)."
            )
        )


def upload_plan(uploaded: Sequence[ItemIn], n_gold: int, n_systems: int) -> UploadPlan:
    """The largest valid plan of an upload (study_items' own rule decides): the checks asked
    for if the file holds enough passages besides at least two rated items, else as many
    fewer as it takes; with none, every usable item rated."""
    usable = len(blank_uploaded(uploaded))
    n_out = max(n_systems, 2)
    for c in range(max(0, int(n_gold)), 0, -1):
        n = usable - c * n_out
        if n < 2:
            continue
        try:
            made = study_items("words", n, c, n_systems, uploaded)
        except InvalidInputError:
            continue
        return UploadPlan(usable, len(made.items), c, int(n_gold))
    return UploadPlan(usable, usable, 0, int(n_gold))


def _spans(it: ItemIn) -> list[str]:
    return [it.original] if isinstance(it.original, str) else list(it.original or [])


def _passage(it: ItemIn) -> str:
    """The whole text of an item, its blanks filled with its original (or left blank)."""
    spans = _spans(it)
    if it.text.count(MARKER) != len(spans):
        return it.text
    return fill_blanks(it.text, spans, MARKER)


def _fill_words(outputs: Sequence[OutputIn]) -> list[int]:
    """The word count of each output's fills (all its blanks together)."""
    return [sum(len(f.split()) for f in o.fills or []) for o in outputs]


def item_seed(study_seed: int, key: str) -> int:
    """An item's sampling seed: from the study's hidden seed and the item's key (56 bits)."""
    digest = hashlib.sha256(f"{study_seed}:{key}".encode()).digest()
    return int.from_bytes(digest[:7], "little")


def unfinished(store: AnnotationStore) -> list[str]:
    """Names of studies whose outputs were being generated when the app stopped."""
    return [d.name for d in list_drafts(store)]


def study_attention(
    questions: Sequence[str], n_outputs: int, n_items: int, n_gold: int, items_per_rater: int
) -> AttentionSettings:
    """The attention settings a study stores: each rater's ``items_per_rater`` items (at most
    the whole study) hold the checks the exclusion rule needs (``attention.plan_checks``), or
    as many as the study has when it has fewer (``checks_note`` says what that costs)."""
    n = max(2, min(int(items_per_rater), n_items + n_gold))
    settings, _plan = planned_settings(n, parse_questions(list(questions)), max(n_outputs, 2))
    m = min(settings.checks_per_rater, max(n_gold, 1), n - 1)
    return AttentionSettings(settings.slip, settings.alpha, settings.power, n, m, settings.against)


def form_checks_cost(plan: CheckPlan, n_gold: int) -> str:
    """What a study form's ``n_gold`` attention checks give each rater when they are fewer than
    ``plan`` needs (a rater meets each check at most once); empty when they are enough."""
    m = min(n_gold, plan.items_per_rater - 1)
    if m >= plan.checks_per_rater:
        return ""
    if m < 1:
        return " This form has no attention checks: nobody can be excluded."
    rule = plan.rule
    return (
        f" This form's {plural(m, 'attention check')}: each rater meets {m}, catching "
        f"{rule.detection(m):.0%} of {'careless' if rule.careless else 'random'} raters (an "
        "attentive one excluded with "
        f"{rule.false_exclusion(m):.1%}); raters it cannot exclude are reported as undecided."
    )


def checks_note(info: StudyInfo) -> str:
    """One sentence on the study's attention checks: how many each rater meets, what the rule
    then catches, and what is missing when the study has fewer checks than the rule needs."""
    a = AttentionSettings.from_dict(info.attention)
    if not info.n_gold or a.items_per_rater is None:
        return "No attention checks: nobody can be excluded." if not info.n_gold else ""
    n_out = max(len(info.systems), 2)
    rule = a.rule(info.questions, n_out)
    plan = plan_checks(a.items_per_rater, rule)
    m = min(a.checks_per_rater or 0, info.n_gold)
    said = (
        f"Each rater meets {m} attention check(s) among {a.items_per_rater} items; a rater "
        f"failing {rule.threshold(m) or 'any number'} is excluded (an attentive one with "
        f"probability {rule.false_exclusion(m):.1%}, {rule.whom} with "
        f"{rule.detection(m):.0%})."
    )
    if m < plan.checks_per_rater and plan.reached:
        said += (
            f" The rule needs {plan.checks_per_rater} to catch {rule.power:.0%}: with "
            f"{m}, raters it does not exclude are reported as undecided. Give more checks."
        )
    return said


def invite_note(info: StudyInfo, n_new: int) -> str:
    """What the admin is told when inviting ``n_new`` raters to a study with few judgments
    left: a rater who finds no regular item gets nothing (never the checks alone)."""
    if n_new < 1 or info.kind != "study":
        return ""
    left = info.judgments_open
    k = info.raters_per_item
    if left == 0:
        return (
            f"Every item of '{info.name}' already has its {k} rater(s): the new rater(s) will "
            "find nothing to rate (they are never given attention checks alone). Send these "
            "links only to replace raters who left, or revoke them."
        )
    a = AttentionSettings.from_dict(info.attention)
    per_rater = (a.items_per_rater - a.checks_per_rater) if a.items_per_rater else None
    if per_rater and left < n_new * per_rater:
        return (
            f"Only {left} judgment(s) are left in '{info.name}' for {n_new} new rater(s) of "
            f"about {per_rater} regular items each: some will get fewer items, or none."
        )
    return ""


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
    compare: Callable[[list[tuple[str, list[str], FillSettings]]], Iterator[tuple]],
    store: AnnotationStore,
    name: str,
    make_items: Callable[[], StudyMaterial],
    systems: Sequence[str],
    *,
    questions: Sequence[str],
    raters_per_item: int,
    instructions: str,
    max_span_tokens: int,
    progress: Callable[[int, int], None] | None = None,
    items_per_rater: int = ITEMS_PER_RATER,
) -> tuple[StudyInfo, int]:
    """Generate every system's output for every item, then create the study.

    ``make_items()`` -> the items and the checks' pool (``study_items``); ``compare(requests)``
    runs several items' systems, each request (text, systems, FillSettings), as one batch (one
    GPU call; Engine.compare_infill_many), yielding (request, system index, result) as each
    output is done; items go to it ``engine.items_per_batch()`` at a time. Each output is
    stored the moment it exists (``annotation_db.drafts``); if a study of this name was being
    generated when the app stopped, its stored items, checks, settings and outputs are used and
    only the missing outputs are made (``make_items`` is not called). Returns the study and how
    many outputs were already there.

    Outputs are sampled (``STUDY_TEMPERATURE``, ``STUDY_TOP_P``), each item with its own seed
    from the study's hidden seed: the demo cannot reproduce them. The attention checks are made
    once every output exists, their fills as long as the systems' fills.
    """
    name = (name or "").strip()
    if name in unfinished(store):
        draft = get_draft(store, name)
    else:
        made = make_items()
        check_sizes(engine, [*made.items, *made.check_pool], int(max_span_tokens))
        settings = {
            "questions": list(questions),
            "instructions": instructions,
            "raters_per_item": int(raters_per_item),
            "max_span_tokens": int(max_span_tokens),
            # the whole decoding, fixed for the study: a draft finished or a flagged output
            # remade later runs with the same rules on any server (the prompted baselines'
            # format by name, per system)
            "decoding": FillSettings(
                int(max_span_tokens),
                True,
                STUDY_TEMPERATURE,
                STUDY_TOP_P,
                magnet=engine.magnet_fill(),
                prompted=engine.prompted_fill({"format": engine.prompt_formats(systems)}),
            ).record(),
            "seed": secrets.randbits(62),  # hidden: never shown, not even to the admin
            "n_gold": made.n_gold,
            "n_outputs": made.n_outputs,
            "attention": study_attention(
                questions, made.n_outputs, len(made.items), made.n_gold, items_per_rater
            ).to_dict(),
            "check_pool": [asdict(it) for it in made.check_pool],
            "check_reblank": made.reblank,
        }
        draft = start_draft(store, name, made.items, list(systems), settings)
    # A draft from before sampled studies keeps the greedy decoding it was started with.
    decoding = dict(
        draft.settings.get("decoding")
        or {"do_sample": False, "max_span_tokens": int(draft.settings["max_span_tokens"])}
    )
    reused = done = len(draft.outputs)
    total = draft.n_needed
    if progress:
        progress(done, total)
    run = replay(engine, decoding)
    missing = list(draft.missing)
    k = engine.items_per_batch()
    for start in range(0, len(missing), k):  # K items' missing systems run as one batch
        batch = missing[start : start + k]
        requests = [
            (item.text, todo, run.but(seed=item_seed(draft.settings["seed"], item.key)))
            if run.do_sample
            else (item.text, todo, run)
            for item, todo in batch
        ]
        for i, j, r in compare(requests):  # each output stored the moment it is made
            if isinstance(r, Exception):
                raise r
            item, todo = batch[i]
            save_output(store, name, make_output(item, todo[j], r, engine, decoding))
            done += 1
            if progress:
                progress(done, total)
    gold_items, gold_outputs = _checks(store, name)
    return finish_draft(store, name, gold_items, gold_outputs), reused


def replay(engine: Engine, decoding: dict) -> FillSettings:
    """The settings to make another output the way a stored one was made (its record), the
    rules it predates as they were before them (FillSettings.from_record)."""
    return FillSettings.from_record(decoding, engine.magnet_fill(), engine.prompted_fill())


def _checks(store: AnnotationStore, name: str) -> tuple[list[ItemIn], list[OutputIn]]:
    """The attention checks of a draft whose outputs are all made: their fills as long as the
    systems' fills; the wrong ones with the systems' surface (first letter's case, final
    punctuation, leading space), the true text as written (``held_out_gold_items``)."""
    draft = get_draft(store, name)
    n_gold = int(draft.settings.get("n_gold") or 0)
    if not n_gold:
        return [], []
    pool = [ItemIn(**d) for d in draft.settings["check_pool"]]
    lengths = _fill_words(draft.outputs)
    seed = int(draft.settings["seed"]) % 2**32
    if draft.settings.get("check_reblank"):
        pool = _reblanked(pool, lengths, random.Random(seed))
    return held_out_gold_items(
        pool,
        n_gold,
        blank=MARKER,
        lengths=lengths,
        n_outputs=int(draft.settings["n_outputs"]),
        seed=seed,
        styles=[list(o.fills or []) for o in draft.outputs],  # case, punctuation, spaces too
    )


def _reblanked(pool: Sequence[ItemIn], lengths: Sequence[int], rng: random.Random) -> list:
    """Each built-in passage of the pool blanked anew: a run of as many words as a fill the
    systems wrote, drawn at random from ``lengths`` (within ``CHECK_SPAN_WORDS``)."""
    lo, hi = CHECK_SPAN_WORDS
    out = []
    for it in pool:
        n = min(hi, max(lo, rng.choice(lengths) if lengths else lo))
        made = blank_words(_passage(it), rng, n, n)
        out.append(ItemIn(it.key, made[0], [made[1]], it.source) if made else it)
    return out
