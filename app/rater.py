"""The Rate handlers behind the rater's page (rater_page.py): open a rater's session, show
their current item, store their answers.

The page sends back an opaque id of the item it shows (an assignment id with a MAC keyed by
the rater's token), so answers always land on the item the rater saw; what is missing is
said in one sentence (rating_form.py).
"""

from __future__ import annotations

import hashlib
import hmac
import logging

import gradio as gr

from annotation_db import RaterItem, StorageError
from annotation_db.queries import label_of
from annotation_db.questions import Appropriate, Comment, Likert, Preference, first

from . import rating_form, render
from .outputs import RaterPage, RaterSlot, RaterView
from .services import Services, check_encodable, user_errors
from .studies import MARKER

log = logging.getLogger("app")

RATER_PATH = "rate"  # the rater-only page; invite links open it
MAX_OUTPUTS = 4  # output slots on the rater page
MAX_LIKERT = 2  # Likert questions per output on the rater page
# The page's radios are built with every value any item can have, and each item only shows its
# own: Gradio checks a value against the choices the page was built with when the server has
# no per-session state (after a restart), so an open page keeps working across one.
LIKERT_RANGE = (0, 10)  # the widest 0-10 scale; a study's Likert scale lies inside it
PREFERENCE_CODES = (*[label_of(i) for i in range(MAX_OUTPUTS)], "tie", "all_bad")
LIKERT_CODES = tuple(str(v) for v in range(LIKERT_RANGE[0], LIKERT_RANGE[1] + 1))


class RaterHandlers(Services):
    """What the rater's page (/rate) calls."""

    def rate_load(
        self,
        token_box: str | None,
        request: gr.Request | None = None,
        saved: dict | None = None,
    ) -> RaterPage:
        """On page load: the token of an invite link (?token=...) opens the session. saved:
        the answers ticked before a reload, as the page keeps them in the browser
        ({"item": shown-item id, "values": [...]}, in the order rate_submit takes them); put
        back when they belong to the item shown."""
        token = (token_box or "").strip()
        if not token and request is not None:
            token = dict(getattr(request, "query_params", {}) or {}).get("token", "")
        if not token:
            hint = "Open your invite link, or paste its token."
            return RaterPage(token, self._rater_view(None, None, hint))
        return RaterPage(token, _restore(self.rate_open(token), saved))

    def rate_open(self, token: str) -> RaterView:
        """Open a rater's session and show their current (or next) item."""
        token = (token or "").strip()
        if not token:
            raise gr.Error("Paste the token of your invite link.", print_exception=False)
        with user_errors():
            session = self.store.open_session(token)
            item = self.store.next_item(token) if session.is_open else None
            prog = self.store.rater_progress(token)
        head = f"Study: {session.study} — rater: {session.display_name}\n\n{session.instructions}"
        if not session.is_open:
            closed = "This study is closed. Thank you!"
            return self._rater_view(None, head, closed, title=session.study)
        if item is not None:
            n_likert = sum(isinstance(q, Likert) for q in item.questions)
            lo, hi = LIKERT_RANGE
            if any(
                isinstance(q, Likert) and not lo <= q.scale_min < q.scale_max <= hi
                for q in item.questions
            ):
                raise gr.Error(
                    f"This study asks a question on a scale outside {lo}-{hi}, which this page "
                    "cannot show. Ask the study's organiser to use a smaller scale.",
                    print_exception=False,
                )
            if len(item.outputs) > MAX_OUTPUTS or n_likert > MAX_LIKERT:
                raise gr.Error(
                    f"This study shows {len(item.outputs)} outputs and {n_likert} 1-5 questions "
                    f"per item; this page shows at most {MAX_OUTPUTS} and {MAX_LIKERT}. Ask the "
                    "study's organiser to rate it with fewer systems or questions.",
                    print_exception=False,
                )
        # no "N of M": the items left to a rater shrink as other raters take them (tour n7),
        # so the page says how many are done and at most how many are left
        status = f"{prog.done} done"
        status += " — all done, thank you!" if prog.finished else f", up to {prog.remaining} more"
        return self._rater_view(item, head, status, token, title=session.study)

    @staticmethod
    def _shown_item_id(token: str, item: RaterItem | None) -> str:
        """The opaque id of the item on the page, which the page sends back with its answers:
        the assignment id and a MAC of it keyed by the rater's token, so it is only valid with
        that token, names exactly the item shown, and survives a restart of the server."""
        if item is None:
            return ""
        return f"{item.assignment_id}.{_mac(token, str(item.assignment_id))}"

    @staticmethod
    def _displayed_assignment(token: str, shown_item: str | None) -> int:
        """The assignment id inside a shown-item id, or a readable error."""
        aid, _, mac = str(shown_item or "").partition(".")
        if not (aid.isdigit() and len(aid) < 19 and hmac.compare_digest(mac, _mac(token, aid))):
            raise gr.Error(
                "This page does not show an item to answer; reload your invite link.",
                print_exception=False,
            )
        return int(aid)

    def _rater_view(
        self,
        item: RaterItem | None,
        head: str | None,
        status: str,
        token: str = "",
        title: str | None = None,
    ) -> RaterView:
        """Head, status, shown-item id, item text, then per output slot its visibility, title,
        highlighted text, appropriate and Likert questions; then preference, comment, submit,
        and the browser tab's title (the study's name: never the model's)."""
        slots: list[RaterSlot] = []
        qs = item.questions if item else []
        likerts = [q for q in qs if isinstance(q, Likert)][:MAX_LIKERT]
        appropriate = first(qs, Appropriate)
        ask_comment = first(qs, Comment) is not None
        for i in range(MAX_OUTPUTS):
            out = item.outputs[i] if item and i < len(item.outputs) else None
            if out is None:
                empty = [gr.update(value=None) for _ in range(MAX_LIKERT)]
                slots.append(
                    RaterSlot(gr.update(visible=False), None, None, gr.update(value=None), empty)
                )
                continue
            pieces = render.fills_pieces(item.text, MARKER, out.text, out.fills)
            shown_likert = []
            for j in range(MAX_LIKERT):
                q = likerts[j] if j < len(likerts) else None
                shown_likert.append(
                    gr.update(
                        visible=q is not None,
                        value=None,
                        label=q.label if q else "",
                        choices=q.choices() if q else [],
                    )
                )
            slots.append(
                RaterSlot(
                    visible=gr.update(visible=True),
                    title=f"Output {out.label}",
                    shown=render.filled_html(pieces),
                    appropriate=gr.update(
                        visible=appropriate is not None,
                        value=None,
                        label=appropriate.label if appropriate else "",
                    ),
                    likert=shown_likert,
                )
            )
        pref = first(qs, Preference)
        labels = [o.label for o in item.outputs] if item else []
        choices = pref.choices(labels) if pref else labels
        return RaterView(
            head=gr.update(value=head or "", visible=bool(head)),
            status=status,
            shown_item=self._shown_item_id(token, item),
            item_text=gr.update(value=item.text if item else "", visible=item is not None),
            slots=slots,
            preference=gr.update(
                visible=pref is not None, choices=render.choices(choices), value=None
            ),
            comment=gr.update(visible=ask_comment and item is not None, value=""),
            submit=gr.update(visible=item is not None),
            title=title or "Rating",
        )

    def rate_submit(self, token: str, shown_item: str | None, *values) -> RaterView:
        """Submit the answers to the item the page showed, then show the next one.

        shown_item: the id the page got with the item (``_shown_item_id``), sent back by the
        page, so the answers always land on the item the rater saw. Sending the same answers
        again (a retry after a lost response, a double click) stores nothing new and shows the
        same next item. values: per output slot (appropriate, Likert x MAX_LIKERT), then
        preference, comment.
        """
        token = (token or "").strip()
        if not token or not shown_item:
            raise gr.Error("Open your invite link first.", print_exception=False)
        assignment_id = self._displayed_assignment(token, shown_item)
        per_slot = 1 + MAX_LIKERT
        with user_errors():
            item = self.store.rater_item(token, assignment_id)
        likerts = [q for q in item.questions if isinstance(q, Likert)][:MAX_LIKERT]
        appropriate = first(item.questions, Appropriate)
        answers: dict[str, dict] = {}
        for i, out in enumerate(item.outputs[:MAX_OUTPUTS]):
            vals = values[i * per_slot : (i + 1) * per_slot]
            a: dict = {}
            if appropriate is not None:
                a[appropriate.name] = appropriate.from_choice(vals[0])
            for q, v in zip(likerts, vals[1:], strict=False):
                a[q.name] = q.from_choice(v)
            answers[out.label] = a
        preference, comment = [*values[MAX_OUTPUTS * per_slot :], None, None][:2]
        missing = rating_form.missing_answers(item.questions, answers, preference)
        if missing:
            raise gr.Error(missing, print_exception=False)
        if isinstance(comment, str):
            check_encodable(comment, "The comment")
        with user_errors():  # any other refusal: the store's own sentence
            try:
                self.store.submit(
                    token,
                    assignment_id,
                    answers,
                    preference=preference or None,
                    comment=(comment or "").strip() or None,
                )
            except StorageError as e:
                log.error("Rating of assignment %s not stored: %s", assignment_id, e)
                raise gr.Error(
                    "Your answer was NOT saved: the rating database is not writable right now. "
                    "Keep this page open and press Submit again in a minute; if it keeps "
                    "failing, tell the study's organiser.",
                    print_exception=False,
                ) from None
        return self.rate_open(token)


def _restore(view: RaterView, saved: dict | None) -> RaterView:
    """The view with the answers ``saved`` in the browser put back, when they were ticked on
    the item the view shows; a value that is not one of its question's choices is left out."""
    if not isinstance(saved, dict) or not view.shown_item or saved.get("item") != view.shown_item:
        return view
    values = saved.get("values")
    if not isinstance(values, list) or len(values) != MAX_OUTPUTS * (1 + MAX_LIKERT) + 2:
        return view

    def put(update, value):
        if not isinstance(update, dict) or value is None or not update.get("visible", True):
            return update
        if isinstance(value, str) and "choices" in update:
            allowed = [c[1] if isinstance(c, tuple | list) else c for c in update["choices"]]
            if value not in allowed:
                return update
        elif not isinstance(value, str):
            return update
        return {**update, "value": value}

    per_slot = 1 + MAX_LIKERT
    for i, slot in enumerate(view.slots):
        vals = values[i * per_slot : (i + 1) * per_slot]
        if vals[0] in ("Yes", "No"):
            slot.appropriate = put(slot.appropriate, vals[0])
        slot.likert = [put(u, v) for u, v in zip(slot.likert, vals[1:], strict=True)]
    preference, comment = values[-2:]
    view.preference = put(view.preference, preference)
    if isinstance(comment, str) and isinstance(view.comment, dict) and view.comment.get("visible"):
        view.comment = {**view.comment, "value": comment[:2000]}
    return view


def _mac(token: str, message: str) -> str:
    key = token.encode("utf-8", "surrogatepass")
    return hmac.new(key, message.encode(), hashlib.sha256).hexdigest()[:32]
