"""The demo tabs' layout and wiring: Infill (with the blind vote), Continue and Search.

Their handlers are demo.py's (DemoHandlers); main.build_demo puts these tabs on the page.
"""

from __future__ import annotations

import gradio as gr

from magnet_model.systems import TITLES

from .demo import BLIND_CHOICES, DemoHandlers, sampling_controls
from .model_calls import CONTINUE_SYSTEMS, SEARCH_SYSTEMS
from .outputs import (
    ContinueColumn,
    ContinueView,
    InfillColumn,
    InfillView,
    SearchView,
    VoteView,
    gradio_fn,
    said_in,
)
from .rater_page import RATING
from .render import choices
from .studies import INFILL_SYSTEMS, MARKER

INFILL_EXAMPLES = [
    "The Eiffel Tower is a wrought-iron [blank] in Paris, France.",
    "She opened the door, [blank], and sat down by the fire.",
    "Water boils at 100 degrees Celsius [blank] at sea level.",
]
CONTINUE_EXAMPLES = [
    "The capital of France is",
    "Photosynthesis is the process by which plants",
    "In 1969, the first humans to walk on the Moon",
]
SEARCH_EXAMPLES = ["a political philosophy without a state", "ancient Greek mathematics"]
INSERT_BLANK_JS = f"""(t) => {{
  const el = document.querySelector('#infill-text textarea');
  t = t || '';
  const s = el && el.selectionStart != null ? el.selectionStart : t.length;
  const e = el && el.selectionEnd != null ? el.selectionEnd : s;
  const before = t.slice(0, s), after = t.slice(e);  // a space on each side, unless one is there
  const left = before && !/\\s$/.test(before) ? ' ' : '';
  const right = after && !/^[\\s.,;:!?]/.test(after) ? ' ' : '';
  return before + left + '{MARKER}' + right + after;
}}"""
# Generation and embedding share the one model. Each model call has a validator (demo.py's
# *_admit), which Gradio runs when the call joins the queue, from the page or any API client:
# the input checks are told at once ("The text is empty." never waits behind a generation) and
# the demo quota counts the call then, only when it passed them. Said on the input, so no
# "Error" pill is left on the outputs.
MODEL = {"concurrency_id": "model"}


def _decoding_controls(app: DemoHandlers, blind: gr.Checkbox | None = None) -> list:
    """Decoding, temperature, top-p and seed. Temperature and top-p are greyed out while they
    do nothing (greedy, and not blind: a blind comparison is always sampled; tour p9)."""
    with gr.Accordion("Decoding settings", open=False), gr.Row():
        sampling = gr.Radio(["greedy", "sampled"], value="greedy", label="Decoding")
        temperature = gr.Slider(
            0.05, 2.0, value=0.8, step=0.05, label="Temperature", interactive=False
        )
        top_p = gr.Slider(0.05, 1.0, value=0.95, step=0.05, label="Top-p", interactive=False)
        # text, parsed as a whole number by the handler: a number box rounds through a float
        # (2**63 - 1 became 2**63) and fails on "abc" before any handler could say why
        seed = gr.Textbox(value="-1", label="Seed (-1: random)", max_lines=1)
    switches = [sampling] if blind is None else [sampling, blind]
    for box in switches:
        box.change(
            sampling_controls,
            inputs=switches,
            outputs=[temperature, top_p],
            api_visibility="private",
            **RATING,
        )
    return [sampling, temperature, top_p, seed]


def infill_tab(app: DemoHandlers) -> None:
    gr.Markdown(
        f"Type a text and put `{MARKER}` where words are missing (up to 8 blanks). "
        "MAGNET fills each blank using the text on both sides; the base model is asked in a "
        "prompt (zero-shot and five-shot)."
    )
    text = gr.Textbox(
        label="Text with blanks",
        lines=4,
        elem_id="infill-text",
        placeholder=f"The Eiffel Tower is a wrought-iron {MARKER} in Paris, France.",
    )
    with gr.Row():
        insert = gr.Button(f"Insert {MARKER} at the cursor", size="sm")
        blind = gr.Checkbox(label="Compare blind (vote before the names are shown)")
    gr.Examples(INFILL_EXAMPLES, inputs=text)
    decoding = _decoding_controls(app, blind)
    span_max = app.settings.max_span_tokens
    max_span = gr.Slider(
        1,
        span_max,
        value=min(12, span_max),
        step=1,
        label="Max span tokens",
        info="Caps a blank inside a sentence. A blank between sentences is filled until its "
        "sentence ends (MAGNET: up to a sentence's length), whatever this says.",
    )
    fill = gr.Button("Fill the blanks", variant="primary", elem_id="infill-run")
    columns, filled, titles, infos = [], [], [], []
    with gr.Row():
        for system in INFILL_SYSTEMS:
            with gr.Column(elem_classes="infill-col"):
                title = gr.Markdown(f"### {TITLES[system]}")
                filled.append(gr.HTML(elem_classes="filled-box"))
                info = gr.Markdown()
                columns.append(InfillColumn.wire(title=title, filled=filled[-1], info=info))
                titles.append(title)
                infos.append(info)
    gr.Markdown(
        "The systems run together, as rows of one batch: each *done after* is when that "
        "system's last blank was filled, not a time of its own.",
        elem_classes="batch-note",
    )
    state = gr.State(None)
    with gr.Row(visible=False) as vote_row:
        choice = gr.Radio(choices(BLIND_CHOICES), label="Which is best?")
        vote = gr.Button("Vote")
    reveal = gr.Markdown()
    insert.click(None, inputs=text, outputs=text, js=INSERT_BLANK_JS, queue=False)
    fill.click(
        gradio_fn(app.infill),
        inputs=[text, *decoding, max_span, blind],
        validator=app.infill_admit,
        outputs=InfillView.wire(columns=columns, state=state, vote_row=vote_row, reveal=reveal),
        show_progress_on=filled,  # on the filled texts only
        api_name="infill",
        **MODEL,
    )
    # a refusal is said in the reveal line (off the queue, Gradio would show no toast)
    vote_view = VoteView.wire(reveal=reveal, state=state, titles=titles, infos=infos)
    vote.click(
        said_in(app.vote, len(vote_view), 0), inputs=[state, choice], outputs=vote_view, **RATING
    )


def continue_tab(app: DemoHandlers) -> None:
    gr.Markdown(
        "The same prompt continued by MAGNET, the base model and the LLM2Vec-style model, "
        "streamed side by side. Rep-4: share of repeated 4-grams; Rep-Sen: share of repeated "
        "sentences; distinct-n: share of unique n-grams (on words)."
    )
    prompt = gr.Textbox(label="Prompt", lines=3)
    gr.Examples(CONTINUE_EXAMPLES, inputs=prompt)
    top = app.settings.max_new_tokens
    length = gr.Slider(1, top, value=min(48, top), step=1, label="Max new tokens")
    decoding = _decoding_controls(app)
    loop_guard = gr.Checkbox(
        False,
        label="Loop guard",
        info="No 3-gram of tokens twice in a continuation, for all three systems alike. Off: "
        "the raw models, as the paper compares them.",
    )
    run = gr.Button("Continue", variant="primary", elem_id="continue-run")
    columns = []
    with gr.Row():
        for system in CONTINUE_SYSTEMS:
            with gr.Column():
                gr.Markdown(f"### {TITLES[system]}")
                text = gr.Textbox(label="Continuation", lines=8)
                columns.append(ContinueColumn.wire(text=text, stats=gr.Markdown()))
    run.click(
        gradio_fn(app.continue_),
        inputs=[prompt, length, *decoding, loop_guard],
        validator=app.continue_admit,
        outputs=ContinueView.wire(columns=columns),
        api_name="continue",
        **MODEL,
    )


def search_tab(app: DemoHandlers) -> None:
    gr.Markdown(
        "Search a corpus with four encoders. The default corpus is held-out Wikipedia text "
        "(vital-article extracts and passages, never trained on); upload a .txt (one passage "
        "per line), .csv (a `text` column) or .jsonl (a `text` field) to search your own. "
        "Corpus vectors are computed once per model and corpus, then cached on disk. Scores "
        "are cosine similarities between the query's vector and each passage's vector (1: "
        "same direction). Each model spreads its scores differently, so compare the ranks "
        "across models, not the scores."
    )
    with gr.Row():
        query = gr.Textbox(label="Query", scale=3)
        k = gr.Slider(1, 20, value=5, step=1, label="Top k", scale=1)
    upload = gr.File(label="Corpus (optional)", file_types=[".txt", ".csv", ".jsonl"])
    gr.Examples(SEARCH_EXAMPLES, inputs=query)
    run = gr.Button("Search", variant="primary", elem_id="search-run")
    note = gr.Textbox(label="Corpus and timing", interactive=False)
    tables = []
    for pair in (SEARCH_SYSTEMS[:2], SEARCH_SYSTEMS[2:]):  # a 2 x 2 grid; stacked on a phone
        with gr.Row(equal_height=False):
            for system in pair:
                with gr.Column(min_width=320):
                    tables.append(
                        gr.Dataframe(
                            headers=["#", "cosine", "passage"],
                            label=TITLES[system],
                            wrap=True,
                            max_height=4000,  # five rows, no scroll inside the page's
                            interactive=False,
                            column_widths=["12%", "21%", "67%"],
                            elem_classes="search-table",
                        )
                    )
    # plain HTML, its systems named short (model_calls): it fits a phone without scrolling
    # sideways (a Dataframe keeps fixed-width header cells that scrolled ~70 px at 390 px)
    overlap = gr.HTML(elem_classes="overlap-table")
    run.click(
        gradio_fn(app.search),
        inputs=[query, upload, k],
        validator=app.search_admit,
        outputs=SearchView.wire(tables=tables, overlap=overlap, note=note),
        show_progress_on=note,  # one progress bar, not one per table
        **MODEL,
    )
