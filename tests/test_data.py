"""The default datasets parse into what the paper's protocols need."""

import json
import random

import numpy as np

from magnet_model import data


def test_wikipedia_split_is_by_article_disjoint_and_stable():
    train = data.wikipedia_articles("train")
    heldout = data.wikipedia_articles("heldout")
    everything = data.wikipedia_articles("all")
    assert len(train) + len(heldout) == len(everything) >= 90
    assert not {a.title for a in train} & {a.title for a in heldout}
    assert 0.15 <= len(heldout) / len(everything) <= 0.25
    # The split depends on titles only: recomputing it from scratch gives the same one.
    data._all_articles.cache_clear()
    assert [a.title for a in data.wikipedia_articles("heldout")] == [a.title for a in heldout]


def test_wikipedia_text_is_clean_prose():
    text = "\n".join(a.text for a in data.wikipedia_articles("all"))
    assert 2_500_000 < len(text) < 4_000_000  # about 3 MB, as the asset promises
    for markup in ("[[", "]]", "{{", "'''", "<ref"):
        assert markup not in text
    paragraphs = data.wikipedia_paragraphs("heldout")
    assert len(paragraphs) > 100 and all(len(p) >= 200 for p in paragraphs)


def test_lee_background():
    docs = data.lee_background_docs()
    assert len(docs) == 300 and "bushfire" in docs[0]


def test_lee_corpus_bytes_that_are_not_utf8_read_as_latin1(tmp_path, monkeypatch):
    """The Lee corpora predate UTF-8: gensim's lee.cor writes '£' as the byte 0xa3."""
    f = tmp_path / "lee.cor"
    f.write_bytes(b"a \xa33,000 satellite tracking device\n\n second story \n")
    monkeypatch.setattr(data.assets, "lee_background", lambda: f)
    assert data.lee_background_docs() == ["a £3,000 satellite tracking device", "second story"]
    f.write_bytes("caf\u00e9 \u00a35\n".encode())  # a UTF-8 copy stays UTF-8
    assert data.lee_background_docs() == ["café £5"]


def test_the_rated_lee_documents_and_peoples_ratings_line_up():
    docs, ratings = data.lee_rated_docs(), data.lee_ratings()
    assert len(docs) == 50 and ratings.shape == (50, 50)
    assert docs[0].startswith("The national executive of the strife-torn Democrats")
    assert not set(docs) & set(data.lee_background_docs())  # another set of documents
    upper = ratings[np.triu_indices(50, 1)]
    assert len(upper) == 1225 and upper.min() >= 0 and upper.max() <= 1
    assert (np.diag(ratings) == 1).all()


def test_a_speech_transcript_reads_as_prose():
    raw = (
        "Thank you so much.Thank you.\n\nMARTIN O'MALLEY: Greetings — \n"
        "the best vice president — — and a friend\xa0of  mine —— and more."
    )
    assert data._clean_speech(raw) == (
        "Thank you so much. Thank you.\nGreetings —\n"
        "the best vice president — and a friend of mine — and more."
    )


def test_convention_speeches_are_cut_into_passages_of_whole_paragraphs():
    speeches = data.convention_speeches()
    assert len(speeches) == 189 and {s.party for s in speeches} == {"democrat", "republican"}
    passages = data.speech_passages()
    assert len(passages) == 687 and passages == data.speech_passages()  # the same order
    assert all(len(p.split()) >= data.SPEECH_PASSAGE_WORDS for p in passages)
    paragraphs = {p for s in speeches for p in s.text.split("\n")}
    opening = passages[0].split(". ")[0]
    assert any(p.startswith(opening) for p in paragraphs)  # a passage starts a paragraph
    text = "\n".join(passages)
    assert "— —" not in text and "O'MALLEY:" not in text and "much.Thank" not in text
    # the first hundred (a domain's default size) come from many speeches, not one
    first = passages[:100]
    speakers = {s.speaker for s in speeches for p in first if p[:80] in s.text.replace("\n", " ")}
    assert len(speakers) > 50


def test_sts_b_has_scores_and_sentences():
    test = data.load_sts_b("test")
    assert len(test) == 1379
    first = test[0]
    assert first.score == 2.5
    assert first.sentence1 == "A girl is styling her hair."
    assert first.sentence2 == "A girl is brushing her hair."
    assert all(0.0 <= p.score <= 5.0 for p in test)
    assert len(data.load_sts_b("train")) > 5000


def test_conll2003_columns_line_up():
    sentences = data.load_conll2003("train")
    assert len(sentences) > 14000
    first = sentences[0]
    assert first.words[:3] == ("EU", "rejects", "German")
    assert first.pos[:3] == ("NNP", "VBZ", "JJ")
    assert first.chunk[:2] == ("B-NP", "B-VP")
    assert first.ner[:3] == ("B-ORG", "O", "B-MISC")
    assert all(len(s.words) == len(s.pos) == len(s.chunk) == len(s.ner) for s in sentences)


def _vital(title: str, extract: str, description: str = "a thing") -> data.VitalArticle:
    return data.VitalArticle(title, extract, description, "topic")


HELD_PASSAGE = "The quick brown fox jumps over the lazy dog near the old mill by the river."
FOX = "A fox is a small canid of the genus Vulpes with a bushy tail."
ARTICLES = [
    _vital("Fox", FOX),  # a title held out by the other (Wikipedia) split
    # eight consecutive words of the held-out passage, in other case and punctuation
    _vital("Copy", "Legend says: the QUICK brown fox, jumps over the lazy dog, often."),
    # seven of them only: no long run shared, it may train
    _vital("Near", "Legend says the quick brown fox jumps over the cat."),
    # nine consecutive words of the held-out extract "Fox"
    _vital("Echo", "Some say that a fox is a small canid of the genus Vulpes indeed."),
    # held out by title, but its text was already trained on elsewhere
    _vital("Seen", "Bears sleep through the long cold winter in dens under snow."),
    *[_vital(f"Filler {i}", f"Filler article number {i} says little.") for i in range(20)],
]
TRAINED = ["In the north, bears sleep through the long cold winter in dens under snow."]


def test_split_vital_keeps_heldout_titles_and_long_shared_runs_out_of_training():
    train, heldout = data.split_vital(ARTICLES, ["fox", "Seen"], [HELD_PASSAGE], TRAINED, 0.1)
    train_titles, held_titles = {a.title for a in train}, {a.title for a in heldout}
    assert "Fox" in held_titles and "Fox" not in train_titles  # title match ignores case
    assert "Copy" not in train_titles  # shares 8 words with a held-out Wikipedia passage
    assert "Echo" not in train_titles  # shares 9 words with a held-out extract
    assert "Near" in train_titles | held_titles  # 7 shared words are not a long run
    assert "Seen" not in held_titles | train_titles  # held-out side stays unseen: dropped
    assert not train_titles & held_titles
    assert 2 <= len(held_titles) <= 1 + round(len(ARTICLES) * 0.1)
    assert [a.title for a in train] == sorted(train_titles)


def test_split_vital_is_deterministic():
    first = data.split_vital(ARTICLES, ["Fox"], [HELD_PASSAGE], TRAINED, 0.2)
    shuffled = random.Random(1).sample(ARTICLES, len(ARTICLES))
    assert data.split_vital(shuffled, ["Fox"], [HELD_PASSAGE], TRAINED, 0.2) == first


def test_vital_articles_never_train_on_heldout_text():
    train, heldout = data.vital_articles("train"), data.vital_articles("heldout")
    everything = data.vital_articles("all")
    assert len(everything) > 10_000 and len(train) > 8_000 and 800 < len(heldout) < 1_200
    wiki_heldout = data.wikipedia_articles("heldout")
    wiki_titles = {a.title.casefold() for a in wiki_heldout}
    train_titles = {a.title.casefold() for a in train}
    assert wiki_titles & {a.title.casefold() for a in everything}  # the rule has work to do
    assert not wiki_titles & train_titles
    assert not train_titles & {a.title.casefold() for a in heldout}
    unseen = set().union(*(data.word_ngrams(t) for t in [a.text for a in wiki_heldout]))
    unseen |= set().union(*(data.word_ngrams(a.extract) for a in heldout))
    assert not any(data.word_ngrams(a.extract) & unseen for a in train)
    assert all(a.extract and a.title for a in everything)
    data._vital_split.cache_clear()
    assert data.vital_articles("heldout") == heldout


def test_vital_pairs_export_for_the_trainer(tmp_path, capsys):
    assert data.main(["vital-pairs", str(tmp_path / "pairs.jsonl"), "--split", "heldout"]) == 0
    n = int(capsys.readouterr().err.split()[1])
    rows = [json.loads(line) for line in (tmp_path / "pairs.jsonl").read_text().splitlines()]
    assert n == len(rows) == len(data.vital_articles("heldout"))
    first = data.vital_articles("heldout")[0]
    assert rows[0] == {
        "text": first.extract,
        "title": first.title,
        "paraphrase": f"{first.title}: {first.description}",
    }


def test_vital_pairs_export_to_a_bad_path_is_one_sentence(tmp_path, capsys):
    assert data.main(["vital-pairs", str(tmp_path / "no" / "such" / "dir.jsonl")]) == 2
    err = capsys.readouterr().err
    assert err.startswith("error: cannot write") and "Traceback" not in err


def test_conll_news_is_prose_from_the_training_split_only_and_typed_as_text():
    from magnet_model.data import conll_news, detokenize, load_conll2003

    tokens = ("He", "said", "it", "is", "n't", '"', "clear", '"', ",", "(", "3", "%", ")", ".")
    assert detokenize(tokens) == 'He said it isn\'t "clear", (3%).'
    stories = conll_news()
    assert 300 < len(stories) < 946  # tables of results and datelines are left out
    text = " ".join(stories)
    assert "European Commission said on Thursday it disagreed with German advice" in text
    assert " n't" not in text and " ," not in text
    assert "BRUSSELS 1996-08-22" not in text
    # the probe's test sentences (another month of Reuters) are not trained on
    test = [detokenize(s.words) for s in load_conll2003("test") if len(s.words) > 12][:300]
    assert not any(sentence in text for sentence in test)
