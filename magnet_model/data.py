"""Readers for the default datasets (all offline, from installed packages; see assets.py).

- Wikipedia: about 100 real articles, cleaned with gensim's wiki utilities and split once,
  deterministically, by article into train and held-out.
- Lee background news corpus, STS-B with gold scores, CoNLL-2003.
"""

from __future__ import annotations

import bz2
import csv
import hashlib
import re
from dataclasses import dataclass
from functools import lru_cache

from . import assets

HELDOUT_SHARE = 0.2  # share of Wikipedia articles kept out of training (by article)
MIN_ARTICLE_CHARS = 1000  # below this a page is a redirect or a stub


@dataclass(frozen=True)
class Article:
    title: str
    text: str


@dataclass(frozen=True)
class StsPair:
    sentence1: str
    sentence2: str
    score: float  # gold similarity, 0..5


@dataclass(frozen=True)
class ConllSentence:
    words: tuple[str, ...]
    pos: tuple[str, ...]
    chunk: tuple[str, ...]
    ner: tuple[str, ...]


_MARKUP = [
    (re.compile(r"'{2,}"), ""),  # bold / italics quotes
    (re.compile(r"\(\s*[,;]?\s*\)"), ""),  # parentheses emptied by template removal
    (re.compile(r"[ \t]+"), " "),
    (re.compile(r" *\n *"), "\n"),
    (re.compile(r"\n{3,}"), "\n\n"),
    (re.compile(r" ([,.;:])"), r"\1"),
]


def clean_wiki_markup(text: str) -> str:
    """MediaWiki source -> plain prose (gensim's filter_wiki plus a few leftovers)."""
    from gensim.corpora.wikicorpus import filter_wiki

    text = filter_wiki(text)
    for pattern, repl in _MARKUP:
        text = pattern.sub(repl, text)
    return text.strip()


@lru_cache(maxsize=1)
def _all_articles() -> tuple[Article, ...]:
    from gensim.corpora.wikicorpus import extract_pages

    articles = []
    with bz2.open(assets.wikipedia_bz2(), "rb") as f:
        for title, raw, _pageid in extract_pages(f):
            if raw.lstrip().lower().startswith("#redirect"):
                continue
            text = clean_wiki_markup(raw)
            if len(text) >= MIN_ARTICLE_CHARS:
                articles.append(Article(title=title, text=text))
    return tuple(articles)


def _split_rank(title: str) -> str:
    return hashlib.sha1(title.encode("utf-8")).hexdigest()


def wikipedia_articles(split: str = "train") -> list[Article]:
    """Cleaned Wikipedia articles of one split: 'train', 'heldout' or 'all'.

    The split is by article (no passage of a held-out article is ever trained on) and depends
    only on the titles, so it is the same on every machine and for every entry point.
    """
    if split not in ("train", "heldout", "all"):
        raise ValueError(f"Wikipedia split must be train, heldout or all, not {split!r}")
    articles = _all_articles()
    if split == "all":
        return list(articles)
    ranked = sorted(articles, key=lambda a: _split_rank(a.title))
    n_heldout = max(1, round(len(ranked) * HELDOUT_SHARE))
    heldout = {a.title for a in ranked[:n_heldout]}
    return [a for a in articles if (a.title in heldout) == (split == "heldout")]


def wikipedia_paragraphs(split: str = "train", min_chars: int = 200) -> list[str]:
    """Prose paragraphs of one split, in article order (headings and lists dropped)."""
    out = []
    for article in wikipedia_articles(split):
        for para in article.text.split("\n"):
            para = para.strip()
            if len(para) >= min_chars and not para.startswith(("=", "*", "|", "{")):
                out.append(para)
    return out


def lee_background_docs() -> list[str]:
    """The Lee background news corpus: 300 short news documents."""
    with open(assets.lee_background(), encoding="utf-8", errors="replace") as f:
        return [line.strip() for line in f if line.strip()]


def load_sts_b(split: str = "test") -> list[StsPair]:
    """STS-B pairs with gold scores (tab-separated: score in column 4, sentences in 5 and 6)."""
    pairs = []
    with open(assets.sts_b(split), encoding="utf-8", newline="") as f:
        for row in csv.reader(f, delimiter="\t", quoting=csv.QUOTE_NONE):
            if len(row) < 7:
                continue
            try:
                score = float(row[4])
            except ValueError:
                continue
            pairs.append(StsPair(row[5].strip(), row[6].strip(), score))
    return pairs


def load_conll2003(split: str = "train") -> list[ConllSentence]:
    """CoNLL-2003 English sentences with POS, chunk and NER tags (-DOCSTART- lines dropped)."""
    sentences: list[ConllSentence] = []
    rows: list[list[str]] = []

    def flush() -> None:
        if rows:
            sentences.append(ConllSentence(*(tuple(col) for col in zip(*rows, strict=True))))
            rows.clear()

    with open(assets.conll2003(split), encoding="utf-8") as f:
        for line in f:
            parts = line.split()
            if not parts or parts[0] == "-DOCSTART-":
                flush()
            elif len(parts) == 4:
                rows.append(parts)
    flush()
    return sentences
