"""What a chat or meta reply is: a reply to the prompt instead of text for the blank, the
assistant talking about the task, itself or the reader ("I'm ready to help", "Here is the
missing text", "fill in the blank", a model's name such as "SmolLM"), that the passage around
the blank does not itself hold.

Two rules, either suffices:
- a phrase of the assistant's (CHAT_PHRASES) that the passage does not hold;
- the register: the reply speaks as "I" or to "you" (outside quotation marks and reported
  speech) where the passage never does. A phrase list only knows the replies it was written
  from, and the baselines ask again after a reply it recognises, so the chat replies that reach
  a study are the ones it does not know ("You've already completed the task.", "No, I have no
  idea how to ..."); an encyclopedia or news passage with neither person says neither in its
  own voice. bench/measure_output_checks.py measures both on hand-labelled real outputs.

Both libraries use this one rule: magnet_model's prompted baselines ask again once after such a
reply (magnet_model/prompts.py, inference/prompted.py), annotation_db flags such fills among a
study's outputs ("chat", annotation_db/fills.py).
"""

from __future__ import annotations

import re

from .meta import talks_about_task

# The assistant's phrases. Matched case-insensitively, on word boundaries.
CHAT_PHRASES = (
    r"i(?:'| a)?m (?:ready|happy|glad|here) to (?:help|assist)",
    r"i(?:'d| would) be (?:happy|glad) to (?:help|assist)",
    r"(?:how|what) can i (?:help|do for you)",
    r"i can help",
    r"(?:help|assist) you",
    r"designed to (?:help|assist)",
    r"what(?:'s| is) your (?:next )?(?:question|text)",
    r"you(?:'d| would) like me to",
    r"you are (?:correct|right|asked)",
    r"let me know if",
    r"please (?:provide|go ahead|share the|give me|fill|ensure)",
    r"i(?:'| a)?m sorry",
    r"i (?:cannot|can't|am unable to|'m unable to) (?:help|assist|fill|provide|complete|answer)",
    r"i(?: will|'ll) (?:just )?(?:add|replace|fill|rephrase|reorder|rewrite|provide|correct"
    r"|complete|edit|fix)",
    r"(?:as |i am |i'm )?(?:an?|the) (?:[\w-]+ )?ai\b",
    r"(?:ai|language) model",
    r"(?:ai|virtual|helpful) assistant",
    r"^\W*(?:sure|certainly|of course|okay|ok|alright)\b[,!.]",
    r"^\W*reply\s*:",
    r"here(?:'s| is| are) (?:the|a|an|your|my) (?:\w+ )?"
    r"(?:missing|answer|text|filled|completed|sentence|version|words?|blank|breakdown|revised"
    r"|corrected|summary)",
    r"fill(?:ed|ing)? in the blanks?",
    r"(?:the|your|this) (?:missing|removed|incorrect|correct) (?:answer|words?|text|sentence|part"
    r"|span)",
    r"no missing words?",
    r"the blank",
    r"(?:a|the|this) blank space",
    r"your (?:answer|text|question|response|request|interpretation|editing)",
    r"(?:the|this) (?:given|above|following|original|provided) (?:text|passage|sentence)",
    r"(?:the|this) (?:given |provided )?(?:text|request|passage) (?:is|does|do|can|needs|should"
    r"|requires|is asking|asks|has)\b",
    r"(?:great|good|nice|excellent) (?:summary|answer|question|job)",
    r"i(?:'m| am) glad you",
    # the assistant reporting its edit: "I've rephrased it", "I will not attempt"
    r"i(?:'ve| have) (?:just )?(?:rephrased|rewritten|replaced|corrected|removed|added|changed"
    r"|edited|filled|reworded|completed)",
    r"i (?:will not|won't|cannot|can't) (?:attempt|try)",
    r"grammatically (?:correct|incorrect)",
    r"(?:the|removing the|remove the|without the) extra words?",
    r"(?:is|are) missing (?:in|from) the (?:text|sentence|passage)",
    # talk about the text instead of text: "The sentence is:", "This is a sentence that
    # requires some correction.", "(No punctuation is provided).", "A: ...", "Repetition: ..."
    r"^\W*(?:the )?(?:missing |correct |complete |new |revised )?(?:sentence|text|answer"
    r"|phrase|word|passage|output|result)s? (?:is|are|would be|reads|should be)\s*:",
    r"^\W*(?:a|q|answer|output|response|result|repetition|correction|explanation|note"
    r"|sentence|(?:corrected|revised|rewritten|completed|filled) (?:text|sentence|version))\s*:",
    r"(?:this|that|it) is an? (?:[\w-]+ ){0,3}(?:(?:sentence|text|passage|paragraph|phrase)"
    r"(?! of)|description|example|version|summary)\b",  # not "a sentence of five years"
    r"(?:requires?|needs?) (?:some |a |further )?(?:correction|editing|rephrasing|rewording)",
    r"(?:no|without) punctuation",
    r"(?:the|this) (?:text|sentence|passage|paragraph) (?:also )?(?:contains|consists|includes"
    r"|states|says|provides|mentions|describes|explains|shows|suggests|refers|notes)",
    r"you (?:can|could|should|may|might|need to|have to) (?:rephrase|rewrite|reword|replace"
    r"|change|use the following|fill)",
    r"missing words?\b",
    r"^\s*1\.\s+\S.*\s2\.\s+\w+",  # a numbered list instead of text
    r"the following (?:elements|words|sentences?|text|changes|corrections)\s*:",
    r"(?:short|long|given|original) text, so",
    # revised on the Paper-protocol rows of 2026-12-03 (tests/data/labelled_outputs.md): the
    # assistant rewording the text, instructions echoed back, remarks about the text
    r"(?:re-?word|re-?phras|paraphras)\w*",
    r"no (?:additional|further|extra|more) (?:words?|information|text|details?|context)",
    r"\((?:removed|added|deleted|replaced)\)",
    r"^\W*(?:write|reply|answer|rewrite|insert)(?= (?!of\b))",  # an instruction, not "Answer of"
    r"^\W*(?:these|the following) (?:words|terms|sentences|phrases) (?:are|were)\s*:",
    r"nothing to do with (?:this|the) (?:text|passage|sentence|question)",
    r"bullet points?",
    r"___",
    r"smollm\d*",
    r"hugging ?face",
    r"chatgpt|openai",
)
_CHAT = re.compile(r"(?<!\w)(?:" + "|".join(CHAT_PHRASES) + r")(?!\w)", re.IGNORECASE)


# The register rule's words. "I" is told from a Roman numeral ("World War I", "Henry I ruled")
# by the word before it, in persons().
_FIRST = {"i", "i'm", "i'll", "i've", "i'd", "me", "my", "mine", "myself"}
_SECOND = {"you", "you're", "you've", "you'll", "you'd", "your", "yours", "yourself"}
_QUOTED = re.compile(r"[\"“”«»]|(?<!\w)'(?=\w)|(?<=[\w.,!?])'(?!\w)")
# "..., she wrote." / "..., the minister said.": words of someone the passage reports
_REPORTED = re.compile(
    r",\s+(?:(?:he|she|they|it|the \w+)|[A-Z][\w.'-]*(?: [A-Z][\w.'-]*)*)\s+"
    r"(?:said|says|wrote|writes|added|adds|told|asked|recalled|declared|explained|insisted)\b"
)
_TOKEN = re.compile(r"[A-Za-z]+(?:['’][A-Za-z]+)?|[.!?,;:]")


def _unquoted(text: str) -> str:
    """The text without what stands in quotation marks (the words of someone quoted)."""
    marks = [m.start() for m in _QUOTED.finditer(text)]
    if len(marks) % 2:  # an opening mark never closed: quoted to the end
        marks.append(len(text))
    out, last = [], 0
    for a, b in zip(marks[::2], marks[1::2], strict=True):
        out.append(text[last:a])
        last = b + 1
    out.append(text[last:])
    return " ".join(out)


def persons(text: str) -> set[str]:
    """The grammatical persons the text speaks in, in its own voice: "first" for I / me / my,
    "second" for you / your; words in quotation marks and reported speech ("..., she wrote.")
    do not count, nor an "I" right after a capitalised word (a Roman numeral, as in "World War
    I" or "Henry I ruled"; "Then I went" is missed with them)."""
    if _REPORTED.search(text):
        return set()
    found: set[str] = set()
    before = ""  # the word before, "" after punctuation
    for tok in _TOKEN.findall(_unquoted(text)):
        if not tok[0].isalpha():
            before = ""
            continue
        low = tok.lower().replace("’", "'")
        if low in _SECOND:
            found.add("second")
        elif low in _FIRST:
            numeral = tok == "I" and before[:1].isupper()
            if (tok[0] == "I" or low != "i") and not numeral:
                found.add("first")
        before = tok
    return found


def speaks_as_assistant(text: str, context: str = "") -> bool:
    """The first two rules: the text holds an assistant's phrase (CHAT_PHRASES) that the
    context (the passage around the blank) does not, or speaks as "I" or to "you" where the
    context never does (persons(); module docstring)."""
    said = {m.group(0).lower() for m in _CHAT.finditer(text)}
    if said - {m.group(0).lower() for m in _CHAT.finditer(context)}:
        return True
    return bool(persons(text) - persons(context))


def is_chat_reply(text: str, context: str = "") -> bool:
    """A chat turn, not a fill: speaks_as_assistant(), or talk about the task by the fitted
    rule of meta.py."""
    return speaks_as_assistant(text, context) or talks_about_task(text, context)
