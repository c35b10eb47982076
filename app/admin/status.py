"""A study's status (open, closed, draft) and the demo beside it: paused while a study with
raters runs, unless the admin keeps it on.
"""

from __future__ import annotations

import logging

import gradio as gr

from annotation_db import ARENA_STUDY, AnnotationError

from ..services import user_errors
from .base import AdminBase
from .view import admin_view

log = logging.getLogger("app")

STATUS_CHOICES = ("open", "closed", "draft")


class StatusViews(AdminBase):
    """Set a study's status; keep the demo on beside it, or not."""

    def admin_study_status(self, request: gr.Request | None, study: str | None) -> gr.update:
        """The status radio when a study is picked: that study's own status, so that "Set
        status" changes nothing unless the admin picks another one."""
        if not self._is_admin(request):
            return gr.skip()
        if not study:
            return gr.update(value=None)
        try:
            return gr.update(value=self.store.study(study).status)
        except AnnotationError:  # gone meanwhile: no status to show
            return gr.update(value=None)
        except Exception:  # a radio cannot hold a sentence: the check picked with it says it
            log.exception("Admin: reading the status of study %r failed", study)
            return gr.update(value=None)

    @admin_view("Setting the status")
    def admin_status(self, request: gr.Request | None, study: str, status: str) -> str:
        """Close, reopen (or set back to draft) a study; raters of a closed one are told so."""
        self._admin(request)
        if not study or status not in STATUS_CHOICES:
            raise gr.Error("Pick a study and a status.", print_exception=False)
        with user_errors():
            info = self.store.set_status(study, status)
        log.info("Study %r set to %s by the admin", info.name, info.status)
        return f"Study '{info.name}' is now {info.status}."

    def demo_rule(self) -> str:
        """Which rule keeps the running studies blind, as it stands now (blinding.py)."""
        if not self.settings.demo:
            return "**Demo tabs:** off on this server (MAGNET_DEMO=false)."
        self.study_passages.invalidate()  # the admin's change counts at once
        paused = self.paused_by()
        kept = sorted(set(self.study_passages.live()) - set(paused))
        beside = (
            f" Kept on beside {', '.join(repr(s) for s in kept)} by your choice: its raters "
            "could learn there which system wrote which output."
            if kept
            else ""
        )
        if paused:
            names = ", ".join(repr(s) for s in paused)
            return (
                f"**Demo tabs: paused** while {names} {'runs' if len(paused) == 1 else 'run'} "
                "(open, with invited raters): Infill, Continue and Search answer with a "
                "sentence, the rater page and Admin work. They are back when the study is "
                f"closed.{beside}"
            )
        return (
            "**Demo tabs: on.** They pause while a study is open and has invited raters; texts "
            f"close to an open study's passages are refused.{beside}"
        )

    @admin_view("Showing the demo's rule")
    def admin_demo_choice(self, request: gr.Request | None, study: str | None) -> tuple:
        """The picked study's choice (keep the demo on beside it, or not) and the rule."""
        if not self._is_admin(request):
            return gr.skip(), ""
        return study in self.demo_policy.allowed() if study else False, self.demo_rule()

    @admin_view("Keeping the demo on or pausing it")
    def admin_keep_demo(self, request: gr.Request | None, study: str | None, on: bool) -> str:
        """Keep the demo on beside ``study`` while it runs (or pause it again): the admin's
        choice, knowing what it costs, said back with the rule then in force."""
        self._admin(request)
        if not study or study == ARENA_STUDY:
            raise gr.Error("Pick a rating study first.", print_exception=False)
        with user_errors():
            self.store.study(study)  # it exists
        self.demo_policy.allow(study, bool(on))
        log.info("Demo beside study %r: %s by the admin", study, "kept on" if on else "paused")
        return self.demo_rule()
