"""How a fill reads, measured on its text: its length as a reader counts it, tokens that are
no text, whether it is one complete sentence, holds a sentence end, or repeats itself (the
evaluator's infill task and its unit suites, evaluation/suites.py). The repeat rule,
repeats_ngram, lives in textrules next to the one annotation_db's study checks use."""

from __future__ import annotations

from textrules import repeats_ngram as repeats_ngram  # suites.py and bench/ import it here

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
