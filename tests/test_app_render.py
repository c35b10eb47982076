"""What people read: labels for codes, counts in words, the model by name, filled text as one
escaped paragraph."""

from __future__ import annotations

from app import render


def test_codes_become_labels_and_counts_agree():
    assert render.choices(["A", "tie", "all_bad"]) == [
        ("Output A", "A"),
        ("A tie", "tie"),
        ("All are bad", "all_bad"),
    ]
    assert render.QUESTION_LABELS["likert:fluency"] == "Fluency (1-5 per output)"
    assert render.plural(1, "attention check") == "1 attention check"
    assert render.plural(3, "passage") == "3 passages"


def test_the_model_is_described_by_name_never_by_server_path(tmp_path):
    cache = "/root/.cache/magnet/embedded/SmolLM2-135M-Instruct"
    assert render.model_description("embedded", cache, "cpu") == (
        "SmolLM2-135M-Instruct (built in), on the CPU"
    )
    folder = tmp_path / "my-llama"
    folder.mkdir()
    assert render.model_name(str(folder), str(folder)) == "my-llama"
    assert render.model_name("/srv/models/x.gguf", "/srv/models/x.gguf") == "x.gguf"
    assert render.model_description("meta-llama/Llama-2-7b-hf", "hub", "cuda:0") == (
        "meta-llama/Llama-2-7b-hf, on a GPU"
    )


def test_filled_html_is_one_paragraph_with_inline_escaped_fills():
    pieces = [("<b>x</b> Welling", None), ("ton", "blank 1"), (" is & ", None), ("", "blank 2")]
    out = render.filled_html(pieces)
    assert out.startswith('<p class="filled" dir="auto">') and out.count("<p") == 1
    assert "&lt;b&gt;x&lt;/b&gt; Welling" in out and " is &amp; " in out
    assert '<mark class="fill" title="blank 1">ton<sup class="fill-n">1</sup></mark>' in out
    assert 'title="blank 2">&#8203;<sup' in out  # an empty fill still shows where it is
    single = render.filled_html([("a ", None), ("b", "blank 1")])
    assert "<sup" not in single  # one blank: no number
    assert render.fills_pieces("a [blank] c", "[blank]", "a b c", ["b"]) == [
        ("a ", None),
        ("b", "blank 1"),
        (" c", None),
    ]
    assert render.fills_pieces("a [blank] c", "[blank]", "a b c", ["b", "x"]) == [("a b c", None)]


def test_table_html_heads_rows_and_escapes_every_cell():
    out = render.table_html("Top-5 <b>lists</b>", ["system", "A&B"], [["<i>x</i>", 3], ["y", 0]])
    assert out.startswith('<table class="small-table"><caption>Top-5 &lt;b&gt;lists')
    assert '<th scope="col">A&amp;B</th>' in out
    assert '<tr><th scope="row">&lt;i&gt;x&lt;/i&gt;</th><td>3</td></tr>' in out
    assert "<i>" not in out and out.count("<tr>") == 3
