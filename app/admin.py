"""The Admin tab: login, studies (create, presets, planner, status), invites and links,
progress, results, exports and backups.

Every handler but the login and the planner needs the admin's login first (_admin); files
leave the server only through a single-use download link (security.PrivateDownloads).
"""

from __future__ import annotations

import asyncio
import hmac
import logging
import math
import time
from dataclasses import dataclass
from pathlib import Path

import gradio as gr
from starlette.requests import Request
from starlette.responses import JSONResponse, Response

from annotation_db import (
    ARENA_STUDY,
    PROBLEM_NAMES,
    PROBLEMS,
    AnnotationError,
    check_study_name,
    fill_summary,
    safe_file_stem,
)
from annotation_db import read_items as read_item_file
from annotation_db.planner import DEFAULT_ICC, plan_study, power_at
from annotation_db.report import bar_length, plot_label, write_report
from annotation_db.results import not_enough
from magnet_model.systems import TITLES

from . import render, studies
from .model_calls import ModelCalls
from .outputs import (
    AdminInvites,
    AdminPanel,
    AdminProgress,
    AdminResults,
    DropStep,
    OutputCheck,
    StudyForm,
)
from .rater import RATER_PATH
from .security import CROSS_ORIGIN_LOGIN, DOWNLOAD_ROUTE, cookie_of, cross_origin, session_cookie
from .services import PROGRESS, client_of, user_errors

log = logging.getLogger("app")

STATUS_CHOICES = ("open", "closed", "draft")
# what the page's confirmation dialog sends as the rater id when the admin says no (main.py)
NOT_CONFIRMED = "not confirmed"
DROP_LABEL = "Drop items with flagged outputs"
LOGGED_IN = "Logged in."
NO_COOKIE = (
    "The password was right, but this browser did not send the login cookie back: open the "
    "app at its own address (not inside another page) and log in again."
)


@dataclass(frozen=True)
class LoginResult:
    """A password check: whether it was right, the one sentence to show, and the new
    session's token (only on success; it goes into the cookie, nowhere else)."""

    authorized: bool
    message: str
    session: str | None = None


class AdminHandlers(ModelCalls):
    """What the Admin tab calls (it generates a study's outputs through model_calls)."""

    def admin_login(self, password: str, request: object | None = None) -> LoginResult:
        """Compared in constant time, and only when this client (and the app as a whole) is
        not locked out after wrong passwords. The right password starts a session, whose token
        the login route (session_endpoint) puts in an HttpOnly cookie; it never reaches a page
        or a URL."""
        client = client_of(request)
        wait = self.login_throttle.wait_s(client)
        if wait > 0:
            log.warning("Admin login from %s refused: locked for %.0f s more", client, wait)
            msg = f"Too many wrong passwords; try again in {math.ceil(wait)} s."
            return LoginResult(False, msg)
        want = self.settings.admin_password
        given = (password if isinstance(password, str) else "").encode("utf-8", "surrogatepass")
        ok = bool(want) and hmac.compare_digest(given, want.encode("utf-8", "surrogatepass"))
        if ok:
            self.login_throttle.succeeded(client)
            log.info("Admin logged in from %s", client)
            return LoginResult(True, LOGGED_IN, self.admin_sessions.start())
        if want:
            self.login_throttle.failed(client)
        return LoginResult(False, "Wrong password.")

    async def session_endpoint(self, request: Request) -> Response:
        """POST /admin-session {"password": ...}: the admin cookie on the right password;
        DELETE /admin-session: log out (the session ends on the server, the cookie is
        cleared). JSON only, so no other site's form can post here; from a page of another
        origin, neither (security.cross_origin). One login at a time per address, answered
        after the throttle's delay while a crowd of addresses is failing."""
        headers = {"cache-control": "no-store"}
        if not self.settings.admin_password:
            return JSONResponse({"message": "Not found."}, status_code=404, headers=headers)
        if cross_origin(request.headers, self.settings.public_url):
            body = {"ok": False, "message": CROSS_ORIGIN_LOGIN}
            return JSONResponse(body, status_code=403, headers=headers)
        secure = request.url.scheme == "https" or (self.settings.public_url or "").startswith(
            "https://"
        )
        if request.method == "DELETE":
            self.admin_sessions.end(cookie_of(request))
            out = JSONResponse({"ok": True, "message": "Logged out."}, headers=headers)
            out.headers.append("set-cookie", session_cookie("", 0, secure))
            return out
        kind = request.headers.get("content-type", "").split(";")[0].strip().lower()
        try:
            body = await request.json() if kind == "application/json" else None
        except ValueError:
            body = None
        if not isinstance(body, dict):
            msg = 'Send {"password": ...} as application/json.'
            return JSONResponse({"ok": False, "message": msg}, status_code=400, headers=headers)
        client = client_of(request)
        if not self.login_throttle.begin(client):
            msg = "A login from your address is being checked; wait for its answer."
            return JSONResponse({"ok": False, "message": msg}, status_code=429, headers=headers)
        try:
            delay = self.login_throttle.delay_s()
            if delay > 0:
                await asyncio.sleep(delay)
            login = self.admin_login(body.get("password"), request)
        finally:
            self.login_throttle.end(client)
        out = JSONResponse({"ok": login.authorized, "message": login.message}, headers=headers)
        if login.session:
            out.headers.append(
                "set-cookie", session_cookie(login.session, self.admin_sessions.max_s, secure)
            )
        return out

    def admin_panel(self, login_message: str = "", request: gr.Request | None = None) -> AdminPanel:
        """After a login or logout on the page: the panel when this browser sent a live admin
        cookie, else hidden (with why, when the password was right but no cookie came back)."""
        if self._is_admin(request):
            return AdminPanel(
                gr.update(visible=True),
                "",
                self.admin_studies(request),
                self.admin_unfinished(request),
                gr.update(visible=True),
            )
        msg = NO_COOKIE if login_message == LOGGED_IN else gr.skip()
        return AdminPanel(gr.update(visible=False), msg, gr.skip(), "", gr.update(visible=False))

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

    def _study_compare(self, text: str, systems: list[str], decoding: dict) -> list:
        """One item of a study: it waits while visitors' model calls run, then runs."""
        self.model_gate.background_turn()
        return self.compare_infill(text, systems, decoding)

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
                    studies.flagged_set(self.store, study, PROBLEM_NAMES)
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

    def admin_demo_choice(self, request: gr.Request | None, study: str | None) -> tuple:
        """The picked study's choice (keep the demo on beside it, or not) and the rule."""
        if not self._is_admin(request):
            return gr.skip(), ""
        return study in self.demo_policy.allowed() if study else False, self.demo_rule()

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
                n, still = studies.regenerate_flagged(
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

    def admin_drop(
        self, request: gr.Request | None, study: str, problems: list[str], pending: str = ""
    ) -> DropStep:
        """Drop every item with an output flagged with any of ``problems``, before raters, in
        two steps: the first click says what would go (items, per problem and system, what is
        left) and asks; the same click again, ``pending`` holding what was shown, drops exactly
        that (if the flagged set changed meanwhile, it shows the new one and asks again)."""
        self._before_raters(request, study, problems)
        with user_errors():
            found = studies.flagged_set(self.store, study, problems)
        if not found.keys:
            return DropStep(
                self.admin_check(request, study),
                f"No output is flagged with {', '.join(problems)}.",
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
            keys = studies.drop_flagged(self.store, study, problems)
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

    def admin_progress(self, request: gr.Request | None, study: str) -> AdminProgress:
        self._admin(request)
        with user_errors():
            p = self.store.progress(study)
        rows = [
            [r.rater_id, r.display_name, r.done, r.open, r.remaining, r.gold_done, r.gold_failed]
            + ["revoked" if r.revoked else "active"]
            for r in p.raters
        ]
        summary = (
            f"{p.judgments_done} of {p.judgments_needed} judgments ({p.share_done:.0%}); "
            f"{p.items_complete} of {p.n_items} items complete; status {p.status}. "
            + fill_summary(self.store.fill_counts(study))
        )
        return AdminProgress(summary, rows)

    def admin_results(self, request: gr.Request | None, study: str) -> AdminResults:
        """-> a table with n on every row, the results as JSON, a plot of the appropriate
        share per system with intervals."""
        self._admin(request)
        with user_errors():
            res = self.store.results(study)
        return AdminResults(_results_rows(res), res.to_dict(), _rates_plot(res))

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

    def admin_status(self, request: gr.Request | None, study: str, status: str) -> str:
        """Close, reopen (or set back to draft) a study; raters of a closed one are told so."""
        self._admin(request)
        if not study or status not in STATUS_CHOICES:
            raise gr.Error("Pick a study and a status.", print_exception=False)
        with user_errors():
            info = self.store.set_status(study, status)
        log.info("Study %r set to %s by the admin", info.name, info.status)
        return f"Study '{info.name}' is now {info.status}."

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

    def admin_export(self, request: gr.Request | None, study: str, fmt: str) -> str:
        """Write the ratings to a private file -> a single-use download link (Markdown)."""
        self._admin(request)
        ext = {"csv": "csv", "jsonl": "jsonl"}.get(fmt)
        if not study or ext is None:
            raise gr.Error("Pick a study and a format (csv or jsonl).", print_exception=False)
        out = self.downloads.new_path(f"{safe_file_stem(study)}.{ext}")
        with user_errors():
            return self._download_link(self.store.export(study, fmt, out))

    def admin_report(self, request: gr.Request | None, study: str, exclude: bool = True) -> str:
        """The study's self-contained HTML report -> a single-use download link (Markdown).
        ``exclude``: leave out the raters the attention rule excludes (the report shows every
        rater's figures beside them either way)."""
        self._admin(request)
        if not study:
            raise gr.Error("Pick a study.", print_exception=False)
        out = self.downloads.new_path(f"{safe_file_stem(study)}.html")
        with user_errors():
            titles = {s: TITLES[s] for s in studies.in_order(list(TITLES))}  # the app's order
            path = write_report(self.store, study, out, exclude=bool(exclude), titles=titles)
            return self._download_link(path)

    def admin_backup(self, request: gr.Request | None) -> str:
        """A consistent copy of the database -> a single-use download link (Markdown)."""
        self._admin(request)
        stamp = time.strftime("%Y%m%d-%H%M%S")
        out = self.downloads.new_path(f"annotations-{stamp}.sqlite3")
        with user_errors():
            return self._download_link(self.store.backup(out))

    def _download_link(self, path: Path) -> str:
        ticket = self.downloads.publish(path)
        minutes = self.downloads.ttl_s / 60
        return (
            f"[Download {path.name}]({DOWNLOAD_ROUTE}/{ticket}) — this link works once, "
            f"within {minutes:.0f} minutes, then the file is deleted from the server."
        )


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


def _interval(low, high, note: str | None, fmt: str) -> str:
    """'[low, high]', or the note that stands where there are too few judgments."""
    if note or low is None or high is None or low != low:  # NaN: no interval
        return note or "no interval"
    return f"[{fmt.format(low)}, {fmt.format(high)}]"


def _number(x, fmt: str) -> str:
    """x in fmt, or a dash where there is no number (None, NaN: no ratings yet)."""
    return "–" if x is None or x != x else fmt.format(x)


def _results_rows(res) -> list[list]:
    """[what, n, estimate, 95% interval] for every number of a study's results, in words;
    below the minimum n the interval column says "not enough votes"."""
    rows: list[list] = []
    every = {s.system: s.appropriate for s in res.systems_all_raters}
    for s in res.systems:
        title = TITLES.get(s.system, s.system)
        if s.appropriate is not None:
            rows.append(_share_row(f"{title}: judged appropriate", s.appropriate, res.min_n))
            if res.n_raters_excluded and every.get(s.system) is not None:
                what = f"{title}: judged appropriate, every rater (no exclusion)"
                rows.append(_share_row(what, every[s.system], res.min_n))
        for q, m in s.likert.items():
            iv = _interval(m.low, m.high, not_enough(m.n, res.min_n), "{:.2f}")
            mean = f"{m.mean:.2f}" if m.n else "–"
            rows.append([f"{title}: {q.replace('_', ' ')} (mean)", m.n, mean, iv])
    for p in res.pairwise:
        a, b = TITLES.get(p.system_a, p.system_a), TITLES.get(p.system_b, p.system_b)
        iv = _interval(p.low, p.high, p.note, "{:.0%}")
        rows.append([f"{a} beats {b} (ties count half)", p.n, _number(p.win_rate_a, "{:.0%}"), iv])
    for b in res.bradley_terry:
        title = TITLES.get(b.system, b.system)
        iv = _interval(b.low, b.high, b.note, "{:+.2f}")
        rows.append([f"{title}: Bradley–Terry strength", b.n, _number(b.score, "{:+.2f}"), iv])
    rows += _attention_rows(res)
    return rows


def _share_row(what: str, a, min_n: int) -> list:  # noqa: ANN001 - a Proportion
    # the same rule as every other row (the table's caption): an interval from min_n on
    iv = _interval(a.low, a.high, not_enough(a.n, min_n), "{:.0%}")
    iv = iv if a.n else "no ratings yet"
    return [what, a.n, _number(a.share if a.n else None, "{:.0%}"), iv]  # never "nan%"


def _attention_rows(res) -> list[list]:
    """The attention rule in words, and how many raters it excluded and left undecided."""
    rule = res.attention_rule
    n = res.n_raters_included + res.n_raters_excluded
    if rule is None:
        return [["Attention checks: these questions cannot tell a random rater", n, "–", "–"]]
    applied = "" if res.exclude else " (not applied to the rows above)"
    return [
        [f"Raters excluded by the attention rule{applied}", n, res.n_raters_excluded,
         rule["description"]],
        ["Raters undecided (too few checks to tell; counted)", n, res.n_raters_undecided, "–"],
    ]  # fmt: skip


def _rates_plot(res):
    """Share judged appropriate per system with its interval (matplotlib figure), or None when
    no system has a yes/no answer yet. A share of 0 is a bar of height 0; an error bar is never
    negative (bar_length)."""
    rows = [s for s in res.systems if s.appropriate is not None and s.appropriate.n]
    if not rows:
        return None
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(figsize=(5, 3))
    shares = [s.appropriate.share for s in rows]
    err = [
        [bar_length(s.appropriate.low, s.appropriate.share) for s in rows],
        [bar_length(s.appropriate.share, s.appropriate.high) for s in rows],
    ]
    names = [f"{plot_label(TITLES.get(s.system, s.system))}\nn = {s.appropriate.n}" for s in rows]
    ax.bar(names, shares, yerr=err, capsize=4)
    ax.set_ylim(0, 1)
    ax.set_ylabel("judged appropriate")
    fig.tight_layout()
    plt.close(fig)
    return fig
