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
