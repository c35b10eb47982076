"""The Admin tab's layout and wiring: the login, the new-study form and planner, the
outputs' check, invites, progress, results, status, exports. Its handlers are this
package's (AdminHandlers); main.build_demo puts the tab on the page.
"""

from __future__ import annotations

import gradio as gr

from annotation_db import PROBLEMS
from annotation_db.planner import DEFAULT_ICC, DEFAULT_RATES
from annotation_db.results import MIN_N
from magnet_model.passages import SENTENCE_SPAN_TOKENS
from magnet_model.systems import TITLES

from ..outputs import (
    AdminInvites,
    AdminPanel,
    AdminProgress,
    AdminResults,
    DropStep,
    OutputCheck,
    StudyForm,
    said_in,
)
from ..rater_page import RATING
from ..render import QUESTION_LABELS
from ..security import ADMIN_SESSION_ROUTE
from ..studies import FORM_CHECKS, INFILL_SYSTEMS, ITEM_KINDS
from . import AdminHandlers
from .invites import NOT_CONFIRMED
from .status import STATUS_CHOICES

QUESTION_CHOICES = [(label, spec) for spec, label in QUESTION_LABELS.items()]
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


def admin_tab(app: AdminHandlers) -> None:
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
    # Admin events skip the queue, where Gradio shows no toast for an error: each says a
    # refusal, or an unexpected error (view.admin_view), in a text of its own (said_in), with
    # no "Error" pill on the other outputs.
    show_panel = said_in(app.admin_panel, len(panel_view), 1)  # in the login line
    demo_choice = said_in(app.admin_demo_choice, 2, 1)  # in the demo's rule
    for event in (login.click, password.submit):  # the button, or Enter in the password box
        event(None, inputs=password, outputs=[password, login_msg], js=LOGIN_JS).then(
            show_panel, inputs=login_msg, outputs=panel_view, **RATING
        )
    logout.click(None, outputs=login_msg, js=LOGOUT_JS).then(
        show_panel, inputs=login_msg, outputs=panel_view, **RATING
    )
    set_status.click(
        said_in(app.admin_status, 1, 0), inputs=[study, status], outputs=admin_msg, **RATING
    ).then(demo_choice, inputs=study, outputs=[keep_demo, demo_rule], **RATING)
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
    study.change(demo_choice, inputs=study, outputs=[keep_demo, demo_rule], **RATING)
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
    upload.change(
        said_in(app.admin_upload, 3, 2),
        inputs=[upload, systems, n_gold],
        outputs=[n_items, n_gold, create_msg],
        **RATING,
    )
    for box in (p1, p2, icc, raters, n_items, n_gold):
        box.change(
            said_in(app.admin_plan, 1, 0),
            inputs=[p1, p2, raters, icc, n_items, n_gold],
            outputs=plan,
            **RATING,
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
    ).then(demo_choice, inputs=study, outputs=[keep_demo, demo_rule], **RATING)
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
