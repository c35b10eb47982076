"""The rater's page (/rate?token=...): the study's instructions, one item, its questions and
progress; nothing else.

Invite links open this page, not the demo: no demo tabs, no model or system names, so a rater
neither has to find a tab nor sees which system wrote what. It is a page of the same Gradio
app (its events skip the queue the model calls wait in) and calls the Rate handlers (rater.py); the
only thing it adds is that a refused submission shows one inline sentence and keeps every
answer, instead of an error overlay on each field.
"""

from __future__ import annotations

import functools
import html

import gradio as gr

from .handlers import MagnetApp
from .outputs import RaterPage, RaterSlot, RaterView, as_values
from .rater import LIKERT_CODES, MAX_LIKERT, MAX_OUTPUTS, PREFERENCE_CODES, RATER_PATH
from .render import choices

# Rating events skip the queue, whose size caps every queued event together: demo traffic
# filling it must never make a rater's submit wait or fail with "queue full" (issue 22).
RATING = {"queue": False}
# Old invite links (/?token=...) open the demo page: send them here, keeping the token.
REDIRECT_JS = f"""() => {{
  const t = new URLSearchParams(window.location.search).get('token');
  if (t) {{
    const base = window.location.pathname.replace(/\\/+$/, '');
    window.location.replace(base + '/{RATER_PATH}?token=' + encodeURIComponent(t));
  }}
}}"""
# The answers ticked on the page, kept in the browser (localStorage) as they are ticked, so a
# reload, or a restart of the server, does not lose them: {"item": shown-item id, "values":
# [...]} in the order rate_submit takes them. Not a secret: they are the rater's own answers in
# their own browser; the key is fixed so that a restarted server can still read them.
SAVED_ANSWERS = {"storage_key": "magnet-rate-answers", "secret": "rate-answers-kept-in-browser"}
SAVE_JS = "(item, ...values) => [{item: item, values: values}]"
TITLE_JS = "(t) => { document.title = t || 'Rating'; }"


def _message(text: str) -> str:
    return f'<div class="rate-msg" role="alert">{html.escape(text)}</div>' if text else ""


def _inline(fn, n_view: int):
    """fn's outputs followed by an empty message; a refusal (gr.Error) becomes the message and
    leaves every field as the rater left it. The handler's name and parameters stay those of
    fn (Gradio reads them for the API and for gr.Request)."""

    @functools.wraps(fn)
    def run(*args, **kwargs):
        try:
            return (*as_values(fn(*args, **kwargs)), _message(""))
        except gr.Error as e:
            return (*[gr.skip()] * n_view, _message(str(e.message)))

    return run


def add_rater_page(app: MagnetApp, demo: gr.Blocks) -> None:
    """The /rate page of demo (called after the demo's own layout, outside its context)."""
    with demo.route("Rating", RATER_PATH, show_in_navbar=False):
        gr.Markdown(
            "# Rating\nRead the text with its blank, then answer the questions about each "
            "filled-in version. Items come one at a time; you can stop and come back later "
            "with the same link."
        )
        with gr.Row(visible=True, elem_id="rate-token-row") as token_row:
            token = gr.Textbox(label="Invite token", type="password", scale=3, elem_id="rate-token")
            open_btn = gr.Button("Open", scale=1, elem_id="rate-open")
        # hidden until a link opens: a bad link's page shows its sentence, not empty boxes
        head = gr.Textbox(label="Study and instructions", interactive=False, lines=3, visible=False)
        status = gr.Markdown(elem_id="rate-status")
        # The page sends back the id of the item it shows (not server-side state, which the
        # previous call may have moved on), so a resent answer lands on the item the rater saw.
        shown_item = gr.Textbox(visible="hidden", elem_id="rate-shown-item")
        item_text = gr.Textbox(label="Text with a blank", interactive=False, lines=3, visible=False)
        slots, answers = [], []
        for _ in range(MAX_OUTPUTS):
            with gr.Group(visible=False) as group:
                title = gr.Markdown(elem_classes="rate-out-title")
                shown = gr.HTML(elem_classes="filled-box")
                appropriate = gr.Radio(["Yes", "No"], label="Appropriate?", visible=False)
                likerts = [gr.Radio(list(LIKERT_CODES), visible=False) for _ in range(MAX_LIKERT)]
            slots.append(
                RaterSlot.wire(
                    visible=group, title=title, shown=shown, appropriate=appropriate, likert=likerts
                )
            )
            answers += [appropriate, *likerts]
        preference = gr.Radio(
            choices(PREFERENCE_CODES), label="Which output is best?", visible=False
        )
        comment = gr.Textbox(label="Comment (optional)", visible=False, max_length=2000)
        message = gr.HTML(elem_id="rate-message")
        submit = gr.Button(
            "Submit and next", variant="primary", visible=False, elem_id="rate-submit"
        )
        title = gr.Textbox(visible="hidden", elem_id="rate-title")
        saved = gr.BrowserState({}, **SAVED_ANSWERS)
        view = RaterView.wire(
            head=head,
            status=status,
            shown_item=shown_item,
            item_text=item_text,
            slots=slots,
            preference=preference,
            comment=comment,
            submit=submit,
            title=title,
        )

        def rate_page_load(token_box: str | None, kept: dict | None, request: gr.Request):
            out = _inline(app.rate_load, 1 + len(view))(token_box, request, kept)
            opened = not out[-1] and bool(out[0])  # a token that opened a session
            return (*out, gr.update(visible=not opened))

        page_view = [*RaterPage.wire(token=token, view=view), message, token_row]
        demo.load(rate_page_load, inputs=[token, saved], outputs=page_view, **RATING)
        title.change(None, inputs=title, js=TITLE_JS)  # in the browser only
        for box in [*answers, preference, comment]:  # in the browser only, as they are ticked
            box.input(None, inputs=[shown_item, *answers, preference, comment], outputs=saved,
                      js=SAVE_JS)  # fmt: skip
        open_btn.click(
            _inline(app.rate_open, len(view)), inputs=token, outputs=[*view, message], **RATING
        )
        token.submit(
            _inline(app.rate_open, len(view)), inputs=token, outputs=[*view, message], **RATING
        )
        submit.click(
            _inline(app.rate_submit, len(view)),
            inputs=[token, shown_item, *answers, preference, comment],
            outputs=[*view, message],
            show_progress_on=submit,  # not a spinner and timer over every block (tour p7)
            **RATING,
        )
