"""The prompts of the infilling baselines (the paper's): the base LLM asked to fill a blank,
zero-shot or with examples. Everything a reader needs to judge the baseline is here.

A prompt format (PromptFormat, named `template[-nearest][-prefix]`) says three things:
- the template: "chat" is the tokenizer's chat template (instruct models such as
  SmolLM2-Instruct), each example a user turn and the assistant's answer, the answer ending at
  the end of the turn; "plain" is a text prompt "Text: ... / Answer: ..." for base models
  without a chat template, the answer ending at the line break.
- the examples: the first `shots` of five fixed hand-written EXAMPLES, or (`-nearest`) the
  `shots` training-split passages nearest to the query with a blank of the same kind
  (example_pool.py).
- the reply's opening (`-prefix`): where the blank stands inside a sentence, the reply opens
  with the words of that sentence before the blank (fed as prompt), so the model goes on with
  the sentence instead of talking about it or copying the passage; the examples' replies open
  the same way.
Each system's default (`auto`) is the format chosen by measurement (DEFAULT_FORMATS; see
docs/method.md); the others stay selectable by name (MAGNET_PROMPT_FORMAT, per request).
A tokenizer without a chat template asks its default in the plain template.

A reply that is a chat turn instead of the missing words ("I'm ready to help. What's your next
question?", "SmolLM.": is_chat_reply, the rule annotation_db's study checks read too, from
textrules) is asked again by the baseline, up to three attempts in all (inference/prompted.py:
ASKS), each new reply starting with the last words before the blank. A reply cannot copy a run
of textrules.COPY_WORDS words of the passage, an example or the instruction (textrules.CopyGuard,
at decode time).

In the prompt the blank is shown as ___ whatever marker the user typed; with several blanks
the model fills them left to right, seeing earlier answers in place and later blanks as "...".
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from textrules import is_chat_reply as is_chat_reply  # prompted.py calls it here

from .units import ends_sentence, sentence_spans

BLANK = "___"
LATER_BLANK = "..."
INSTRUCTION = (
    "Fill in the blank (___) in the text. Reply with only the missing words that replace ___, "
    "nothing else."
)

# Hand-written, ROCStories-like (a sentence removed) and Wikipedia-like (a few words removed).
EXAMPLES: list[tuple[str, str]] = [
    (
        "Tom wanted to learn to cook. ___ He practised every evening for a month. "
        "Now he makes dinner for his whole family.",
        "He bought a cookbook and a set of new pans.",
    ),
    (
        "The river flooded after three days of heavy ___, so the town closed the old bridge.",
        "rain",
    ),
    (
        "Anna missed the bus this morning. She ran all the way to school. ___ "
        "Her teacher smiled and told her to sit down.",
        "She arrived just as the bell rang.",
    ),
    ("Paris is the ___ of France and its largest city.", "capital"),
    (
        "Mark found a lost puppy in the park. ___ The next day, a happy family came to take "
        "it home.",
        "He put up posters with its photo all around the neighbourhood.",
    ),
]


CHAT, PLAIN = "chat", "plain"
AUTO = "auto"  # the measured default format of each system (DEFAULT_FORMATS)
PREFIX_MAX_WORDS = 24  # the reply's opening: at most this many words of the blank's sentence


@dataclass(frozen=True)
class PromptFormat:
    """How the base model is asked. Its name reads `template[-nearest][-prefix]`."""

    template: str  # CHAT (the tokenizer's chat template) or PLAIN ("Text: ... / Answer: ...")
    nearest: bool = False  # examples chosen per passage (example_pool), not the fixed EXAMPLES
    prefix: bool = False  # the reply opens with the words of the blank's sentence before it

    @property
    def name(self) -> str:
        return self.template + "-nearest" * self.nearest + "-prefix" * self.prefix


FORMATS = tuple(
    PromptFormat(t, n, p) for t in (CHAT, PLAIN) for n in (False, True) for p in (False, True)
)
FORMAT_NAMES = tuple(f.name for f in FORMATS)
BY_FORMAT_NAME = {f.name: f for f in FORMATS}
# The default format per number of examples (0: zero-shot, else five-shot's). Chosen by
# measurement (bench/bench_prompt_formats.py; docs/method.md, "The prompted baselines").
DEFAULT_FORMATS = {0: "chat", 5: "chat"}


def default_style(tokenizer) -> str:
    return CHAT if getattr(tokenizer, "chat_template", None) else PLAIN


def get_format(fmt: str | PromptFormat | None, shots: int, tokenizer=None) -> PromptFormat:
    """The format to ask in: a PromptFormat, a name of FORMAT_NAMES, or None / "auto" for the
    measured default of this many shots. A tokenizer without a chat template asks the auto
    default in the plain template; naming a chat format for it is a ValueError."""
    if isinstance(fmt, PromptFormat):
        chosen = fmt
    elif fmt is None or fmt == AUTO:
        chosen = BY_FORMAT_NAME[DEFAULT_FORMATS.get(shots, DEFAULT_FORMATS[5 if shots else 0])]
        if chosen.template == CHAT and default_style(tokenizer) != CHAT:
            chosen = PromptFormat(PLAIN, chosen.nearest, chosen.prefix)
        return chosen
    elif fmt in BY_FORMAT_NAME:
        chosen = BY_FORMAT_NAME[fmt]
    else:
        raise ValueError(
            f"prompt format must be auto or one of {', '.join(FORMAT_NAMES)}, not {fmt!r}"
        )
    if chosen.template == CHAT and tokenizer is not None and default_style(tokenizer) != CHAT:
        raise ValueError(
            f"this tokenizer has no chat template: ask in a plain format, not {chosen.name!r}"
        )
    return chosen


def render_query(pieces: list[str], answers: list[str], k: int) -> str:
    """The text with blank k shown as ___, earlier blanks filled, later ones shown as '...'."""
    out = [pieces[0]]
    for i, piece in enumerate(pieces[1:]):
        out.append(answers[i] if i < k else BLANK if i == k else LATER_BLANK)
        out.append(piece)
    return "".join(out)


def reply_opening(left: str) -> str:
    """The words of the blank's sentence before the blank (at most PREFIX_MAX_WORDS), which a
    `-prefix` format's reply opens with; empty where whole sentences go before the blank (at
    the start, after a sentence end or a line break)."""
    before = left.rstrip(" \t")
    if not before.strip() or before.endswith("\n") or ends_sentence(before):
        return ""
    line = before.rsplit("\n", 1)[-1]
    spans = sentence_spans(line)
    opening = line[spans[-1][0] :] if spans else line
    words = opening.split()
    if len(words) > PREFIX_MAX_WORDS:
        opening = " ".join(words[-PREFIX_MAX_WORDS:])
    return opening.strip()


def answer_lead(fmt: PromptFormat, left: str) -> str:
    """What stands between the prompt and the answer's first word: the space the text had
    before the blank after a reply's opening, none at the start of a chat turn, a space after
    the plain template's "Answer:"."""
    if fmt.prefix and reply_opening(left):
        return left[len(left.rstrip(" \t")) :][:1]
    return "" if fmt.template == CHAT else " "


def prompt_examples(query: str, shots: int, fmt: PromptFormat) -> list[tuple[str, str]]:
    """The (text, answer) examples of a prompt: the first `shots` of EXAMPLES, or the `shots`
    training passages nearest to the query (example_pool) in a -nearest format."""
    if not fmt.nearest:
        return list(EXAMPLES[:shots])
    from .example_pool import default_pool

    return [(e.text, e.answer) for e in default_pool().nearest(query, shots)]


def copy_sources(query: str, examples: list[tuple[str, str]]) -> list[str]:
    """What a reply must not copy a run of (textrules.CopyGuard): the passage around the blank
    (each side on its own), the instruction, each example's text and answer."""
    sources = [INSTRUCTION, *(part for ex in examples for part in ex)]
    return sources + [piece for piece in query.split(BLANK)]


def _user_turn(text: str) -> str:
    return f"{INSTRUCTION}\n\nText: {text}"


def _reply(text: str, answer: str, fmt: PromptFormat) -> str:
    """An example's reply: its answer, after the opening in a -prefix format."""
    left = text.partition(BLANK)[0]
    opening = reply_opening(left) if fmt.prefix else ""
    return opening + answer_lead(fmt, left) + answer if opening else answer


def build_prompt(
    query: str,
    shots: int,
    tokenizer=None,
    fmt: str | PromptFormat | None = None,
    examples: list[tuple[str, str]] | None = None,
) -> str:
    """The prompt for one blank (query holds exactly one ___); shots = 0..len(EXAMPLES). In a
    -prefix format the prompt ends with the reply's opening. examples: the prompt's examples
    when already chosen (prompt_examples)."""
    if not 0 <= shots <= len(EXAMPLES):
        raise ValueError(f"shots must be between 0 and {len(EXAMPLES)}, not {shots}")
    fmt = get_format(fmt, shots, tokenizer)
    if examples is None:
        examples = prompt_examples(query, shots, fmt)
    opening = reply_opening(query.partition(BLANK)[0]) if fmt.prefix else ""
    if fmt.template == CHAT:
        messages = []
        for text, answer in examples:
            messages.append({"role": "user", "content": _user_turn(text)})
            messages.append({"role": "assistant", "content": _reply(text, answer, fmt)})
        messages.append({"role": "user", "content": _user_turn(query)})
        head = tokenizer.apply_chat_template(messages, tokenize=False, add_generation_prompt=True)
        return head + opening
    blocks = [f"Text: {text}\nAnswer: {_reply(text, answer, fmt)}\n" for text, answer in examples]
    tail = f"Text: {query}\nAnswer:" + (" " + opening if opening else "")
    return INSTRUCTION + "\n\n" + "\n".join([*blocks, tail])


# "Answer:", "The missing words in the text are:", "The text is:" ... before the answer itself
_PREAMBLE = re.compile(
    r"^(answer\s*:|the answer is\s*:?|[^:]{0,40}\b(missing|answer|blank|text)\b[^:]{0,25}:)\s*",
    re.IGNORECASE,
)
# "Sure!", "Certainly." ... before a preamble or the answer (a chat model's opening word)
_INTERJECTION = re.compile(r"^(sure|certainly|of course)\s*[!.,]\s*", re.IGNORECASE)

_PUNCT = ".,;:!?"
_QUOTES = "\"'`“”‘’"
_DOUBLE_QUOTES = '"“”'


def parse_answer(raw: str, left: str, right: str) -> str:
    """The missing words from a model's reply: first line, no quotes, no copied context."""
    return read_answer(raw, left, right)[0]


def read_answer(raw: str, left: str, right: str) -> tuple[str, bool]:
    """(the missing words, whether the reply ran on into the text after the blank and was
    cut where that text begins)."""
    answer = raw.strip().split("\n", 1)[0].strip()
    answer = _PREAMBLE.sub("", _INTERJECTION.sub("", answer))
    inner = answer[1:-1]
    quoted = len(answer) >= 2 and answer[0] in _QUOTES and answer[-1] in _QUOTES
    if quoted and not any(q in inner for q in _QUOTES):
        answer = inner.strip()
    # Models often copy the whole text with the blank filled: keep what sits between the two.
    head, tail = left.strip()[-40:], right.strip()[:40]
    # a short head counts only at the very start (elsewhere it matches by chance)
    if head and head in answer and (len(head) >= 8 or answer.startswith(head)):
        answer = answer[answer.index(head) + len(head) :].strip()
    joined = bool(tail) and tail in answer
    if joined:
        answer = answer[: answer.index(tail)].strip()
    if tail[:1] in _PUNCT:  # the text goes on with punctuation: the answer must not end one
        answer = answer.rstrip(_PUNCT).rstrip()
    answer = _drop_unpaired_quotes(answer)
    if not any(c.isalnum() for c in answer):  # quotes or punctuation alone fill nothing
        answer = ""
    return answer, joined


def _drop_unpaired_quotes(answer: str) -> str:
    """A double quote left over from a copied context (the closing quote of the text before
    the blank, the opening one of the text after it) at either end, when the answer holds an
    odd number of that quote (apostrophes are left alone: "students'", "'90s")."""
    if answer and answer[0] in _DOUBLE_QUOTES and answer.count(answer[0]) % 2:
        answer = answer[1:].lstrip()
    if answer and answer[-1] in _DOUBLE_QUOTES and answer.count(answer[-1]) % 2:
        answer = answer[:-1].rstrip()
    return answer
