"""What every Admin view wears: its refusals pass as they are (a gr.Error, said in the view's
own text by outputs.said_in), and anything unexpected (a bug, a database gone) is logged with
its traceback and said as one sentence there, never as bare "Error" pills (tour 6, M1: a plot
that failed filled Results with three).
"""

from __future__ import annotations

import functools
import logging

import gradio as gr

log = logging.getLogger("app")


def unexpected(what: str, e: BaseException) -> str:
    """The one sentence an admin reads when ``what`` failed on something unforeseen."""
    return (
        f"{what} failed on an unexpected error on the server ({type(e).__name__}); the details "
        "are in the server's log."
    )


def admin_view(what: str):
    """Decorate an Admin handler; ``what`` names the action in the sentence ("Showing the
    results"). Name, parameters and defaults stay the handler's (Gradio reads them for
    gr.Request and gr.Progress)."""

    def wrap(handler):
        @functools.wraps(handler)
        def run(*args, **kwargs):
            try:
                return handler(*args, **kwargs)
            except gr.Error:
                raise
            except Exception as e:
                log.exception("Admin: %s failed", what[:1].lower() + what[1:])
                raise gr.Error(unexpected(what, e), print_exception=False) from None

        return run

    return wrap
