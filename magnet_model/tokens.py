"""Token roles: the special tokens MAGNET uses, chosen among tokens the tokenizer already has.

Reusing existing tokens (that never occur in prose) means the embedding matrix is not resized,
so an adapter stays LoRA-only and a few MB. The roles are recorded next to each adapter
(magnet_config.json) so inference uses exactly the tokens training used.

Given the model, the roles are chosen by its weights (head_rows): a role token whose head or
input row nearly duplicates another row is refused (LoRA cannot change the head, so a token
sharing its row with k others can never get more than p = 1/(k+1): SmolLM2's
`<issue_comment>`, the first adapter's <span_end>, shares its row with 16 tokens), and so is a
token the chat template, BOS, EOS or padding uses; <span_end>, the one role the model must
predict, is the first remaining candidate that is reachable (some final hidden state gives it
p >= REACHABLE).

- mask:       replaces selected context tokens in MNTP (the "[MASK]" of BERT)
- blank:      stands in the context where a span was removed (one per span)
- span_start: first input of each span; its output predicts the span's first token
- span_end:   predicted after a span's last token: generation stops by itself there
- sentence_end: appended to a sentence; its last hidden state is the sentence embedding
"""

from __future__ import annotations

from dataclasses import asdict, dataclass

from .errors import ConfigError
from .head_rows import near_duplicates, reachable

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
    "<repo_name>",
    "<|endoftext|>",
]
ROLE_NAMES = ("mask", "blank", "span_start", "span_end")
REACHABLE = 0.5  # the least p(<span_end>) some hidden state must be able to give


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


def choose_token_roles(tokenizer, lm=None) -> TokenRoles:
    """Four distinct existing tokens for the roles, the first candidates that exist (and, given
    the causal LM `lm`, whose rows are their own: see the module docstring). <span_end> is the
    first remaining candidate a hidden state can reach (p >= REACHABLE), or, if none can, the
    one that comes closest."""
    vocab = tokenizer.get_vocab()
    eos = tokenizer.eos_token_id
    pad = tokenizer.pad_token_id if tokenizer.pad_token_id is not None else eos
    if eos is None:
        raise ConfigError("The tokenizer has no end-of-sequence token to end sentences with.")
    used = {eos, pad, tokenizer.bos_token_id}
    template = getattr(tokenizer, "chat_template", None) or ""
    usable: list[int] = []
    refused: list[str] = []
    for tok in CANDIDATES:
        idx = vocab.get(tok)
        if idx is None or idx in usable:
            continue
        why = _refusal(lm, idx, used, tok, template)
        if why:
            refused.append(f"{tok} ({why})")
        else:
            usable.append(idx)
    if len(usable) < len(ROLE_NAMES):
        detail = f" Refused: {'; '.join(refused)}." if refused else ""
        raise ConfigError(
            "The tokenizer has too few reusable special tokens for MAGNET's roles "
            f"({', '.join(CANDIDATES)}).{detail} Add candidates to magnet_model/tokens.py."
        )
    inputs = usable[: ROLE_NAMES.index("span_end")]
    rest = usable[len(inputs) :]
    end = rest[0] if lm is None else _most_reachable(lm, rest)
    return TokenRoles(*inputs, end, sentence_end=eos, pad=pad)


def _refusal(lm, idx: int, used: set, tok: str, template: str) -> str | None:
    """Why token `idx` may not take a role (None: it may)."""
    if idx in used or (template and tok in template):
        return "used by the chat template, BOS, EOS or padding"
    if lm is None:
        return None
    rows = {"head": lm.get_output_embeddings().weight, "input": lm.get_input_embeddings().weight}
    for name, weight in rows.items():
        twins = near_duplicates(weight, idx)
        if twins:
            return f"its {name} row nearly duplicates {len(twins)} other rows"
    return None


def _most_reachable(lm, ids: list[int]) -> int:
    """The first of ids a hidden state can give p >= REACHABLE, else the one with the most."""
    best, best_p = ids[0], -1.0
    for idx in ids:
        p = reachable(lm, idx, enough=REACHABLE)
        if p >= REACHABLE:
            return idx
        if p > best_p:
            best, best_p = idx, p
    return best


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
