"""The fills' problems (empty, overlong, unfinished, chat, copy, repeats) are counted per system,
with examples, in the store, the report and the rules; the checks are those of the Paper
protocol's outputs that raters met unannounced (browser tour s4, N-M2)."""

from __future__ import annotations

import textrules
from annotation_db import OVERLONG_RATIO, ItemIn, OutputIn, fill_counts, fill_summary
from annotation_db.fills import (
    fill_problems,
    has_repeats,
    is_chat_reply,
    is_copy,
    is_unfinished,
    output_problems,
)
from annotation_db.report import render_report


def _study(store):
    items = [ItemIn(f"i{i}", f"Passage {i} with ___ inside.", ["two words"]) for i in range(4)]
    fills = {
        "magnet": ["a fill", "a fill", "a fill", "a fill"],
        "zero-shot": ["", '"', "I'm ready to help.", " ".join(["w"] * (2 * OVERLONG_RATIO + 1))],
        "five-shot": ["a fill", "a fill", "", " ".join(["w"] * (2 * OVERLONG_RATIO))],
    }
    outputs = [
        OutputIn(it.key, system, it.text.replace("___", f[i]), [f[i]])
        for system, f in fills.items()
        for i, it in enumerate(items)
    ]
    store.create_study("fills", items, outputs, questions=["appropriate"], raters_per_item=1)


def test_problems_are_counted_per_system_with_examples(sqlite_store):
    _study(sqlite_store)
    counts = {c.system: c for c in sqlite_store.fill_counts("fills")}
    assert (counts["magnet"].empty, counts["magnet"].overlong, counts["magnet"].flagged) == (
        0,
        0,
        0,
    )
    # "" and a lone quote are empty; 7 words for a 2-word span is more than 3x
    zs = counts["zero-shot"]
    assert (zs.empty, zs.overlong, zs.chat, zs.repeats, zs.flagged) == (2, 1, 1, 1, 4)
    assert [f.item_key for f in zs.examples["chat"]] == ["i2"]
    assert zs.examples["chat"][0].fill == "I'm ready to help."
    assert (counts["five-shot"].empty, counts["five-shot"].overlong) == (1, 0)  # 6 = 3x: not
    assert all(c.n_outputs == 4 for c in counts.values())
    line = fill_summary(list(counts.values()))
    assert "zero-shot: 4 of 4 flagged (empty 2, overlong 1, chat 1, repeats 1)" in line
    # a system with no problem says that every check ran, not "0 empty, 0 overlong"
    assert "magnet: 0 of 4 flagged (none of the checks found a problem)" in line
    assert "3x" in line and "chat" in line


def test_the_report_shows_every_problem_with_examples(sqlite_store):
    _study(sqlite_store)
    page = render_report(sqlite_store, "fills", n_resamples=50)
    assert "Problems of the fills, per system" in page
    row = "<tr><td>zero-shot</td><td class=num>4</td><td class=num>4</td><td class=num>2</td>"
    assert row + "<td class=num>1</td><td class=num>0</td><td class=num>1</td>" in page
    assert "I&#x27;m ready to help." in page  # the example, escaped


def test_attention_checks_and_outputs_without_fills():
    items = [ItemIn("a", "x ___ y", ["w"]), ItemIn("g", "x ___ y", ["w"], is_gold=True)]
    outputs = [
        OutputIn("a", "s", "x  y"),  # no fills stored: cannot be checked
        OutputIn("g", "s", "x  y", [""], gold_role="corrupted"),  # made by us, not the system
    ]
    (c,) = fill_counts(items, outputs)
    assert (c.n_outputs, c.empty, c.overlong, c.unchecked) == (1, 0, 0, 1)


def test_chat_replies_are_flagged_by_the_shared_rule():
    """The store flags chat replies with textrules' rule itself, not a copy: its cases (the
    replies of tests/fill_cases.py, the fills that are none) are in tests/test_textrules.py."""
    assert is_chat_reply is textrules.is_chat_reply


def test_copies_repeats_and_unfinished_sentences():
    text = "After the long winter, the old farmer walked out to [blank] before the rain came."
    assert is_copy("The old farmer walked out to the field before the rain came", text)
    assert not is_copy("the long winter", text)  # a phrase of the passage is no copy
    assert not is_copy("the fields", text) and not is_copy("the barn to feed the cows", text)
    assert has_repeats("The person who would call the person who would call")
    assert has_repeats("President President President")
    assert not has_repeats("He planted the seeds and watered the seeds.")
    removed = "He planted the seeds."  # a sentence was removed
    assert is_unfinished("There is", removed) and is_unfinished("algae are unicellular,", removed)
    assert not is_unfinished("He sowed the wheat.", removed)
    assert not is_unfinished('"Run!"', removed)  # a closing quote after the sentence's end
    # a full stop after words that hold no verb is no sentence
    for fragment in ("The city of Calgary, Alberta.", "Aristocracy.", "The end of the war."):
        assert is_unfinished(fragment, removed), fragment
    for sentence in ("They live in burrows.", "Whales appear in spring.", "It rained.",
                     "The law was passed.", "She wrote it.", "What a harvest!"):  # fmt: skip
        assert not is_unfinished(sentence, removed), sentence
    # a sentence that trails off in an ellipsis is left unfinished, unless the original did
    assert is_unfinished("They are thought to have...", removed)
    assert is_unfinished("His aversion to the imposition…", removed)
    assert not is_unfinished("He waited...", "He waited and waited...")
    assert not is_unfinished("Aristocracy.", "aristocracy.")  # a word removed: no verb needed
    assert not is_unfinished("the fields", "the fields")  # words removed, not a sentence
    assert not is_unfinished("the fields", None)  # the original unknown: not judged
    assert fill_problems("", removed, text) == {"empty"}
    assert fill_problems("There is", removed, text) == {"unfinished"}


def test_a_fill_that_ends_the_sentence_begun_before_the_blank_is_read_with_its_start():
    removed = "Clark and Rosalind Krauss wrote on it."  # the splitter had cut after "T. J."
    text = "Critics emerged, such as Michael Fried, T. J. [blank] Later ones followed."
    assert fill_problems("Greenberg.", removed, text) == set()  # "emerged" is its verb
    assert is_unfinished("Greenberg.", removed)  # read alone, it is no sentence
    # a blank that starts its sentence gets no verb from the sentence before
    text = "Critics emerged in Paris. [blank] Later ones followed."
    assert fill_problems("The end of the war.", "Artists came.", text) == {"unfinished"}
    # in an item with several blanks each fill is read after the text before its own blank
    item = ItemIn(key="k", text="It rained. [blank] Then, as critics such as T. J. [blank] Later.",
                  original=["Crops grew.", "Clark wrote."])  # fmt: skip
    out = OutputIn("k", "s", "...", fills=["The harvest.", "Greenberg."])
    assert output_problems(item, out) == ("unfinished",)  # the first fill's
    out = OutputIn("k", "s", "...", fills=["The harvest came.", "Greenberg."])
    assert output_problems(item, out) == ()


def test_a_plural_that_ends_a_noun_phrase_makes_no_sentence():
    removed = "Speakers of the language live on many islands."
    for fragment in ("The language of the Austronesian peoples.", "His works, his discoveries.",
                     "A group of non-religious residents.",
                     "The Mid-Atlantic Ridge, a marvellous example of natural geological wonders.",
                     "Eagles, hawks, owls, and crows."):  # fmt: skip
        assert is_unfinished(fragment, removed), fragment
    # a plural subject with its bare verb, and a third-person verb with more after it, still
    # read as sentences; one that ends the sentence reads as a plural ("The river floods." is
    # the rule's known cost: such fills were rarer than fragments ending in a plural)
    for sentence in ("The chloroplasts contain chlorophyll.", "The river floods every spring.",
                     "Some authors consider them algae.", "It floods."):  # fmt: skip
        assert not is_unfinished(sentence, removed), sentence
    assert is_unfinished("The river floods.", removed)


def test_a_verb_inside_a_relative_clause_makes_no_sentence():
    removed = "The book was published in 1844."
    for fragment in ("The Art of Seeing, which was published in 1942 in the United Kingdom.",
                     "The Palace of Versailles, where the court could be seen."):  # fmt: skip
        assert is_unfinished(fragment, removed), fragment
    # a main verb after the clause, or before it, and a finite verb after a comma before "to"
    sentences = (
        "The book, which was banned, became famous.",
        "He moved to Paris, where he died.",
        "Pi y Margall, who translated Proudhon, helped to prevent a revolt.",
    )
    for sentence in sentences:
        assert not is_unfinished(sentence, removed), sentence
    # the original is read as before: a relative clause's verb still makes it a sentence
    original = "Jackson, who has spent seven years on filming it at home has been honoured."
    assert is_unfinished("The first of three films in Lord of the Rings.", original)


def test_possessives_coordinated_plurals_adjectives_and_comma_participles_are_no_verb():
    removed = "The book was published in 1844."
    for fragment in (
        "Stirner's The Ego and Its Self, a seminal work of philosophy, published in 1844.",
        "The women's liberation movement and the women's social revolution.",
        "The math of algorithms and the math of other problems.",
        "The Holy Trinity, a religious doctrine of the Christian faith.",
    ):
        assert is_unfinished(fragment, removed), fragment
    # 's after a pronoun is "is", a possessive before a verb, a past tense before a preposition
    # and a comma participle beside a verb: still sentences
    for sentence in ("It's raining.", "That's correct.", "The city's walls fell.",
                     "The war ended in 1945.", "The book, published in 1844, became famous.",
                     "This happens often.", "The status quo remained."):  # fmt: skip
        assert not is_unfinished(sentence, removed), sentence


def test_names_numerals_and_participles_are_not_the_verb_of_a_sentence():
    removed = "The treaty was signed in 1919."
    for fragment in ("The League of Nations in 1919.", "3400 BC (5,400 years old).",
                     "Banned by the International Red Cross.", "Dedicated to the land.",
                     "Only the required text."):  # fmt: skip
        assert is_unfinished(fragment, removed), fragment
    # a verb after a participle opening, a modifier before a verb, an order, a capitalised
    # word that starts a second sentence: still sentences
    for sentence in ("Founded in 1900, the city grew.", "The armed men arrived.",
                     "Please replace the text.", "It rained. Crops grew.",
                     "Oklahoma has the highest rate of tornadoes.",
                     "The Beatles released Abbey Road."):  # fmt: skip
        assert not is_unfinished(sentence, removed), sentence
