"""A new study: the Paper protocol preset, the sample-size planner, and the generation of
every system's outputs in the background (resumed after a restart).
"""

from __future__ import annotations

from pathlib import Path

import gradio as gr

from annotation_db import AnnotationError, check_study_name, fill_summary
from annotation_db import read_items as read_item_file
from annotation_db.planner import DEFAULT_ICC, plan_study, power_at
from magnet_model.systems import TITLES

from .. import render, studies
from ..outputs import StudyForm
from ..services import PROGRESS, user_errors
from .base import AdminBase
from .view import admin_view


class CreateViews(AdminBase):
    """Create a study (and say which were stopped while generating)."""

    @admin_view("Creating the study")
    def admin_create(
        self,
        request: gr.Request | None,
        name: str,
        upload: str | None,
        n_items: float,
        systems: list[str],
        questions: list[str],
        raters_per_item: float,
        n_gold: float,
        instructions: str,
        max_span: float = 16,
        item_kind: str = "words",
        progress=PROGRESS,
    ) -> tuple:
        """Items (built-in or uploaded), every system's outputs made ahead, one new study.

        Outputs are stored as they are made: after a restart, the same name resumes the
        generation with the items and settings it started with (studies.build_study)."""
        self._admin(request)
        if not (name or "").strip():
            raise gr.Error("Give the study a name.", print_exception=False)
        with user_errors():
            name = check_study_name(name)  # before minutes of generation, not after
        resuming = name in studies.unfinished(self.store)
        systems = list(systems or [])
        if not systems and not resuming:
            raise gr.Error("Pick at least one system.", print_exception=False)
        for s in systems:
            why = self.availability(s)
            if why:
                raise gr.Error(
                    f"{TITLES.get(s, s)} is unavailable: {why.reason}", print_exception=False
                )
        if name.strip() in {s.name for s in self.store.list_studies()}:  # before any generation
            raise gr.Error(
                f"A study named '{name.strip()}' already exists; pick another name.",
                print_exception=False,
            )
        n_gold = int(n_gold)
        if n_gold > 0 and len(systems) < 2 and not resuming:
            raise gr.Error(
                "Attention checks show an original and a wrong fill side by side, like the "
                "outputs of two systems: pick at least two systems, or set attention checks to 0.",
                print_exception=False,
            )
        if upload and Path(upload).stat().st_size > self.settings.max_upload_mb * 1024 * 1024:
            raise gr.Error(
                f"The file is larger than {self.settings.max_upload_mb} MB.", print_exception=False
            )

        def make_items() -> studies.StudyMaterial:
            uploaded = read_item_file(upload) if upload else None
            return studies.study_items(item_kind, int(n_items), n_gold, len(systems), uploaded)

        def work(report) -> tuple:
            with user_errors():  # the libraries' errors as their one sentence
                return studies.build_study(
                    self.engine,
                    self._study_compare,
                    self.store,
                    name,
                    make_items,
                    systems,
                    questions=list(questions or ["appropriate"]),
                    raters_per_item=int(raters_per_item),
                    instructions=instructions or "",
                    max_span_tokens=int(max_span),
                    progress=report,
                )

        # The generation runs in a thread of its own: it goes on when this tab is closed, and
        # clicking create again while it runs follows the same job.
        job = self.study_jobs.start(name, work)
        progress(0, desc="Generating outputs")
        while not job.wait(0.5):
            progress(
                job.done / max(job.total, 1),
                desc=f"Outputs {job.done}/{job.total} (generating in the background: closing "
                "this tab does not stop it)",
            )
        if job.error is not None:
            if name not in studies.unfinished(self.store):  # refused before any output
                raise gr.Error(job.error, print_exception=False)
            raise gr.Error(
                f"The generation of '{name}' stopped: {job.error.rstrip('.')}. The outputs made "
                "so far are kept: click create with the same name to resume.",
                print_exception=False,
            )
        info, reused = job.info, job.reused
        # systems apart by semicolons (their titles have commas); the checks come on top of
        # the items, so "plus", not "(2 attention checks)" that read as among them (tour m16)
        msg = (
            f"Created study '{info.name}': {render.plural(info.n_items, 'item')} plus "
            f"{render.plural(info.n_gold, 'attention check')}; systems: "
            f"{'; '.join(TITLES.get(s, s) for s in studies.in_order(info.systems))}."
        )
        if reused:
            msg += f" Resumed: {reused} outputs had been made before the restart."
        with user_errors():
            msg += " " + fill_summary(self.store.fill_counts(info.name))
            msg += " Check them below (Check outputs) before inviting raters."
        note = studies.checks_note(info)
        msg += f" {note}" if note else ""
        return msg, gr.update(choices=self._study_choices(), value=info.name)

    @admin_view("Filling in the Paper protocol")
    def admin_preset(
        self, request: gr.Request | None, name: str | None = "", preset: str = "paper"
    ) -> StudyForm:
        """The paper's protocol in the form (item kind, items, systems, questions, raters,
        checks, max span, instructions), and a free name ("paper-1", "paper-2", ...) unless one
        is typed; the study is made when the admin clicks create."""
        self._admin(request)
        p = studies.PAPER
        taken = {s.name for s in self.store.list_studies()} | set(studies.unfinished(self.store))
        names = (f"{preset}-{i}" for i in range(1, len(taken) + 2))
        free = next(n for n in names if n not in taken)
        return StudyForm(
            name=(name or "").strip() or free,
            item_kind=p.item_kind,
            n_items=p.n_items,
            systems=list(p.systems),
            questions=list(p.questions),
            raters_per_item=p.raters_per_item,
            n_gold=p.n_gold,
            max_span_tokens=p.max_span_tokens,
            instructions=p.instructions,
        )

    @admin_view("The planner")
    def admin_plan(
        self,
        p1: float,
        p2: float,
        raters_per_item: float,
        icc: float = DEFAULT_ICC,
        n_items: float | None = None,
        n_gold: float | None = None,
    ) -> str:
        """The sample-size planner's answer for the form's values (Markdown of numbers only),
        the power of the number of items the form asks for, and what the form's number of
        attention checks gives when it is fewer than the exclusion rule needs."""
        try:
            k = int(raters_per_item)
            plan = plan_study(float(p1), float(p2), k, icc=float(icc))
            line = f"**Planner:** {plan.summary()}"
            if n_items:
                pw = power_at(int(n_items), float(p1), float(p2), k, icc=float(icc))
                line += f" This form's {int(n_items)} items: power {pw:.0%}."
            checks = studies.FORM_PLAN
            line += f"\n\n**Attention checks** (three systems, yes/no): {checks.summary()}"
            if n_gold is not None:
                line += studies.form_checks_cost(checks, int(n_gold))
        except (AnnotationError, TypeError, ValueError) as e:
            return f"Planner: {e}"
        return line

    @admin_view("Reading the uploaded items")
    def admin_upload(
        self,
        request: gr.Request | None,
        upload: str | None,
        systems: list[str] | None,
        n_gold: float,
    ) -> tuple[dict, dict, str]:
        """An upload read at once: how many usable items it holds, and the form set to the
        largest plan it allows (items, checks) before Create, said in one sentence."""
        if not upload or not self._is_admin(request):
            return gr.skip(), gr.skip(), ""
        if Path(upload).stat().st_size > self.settings.max_upload_mb * 1024 * 1024:
            return (
                gr.skip(),
                gr.skip(),
                f"The file is larger than {self.settings.max_upload_mb} MB.",
            )
        with user_errors():
            plan = studies.upload_plan(read_item_file(upload), int(n_gold), len(systems or []))
        if not plan.usable:
            return gr.skip(), gr.skip(), plan.say()
        return gr.update(value=plan.n_items), gr.update(value=plan.n_gold), plan.say()

    @admin_view("Listing the studies stopped while generating")
    def admin_unfinished(self, request: gr.Request | None) -> str:
        self._admin(request)
        lines, stopped = [], []
        for name in studies.unfinished(self.store):
            job = self.study_jobs.get(name)
            if job is not None and job.running:
                done = f"{job.done}/{job.total}"
                lines.append(f"{name}: generating in the background, {done} outputs.")
            elif job is not None and job.error:
                stopped.append(f"{name} (stopped: {job.error})")
            else:
                stopped.append(name)
        if stopped:
            lines.append(
                "Stopped while generating (type the same name and click create to resume): "
                + ", ".join(stopped)
            )
        return "\n\n".join(lines)
