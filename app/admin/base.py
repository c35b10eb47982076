"""What every Admin view stands on: the admin's login checked on each call, the study list,
and a study's model call (made in the background, after visitors' calls).
"""

from __future__ import annotations

from collections.abc import Iterator

import gradio as gr

from ..model_calls import ModelCalls
from ..security import cookie_of, cross_origin
from .view import admin_view


class AdminBase(ModelCalls):
    """The Admin tab's shared ground (it generates a study's outputs through model_calls)."""

    def _is_admin(self, request: object | None) -> bool:
        """A live admin cookie, sent by the app's own page (never by a page of another origin:
        the request guard takes the cookie out of those already; checked here again)."""
        if not self.settings.admin_password:
            return False
        if cross_origin(getattr(request, "headers", None), self.settings.public_url):
            return False
        return self.admin_sessions.valid(cookie_of(request))

    def _admin(self, request: object | None) -> None:
        if not self._is_admin(request):
            raise gr.Error(
                "Log in as admin first (a login ends after "
                f"{self.settings.admin_idle_minutes} minutes unused, and at Log out).",
                print_exception=False,
            )

    @admin_view("Listing the studies")
    def admin_studies(self, request: gr.Request | None) -> gr.update:
        """The study dropdown: every study, the newest one picked; the demo's vote store
        ("arena") is listed for its progress and results, named as such, never picked."""
        self._admin(request)
        return gr.update(choices=self._study_choices(), value=self._newest_study())

    def _study_choices(self) -> list[str | tuple[str, str]]:
        return [
            s.name if s.kind == "study" else (f"{s.name} (the demo's blind votes)", s.name)
            for s in self.store.list_studies()
        ]

    def _newest_study(self) -> str | None:
        names = [s.name for s in self.store.list_studies() if s.kind == "study"]
        return names[-1] if names else None

    def _study_compare(self, requests: list) -> Iterator[tuple]:
        """A batch of a study's items (studies.build_study): it waits while visitors' model
        calls run, then runs."""
        self.model_gate.background_turn()
        return self.compare_infill_many(requests)
