"""The outputs' check before raters are invited: what is flagged per system, and the two
actions on flagged outputs (make them again, or drop their items after a preview).
"""

from __future__ import annotations

import logging

import gradio as gr

from annotation_db import PROBLEMS, AnnotationError
from magnet_model.systems import TITLES

from .. import render, study_outputs
from ..outputs import DropStep, OutputCheck
from ..services import PROGRESS, user_errors
from .base import AdminBase
from .view import admin_view

log = logging.getLogger("app")

DROP_LABEL = "Drop items with flagged outputs"


class OutputCheckViews(AdminBase):
    """Check the outputs, make the flagged ones again, drop items with flagged outputs."""

    @admin_view("Checking the outputs")
    def admin_check(self, request: gr.Request | None, study: str | None) -> str:
        """The picked study's outputs checked (annotation_db.fills): per system, how many are
        empty, overlong, unfinished, chat replies, copies or repeats, with examples."""
        if not self._is_admin(request) or not study:
            return ""
        try:
            counts = self.store.fill_counts(study)
        except AnnotationError as e:  # gone meanwhile
            return str(e)
        return render.fill_check(study, counts, TITLES, PROBLEMS)

    @admin_view("Making the flagged outputs again")
    def admin_regenerate(
        self,
        request: gr.Request | None,
        study: str,
        problems: list[str],
        progress=PROGRESS,
    ) -> OutputCheck:
        """Make the outputs flagged with any of ``problems`` again (new seed, the study's
        decoding), before any rater is invited."""
        with self.remake_lock:  # one remake per study, and no invite while it runs
            self._before_raters(request, study, problems)
            if study in self.remaking:
                raise gr.Error(
                    f"'{study}' is already making its flagged outputs again; wait for it.",
                    print_exception=False,
                )
            self.remaking.add(study)
        progress(0, desc="Making the flagged outputs again")

        def report(done: int, total: int) -> None:
            progress(done / max(total, 1), desc=f"Items {done}/{total}")

        try:
            with user_errors():
                n, still = study_outputs.regenerate_flagged(
                    self.engine, self._study_compare, self.store, study, problems, report
                )
        finally:
            with self.remake_lock:
                self.remaking.discard(study)
        log.info("Study %r: %d flagged outputs made again, %d still flagged", study, n, still)
        msg = (
            f"Made {render.plural(n, 'flagged output')} again; {still} of them still have one "
            f"of these problems ({', '.join(problems)})."
            if n
            else f"No output is flagged with {', '.join(problems)}."
        )
        return OutputCheck(self.admin_check(request, study), msg)

    @admin_view("Dropping the items with flagged outputs")
    def admin_drop(
        self, request: gr.Request | None, study: str, problems: list[str], pending: str = ""
    ) -> DropStep:
        """Drop every item with an output flagged with any of ``problems``, before raters, in
        two steps: the first click says what would go (items, per problem and system, what is
        left) and asks; the same click again, ``pending`` holding what was shown, drops exactly
        that (if the flagged set changed meanwhile, it shows the new one and asks again)."""
        self._before_raters(request, study, problems)
        # one change of a study's outputs at a time: no drop while a remake runs (it would
        # remake outputs of dropped items), and two admins' confirmations one after the other
        with self.remake_lock:
            if study in self.remaking:
                raise gr.Error(
                    f"'{study}' is making its flagged outputs again: drop once that is done, on "
                    "the check of the new outputs. Nothing was dropped.",
                    print_exception=False,
                )
            return self._drop_step(request, study, problems, pending)

    def _drop_step(self, request, study: str, problems: list[str], pending: str) -> DropStep:
        """admin_drop's preview or drop, under the remake lock."""
        with user_errors():
            found = study_outputs.flagged_set(self.store, study, problems)
        if not found.keys:
            again = (
                " (the outputs changed since the preview: nothing was dropped)" if pending else ""
            )
            return DropStep(
                self.admin_check(request, study),
                f"No output is flagged with {', '.join(problems)}{again}.",
                "",
                gr.update(value=DROP_LABEL),
            )
        n, left = len(found.keys), found.n_items - len(found.keys)
        if pending != found.token:
            most = " That is most of the study." if left < found.n_items / 2 else ""
            return DropStep(
                gr.skip(),
                f"Dropping would remove {n} of {found.n_items} items, leaving "
                f"{render.plural(left, 'item')} to rate: an item goes when any of its outputs is"
                f" flagged with a ticked problem ({found.describe(TITLES)}).{most} Nothing was "
                f"dropped yet: click **Yes, drop {render.plural(n, 'item')}** to drop them, or "
                "untick problems first.",
                found.token,
                gr.update(value=f"Yes, drop {render.plural(n, 'item')}"),
            )
        with user_errors():
            keys = study_outputs.drop_flagged(self.store, study, problems)
            info = self.store.study(study)
        log.info("Study %r: %d flagged items dropped", study, len(keys))
        msg = (
            f"Dropped {render.plural(len(keys), 'item')} ({', '.join(keys[:10])}"
            f"{', ...' if len(keys) > 10 else ''}); {render.plural(info.n_items, 'item')} to "
            "rate left."
        )
        return DropStep(self.admin_check(request, study), msg, "", gr.update(value=DROP_LABEL))

    def drop_reset(self) -> tuple[str, gr.update]:
        """Another study or other problems picked: no drop waits for a yes."""
        return "", gr.update(value=DROP_LABEL)

    def _before_raters(self, request: gr.Request | None, study: str, problems: list[str]) -> None:
        """A study picked, problems ticked, no rater invited yet (else one sentence why not)."""
        self._admin(request)
        if not study or not problems:
            raise gr.Error("Pick a study and the problems to act on.", print_exception=False)
        with user_errors():
            n = self.store.study(study).n_raters
        if n:
            raise gr.Error(
                f"'{study}' has {render.plural(n, 'invited rater')}: its outputs can no longer "
                "change (make a new study to change them).",
                print_exception=False,
            )
