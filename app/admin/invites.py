"""Raters' invite links: made (asking first when outputs are flagged), made anew for one
rater, or revoked; each link shown once.
"""

from __future__ import annotations

import logging
import math

import gradio as gr

from annotation_db import ARENA_STUDY, PROBLEM_NAMES, AnnotationError
from magnet_model.systems import TITLES

from .. import render, studies, study_outputs
from ..outputs import AdminInvites
from ..rater import RATER_PATH
from ..services import user_errors
from .base import AdminBase
from .view import admin_view

log = logging.getLogger("app")

# what the page's confirmation dialog sends as the rater id when the admin says no
NOT_CONFIRMED = "not confirmed"


class InviteViews(AdminBase):
    """Invite raters, give one rater a new link, revoke a link."""

    @admin_view("Inviting raters")
    def admin_invite(
        self, request: gr.Request | None, study: str, names: str, pending: str = ""
    ) -> AdminInvites:
        """One invite per line of names -> the links (the only time tokens are shown) and a
        sentence naming the study they open. Refused for a study that cannot be rated (the
        demo's vote store, one without items, one still generating, one whose flagged outputs
        are being made again); every link made is opened here once before it is shown (a link
        that does not open is never handed out). The first invite to a study with flagged
        outputs asks first: it says how many and of which problems, since an invite freezes the
        outputs; the same click again (``pending`` holding what was shown) invites."""
        self._admin(request)
        people = [n.strip() for n in (names or "").splitlines() if n.strip()]
        if not study or not people:
            raise gr.Error("Pick a study and type one rater name per line.", print_exception=False)
        job = self.study_jobs.get(study)
        if study in studies.unfinished(self.store):
            made = f" ({job.done} of {job.total} outputs made)" if job and job.running else ""
            raise gr.Error(
                f"'{study}' is still generating its outputs{made}: invite raters once it is "
                "created, and check its outputs first.",
                print_exception=False,
            )
        with self.remake_lock:  # an invite and a remake of one study exclude each other
            if study in self.remaking:
                raise gr.Error(
                    f"'{study}' is making its flagged outputs again: invite raters once that is "
                    "done (an invite now would freeze the outputs and throw that work away).",
                    print_exception=False,
                )
            with user_errors():
                info = self.store.study(study)
                found = (
                    study_outputs.flagged_set(self.store, study, PROBLEM_NAMES)
                    if info.n_raters == 0 and info.kind == "study"
                    else None
                )
            if found is not None and found.keys and pending != found.token:
                return AdminInvites(
                    gr.skip(),
                    f"{render.plural(found.n_outputs, 'output')} of **{render.md_text(study)}**"
                    f" {'is' if found.n_outputs == 1 else 'are'} flagged "
                    f"({found.describe(TITLES)}; see the check above). Once a rater is invited "
                    "the outputs can no longer be made again or dropped. Nobody was invited yet:"
                    " click **Invite anyway** to invite, or act on the flagged outputs first.",
                    found.token,
                    gr.update(value=f"Invite anyway ({found.n_outputs} flagged outputs)"),
                )
            with user_errors():
                invites = self.store.invite_many(study, people)
                for i in invites:  # each link opens its rater page (what the rater's click does)
                    opened = self.store.open_session(i.token)
                    if opened.study != study:
                        raise AnnotationError(f"the link of {i.display_name} opens another study")
                info = self.store.study(study)
            # the demo pauses now, not at the next look at the live studies (refresh_s later)
            self.study_passages.invalidate()
        rows = [[i.display_name, self._invite_link(i.token, request)] for i in invites]
        msg = (
            f"{render.plural(len(rows), 'invite link')} for the study **{render.md_text(study)}**"
            " (each opened once here: it opens that study's rater page). Shown once: copy them "
            "now."
        )
        if info.status != "open":
            msg += f" The study is {info.status}: its raters can start once you set it open."
        note = studies.invite_note(info, len(people))  # items all (or nearly) taken
        msg += f" {note}" if note else ""
        return AdminInvites(rows, msg, "", self.invite_label(study))

    def invite_reset(self, study: str | None) -> tuple[str, gr.update]:
        """Another study picked: no question waits, the button names that study."""
        return "", self.invite_label(study)

    def invite_label(self, study: str | None) -> gr.update:
        """The invite button names the study its links will open."""
        if not study:
            return gr.update(value="Create invite links (pick a study)")
        if study == ARENA_STUDY:
            return gr.update(value=f"No invite links for '{study}' (the demo's votes)")
        return gr.update(value=f"Create invite links for '{study}'")

    @admin_view("Revoking the invite link")
    def admin_revoke(
        self, request: gr.Request | None, study: str, rater_id: float | str | None
    ) -> str:
        """Make one rater's invite link stop working (their answers so far are kept). The page
        asks first (tour p10); NOT_CONFIRMED is its "no"."""
        self._admin(request)
        if rater_id == NOT_CONFIRMED:
            return "Nothing was revoked."
        rater = _rater_id(study, rater_id)
        with user_errors():
            r = self.store.revoke(study, rater)
        log.info("Invite of rater %s (%s) in study %r revoked", r.rater_id, r.display_name, study)
        return (
            f"The invite link of rater {r.rater_id} ({r.display_name}) no longer works; "
            f"their {r.done} answers are kept."
        )

    @admin_view("Making a new invite link")
    def admin_new_link(
        self, request: gr.Request | None, study: str, rater_id: float | str | None
    ) -> str:
        """A new invite link for one rater (the old one stops working; answers are kept)."""
        self._admin(request)
        rater = _rater_id(study, rater_id)
        with user_errors():
            inv = self.store.new_link(study, rater)
        log.info(
            "New invite link for rater %s (%s) in study %r", inv.rater_id, inv.display_name, study
        )
        return (
            f"New invite link for rater {inv.rater_id} ({inv.display_name}); the old one no longer "
            f"works, their answers are kept. Shown once: {self._invite_link(inv.token, request)}"
        )

    def _invite_link(self, token: str, request: gr.Request | None) -> str:
        """The rater page's address with this token, under the public URL if one is set."""
        base = self.settings.public_url or _base_url(request)
        return f"{base}/{RATER_PATH}?token={token}"


def _rater_id(study: str, rater_id: float | str | None) -> int:
    """The rater id typed in Admin (a text box: a number box shows 0 before anything is typed),
    or one sentence saying what is missing."""
    if isinstance(rater_id, str):
        text = rater_id.strip()
        rater_id = int(text) if text.isdigit() and len(text) < 19 else None
    ok = isinstance(rater_id, int | float) and math.isfinite(rater_id)
    if not study or not ok or rater_id != int(rater_id) or rater_id < 1:
        raise gr.Error(
            "Pick a study and type the rater's id (see Progress).", print_exception=False
        )
    return int(rater_id)


def _base_url(request: gr.Request | None) -> str:
    if request is None:
        return "http://127.0.0.1:7860"
    headers = dict(getattr(request, "headers", {}) or {})
    host = headers.get("x-forwarded-host") or headers.get("host") or "127.0.0.1:7860"
    proto = headers.get("x-forwarded-proto") or "http"
    return f"{proto}://{host}"
