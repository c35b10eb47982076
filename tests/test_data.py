"""The default datasets parse into what the paper's protocols need."""

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
