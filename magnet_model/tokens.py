"""Token roles: the special tokens MAGNET uses, chosen among tokens the tokenizer already has.

Reusing existing tokens (that never occur in prose) means the embedding matrix is not resized,
so an adapter stays LoRA-only and a few MB. The roles are recorded next to each adapter
(magnet_config.json) so inference uses exactly the tokens training used.

- mask:       replaces selected context tokens in MNTP (the "[MASK]" of BERT)
- blank:      stands in the context where a span was removed (one per span)
- span_start: first input of each span; its output predicts the span's first token
- span_end:   predicted after a span's last token: generation stops by itself there
- sentence_end: appended to a sentence; its last hidden state is the sentence embedding
"""

from __future__ import annotations

from dataclasses import asdict, dataclass

from .errors import ConfigError

# Tokens of code-pretraining vocabularies (SmolLM2/StarCoder family) that prose never yields,
# then Llama/SentencePiece byte tokens for control characters that text does not contain.
CANDIDATES = [
    "<filename>",
    "<reponame>",
    "<gh_stars>",
    "<issue_comment>",
    "<jupyter_output>",
    "<empty_output>",
    "<0x01>",
    "<0x02>",
    "<0x03>",
    "<0x04>",
    "<0x05>",
    "<0x06>",
]
ROLE_NAMES = ("mask", "blank", "span_start", "span_end")


@dataclass(frozen=True)
class TokenRoles:
    mask: int
    blank: int
    span_start: int
    span_end: int
    sentence_end: int
    pad: int

    def to_dict(self) -> dict[str, int]:
        return asdict(self)

    @classmethod
    def from_dict(cls, d: dict) -> TokenRoles:
        return cls(**{k: int(d[k]) for k in cls.__dataclass_fields__})

    def special_ids(self) -> set[int]:
        return {self.mask, self.blank, self.span_start, self.span_end}


def choose_token_roles(tokenizer) -> TokenRoles:
    """Pick four distinct existing tokens for the roles (first candidates that exist)."""
    vocab = tokenizer.get_vocab()
    found = []
    for tok in CANDIDATES:
        idx = vocab.get(tok)
        if idx is not None and idx not in found:
            found.append(idx)
        if len(found) == len(ROLE_NAMES):
            break
    if len(found) < len(ROLE_NAMES):
        raise ConfigError(
            "The tokenizer has none of the reusable special tokens MAGNET needs "
            f"({', '.join(CANDIDATES)}); add candidates to magnet_model/tokens.py."
        )
    eos = tokenizer.eos_token_id
    pad = tokenizer.pad_token_id if tokenizer.pad_token_id is not None else eos
    if eos is None:
        raise ConfigError("The tokenizer has no end-of-sequence token to end sentences with.")
    return TokenRoles(*found, sentence_end=eos, pad=pad)


# Byte-level BPE (GPT-2, SmolLM2) and SentencePiece (Llama) mark a leading space in the token.
SPACE_MARKS = ("Ġ", "▁")


def word_start_table(tokenizer) -> list[bool] | None:
    """Per vocabulary id: whether the token begins a word (it starts with a space mark).

    SmolLM2 (and Llama) split " 1887" into a bare " " + "1" "8" "8" "7": the word starts at
    the bare space, and "1" is not a word start although a space precedes it. An edge before
    "1" would leave the space at the end of the left context, which typed text never gives
    (the space before a blank is not shown to the model), so the layout scored or trained
    would differ from the one generation runs. None when the vocabulary marks no spaces
    (word-level tokenizers): every token boundary is then a word boundary.
    """
    tokens = tokenizer.convert_ids_to_tokens(list(range(len(tokenizer))))
    table = [bool(t) and t.startswith(SPACE_MARKS) for t in tokens]
    return table if any(table) else None


def word_edges(ids, table: list[bool] | None) -> list[bool]:
    """Whether a span may start (or end) right before each token: the start of the text, or
    a token that begins a word (word_start_table)."""
    if table is None:
        return [True] * len(ids)
    return [i == 0 or (t < len(table) and table[t]) for i, t in enumerate(ids)]


def bos_of(tokenizer) -> int | None:
    """The BOS the tokenizer itself puts in front of text (None for SmolLM2, <s> for Llama):
    what the trainer records, and what inference uses for an adapter without that record."""
    bos = tokenizer.bos_token_id
    probe = tokenizer("a").input_ids
    return bos if bos is not None and probe and probe[0] == bos else None
