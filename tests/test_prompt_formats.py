"""The prompted baselines' formats (prompts.py), their examples chosen per passage
(example_pool.py) and the copy guard of their decoding (inference/prompted.py), on the tiny
model: what each format puts in the prompt, how the truth is scored after a reply's opening,
and that a reply cannot copy a run of its prompt."""

from __future__ import annotations

import pytest
from reply_driver import drive_reply
from tiny_models import tiny_engine

from magnet_model import example_pool, prompts
from magnet_model.errors import InputError
from magnet_model.evaluation import scoring
from magnet_model.evaluation.fills import prompt_flags
from magnet_model.inference import prompted
from magnet_model.inference.blanks import FilledSpan, InfillResult
from magnet_model.inference.prompted import ReplyRules
from textrules import CopyGuard

CHAT_TEMPLATE = (
    "{% for m in messages %}<|im_start|>{{ m['role'] }}\n{{ m['content'] }}<|im_end|>\n"
    "{% endfor %}{% if add_generation_prompt %}<|im_start|>assistant\n{% endif %}"
)
PARAGRAPHS = [
    "The river rose for three days. Heavy rain fell across the whole valley that week. "
    "The town closed the old bridge at noon. Nobody crossed it again.",
    "Paris is the capital of France and its largest city. It sits on the river Seine in the "
    "north of the country. Millions of tourists visit it every year to see its museums.",
    "The war ended in the spring. Soldiers came home to their families and farms. Peace "
    "brought music and art back to the cities of the north.",
]


@pytest.fixture(scope="module")
def engine():
    return tiny_engine()


@pytest.fixture
def chat_tok(engine):
    tok = engine.tokenizer
    saved = getattr(tok, "chat_template", None)
    tok.chat_template = CHAT_TEMPLATE
    yield tok
    tok.chat_template = saved


@pytest.fixture
def pool(monkeypatch):
    p = example_pool.ExamplePool(PARAGRAPHS)
    monkeypatch.setattr(example_pool, "default_pool", lambda: p)
    return p


# ---------------------------------------------------------------- formats


def test_format_names_say_template_examples_and_opening():
    assert {"chat", "plain", "chat-prefix", "chat-nearest", "chat-nearest-prefix"} <= set(
        prompts.FORMAT_NAMES
    )
    f = prompts.get_format("plain-nearest-prefix", 5)
    assert (f.template, f.nearest, f.prefix) == ("plain", True, True)
    assert all(prompts.get_format(n, 5).name == n for n in prompts.FORMAT_NAMES)


def test_auto_asks_each_systems_measured_default_in_the_template_the_tokenizer_has(
    engine, chat_tok
):
    for shots in (0, 5):
        want = prompts.DEFAULT_FORMATS[shots]
        assert prompts.get_format("auto", shots, chat_tok).name == want
        assert prompts.get_format(None, shots, chat_tok).name == want
    chat_tok.chat_template = None  # a base model without a chat template: plain
    assert prompts.get_format("auto", 5, chat_tok).template == "plain"


def test_a_chat_format_on_a_tokenizer_without_a_chat_template_is_refused_in_a_sentence(engine):
    with pytest.raises(InputError, match="no chat template: ask in a plain format"):
        engine.infill_prompted("the cat [blank] on the mat .", prompted={"format": "chat"})
    with pytest.raises(InputError, match="format must be auto or one of chat, "):
        engine.infill_prompted("the cat [blank] on the mat .", prompted={"format": "fancy"})
    with pytest.raises(InputError, match="prompt_no_copy must be a whole number"):
        engine.infill_prompted("the cat [blank] on the mat .", prompted={"no_copy": -1})


@pytest.mark.parametrize(
    "left, opening",
    [
        ("It rained. The river flooded after three days of heavy ", "The river flooded after "
         "three days of heavy"),
        ("The river flooded after heavy", "The river flooded after heavy"),
        ("It rained. ", ""),  # between sentences: nothing to open with
        ("", ""),
        ("A list:\n", ""),
        ("It rained.\nThe town ", "The town"),
    ],
)  # fmt: skip
def test_the_reply_opens_with_the_blanks_sentence_before_it(left, opening):
    assert prompts.reply_opening(left) == opening


def test_a_long_sentences_opening_keeps_its_last_words():
    left = " ".join(f"w{i}" for i in range(40)) + " "
    assert prompts.reply_opening(left).split() == left.split()[-prompts.PREFIX_MAX_WORDS :]


def test_a_prefix_prompt_ends_with_the_opening_and_its_examples_open_the_same_way(chat_tok):
    query = "It rained all week. The river flooded after three days of heavy ___, so it closed."
    prompt = prompts.build_prompt(query, 5, chat_tok, "chat-prefix")
    assert prompt.endswith("<|im_start|>assistant\nThe river flooded after three days of heavy")
    # the fixed example "The river flooded after three days of heavy ___, so ..." -> "rain"
    assert "assistant\nThe river flooded after three days of heavy rain<|im_end|>" in prompt
    # an example whose blank stands between sentences keeps its bare answer
    assert "assistant\nHe bought a cookbook and a set of new pans.<|im_end|>" in prompt
    plain = prompts.build_prompt(query, 0, chat_tok, "chat")
    assert plain.endswith("<|im_start|>assistant\n")


def test_the_truth_is_scored_after_the_replys_opening(engine):
    tok = engine.tokenizer
    case = scoring.SpanCase(
        tok("the cat sat on the", add_special_tokens=False).input_ids,
        tok(" mat", add_special_tokens=False).input_ids,
        tok(" and the dog ran .", add_special_tokens=False).input_ids,
        "the cat sat on the ",
        "mat",
        " and the dog ran .",
    )
    ((row, n),) = scoring.prompted_rows(tok, [case], 0, "plain-prefix")
    prompt = prompts.build_prompt(case.blanked(prompts.BLANK), 0, tok, "plain-prefix")
    assert prompt.endswith("Answer: the cat sat on the")
    p = tok(prompt, add_special_tokens=False).input_ids
    answer = tok(" mat", add_special_tokens=False).input_ids
    assert row.ids[: len(p)] == p and row.ids[len(p) : len(p) + n] == answer


# ---------------------------------------------------------------- examples per passage


def test_nearest_examples_are_the_closest_training_passages_with_a_blank_of_the_same_kind(pool):
    between = pool.nearest("The Seine flows through Paris. ___ Tourists love the city.", 2)
    assert [e.kind for e in between] == ["sentence", "sentence"]
    assert "Paris" in between[-1].text  # the nearest comes last, next to the query
    inside = pool.nearest("The bridge over the ___ was closed after the rain.", 2)
    assert all(e.kind == "inside" for e in inside) and "river" in inside[-1].text
    assert pool.nearest("anything ___ here", 0) == []


def test_an_example_is_its_paragraphs_text_with_one_unit_blanked():
    for e in example_pool.ExamplePool(PARAGRAPHS).examples:
        assert e.text.count(example_pool.BLANK) == 1
        restored = e.text.replace(example_pool.BLANK, e.answer)
        assert any(restored.replace(" ", "") in p.replace(" ", "") for p in PARAGRAPHS)


def test_a_nearest_prompt_holds_the_pools_examples_not_the_fixed_ones(engine, pool):
    query = "Paris is a big city. ___ It has many museums."
    prompt = prompts.build_prompt(query, 2, engine.tokenizer, "plain-nearest")
    near = pool.nearest(query, 2)
    assert all(e.text in prompt and e.answer in prompt for e in near)
    assert not any(text in prompt for text, _ in prompts.EXAMPLES)
    r = engine.infill_prompted(
        "the cat [blank] on the mat .", shots=2, prompted={"format": "plain-nearest"}
    )
    assert r.system == "2-shot" and len(r.spans) == 1


def test_the_default_pool_reads_the_training_split_only(monkeypatch):
    from magnet_model import data

    asked = []

    def paragraphs(split="train", min_chars=200):
        asked.append(split)
        return PARAGRAPHS

    monkeypatch.setattr(data, "wikipedia_paragraphs", paragraphs)
    example_pool.default_pool.cache_clear()
    try:
        assert len(example_pool.default_pool()) > 0 and asked == ["train"]
    finally:
        example_pool.default_pool.cache_clear()


# ---------------------------------------------------------------- the copy guard


def test_the_copy_guard_refuses_the_word_that_would_complete_a_copied_run(engine):
    tok = engine.tokenizer
    one, two, three, four, five, six, paris = tok(
        "one two three four five six paris", add_special_tokens=False
    ).input_ids
    eos = tok.eos_token_id
    plan = {(5, one): [two], (6, two): [three], (7, three): [four], (8, four): [five]}
    plan |= {(9, five): [six, paris], (10, paris): [eos], (10, six): [eos]}
    source = "the count went one two three four five six seven [blank] and on"
    rules = ReplyRules(CopyGuard([source], 6))
    text, reason, _ = drive_reply(engine, [one], plan, "x ", " y", [], rules, 12)
    assert (text, reason, rules.blocked) == ("one two three four five paris", "end", 1)
    free = ReplyRules(None)  # no guard: the copy goes through
    assert (
        drive_reply(engine, [one], plan, "x ", " y", [], free, 12)[0]
        == "one two three four five six"
    )
    assert free.blocked == 0


def test_a_fill_records_how_often_the_guard_refused_a_token(engine, monkeypatch):
    tok = engine.tokenizer
    ids = tok("sat", add_special_tokens=False).input_ids

    def reply(runner, logits, pos, limit, s, stop, visible, left="", right="", rules=None):
        assert rules is not None and rules.guard is not None and rules.guard.run_words == 5
        rules.blocked += 3
        return "sat", "end", ids
        yield  # a generator, as answer_steps is

    monkeypatch.setattr(prompted, "answer_steps", reply)
    (span,) = engine.infill_prompted("the cat [blank] on the mat", prompted={"no_copy": 5}).spans
    assert (span.text, span.copy_blocks) == ("sat", 3)


def test_the_guard_runs_on_a_real_prompt_with_its_passage_and_examples(engine, monkeypatch):
    """The guard of a prompted fill is built from the passage (both sides of the blank), the
    examples and the instruction: any of them copied is refused."""
    seen = []
    real = prompted.ReplyRules

    def spy(guard, opened):
        seen.append(guard)
        return real(guard, opened)

    monkeypatch.setattr(prompted, "ReplyRules", spy)
    text = "one two three four five six seven [blank] paris france capital music art science"
    engine.infill_prompted(text, shots=5, prompted={"format": "plain"})
    (guard,) = seen
    assert guard.copies("two three four five six seven")
    assert guard.copies("paris france capital music art science")
    assert guard.copies("He bought a cookbook and a")  # an example's answer
    assert not guard.copies("seven paris france capital music art")  # across the blank
    seen.clear()
    engine.infill_prompted(text, shots=5, prompted={"format": "plain", "no_copy": 0})
    assert seen == [None]


def test_compare_infill_asks_each_prompted_system_in_its_own_format(engine, monkeypatch):
    asked = []
    real = prompts.build_prompt

    def spy(query, shots, tokenizer=None, fmt=None, examples=None):
        asked.append((shots, prompts.get_format(fmt, shots, tokenizer).name))
        return real(query, shots, tokenizer, fmt, examples)

    monkeypatch.setattr(prompts, "build_prompt", spy)
    formats = {"zero-shot": "plain-prefix", "five-shot": "plain"}
    engine.compare_infill("the cat [blank] on the mat .", ["zero-shot", "five-shot"],
                          prompted=engine.prompted_fill({"format": formats}))  # fmt: skip
    assert {(0, "plain-prefix"), (5, "plain")} <= set(asked)
    assert engine.prompt_formats(["magnet", "zero-shot", "five-shot"]) == {
        "zero-shot": "plain",
        "five-shot": "plain",
    }  # the tiny tokenizer has no chat template: the defaults in the plain template


# ---------------------------------------------------------------- the evaluator's flags


def _result(text: str, fill: str, blocks: int = 0) -> InfillResult:
    span = FilledSpan(fill, [], 0, len(fill), "end", copy_blocks=blocks)
    return InfillResult(text, text.replace("[blank]", fill), [span], "five-shot", "base",
                        0, 0.0, 0.0, 0.0, None)  # fmt: skip


def test_prompt_flags_name_chat_replies_copies_and_copied_examples():
    text = "The old mill stood by the river for two hundred years. [blank] It burned in 1920."
    results = [
        _result(text, "The old mill stood by the river."),
        _result(text, "I'm ready to help. What's your next question?"),
        _result(text, "He bought a cookbook and a set of new pans.", blocks=2),
        _result(text, "Farmers brought their grain to it every autumn."),
    ]
    flags = prompt_flags(results, 5, prompts.get_format("plain", 5))
    assert flags["copy"] == [True, False, False, False]
    assert flags["chat"] == [False, True, False, False]
    assert flags["example_copy"] == [False, False, True, False]
    assert flags["copy_blocked"] == [False, False, True, False]
    zero = prompt_flags(results, 0, prompts.get_format("plain", 0))  # no examples: no copy
    assert zero["example_copy"] == [False] * 4
