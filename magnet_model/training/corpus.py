"""The training texts: corpus files or the default corpus, packed and chunked to
--max-length tokens with their units (sentences, phrases, words) found, and the Sampler that
makes every global micro-batch a fixed function of (seed, draw)."""

from __future__ import annotations

import random
from dataclasses import dataclass
from functools import lru_cache
from pathlib import Path

from ..errors import ConfigError
from ..files import BadLine, jsonl_records
from ..tokens import word_edges, word_start_table
from ..units import token_units
from .config import MIN_TOKENS, TrainConfig
from .views import TokenUnit


@dataclass(frozen=True)
class Example:
    ids: tuple[int, ...]
    positive: tuple[int, ...] | None = None  # a paraphrase's ids, if the data has one
    units: tuple[TokenUnit, ...] = ()  # sentences, phrases, words as token spans (units.py)


def chunk(ids: list[int], size: int) -> list[list[int]]:
    """Cut a paragraph's tokens into training texts of at most `size` tokens."""
    return [ids[i : i + size] for i in range(0, len(ids), size) if len(ids[i : i + size])]


def units_in(units: list[TokenUnit], start: int, end: int) -> tuple[TokenUnit, ...]:
    """The units that lie wholly inside tokens [start, end), counted from start."""
    return tuple((a - start, b - start, k) for a, b, k in units if a >= start and b <= end)


def _read_rows(path: Path, cfg: TrainConfig) -> list[tuple[str, str | None]]:
    if not path.is_file():
        raise ConfigError(f"Corpus file {path} does not exist.")
    text = path.read_text(encoding="utf-8")
    if path.suffix.lower() not in (".jsonl", ".json"):
        return [(line.strip(), None) for line in text.splitlines() if line.strip()]
    rows = []
    try:
        for n, obj in jsonl_records(text):
            if not isinstance(obj, dict) or cfg.text_column not in obj:
                raise ConfigError(
                    f"{path}:{n} has no {cfg.text_column!r} field; choose it with --text-column."
                )
            para = obj.get(cfg.paraphrase_column)
            rows.append((str(obj[cfg.text_column]).strip(), str(para).strip() if para else None))
    except BadLine as e:
        raise ConfigError(f"{path}:{e.line} is not valid JSON ({e.reason}).") from None
    return rows


def default_rows(
    positives: str = "dropout", vital: bool = True, news: bool = False
) -> list[tuple[str, str | None]]:
    """The default corpus: the Wikipedia training split's paragraphs and the vital-article
    training extracts (data.py keeps both clear of held-out text). With positives
    'description' each extract is paired with "title: description", the asymmetric
    query -> document pair text-embedding models train on; MNTP and MSG still see the extract.
    vital False: the Wikipedia paragraphs alone (the default corpus of earlier adapters).
    news: the CoNLL-2003 training split's Reuters stories too (data.conll_news), a second
    domain.
    """
    from ..data import conll_news, vital_articles, wikipedia_paragraphs

    pair = positives == "description"
    rows: list[tuple[str, str | None]] = [(p, None) for p in wikipedia_paragraphs("train")]
    for a in vital_articles("train") if vital else []:
        rows.append((a.extract, a.query if pair and a.description else None))
    rows += [(story, None) for story in (conll_news() if news else ())]
    return rows


def pack_rows(rows: list[tuple[str, str | None]], tokenizer, size: int) -> list:
    """Consecutive texts without a paraphrase joined by a line break while they fit in `size`
    tokens together (a text longer than that stays alone, to be chunked); pairs stay as
    they are. Joining changes the tokens at the seams only (the line break)."""
    lengths = tokenizer([t for t, _ in rows], add_special_tokens=False).input_ids if rows else []
    out: list[tuple[str, str | None]] = []
    group: list[str] = []
    used = 0
    for (text, para), ids in zip(rows, lengths, strict=True):
        if para:
            out.append((text, para))
            continue
        n = len(ids) + 1  # + the line break
        if group and used + n > size:
            out.append(("\n".join(group), None))
            group, used = [], 0
        group.append(text)
        used += n
    if group:
        out.append(("\n".join(group), None))
    return out


def load_corpus(cfg: TrainConfig, tokenizer) -> list[Example]:
    """Files (text: one text per line; JSONL: text + optional paraphrase) or default_rows().

    Texts without a paraphrase are chunked to --max-length tokens; pairs are truncated (a
    chunk of a text is not a paraphrase of the matching chunk of the other).
    """
    if cfg.corpus:
        rows = [r for p in cfg.corpus for r in _read_rows(Path(p), cfg)]
    else:
        rows = default_rows(cfg.sscl_positives, cfg.vital_extracts, cfg.news)
    rows = [(t, p) for t, p in rows if t]
    if cfg.pack_texts:
        rows = pack_rows(rows, tokenizer, cfg.max_length)

    def encode(texts: list[str]) -> list[list[int]]:
        return tokenizer(texts, add_special_tokens=False).input_ids if texts else []

    texts = [t for t, _ in rows]
    if cfg.uses_units and texts:
        enc = tokenizer(texts, add_special_tokens=False, return_offsets_mapping=True)
        text_ids = enc.input_ids
        table = word_start_table(tokenizer)
        found = [
            token_units(t, off, word_edges(ids, table))
            for t, ids, off in zip(texts, text_ids, enc.offset_mapping, strict=True)
        ]
    else:
        text_ids = encode(texts)
        found = [[] for _ in texts]
    para_ids = iter(encode([p for _, p in rows if p]))
    examples = []
    size = cfg.max_length
    for (_, para), ids, units in zip(rows, text_ids, found, strict=True):
        if para:
            positive = next(para_ids)[:size]
            examples.append(Example(tuple(ids[:size]), tuple(positive), units_in(units, 0, size)))
        else:
            examples.extend(
                Example(tuple(c), None, units_in(units, i * size, i * size + len(c)))
                for i, c in enumerate(chunk(ids, size))
            )
    examples = [e for e in examples if len(e.ids) >= MIN_TOKENS]
    if not examples:
        where = ", ".join(cfg.corpus) or "the default corpus"
        raise ConfigError(f"The corpus ({where}) holds no text of {MIN_TOKENS}+ tokens.")
    return examples


class Sampler:
    """Batch b of the run is a fixed function of (seed, b): resuming draws the same texts."""

    def __init__(self, n: int, seed: int | str):
        self.n, self.seed = n, seed

    @lru_cache(maxsize=4)  # noqa: B019 (a few epochs' permutations, per sampler)
    def _epoch(self, epoch: int) -> list[int]:
        order = list(range(self.n))
        random.Random(f"{self.seed}-epoch-{epoch}").shuffle(order)
        return order

    def indices(self, draw: int, size: int) -> list[int]:
        start = draw * size
        return [self._epoch(g // self.n)[g % self.n] for g in range(start, start + size)]


class Draws:
    """Which texts global micro-batch `draw` holds, for the masked view and for SSCL: with
    --sscl-batch-size SSCL draws its pairs from a sampler of its own (its own order over the
    same corpus), else it takes the masked view's texts. The trainer and the model card's
    token count both ask this, so they cannot disagree."""

    def __init__(self, n: int, cfg: TrainConfig):
        self.tokens = Sampler(n, cfg.seed)
        self.sentences = Sampler(n, f"{cfg.seed}-sscl") if cfg.sscl_batch_size else None
        self.size, self.pairs = cfg.batch_size, cfg.sscl_pairs

    def token_batch(self, draw: int, world: int = 1) -> list[int]:
        """The global micro-batch of the masked view: --batch-size texts per rank."""
        return self.tokens.indices(draw, self.size * world)

    def sentence_batch(self, draw: int, world: int = 1) -> list[int]:
        """The global micro-batch of SSCL pairs: each rank's share in rank order."""
        if self.sentences is None:
            return self.token_batch(draw, world)
        return self.sentences.indices(draw, self.pairs * world)
