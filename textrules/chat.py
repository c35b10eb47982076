"""What a chat or meta reply is: a reply to the prompt instead of text for the blank, the
assistant talking about the task, itself or the reader ("I'm ready to help", "Here is the
missing text", "fill in the blank", a model's name such as "SmolLM"), that the passage around
the blank does not itself hold.

Both libraries use this one rule: magnet_model's prompted baselines ask again once after such a
reply (magnet_model/prompts.py, inference/prompted.py), annotation_db flags such fills among a
study's outputs ("chat", annotation_db/fills.py).
"""

from __future__ import annotations

import re

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


def is_chat_reply(text: str, context: str = "") -> bool:
    """The text holds an assistant's phrase (CHAT_PHRASES) that the context (the passage around
    the blank) does not: a chat turn, not a fill."""
    said = {m.group(0).lower() for m in _CHAT.finditer(text)}
    return bool(said - {m.group(0).lower() for m in _CHAT.finditer(context)})
