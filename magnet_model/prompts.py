"""The prompts of the infilling baselines (the paper's): the base LLM asked to fill a blank,
zero-shot or with five fixed examples. Everything a reader needs to judge the baseline is here.

Two styles:
- "chat": the tokenizer's chat template (instruct models such as SmolLM2-Instruct); each
  example is a user turn and the assistant's answer. The answer ends at the end of the turn.
- "plain": a text prompt "Text: ... / Answer: ..." for base models without a chat template.
  The answer ends at the line break.
`default_style` picks "chat" when the tokenizer has a chat template. On SmolLM2-135M-Instruct
the plain form zero-shot mostly answers with an empty line, while the chat form always answers
(often with a preamble such as "The missing words are: ...", which parse_answer removes);
five-shot, both give short answers of the right kind, the chat form more often full sentences
where a sentence is missing.

A reply that is a chat turn instead of the missing words ("I'm ready to help. What's your next
question?", "SmolLM.": is_chat_reply, the rule annotation_db's study checks read too, from
textrules) is asked again once by the baseline (inference/prompted.py), its new reply starting
with the last words before the blank.

In the prompt the blank is shown as ___ whatever marker the user typed; with several blanks
the model fills them left to right, seeing earlier answers in place and later blanks as "...".
"""

from __future__ import annotations

import re

from textrules import is_chat_reply as is_chat_reply  # prompted.py calls it here

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


def default_style(tokenizer) -> str:
    return "chat" if getattr(tokenizer, "chat_template", None) else "plain"


def render_query(pieces: list[str], answers: list[str], k: int) -> str:
    """The text with blank k shown as ___, earlier blanks filled, later ones shown as '...'."""
    out = [pieces[0]]
    for i, piece in enumerate(pieces[1:]):
        out.append(answers[i] if i < k else BLANK if i == k else LATER_BLANK)
        out.append(piece)
    return "".join(out)


def _user_turn(text: str) -> str:
    return f"{INSTRUCTION}\n\nText: {text}"


def build_prompt(query: str, shots: int, tokenizer=None, style: str | None = None) -> str:
    """The prompt for one blank (query holds exactly one ___); shots = 0..len(EXAMPLES)."""
    if not 0 <= shots <= len(EXAMPLES):
        raise ValueError(f"shots must be between 0 and {len(EXAMPLES)}, not {shots}")
    style = style or default_style(tokenizer)
    examples = EXAMPLES[:shots]
    if style == "chat":
        messages = []
        for text, answer in examples:
            messages.append({"role": "user", "content": _user_turn(text)})
            messages.append({"role": "assistant", "content": answer})
        messages.append({"role": "user", "content": _user_turn(query)})
        return tokenizer.apply_chat_template(messages, tokenize=False, add_generation_prompt=True)
    if style == "plain":
        blocks = [f"Text: {text}\nAnswer: {answer}\n" for text, answer in examples]
        return INSTRUCTION + "\n\n" + "\n".join([*blocks, f"Text: {query}\nAnswer:"])
    raise ValueError(f"prompt style must be 'chat' or 'plain', not {style!r}")


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
