"""Whether a text that ends like a sentence has a verb at all: "The city of Calgary, Alberta.",
"Aristocracy.", "The end of the 19th century." end in a full stop but are no sentence, and a
reader who asked for a removed sentence reads them as unfinished.

No tagger is at hand offline, so the test is a word list and two endings, and it leans to
"has a verb" (a check that flags a good fill costs the researcher a look; a missed fragment
costs a rating): an auxiliary or modal ("is", "can", "'ll"), a common irregular past ("became",
"wrote"), a word ending in -ed, a word of four letters or more ending in -s but not -ss (a
third-person verb, or a plural noun that is usually a subject), or a subject pronoun (then a
bare verb follows: "They live in burrows."). English only, as the models are.

Used by annotation_db's study checks (unfinished: fills.is_unfinished).
"""

from __future__ import annotations

import re

_AUXILIARIES = frozenset(
    "is are was were be been being am has have had do does did can could will would shall "
    "should may might must ought".split()
)
_PRONOUNS = frozenset("i we you they he she it there".split())
_CONTRACTIONS = ("'m", "'re", "'s", "'ve", "'ll", "'d", "n't")
_IRREGULAR_PAST = frozenset(
    """arose awoke became began bent bet bit bled blew bore bought bred broke brought built
    burnt burst caught chose clung came cost crept cut dealt did drew dreamt drank drove dug
    dwelt ate fell fed felt fought found fled flew forbade forgot forgave froze got gave went
    grew hung held hid hit hurt kept knelt knew laid led leapt left lent let lay lit lost made
    meant met overcame overtook paid put quit rode rang rose ran said saw sought sold sent set
    sewed shed shook shone shot showed shrank shut sang sank sat slept slid slung spoke spent
    sprang spun split spread stood stole stuck stung strove struck swore swept swam swung took
    taught tore told thought threw trod understood undertook upheld woke wore won withdrew
    wound wrote""".split()
)
_WORD = re.compile(r"[a-z]+(?:['’][a-z]+)?")


def has_verb(text: str) -> bool:
    """Whether the text holds a word that is, or promises, a finite verb (see the module)."""
    for word in _WORD.findall(text.lower().replace("’", "'")):
        if (
            word in _AUXILIARIES
            or word in _PRONOUNS
            or word in _IRREGULAR_PAST
            or word.endswith(_CONTRACTIONS)
            or word.endswith("ed")
            or (len(word) >= 4 and word.endswith("s") and not word.endswith("ss"))
        ):
            return True
    return False
