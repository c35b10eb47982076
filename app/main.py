"""`python -m app`: load the model once, open the annotation store, serve the Gradio UI.

Tabs: Infill, Continue, Search, Admin (only when MAGNET_ADMIN_PASSWORD is set); raters get a
page of their own at /rate (rater_page.py), which invite links open. The handlers live in
demo.py, admin.py and rater.py, put together as handlers.MagnetApp; this file is layout,
wiring and start-up.
"""

from __future__ import annotations

import argparse
import atexit
import errno
import logging
import os
import socket
import sys
import threading
import time
from pathlib import Path

import gradio as gr
from gradio.utils import get_upload_folder
from starlette.middleware import Middleware
from starlette.routing import Route

from annotation_db import PROBLEMS, AnnotationError, AnnotationStore
from annotation_db.planner import DEFAULT_ICC, DEFAULT_RATES
from annotation_db.results import MIN_N
from annotation_db.settings import load_store_settings
from magnet_model import systems
from magnet_model.errors import MagnetError, ModelLoadError
from magnet_model.inference.engine import Engine
from magnet_model.loading import load_model
from magnet_model.passages import SENTENCE_SPAN_TOKENS
from magnet_model.settings import ModelSpec, add_model_args
from magnet_model.systems import TITLES

from .admin import NOT_CONFIRMED, STATUS_CHOICES
from .blinding import POLICY_FILE, DemoPolicy
from .demo import BLIND_CHOICES, sampling_controls
from .gpu import has_spaces, server_spec, zero_gpu
from .handlers import MagnetApp
from .model_calls import CONTINUE_SYSTEMS, SEARCH_SYSTEMS, default_corpus
from .outputs import (
    AdminInvites,
    AdminPanel,
    AdminProgress,
    AdminResults,
    ContinueColumn,
    ContinueView,
    DropStep,
    InfillColumn,
    InfillView,
    OutputCheck,
    SearchView,
    StudyForm,
    VoteView,
    gradio_fn,
    said_in,
)
from .rater_page import RATING as RATING_EVENTS
from .rater_page import REDIRECT_JS, add_rater_page
from .render import QUESTION_LABELS, choices, model_description
from .security import (
    ADMIN_SESSION_ROUTE,
    DOWNLOAD_ROUTE,
    MAX_REQUEST_BYTES,
    UPLOAD_OVERHEAD_BYTES,
    PrivateDownloads,
    RequestGuard,
    UploadQuota,
    parse_networks,
)
from .settings import AppSettings, proxy_env
from .studies import FORM_CHECKS, INFILL_SYSTEMS, ITEM_KINDS, MARKER

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
QUESTION_CHOICES = [(label, spec) for spec, label in QUESTION_LABELS.items()]
# A system font stack: the default theme's web font cannot load offline, and its fallback drew
# the title as "MᴀGNET".
SYSTEM_FONTS = ["system-ui", "-apple-system", "Segoe UI", "Roboto", "Helvetica Neue", "Arial"]
MONO_FONTS = ["ui-monospace", "SFMono-Regular", "Menlo", "Consolas", "monospace"]
THEME = gr.themes.Default(font=SYSTEM_FONTS + ["sans-serif"], font_mono=MONO_FONTS)
CSS = """
.filled { white-space: pre-wrap; overflow-wrap: break-word; word-break: normal;
          line-height: 1.7; margin: 0.25em 0; font-size: 1.05em; }
.filled mark.fill { background: #fde68a; color: inherit; padding: 0.05em 0.2em;
                    border-radius: 0.25em; }
.filled sup.fill-n { font-size: 0.7em; color: #92400e; margin-left: 0.1em; }
.filled-box { padding: 0.5em 0.75em; }
/* the Infill columns: the text flush with its title, not ~33 px in (three paddings; tour p6) */
.infill-col .filled-box, .infill-col .html-container { padding-left: 0; padding-right: 0; }
.rate-msg { color: #b91c1c; font-weight: 600; padding: 0.5em 0; }
.rate-out-title { padding: 0.4em 0.75em; font-weight: 600; }
/* the rater page: an output's text flush with its title "Output A" (tour q4) */
.filled-box.html-container, .filled-box .html-container { padding-left: 0; padding-right: 0; }
.search-table table th, .results-table th, .results-table th * { white-space: nowrap !important; }
/* passages read as prose, not code; the table grows with its rows instead of scrolling */
.search-table table td { font-family: var(--font); }
/* a small table of numbers takes the width its cells need, never more than its column */
.small-table { border-collapse: collapse; margin: 0.5em 0; width: auto !important;
               max-width: 100%; font-size: 0.85em; }
.small-table caption { text-align: left; font-weight: 600; padding-bottom: 0.4em; }
.small-table th, .small-table td { border: 1px solid var(--border-color-primary);
                                   padding: 0.25em 0.35em !important; text-align: right;
                                   min-width: 0 !important; }
/* the overlap matrix: the column's width, not three paddings less (it must fit a phone) */
.overlap-table.block, .overlap-table .html-container { padding-left: 0; padding-right: 0; }
.small-table th[scope="row"], .small-table thead th:first-child { text-align: left; }
.nav-holder { display: none !important; }  /* the pages are reached by link, not a menu */
/* the rater page: no "Use via API" or "Settings" footer (raters need neither) */
body:has(#rate-message) footer { display: none !important; }
/* a text typed right-to-left (Arabic, Hebrew) shows right-to-left, line by line (tour n5) */
textarea { unicode-bidi: plaintext; }
"""
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
# Ratings and admin work skip the queue: demo traffic can fill the queue (its size caps every
# queued event together), and a rater's submit must never wait for it or fail with "queue full".
RATING = RATING_EVENTS
LOGIN_JS = f"""async (pw) => {{
  try {{
    const r = await fetch('{ADMIN_SESSION_ROUTE}', {{
      method: 'POST', credentials: 'same-origin', headers: {{'content-type': 'application/json'}},
      body: JSON.stringify({{password: pw || ''}})}});
    const j = await r.json();
    return ['', j.message || ''];
  }} catch (e) {{
    return ['', 'The server could not be reached; try again.'];
  }}
}}"""
LOGOUT_JS = f"""async () => {{
  try {{
    await fetch('{ADMIN_SESSION_ROUTE}', {{method: 'DELETE', credentials: 'same-origin'}});
    return 'Logged out.';
  }} catch (e) {{
    return 'The server could not be reached; try again.';
  }}
}}"""

# Revoking asks first (tour p10): the browser's own dialog; "no" reaches the handler as
# NOT_CONFIRMED, and nothing is revoked.
CONFIRM_REVOKE_JS = f"""(study, id) => {{
  if (!study || !String(id || '').trim()) return [study, id];  // the handler says what is missing
  const ok = window.confirm(`Revoke the invite link of rater ${{id}} in study "${{study}}"? `
    + 'It stops working at once (their answers are kept; a new link can be made).');
  return [study, ok ? id : {NOT_CONFIRMED!r}];
}}"""

# Creating a study waits for its background generation (app/jobs.py), not in the model's queue.
STUDY = {"concurrency_id": "study", "concurrency_limit": 4}
UPLOAD_CACHE = (600, 3600)  # (every, older than) seconds: Gradio's delete_cache


def _decoding_controls(app: MagnetApp, blind: gr.Checkbox | None = None) -> list:
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


def _infill_tab(app: MagnetApp) -> None:
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
    max_span = gr.Slider(1, span_max, value=min(12, span_max), step=1, label="Max span tokens")
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


def _continue_tab(app: MagnetApp) -> None:
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
        inputs=[prompt, length, *decoding],
        validator=app.continue_admit,
        outputs=ContinueView.wire(columns=columns),
        api_name="continue",
        **MODEL,
    )


def _search_tab(app: MagnetApp) -> None:
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


def _admin_tab(app: MagnetApp) -> None:
    with gr.Row():
        password = gr.Textbox(label="Admin password", type="password", scale=3, elem_id="admin-pw")
        login = gr.Button("Log in", scale=1)
        # shown once logged in (admin_panel), never beside "Log in" before (tour q5)
        logout = gr.Button("Log out", scale=1, size="sm", elem_id="admin-logout", visible=False)
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
            paper = gr.Button("Paper protocol", size="sm", elem_id="admin-paper")
            gr.Markdown(
                "One sentence removed from each of 100 held-out passages; MAGNET, base "
                "zero-shot and five-shot; yes/no *contextually appropriate*; 3 raters per item; "
                "attention checks. Fills the form below."
            )
        unfinished = gr.Markdown()
        with gr.Row():
            item_kind = gr.Radio(
                list(ITEM_KINDS),
                value="words",
                label="Built-in items: blank 2-5 words, or one whole sentence",
            )
            n_items = gr.Slider(2, 400, value=10, step=1, label="Items")
            raters = gr.Slider(1, 10, value=3, step=1, label="Raters per item")
            n_gold = gr.Slider(0, 20, value=FORM_CHECKS, step=1, label="Attention checks")
            span_top = max(app.settings.max_span_tokens, SENTENCE_SPAN_TOKENS)
            span = gr.Slider(1, span_top, value=12, step=1, label="Max span tokens")
        with gr.Row():
            # no minimum/maximum: the planner says in its own line what is out of range, where
            # Gradio's check would answer with its raw "Value 1.5 is greater than ..."
            p1 = gr.Number(DEFAULT_RATES[0], label="Expected rate, system 1")
            p2 = gr.Number(DEFAULT_RATES[1], label="Expected rate, system 2")
            icc = gr.Number(DEFAULT_ICC, label="Assumed intra-item correlation")
        plan = gr.Markdown(
            app.admin_plan(*DEFAULT_RATES, 3, DEFAULT_ICC, 10, FORM_CHECKS), elem_id="admin-plan"
        )
        systems = gr.CheckboxGroup(
            [(TITLES[s], s) for s in INFILL_SYSTEMS], value=list(INFILL_SYSTEMS), label="Systems"
        )
        questions = gr.CheckboxGroup(
            QUESTION_CHOICES, value=["appropriate", "preference"], label="Questions"
        )
        instructions = gr.Textbox(label="Instructions for raters", lines=3)
        create = gr.Button("Generate outputs and create the study", variant="primary")
        create_msg = gr.Textbox(label="Result", interactive=False, elem_id="admin-create-msg")
        gr.Markdown("### Studies")
        with gr.Row():
            study = gr.Dropdown([], label="Study", allow_custom_value=False, elem_id="admin-study")
            refresh = gr.Button("Refresh list", size="sm")
        gr.Markdown("#### Check the outputs before inviting raters")
        check_report = gr.Markdown(elem_id="admin-check-report")
        with gr.Row():
            problems = gr.CheckboxGroup(
                [(f"{p} ({why})", p) for p, why in PROBLEMS],
                value=[p for p, _ in PROBLEMS],
                label="Act on outputs flagged as",
                scale=3,
            )
            with gr.Column(scale=1, min_width=200):
                check = gr.Button("Check outputs", size="sm", elem_id="admin-check")
                regenerate = gr.Button(
                    "Make flagged outputs again", size="sm", elem_id="admin-regenerate"
                )
                drop = gr.Button("Drop items with flagged outputs", size="sm", elem_id="admin-drop")
        check_msg = gr.Markdown(elem_classes="rate-msg", elem_id="admin-check-msg")
        gr.Markdown("#### Invite raters")
        names = gr.Textbox(label="Rater names, one per line", lines=3)
        invite = gr.Button("Create invite links (pick a study)", elem_id="admin-invite")
        invite_msg = gr.Markdown(elem_classes="rate-msg", elem_id="admin-invite-msg")
        links = gr.Dataframe(headers=["rater", "invite link"], interactive=False, wrap=True)
        with gr.Row():
            prog_btn = gr.Button("Progress")
            results_btn = gr.Button("Results")
        results_msg = gr.Markdown(elem_classes="rate-msg")
        prog_summary = gr.Textbox(label="Progress", interactive=False)
        prog_rows = gr.Dataframe(
            headers=["id", "rater", "done", "open", "remaining", "checks", "failed", "invite"],
            interactive=False,
        )
        with gr.Row():
            # the picked study's own status (admin_study_status), never a preset one
            status = gr.Radio(list(STATUS_CHOICES), value=None, label="Study status")
            set_status = gr.Button("Set status")
            # text, read by the handler: a number box shows "0" before anything is typed, and
            # its range check answers with Gradio's raw sentence before the handler's own
            rater_id = gr.Textbox(label="Rater id (see Progress)", max_lines=1, elem_id="rater-id")
            new_link = gr.Button("New invite link for this rater")
            revoke = gr.Button("Revoke this rater's invite link", variant="stop")
        with gr.Row():
            keep_demo = gr.Checkbox(
                False,
                label="Keep the demo tabs on while this study has raters (they could learn "
                "there which system wrote which output)",
                elem_id="admin-keep-demo",
                scale=2,
            )
            demo_rule = gr.Markdown(elem_id="admin-demo-rule")
        admin_msg = gr.Textbox(label="Result", interactive=False, elem_id="admin-msg")
        results_table = gr.Dataframe(
            headers=["result", "n", "estimate", "95% interval"],
            label=f"Results (an interval from {MIN_N} judgments on)",
            interactive=False,
            elem_classes="results-table",
            wrap=True,
        )
        results_json = gr.JSON(label="All results (JSON)")
        results_plot = gr.Plot(label="Judged appropriate (95% interval)")
        with gr.Row():
            fmt = gr.Radio(["csv", "jsonl"], value="csv", label="Export format")
            export = gr.Button("Export ratings")
            backup = gr.Button("Back up the database")
        with gr.Row():
            report_share = gr.Checkbox(
                True,
                label="Report: leave out the raters the attention rule excludes (every "
                "rater's figures are shown beside them)",
            )
            report = gr.Button("HTML report", elem_id="admin-report")
        files = gr.Markdown()  # a single-use link to a private file, never a public file URL
    # The password goes to the login route, which answers with an HttpOnly cookie; every
    # admin handler checks that cookie (the page never holds a credential of its own).
    panel_view = AdminPanel.wire(
        panel=panel, message=login_msg, studies=study, unfinished=unfinished, logout=logout
    )
    for event in (login.click, password.submit):  # the button, or Enter in the password box
        event(None, inputs=password, outputs=[password, login_msg], js=LOGIN_JS).then(
            gradio_fn(app.admin_panel), inputs=login_msg, outputs=panel_view, **RATING
        )
    logout.click(None, outputs=login_msg, js=LOGOUT_JS).then(
        gradio_fn(app.admin_panel), inputs=login_msg, outputs=panel_view, **RATING
    )
    # Admin events skip the queue, where Gradio shows no toast for an error: each says a
    # refusal in a text of its own (said_in), with no "Error" pill on the other outputs.
    set_status.click(
        said_in(app.admin_status, 1, 0), inputs=[study, status], outputs=admin_msg, **RATING
    ).then(app.admin_demo_choice, inputs=study, outputs=[keep_demo, demo_rule], **RATING)
    new_link.click(
        said_in(app.admin_new_link, 1, 0), inputs=[study, rater_id], outputs=admin_msg, **RATING
    )
    revoke.click(
        said_in(app.admin_revoke, 1, 0),
        inputs=[study, rater_id],
        outputs=admin_msg,
        js=CONFIRM_REVOKE_JS,
        **RATING,
    )
    refresh.click(said_in(app.admin_studies, 1, 1), outputs=[study, admin_msg], **RATING)
    # Dropping flagged items and the first invite to a study with flagged outputs ask first
    # (tour M1, security L2): the first click says what would happen and the button asks; the
    # second does exactly that (its token waits in a state, on the server). Picking another
    # study (or other problems) drops the question.
    drop_pending, invite_pending = gr.State(""), gr.State("")
    study.change(app.admin_study_status, inputs=study, outputs=status, **RATING)
    study.change(app.admin_demo_choice, inputs=study, outputs=[keep_demo, demo_rule], **RATING)
    keep_demo.input(
        said_in(app.admin_keep_demo, 1, 0), inputs=[study, keep_demo], outputs=demo_rule, **RATING
    )
    study.change(app.invite_reset, inputs=study, outputs=[invite_pending, invite], **RATING)
    study.change(said_in(app.admin_check, 1, 0), inputs=study, outputs=check_report, **RATING)
    check.click(said_in(app.admin_check, 1, 0), inputs=study, outputs=check_report, **RATING)
    outcome = OutputCheck.wire(report=check_report, message=check_msg)
    regenerate.click(
        said_in(app.admin_regenerate, 2, 1),
        inputs=[study, problems],
        outputs=outcome,
        show_progress_on=check_msg,
        **STUDY,
    ).then(app.invite_reset, inputs=study, outputs=[invite_pending, invite], **RATING)
    drop.click(
        said_in(app.admin_drop, 4, 1),
        inputs=[study, problems, drop_pending],
        outputs=DropStep.wire(
            report=check_report, message=check_msg, pending=drop_pending, button=drop
        ),
        **RATING,
    ).then(app.invite_reset, inputs=study, outputs=[invite_pending, invite], **RATING)
    for picked in (study.change, problems.change):
        picked(app.drop_reset, outputs=[drop_pending, drop], **RATING)
    form = StudyForm.wire(
        name=name,
        item_kind=item_kind,
        n_items=n_items,
        systems=systems,
        questions=questions,
        raters_per_item=raters,
        n_gold=n_gold,
        max_span_tokens=span,
        instructions=instructions,
    )
    paper.click(
        said_in(app.admin_preset, len(form), len(form)),
        inputs=name,
        outputs=[*form, create_msg],
        **RATING,
    )
    for box in (p1, p2, icc, raters, n_items, n_gold):
        box.change(
            app.admin_plan, inputs=[p1, p2, raters, icc, n_items, n_gold], outputs=plan, **RATING
        )
    create.click(
        said_in(app.admin_create, 2, 0),  # not an "Error" pill over the study list
        inputs=[name, upload, n_items, systems, questions, raters, n_gold]
        + [instructions, span, item_kind],
        outputs=[create_msg, study],
        # the progress over the message alone: the study list, the invites and every other
        # admin action stay usable while a study generates (tour N-M3)
        show_progress_on=create_msg,
        **STUDY,
    ).then(said_in(app.admin_check, 1, 0), inputs=study, outputs=check_report, **RATING)
    report.click(
        said_in(app.admin_report, 1, 0), inputs=[study, report_share], outputs=files, **RATING
    )
    invite.click(
        said_in(app.admin_invite, 4, 1),
        inputs=[study, names, invite_pending],
        outputs=AdminInvites.wire(
            rows=links, message=invite_msg, pending=invite_pending, button=invite
        ),
        **RATING,
    ).then(app.admin_demo_choice, inputs=study, outputs=[keep_demo, demo_rule], **RATING)
    prog_btn.click(
        said_in(app.admin_progress, 2, 0),
        inputs=study,
        outputs=AdminProgress.wire(summary=prog_summary, rows=prog_rows),
        **RATING,
    )
    results = AdminResults.wire(table=results_table, results=results_json, plot=results_plot)
    results_btn.click(
        said_in(app.admin_results, 3, 3), inputs=study, outputs=[*results, results_msg], **RATING
    )
    export.click(said_in(app.admin_export, 1, 0), inputs=[study, fmt], outputs=files, **RATING)
    backup.click(said_in(app.admin_backup, 1, 0), outputs=files, **RATING)


def build_demo(app: MagnetApp) -> gr.Blocks:
    """The demo's tabs, and the raters' own page at /rate; queue: one model call at a time
    (setting), bounded waiting line."""
    adapters = ", ".join(app.engine.runner.adapter_names) or "none"
    wanted = {s.adapter for s in systems.SYSTEMS if s.adapter}  # the table's adapters
    missing = sorted(wanted - set(app.engine.runner.adapter_names), key=list(systems.BY_NAME).index)
    loaded = app.engine.loaded
    model = model_description(loaded.spec.base, loaded.source, str(app.engine.runner.device))
    # Gradio's own temporary files (uploaded corpora and item files, which hold the hidden
    # original spans) are deleted an hour after they were made, checked every 10 minutes.
    # A study deployment (MAGNET_DEMO=false) serves no demo: nothing where a rater could rerun
    # an item, and no model name in the page's title.
    with gr.Blocks(
        title="MAGNET" if app.settings.demo else "Rating", delete_cache=UPLOAD_CACHE
    ) as demo:
        if app.settings.demo:
            gr.Markdown(
                "# MAGNET\nOne decoder LLM that infills (left and right context), continues "
                f"text and embeds sentences. Base model: {model}; adapters: {adapters}."
                + (f" Not loaded: {', '.join(missing)} (shown as unavailable)." if missing else "")
                + " The models read and write English only. Raters: open the invite link you "
                "were sent."
            )
        else:
            gr.Markdown("# Rating studies\nRaters: open the invite link you were sent.")
        demo.load(None, js=REDIRECT_JS)  # an old invite link (/?token=...) opens /rate
        if app.settings.demo:
            with gr.Tab("Infill", id="infill"):
                _infill_tab(app)
            with gr.Tab("Continue", id="continue"):
                _continue_tab(app)
            with gr.Tab("Search", id="search"):
                _search_tab(app)
        if app.settings.admin_password:
            with gr.Tab("Admin", id="admin"):
                _admin_tab(app)
    add_rater_page(app, demo)
    # api_open=False: a queued event (every model call) is reachable only through the queue,
    # where its validator counts it; POST /gradio_api/run/infill skipped both (review 4, N13)
    demo.queue(
        default_concurrency_limit=app.settings.concurrency,
        max_size=app.settings.queue_size,
        api_open=False,
    )
    return demo


def server_app_kwargs(app: MagnetApp, upload_folder: Path | None = None) -> dict:
    """What the FastAPI app under Gradio gets: the request guard (body cap, upload quota,
    trusted proxies, security headers, closed Gradio routes), the admin's login route and the
    route of the admin's single-use downloads."""
    st = app.settings
    upload_cap = st.max_upload_mb * 2**20 + UPLOAD_OVERHEAD_BYTES
    uploads = UploadQuota(
        per_client_bytes=st.upload_mb_per_hour * 2**20,
        total_bytes=st.upload_mb_per_hour_total * 2**20,
        folder=Path(upload_folder or get_upload_folder()),
        min_free_bytes=st.upload_min_free_mb * 2**20,
    )
    guard = Middleware(
        RequestGuard,
        max_body_bytes=MAX_REQUEST_BYTES,
        max_upload_bytes=upload_cap,
        trusted_proxies=parse_networks(st.trusted_proxies or ""),
        frame_ancestors=st.frame_ancestors,
        uploads=uploads,
        public_url=st.public_url,
    )
    return {
        "middleware": [guard],
        "routes": [
            Route(f"/{DOWNLOAD_ROUTE}/{{ticket}}", app.downloads.endpoint),
            Route(f"/{ADMIN_SESSION_ROUTE}", app.session_endpoint, methods=["POST", "DELETE"]),
        ],
    }


def check_upload_disk(upload_folder: Path, store: AnnotationStore) -> None:
    """Say at start-up when uploads land on the rating database's disk (the upload quota and
    free-space floor still hold; a separate volume for GRADIO_TEMP_DIR is better)."""
    database = store.sqlite_file
    if database is None:
        return
    try:
        up = upload_folder if upload_folder.exists() else upload_folder.parent
        same = os.stat(up).st_dev == os.stat(database.parent).st_dev
    except OSError:
        return
    if same:
        log.warning(
            "Uploads (%s) are on the rating database's disk; uploads stop while less than "
            "MAGNET_UPLOAD_MIN_FREE_MB is free there. Set GRADIO_TEMP_DIR to another volume "
            "to keep them apart.",
            upload_folder,
        )


def load_engine(spec: ModelSpec) -> tuple[Engine, dict[str, ModelLoadError]]:
    """The engine with every adapter that loads, the base model loaded once; an adapter that
    does not load is reported (adapter -> the error saying why), not fatal. A base model that
    does not load raises its ModelLoadError."""
    engine = Engine(load_model(spec, skip_failed_adapters=True))
    return engine, dict(engine.loaded.failed)


def _read_default_corpus() -> None:
    try:
        default_corpus()
    except Exception as e:  # the warm-up, or the first search, says it again
        log.warning("The default search corpus could not be read ahead: %s", e)


def start_search_warmup(app: MagnetApp) -> threading.Thread:
    """Embed the default search corpus in the background while the page is served, unless
    `make prepare` cached it already: the first search then only embeds its query."""

    def warm() -> None:
        t0 = time.perf_counter()
        try:
            done = app.warm_search()
        except Exception as e:  # a full disk, say: the first search computes them then
            log.warning("The default search corpus was not embedded ahead: %s", e)
            return
        log.info(
            "Default search corpus after %.1f s: %s",
            time.perf_counter() - t0,
            "; ".join(f"{TITLES[s]} {what}" for s, what in done.items()),
        )

    thread = threading.Thread(target=warm, name="search-warmup", daemon=True)
    thread.start()
    return thread


def port_taken(host: str, port: int) -> str | None:
    """The one sentence to print when `host:port` cannot be listened on, else None. Checked
    before the model loads (a taken port should not cost the wait), and said again if
    Gradio's own bind fails later: Gradio would end in a traceback."""
    family = socket.AF_INET6 if ":" in host.strip("[]") else socket.AF_INET
    try:
        # create_server sets SO_REUSEADDR as uvicorn does: a port only in TIME_WAIT is free
        with socket.create_server((host.strip("[]"), port), family=family):
            return None
    except OSError as e:
        why = (
            "is already in use" if e.errno == errno.EADDRINUSE else f"cannot be used ({e.strerror})"
        )
        return (
            f"Port {port} on {host} {why}; choose another with --port N or the variable "
            "GRADIO_SERVER_PORT (for example `GRADIO_SERVER_PORT=7861 make run`)."
        )


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(description="Serve the MAGNET demo.")
    add_model_args(parser)
    parser.add_argument("--host", default=os.environ.get("GRADIO_SERVER_NAME", "127.0.0.1"))
    parser.add_argument(
        "--port", type=int, default=int(os.environ.get("GRADIO_SERVER_PORT", "7860"))
    )
    parser.add_argument("--db-path", help="SQLite file of the rating studies (MAGNET_DB_PATH)")
    parser.add_argument("--db-url", help="SQLAlchemy URL of the rating studies (MAGNET_DB_URL)")
    return parser


def main(argv: list[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(name)s: %(message)s")
    t0 = time.perf_counter()
    if taken := port_taken(args.host, args.port):
        print(f"error: {taken}", file=sys.stderr)
        return 2
    try:
        settings = AppSettings.from_env()
        if settings.demo and settings.search_warmup:
            # the default search corpus is read (seconds of parsing) while the model loads
            reader = threading.Thread(target=_read_default_corpus, name="corpus", daemon=True)
            reader.start()
        spec = server_spec(ModelSpec.from_args(args))
        store = AnnotationStore(url=args.db_url, path=args.db_path)  # fails fast if read-only
        engine, unavailable = load_engine(spec)
    except (MagnetError, AnnotationError) as e:
        print(f"error: {e}", file=sys.stderr)
        return 2
    log.info(
        "Model %s on %s (%s); adapters: %s",
        engine.loaded.source,
        engine.runner.device,
        engine.runner.dtype,
        engine.loaded.adapters or "none",
    )
    log.info("Rating studies in %s", store.location)
    on_zero_gpu = zero_gpu()
    log.info(
        "Cache in %s; ZeroGPU: %s",
        spec.cache_dir,
        "on (the model moves to the GPU inside each call)"
        if on_zero_gpu
        else f"off (spaces {'installed' if has_spaces() else 'not installed'})",
    )
    log.info("Admin tab: %s", "on" if settings.admin_password else "off (MAGNET_ADMIN_PASSWORD)")
    log.info("Demo tabs: %s", "on" if settings.demo else "off (MAGNET_DEMO=false: a study runs)")
    # one fixed private folder, emptied now: a killed process's exports do not outlive it
    downloads = PrivateDownloads(root=load_store_settings().data_dir / "admin-files")
    atexit.register(downloads.close)
    app = MagnetApp(
        engine,
        store,
        settings,
        spec.cache_dir,
        unavailable,
        cuda_inside_calls=on_zero_gpu,
        downloads=downloads,
        demo_policy=DemoPolicy(load_store_settings().data_dir / POLICY_FILE),
    )
    if settings.demo and settings.search_warmup:
        start_search_warmup(app)  # beside building the page and launching it
    demo = build_demo(app)
    upload_folder = Path(get_upload_folder())
    check_upload_disk(upload_folder, store)
    proxy_env()  # uvicorn trusts no forwarded header; RequestGuard applies MAGNET_TRUSTED_PROXIES
    log.info("Ready to launch after %.1f s", time.perf_counter() - t0)
    try:
        demo.launch(
            server_name=args.host,
            server_port=args.port,
            max_file_size=f"{settings.max_upload_mb}mb",
            app_kwargs=server_app_kwargs(app, upload_folder),
            enable_monitoring=False,
            theme=THEME,
            css=CSS,
        )
    except OSError:
        # taken while the model loaded (Gradio says "Cannot find empty port"), or not bindable
        if taken := port_taken(args.host, args.port):
            print(f"error: {taken}", file=sys.stderr)
            return 2
        raise
    return 0
