"""`python -m app`: load the model once, open the annotation store, serve the Gradio UI.

Tabs: Infill, Continue, Search, Rate (raters, by invite link), Admin (only when
MAGNET_ADMIN_PASSWORD is set). The handlers live in handlers.py; this file is layout, wiring
and start-up.
"""

from __future__ import annotations

import argparse
import dataclasses
import logging
import os
import sys
import time

import gradio as gr

from annotation_db import AnnotationError, AnnotationStore
from magnet_model.engine import Engine
from magnet_model.errors import MagnetError, ModelLoadError
from magnet_model.settings import ModelSpec, add_model_args

from .gpu import HAS_SPACES
from .handlers import (
    CONTINUE_SYSTEMS,
    INFILL_SYSTEMS,
    MARKER,
    MAX_LIKERT,
    MAX_OUTPUTS,
    SEARCH_SYSTEMS,
    TITLES,
    MagnetApp,
)
from .settings import AppSettings

log = logging.getLogger("app")

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
QUESTION_CHOICES = ["appropriate", "likert:fluency", "likert:coherence", "preference", "comment"]
INSERT_BLANK_JS = f"""(t) => {{
  const el = document.querySelector('#infill-text textarea');
  t = t || '';
  const s = el && el.selectionStart != null ? el.selectionStart : t.length;
  const e = el && el.selectionEnd != null ? el.selectionEnd : s;
  return t.slice(0, s) + '{MARKER}' + t.slice(e);
}}"""
MODEL = {"concurrency_id": "model"}  # generation and embedding share the one model
RATING = {"concurrency_id": "rating", "concurrency_limit": 8}  # never waits behind MODEL


def _decoding_controls(app: MagnetApp) -> list:
    with gr.Accordion("Decoding", open=False), gr.Row():
        sampling = gr.Radio(["greedy", "sampled"], value="greedy", label="Decoding")
        temperature = gr.Slider(0.05, 2.0, value=0.8, step=0.05, label="Temperature")
        top_p = gr.Slider(0.05, 1.0, value=0.95, step=0.05, label="Top-p")
        seed = gr.Number(value=-1, precision=0, label="Seed (-1: random)")
    return [sampling, temperature, top_p, seed]


def _infill_tab(app: MagnetApp) -> None:
    gr.Markdown(
        f"Type a text and put `{MARKER}` where words are missing (up to 8 blanks). "
        "MAGNET fills each blank using the text on both sides; the base model is asked in a "
        "prompt (zero-shot and five-shot)."
    )
    text = gr.Textbox(
        label="Text with blanks",
        lines=4,
        max_length=app.settings.max_input_chars,
        elem_id="infill-text",
    )
    with gr.Row():
        insert = gr.Button(f"Insert {MARKER} at the cursor", size="sm")
        blind = gr.Checkbox(label="Compare blind (vote before the names are shown)")
    gr.Examples(INFILL_EXAMPLES, inputs=text)
    decoding = _decoding_controls(app)
    span_max = app.settings.max_span_tokens
    max_span = gr.Slider(1, span_max, value=min(12, span_max), step=1, label="Max span tokens")
    fill = gr.Button("Fill the blanks", variant="primary", elem_id="infill-run")
    outputs = []
    with gr.Row():
        for system in INFILL_SYSTEMS:
            with gr.Column(elem_classes="infill-col"):
                outputs += [
                    gr.Markdown(f"### {TITLES[system]}"),
                    gr.HighlightedText(label="Filled text", show_legend=False),
                    gr.Markdown(),
                ]
    state = gr.State(None)
    with gr.Row(visible=False) as vote_row:
        choice = gr.Radio(["A", "B", "C", "tie", "all_bad"], label="Which is best?")
        vote = gr.Button("Vote")
    reveal = gr.Markdown()
    insert.click(None, inputs=text, outputs=text, js=INSERT_BLANK_JS, queue=False)
    fill.click(
        app.infill,
        inputs=[text, *decoding, max_span, blind],
        outputs=[*outputs, state, vote_row, reveal],
        api_name="infill",
        **MODEL,
    )
    vote.click(app.vote, inputs=[state, choice], outputs=[reveal, state], **RATING)


def _continue_tab(app: MagnetApp) -> None:
    gr.Markdown(
        "The same prompt continued by MAGNET, the base model and the LLM2Vec-style model, "
        "streamed side by side. Rep-4: share of repeated 4-grams; Rep-Sen: share of repeated "
        "sentences; distinct-n: share of unique n-grams (on words)."
    )
    prompt = gr.Textbox(label="Prompt", lines=3, max_length=app.settings.max_input_chars)
    gr.Examples(CONTINUE_EXAMPLES, inputs=prompt)
    top = app.settings.max_new_tokens
    length = gr.Slider(1, top, value=min(48, top), step=1, label="Max new tokens")
    decoding = _decoding_controls(app)
    run = gr.Button("Continue", variant="primary", elem_id="continue-run")
    outputs = []
    with gr.Row():
        for system in CONTINUE_SYSTEMS:
            with gr.Column():
                gr.Markdown(f"### {TITLES[system]}")
                outputs += [gr.Textbox(label="Continuation", lines=8), gr.Markdown()]
    run.click(
        app.continue_,
        inputs=[prompt, length, *decoding],
        outputs=outputs,
        api_name="continue",
        **MODEL,
    )


def _search_tab(app: MagnetApp) -> None:
    gr.Markdown(
        "Search a corpus with four encoders. The default corpus is held-out Wikipedia text "
        "(vital-article extracts and passages, never trained on); upload a .txt (one passage "
        "per line), .csv (a `text` column) or .jsonl (a `text` field) to search your own. "
        "Corpus vectors are computed once per model and corpus, then cached on disk."
    )
    with gr.Row():
        query = gr.Textbox(label="Query", max_length=app.settings.max_input_chars, scale=3)
        k = gr.Slider(1, 20, value=5, step=1, label="Top k", scale=1)
    upload = gr.File(label="Corpus (optional)", file_types=[".txt", ".csv", ".jsonl"])
    gr.Examples(SEARCH_EXAMPLES, inputs=query)
    run = gr.Button("Search", variant="primary", elem_id="search-run")
    tables = []
    with gr.Row():
        for system in SEARCH_SYSTEMS:
            with gr.Column():
                gr.Markdown(f"### {TITLES[system]}")
                tables.append(
                    gr.Dataframe(headers=["rank", "score", "passage"], wrap=True, max_height=420)
                )
    overlap = gr.Dataframe(label="Shared passages between the top-k lists", interactive=False)
    note = gr.Textbox(label="Corpus and timing", interactive=False)
    run.click(app.search, inputs=[query, upload, k], outputs=[*tables, overlap, note], **MODEL)


def _rate_tab(app: MagnetApp, demo: gr.Blocks) -> None:
    gr.Markdown(
        "Rate filled-in texts for a study. Open your invite link, or paste its token. "
        "Items come one at a time; you can stop and come back later with the same link."
    )
    with gr.Row():
        token = gr.Textbox(label="Invite token", type="password", scale=3, elem_id="rate-token")
        open_btn = gr.Button("Open", scale=1, elem_id="rate-open")
    head = gr.Textbox(label="Study and instructions", interactive=False, lines=3)
    status = gr.Markdown()
    assignment = gr.State(None)
    item_text = gr.Textbox(label="Text with blanks", interactive=False, lines=3)
    slots, answers = [], []
    for _ in range(MAX_OUTPUTS):
        with gr.Group(visible=False) as group:
            title = gr.Markdown()
            shown = gr.HighlightedText(label="Filled text", show_legend=False)
            appropriate = gr.Radio(["Yes", "No"], label="Appropriate?", visible=False)
            likerts = [gr.Radio([], visible=False) for _ in range(MAX_LIKERT)]
        slots += [group, title, shown, appropriate, *likerts]
        answers += [appropriate, *likerts]
    preference = gr.Radio([], label="Which output is best?", visible=False)
    comment = gr.Textbox(label="Comment (optional)", visible=False, max_length=2000)
    submit = gr.Button("Submit and next", variant="primary", visible=False, elem_id="rate-submit")
    view = [head, status, assignment, item_text, *slots, preference, comment, submit]
    demo.load(app.rate_load, inputs=token, outputs=[token, *view], **RATING)
    open_btn.click(app.rate_open, inputs=token, outputs=view, **RATING)
    submit.click(
        app.rate_submit,
        inputs=[token, assignment, *answers, preference, comment],
        outputs=view,
        **RATING,
    )


def _admin_tab(app: MagnetApp) -> None:
    authorized = gr.State(False)
    with gr.Row():
        password = gr.Textbox(label="Admin password", type="password", scale=3)
        login = gr.Button("Log in", scale=1)
    login_msg = gr.Markdown()
    with gr.Column(visible=False) as panel:
        gr.Markdown("### New study")
        with gr.Row():
            name = gr.Textbox(label="Study name")
            upload = gr.File(
                label="Items (.jsonl/.csv; default: built-in Wikipedia)",
                file_types=[".jsonl", ".csv"],
            )
        with gr.Row():
            n_items = gr.Slider(2, 200, value=10, step=1, label="Items")
            raters = gr.Slider(1, 10, value=3, step=1, label="Raters per item")
            n_gold = gr.Slider(0, 10, value=2, step=1, label="Attention checks")
            span = gr.Slider(1, app.settings.max_span_tokens, value=12, step=1, label="Max span")
        systems = gr.CheckboxGroup(
            list(INFILL_SYSTEMS), value=list(INFILL_SYSTEMS), label="Systems"
        )
        questions = gr.CheckboxGroup(
            QUESTION_CHOICES, value=["appropriate", "preference"], label="Questions"
        )
        instructions = gr.Textbox(label="Instructions for raters", lines=3)
        create = gr.Button("Generate outputs and create the study", variant="primary")
        create_msg = gr.Textbox(label="Result", interactive=False)
        gr.Markdown("### Studies")
        with gr.Row():
            study = gr.Dropdown([], label="Study", allow_custom_value=False)
            refresh = gr.Button("Refresh list", size="sm")
        names = gr.Textbox(label="Rater names, one per line", lines=3)
        invite = gr.Button("Create invite links")
        links = gr.Dataframe(headers=["rater", "invite link"], interactive=False, wrap=True)
        with gr.Row():
            prog_btn = gr.Button("Progress")
            results_btn = gr.Button("Results")
        prog_summary = gr.Textbox(label="Progress", interactive=False)
        prog_rows = gr.Dataframe(
            headers=["rater", "done", "open", "remaining", "checks", "failed"], interactive=False
        )
        results_json = gr.JSON(label="Results")
        results_plot = gr.Plot(label="Judged appropriate (95% interval)")
        with gr.Row():
            fmt = gr.Radio(["csv", "jsonl"], value="csv", label="Export format")
            export = gr.Button("Export ratings")
            backup = gr.Button("Back up the database")
        files = gr.File(label="Download")
    login.click(app.admin_login, inputs=password, outputs=[authorized, panel, login_msg], **RATING)
    login.click(app.admin_studies, inputs=authorized, outputs=study, **RATING)
    refresh.click(app.admin_studies, inputs=authorized, outputs=study, **RATING)
    create.click(
        app.admin_create,
        inputs=[authorized, name, upload, n_items, systems, questions, raters, n_gold]
        + [instructions, span],
        outputs=[create_msg, study],
        **MODEL,
    )
    invite.click(app.admin_invite, inputs=[authorized, study, names], outputs=links, **RATING)
    prog_btn.click(
        app.admin_progress, inputs=[authorized, study], outputs=[prog_summary, prog_rows], **RATING
    )
    results_btn.click(
        app.admin_results,
        inputs=[authorized, study],
        outputs=[results_json, results_plot],
        **RATING,
    )
    export.click(app.admin_export, inputs=[authorized, study, fmt], outputs=files, **RATING)
    backup.click(app.admin_backup, inputs=authorized, outputs=files, **RATING)


def build_demo(app: MagnetApp) -> gr.Blocks:
    """The whole UI; queue: one model call at a time (setting), bounded waiting line."""
    adapters = ", ".join(app.engine.adapter_names) or "none"
    missing = [n for n in ("magnet", "llm2vec") if n not in app.engine.adapter_names]
    with gr.Blocks(title="MAGNET") as demo:
        gr.Markdown(
            "# MAGNET\nOne decoder LLM that infills (left and right context), continues text "
            f"and embeds sentences. Base model: `{app.engine.loaded.source}`; adapters: "
            f"{adapters}."
            + (f" Not loaded: {', '.join(missing)} (shown as unavailable)." if missing else "")
        )
        with gr.Tab("Infill", id="infill"):
            _infill_tab(app)
        with gr.Tab("Continue", id="continue"):
            _continue_tab(app)
        with gr.Tab("Search", id="search"):
            _search_tab(app)
        with gr.Tab("Rate", id="rate"):
            _rate_tab(app, demo)
        if app.settings.admin_password:
            with gr.Tab("Admin", id="admin"):
                _admin_tab(app)
    demo.queue(default_concurrency_limit=app.settings.concurrency, max_size=app.settings.queue_size)
    return demo


def load_engine(spec: ModelSpec) -> tuple[Engine, dict[str, str]]:
    """The engine with every adapter that loads; one that does not is reported, not fatal."""
    adapters = dict(spec.adapters)
    unavailable: dict[str, str] = {}
    while True:
        try:
            return Engine.from_spec(dataclasses.replace(spec, adapters=adapters)), unavailable
        except ModelLoadError as e:
            bad = next((n for n in adapters if f"'{n}'" in str(e)), None)
            if bad is None:
                raise
            log.warning("Adapter %s is unavailable: %s", bad, e)
            unavailable[bad] = str(e)
            del adapters[bad]


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description="Serve the MAGNET demo.")
    add_model_args(parser)
    parser.add_argument("--host", default=os.environ.get("GRADIO_SERVER_NAME", "127.0.0.1"))
    parser.add_argument(
        "--port", type=int, default=int(os.environ.get("GRADIO_SERVER_PORT", "7860"))
    )
    parser.add_argument("--db-path", help="SQLite file of the rating studies (MAGNET_DB_PATH)")
    parser.add_argument("--db-url", help="SQLAlchemy URL of the rating studies (MAGNET_DB_URL)")
    args = parser.parse_args(argv)
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(name)s: %(message)s")
    t0 = time.perf_counter()
    try:
        settings = AppSettings.from_env()
        spec = ModelSpec.from_args(args)
        engine, unavailable = load_engine(spec)
        store = AnnotationStore(url=args.db_url, path=args.db_path)
    except (MagnetError, AnnotationError) as e:
        print(f"error: {e}", file=sys.stderr)
        return 2
    log.info(
        "Model %s on %s (%s); adapters: %s",
        engine.loaded.source,
        engine.device,
        engine.dtype,
        engine.loaded.adapters or "none",
    )
    log.info("Rating studies in %s", store.db.engine.url.render_as_string(hide_password=True))
    log.info("Cache in %s; ZeroGPU: %s", spec.cache_dir, HAS_SPACES)
    log.info("Admin tab: %s", "on" if settings.admin_password else "off (MAGNET_ADMIN_PASSWORD)")
    app = MagnetApp(engine, store, settings, spec.cache_dir, unavailable)
    demo = build_demo(app)
    log.info("Ready to launch after %.1f s", time.perf_counter() - t0)
    demo.launch(
        server_name=args.host,
        server_port=args.port,
        max_file_size=f"{settings.max_upload_mb}mb",
    )
    return 0
