"""textrules, the rules on a fill's text that magnet_model and annotation_db share: what a chat
reply, a copy of the passage and a loop are (pure text, no model, no store)."""

from __future__ import annotations

import pytest
from fill_cases import CHAT_REPLIES, FILLS, NO_CHAT_CONTEXT

from textrules import CopyGuard, has_repeats, is_chat_reply, is_copy, repeats_ngram, words

CONTEXT = NO_CHAT_CONTEXT


@pytest.mark.parametrize("reply", CHAT_REPLIES)
def test_chat_replies_the_model_gave_are_chat_replies(reply):
    assert is_chat_reply(reply, CONTEXT)


@pytest.mark.parametrize("fill", FILLS)
def test_fills_about_help_models_or_texts_are_no_chat_replies(fill):
    assert not is_chat_reply(fill, CONTEXT)


def test_a_phrase_the_passage_holds_itself_is_no_chat_reply():
    text = "SmolLM is a small language model. [blank] It runs on phones."
    assert not is_chat_reply("SmolLM was trained on 2 trillion tokens.", text)
    assert is_chat_reply("SmolLM.", "Water boils at [blank] degrees.")
    assert is_chat_reply("SmolLM.")  # no passage given: any phrase counts


def test_a_reply_in_the_first_or_second_person_is_chat_only_where_the_passage_never_speaks_so():
    assert is_chat_reply("No, I have no idea.", CONTEXT)
    assert is_chat_reply("You've already completed it.", CONTEXT)
    # the passage itself speaks as "I" / to "you": the same words may fill its blank
    assert not is_chat_reply("No, I have no idea.", "I was tired. [blank] I slept.")
    assert not is_chat_reply("You've already completed it.", "If you run, [blank] you win.")
    # the rule's price, stated: an idiom with "you" in a passage without it reads as a reply
    assert is_chat_reply("He bought it for you know who.", CONTEXT)


def test_words_are_case_folded_and_split_at_hyphens_and_dashes_but_not_apostrophes():
    assert words("The farmer’s 'old' barn-door, TWO- Proudhon´s") == [
        "the",
        "farmer's",
        "old",
        "barn",
        "door",
        "two",
        "proudhon's",
    ]


def test_a_run_of_the_passage_in_a_fill_is_a_copy():
    text = "After the long winter, the old farmer walked out to [blank] before the rain came."
    assert is_copy("The old farmer walked out to the field before the rain came", text)
    assert not is_copy("the long winter", text)  # a phrase the passage holds: no copy
    assert not is_copy("the fields", text)
    assert not is_copy("the barn to feed the cows", text)
    assert not is_copy("walked out to blank", text)  # the blank marker is no word of the text
    assert not is_copy("the old farmer sold his farm", text)
    assert is_copy("the old farmer sold his farm", text, run_words=3)  # the thresholds


def test_a_copy_is_counted_in_the_words_a_reader_sees():
    """Hand-labelled outputs a reader called copies that the rule missed while a hyphenated
    word counted as one, or the passage spelled a compound or apostrophe another way."""
    text = "Anarcho-syndicalism is a branch of anarchism that focuses on the labour movement."
    assert is_copy("Anarcho-syndicalism is a branch of anarchism focused on labour.", text)
    war = "It drew on the Anti-nuclear movement and anti war movements of the time. [blank]"
    assert is_copy("It was led by the anti-nuclear movement and anti-war movements.", war)
    ideas = "A movement which was inspired by Proudhon´s ideas. [blank]"
    assert is_copy("Pi y Margall's party, which was inspired by Proudhon's ideas", ideas)
    assert not is_copy("a branch of anarchism", text)  # five words


def test_the_study_repeat_rule_is_a_four_word_run_twice_or_one_word_three_times():
    assert has_repeats("The person who would call the person who would call")
    assert has_repeats("President President President")
    assert not has_repeats("He planted the seeds and watered the seeds.")
    assert not has_repeats("President McKinley, President McKinley")  # a 2-word run twice
    assert has_repeats("the seeds and the seeds", run_words=2)


def test_the_evaluator_repeat_rule_is_a_word_3_gram_twice():
    assert repeats_ngram("President McKinley, President McKinley, President McKinley")
    assert not repeats_ngram("the city of the river and the city")
    assert repeats_ngram("the city of the city", n=2) and not repeats_ngram("a b c", n=4)
    # the two rules differ today (issue 36: a measurement decides between them)
    loop = "he said that he said that it was"
    assert repeats_ngram(loop) and not has_repeats(loop)


def test_the_copy_guard_sees_a_run_of_the_source_while_its_last_word_is_written():
    guard = CopyGuard(["The cat sat on the mat and slept.", "A second text."], 6)
    assert guard.copies("the cat sat on the ma")  # "ma" may still become "mat"
    assert guard.copies("The cat, sat on the mat.")  # case and punctuation are no words
    assert not guard.copies("the cat sat on the map")  # the word is complete: no copy
    assert not guard.copies("the cat sat on the")  # five words
    assert not guard.copies("slept. A second text and")  # runs never span two sources
    assert not CopyGuard(["The cat sat on the mat."], 0).copies("the cat sat on the mat")
    assert is_copy("the cat sat on the mat", "The cat sat on the mat and slept.")


def test_talk_about_the_task_is_scored_against_the_words_the_passage_uses():
    from textrules.chat import speaks_as_assistant
    from textrules.meta import score, talks_about_task

    reply = "No other words are provided to complete the sentence."
    assert not speaks_as_assistant(reply, CONTEXT)  # no phrase of the list, no "I" or "you"
    assert talks_about_task(reply, CONTEXT) and is_chat_reply(reply, CONTEXT)
    # a passage about sentences and words: the same words are no evidence there
    grammar = "A sentence is made of words. [blank] Every sentence needs a verb."
    assert not talks_about_task(reply, grammar)
    assert score(reply, grammar) < score(reply, CONTEXT)
    # one task word in its other sense is not enough; a second kind of evidence is
    assert not talks_about_task("The sentence was read out in court.", CONTEXT)
    assert talks_about_task("The sentence to be filled in is:", CONTEXT)
    # words in quotation marks are the quoted text's, not the reply's
    assert not talks_about_task('He called it "the missing sentence" in his memoir.', CONTEXT)


def test_the_sentence_a_blank_sits_in_starts_after_the_last_real_sentence_end():
    from textrules import ends_sentence, sentence_start

    assert sentence_start("It rained. Then the") == "Then the"
    assert sentence_start("It rained.") == "" and sentence_start("") == ""
    assert sentence_start("Line one\nline two") == "line two"
    # an initial, "et al." or a title goes on with the sentence
    left = "Critics emerged, such as Michael Fried, T. J."
    assert sentence_start(left) == left
    assert sentence_start("It grew. According to Chaubey et al.") == "According to Chaubey et al."
    assert sentence_start("He met Dr. Smith and the") == "He met Dr. Smith and the"
    # "i.e." and "e.g." never end a sentence, for the fills' sentence rule too
    assert not ends_sentence("the older system, i.e.") and not ends_sentence("for example, E.g.")
    assert ends_sentence("in the U.S.")


def test_a_sentence_break_is_where_a_reader_sees_one():
    from textrules import sentence_break

    assert sentence_break("He died.", "Then it rained.")
    assert sentence_break("He died.", '"Run," she said.')
    assert sentence_break("It ended.", "1900 came.")
    assert not sentence_break("It was used in the 1890 U.S.", "census. Then came")  # an initial
    assert not sentence_break("the teleprinter (ca.", "1870s) was in use")  # "circa"
    assert not sentence_break("He met Dr.", "Smith.")
    assert not sentence_break("Fried, T. J.", "Clark")
    assert not sentence_break("It was a car.", "and then it left.")  # no sentence opens so
    assert not sentence_break("It was a car", "The end.")  # no sentence ended
