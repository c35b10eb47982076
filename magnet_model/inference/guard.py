"""A decode-time guard against loops inside a fill: no n-gram of tokens twice in one span.

Greedy span decoding of a small model falls into loops ("which can be used to compress the
input data into a single layer of the model, which can be used to compress ..."). The guard
forbids, at each step of a span, every token that would complete an n-gram of tokens the span
already holds (transformers' `no_repeat_ngram_size`, per span and not over the context: a fill
may repeat the passage's words, only not its own).

Nor the same token three times in a row ("spokesman spokesman spokesman", a 3-gram the span
did not hold before), the study checks' "one word 3 times in a row".

A token that continues a word (no leading space mark, its text starting with a letter or
digit) is never forbidden: banning it would cut the word in two and leave a made-up word
("LMLML" for a repeated "LML"); the ban bites at the next word start instead. Punctuation
stays under the ban, so a ",,,,,," run is stopped too. "Its text" is the token decoded, not its
vocabulary string: a byte-level BPE writes the closing quote "”" as "âĢĿ" and a newline as "Ċ",
which look like letters, and a guard that read them so let a fill run on in "”””””…". A token
that is part of one character (it decodes to U+FFFD alone) is left alone like a word's middle.
"""

from __future__ import annotations

from ..tokens import SPACE_MARKS, word_start_table

DEFAULT_NO_REPEAT = 3  # measured on the unit suites: docs/evaluation.md


def word_continuations(tokenizer) -> list[bool]:
    """Per vocabulary id: whether the token continues the word before it (no space mark in
    front, its decoded text starting with a letter or digit, or a piece of one character): the
    tokens the guard never forbids. None is, where the vocabulary marks no spaces (a word-level
    tokenizer: every token is a word)."""
    tokens = tokenizer.convert_ids_to_tokens(list(range(len(tokenizer))))
    if word_start_table(tokenizer) is None:
        return [False] * len(tokens)
    out = []
    for t in tokens:
        if not t or t.startswith(SPACE_MARKS):
            out.append(False)
            continue
        first = tokenizer.convert_tokens_to_string([t])[:1]
        out.append(first.isalnum() or first == "\ufffd")
    return out


def repeat_bans(tokens: list[int], n: int, exempt: list[bool] | None = None) -> list[int]:
    """The tokens that would complete an n-gram `tokens` already holds, or make a token's third
    in a row (n < 1: none), less those `exempt` marks (word_continuations)."""
    if n < 1 or len(tokens) < n - 1:
        return []
    head = tokens[len(tokens) - (n - 1) :] if n > 1 else []
    bans = set()
    if len(tokens) >= 2 and tokens[-1] == tokens[-2]:
        t = tokens[-1]
        if exempt is None or t >= len(exempt) or not exempt[t]:
            bans.add(t)
    for i in range(len(tokens) - n + 1):
        if tokens[i : i + n - 1] == head:
            t = tokens[i + n - 1]
            if exempt is None or t >= len(exempt) or not exempt[t]:
                bans.add(t)
    return sorted(bans)
