"""How a fill reads, measured on its text: its length as a reader counts it, tokens that are
no text, whether it is one complete sentence, holds a sentence end, or repeats itself (the
evaluator's infill task and its unit suites, evaluation/suites.py). The repeat rule,
repeats_ngram, lives in textrules next to the one annotation_db's study checks use."""

from __future__ import annotations

from textrules import MARKER, is_chat_reply, is_copy
from textrules import repeats_ngram as repeats_ngram  # suites.py and bench/ import it here

from .. import prompts
from ..units import ends_sentence, sentence_spans


def fill_tokens(engine, text: str) -> int:
    """A fill's length as a reader gets it: the tokens of its text after a space, the way the
    true span's tokens are counted in the passage (so every system is counted alike, whatever
    tokens it wrote)."""
    text = text.strip()
    return len(engine.runner.encode(" " + text)) if text else 0


def junk_ids(engine, adapter: str | None) -> set[int]:
    """Tokens that are not text for a reader: never-trained head rows, and every special id
    (roles, <span_end>'s tie, the tokenizer's specials; <span_end> itself, which ends a
    MAGNET span and is never part of one, and is no word in a prompted reply)."""
    roles = engine.runner.roles(adapter)
    return (
        set(engine.runner.special_ids(roles))
        | set(engine.runner.undertrained_ids)
        | {roles.span_end}
    )


def is_one_sentence(text: str) -> bool:
    """Exactly one complete sentence: the splitter finds one, it begins with a capital, a
    digit or an opening quote, and it ends as a sentence does (units.ends_sentence)."""
    text = text.strip()
    if not text or not ends_sentence(text) or len(sentence_spans(text)) != 1:
        return False
    first = text.lstrip("\"'“‘([")[:1]
    return first.isupper() or first.isdigit()


def has_sentence_end(text: str) -> bool:
    """A sentence ends inside or at the end of the text (what a word or phrase fill must not
    have: it would close the sentence it sits in)."""
    text = text.strip()
    return bool(text) and (ends_sentence(text) or len(sentence_spans(text)) > 1)


def prompt_flags(results: list, shots: int, fmt) -> dict[str, list[bool]]:
    """Per prompted fill (InfillResult of a text with one [blank]): whether it is a chat or
    meta reply, a copy of the passage, a copy of one of its prompt's examples (textrules'
    rules, as a study's checks read them), and whether the copy guard refused a token while
    it was written. fmt: the prompt format the fills were asked in (prompts.get_format)."""
    out: dict[str, list[bool]] = {"chat": [], "copy": [], "example_copy": [], "copy_blocked": []}
    for r in results:
        span = r.spans[0]
        fill, context = span.text.strip(), r.text.replace(MARKER, " ")
        query = r.text.replace(MARKER, prompts.BLANK, 1)
        examples = prompts.prompt_examples(query, shots, fmt)
        out["chat"].append(bool(fill) and is_chat_reply(fill, context))
        out["copy"].append(is_copy(fill, context))
        out["example_copy"].append(any(is_copy(fill, f"{t}\n{a}") for t, a in examples))
        out["copy_blocked"].append(span.copy_blocks > 0)
    return out
