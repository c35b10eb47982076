"""Talk about the task, scored: the third chat rule, beside the phrase list and the register
(chat.py). A reply to a fill-in prompt that is not text for the blank talks about the task's
parts ("No other words are provided.", "The sentence to be filled in is:", "**Removed
punctuation.**", "Just replace "post-left anarchy" with ...") in words the passage around the
blank does not use. No list of whole phrases catches these: each study brought new ones. So
this rule counts a few kinds of evidence, none decisive alone (features()), and weighs them
with a logistic model fitted on hand-labelled real outputs (tests/data/labelled_outputs.jsonl)
by `python bench/fit_meta_rule.py`, which writes meta_weights.py and says how well the rule
does on each labelled batch when fitted without that batch.

Every vocabulary feature counts only words the passage does not hold: an article about
linguistics may say "sentence", a fill in it may too. Pure standard library, like the rest of
textrules.
"""

from __future__ import annotations

import math
import re

from .copies import MARKER
from .meta_weights import BIAS, THRESHOLD, WEIGHTS

_QUOTED_SPAN = re.compile(r"[\"“]([^\"“”]{1,80})[\"”]")
_QUOTE_CHARS = re.compile(r"[\"“”]")


def _vocab(pattern: str) -> re.Pattern[str]:
    return re.compile(r"(?<![\w-])(?:" + pattern + r")(?![\w-])", re.IGNORECASE)


# The parts of the task, as a reply names them.
_TASK_NOUNS = _vocab(r"sentences?|text|passages?|paragraphs?|punctuation|blanks?|phrases?")
_WORDS = _vocab(r"words?")
_TASK_VERBS = _vocab(
    r"replac(?:e|ed|es|ing|ement)|re-?writ\w*|re-?phras\w*|re-?word\w*|fill(?:ed|ing|s)?"
    r"|missing|provided?|correct(?:ed|ion|ly)?|remov(?:e|ed|ing)|translat\w*|mention(?:ed|s)?"
)
_ASK_NOUNS = _vocab(
    r"answers?|questions?|tasks?|request(?:ed|s)?|response|specified|desired|instructions?"
)
_QUOTED_WITH = re.compile(r"[\"”]\s+(?:is\s+|was\s+)?(?:replaced\s+)?with\s+[\"“]", re.IGNORECASE)
_LABEL_START = re.compile(r"^\W*[A-Z][a-z]+(?: [a-z]+){0,3}\s*:")
_MARKDOWN = re.compile(r"\*\*|^\s*#+\s|^\s*[-*]\s", re.MULTILINE)
_NEGATION_START = re.compile(r"^\W*(?:no|not|none|nothing)\b", re.IGNORECASE)
_IMPERATIVE_START = re.compile(
    r"^\W*(?:please|just|translate|write|replace|rewrite|use|insert|add|remove|correct|fill"
    r"|complete|change|make|try|note)\b",
    re.IGNORECASE,
)
_THIS_START = re.compile(r"^\W*(?:this|these)\s+(?:is|are|was|sentence|text|words?)\b", re.I)


def _new(pattern: re.Pattern[str], fill: str, context: str) -> int:
    """How many different words of `pattern` the fill says that the context does not."""
    said = {m.group(0).lower() for m in pattern.finditer(fill)}
    return len(said - {m.group(0).lower() for m in pattern.finditer(context)})


def _unquoted(text: str) -> str:
    return _QUOTED_SPAN.sub(" ", text)


def features(fill: str, context: str = "") -> dict[str, float]:
    """The evidence that `fill` talks about the task rather than fills the blank (FEATURES'
    names, each 0 when absent). Vocabulary is counted outside quotation marks."""
    text = _unquoted(fill)
    context = context.replace(MARKER, " ")  # the app's blank is no word of the passage
    stripped = fill.strip()
    spans = _QUOTED_SPAN.findall(fill)
    low_context = context.lower()
    quoted_chars = sum(len(s) + 2 for s in spans)
    return {
        "task_nouns": float(_new(_TASK_NOUNS, text, context) > 0),
        "words": float(_new(_WORDS, text, context) > 0),
        "task_verbs": float(_new(_TASK_VERBS, text, context) > 0),
        "ask_nouns": float(_new(_ASK_NOUNS, text, context) > 0),
        "quoted_with": float(bool(_QUOTED_WITH.search(fill))),
        "quotes_passage": float(
            any(s.strip().lower() in low_context for s in spans if len(s.strip()) > 1)
        ),
        "quote_share": quoted_chars / max(len(stripped), 1) if spans else 0.0,
        "unpaired_quotes": float(len(_QUOTE_CHARS.findall(fill)) % 2),
        "label_start": float(bool(_LABEL_START.match(fill))),
        "ends_colon": float(stripped.endswith(":")),
        "markdown": float(bool(_MARKDOWN.search(fill))),
        "negation_start": float(bool(_NEGATION_START.match(fill))),
        "imperative_start": float(bool(_IMPERATIVE_START.match(fill))),
        "this_start": float(bool(_THIS_START.match(fill))),
    }


FEATURES = tuple(features("x"))


def score(fill: str, context: str = "") -> float:
    """The fitted probability that `fill` is talk about the task (meta_weights.py)."""
    f = features(fill, context)
    z = BIAS + sum(WEIGHTS.get(name, 0.0) * value for name, value in f.items())
    return 1.0 / (1.0 + math.exp(-z))


def talks_about_task(fill: str, context: str = "") -> bool:
    """Whether the fitted rule calls `fill` talk about the task (score at or above the
    threshold fit_meta_rule.py chose)."""
    return score(fill, context) >= THRESHOLD
