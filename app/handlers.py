"""What the buttons call: validation, calls into magnet_model / annotation_db, rendering.

Every handler is a method of MagnetApp (the services of one process: the engine, the
annotation store, the search encoders), so tests call what Gradio calls. A handler with several
outputs returns a named result (outputs.py), which Gradio gets as its tuple of values through
outputs.gradio_fn. Errors of the two libraries become gr.Error with their one-sentence message
(user_errors); no traceback reaches a visitor.
Everything a user typed or uploaded goes to Textbox / Dataframe values (rendered as text by
the browser), or into HTML only escaped (render.filled_html); never into Markdown.
"""

from __future__ import annotations

import hashlib
import hmac
import logging
import math
import random
import tempfile
import time
import uuid
from collections import OrderedDict
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path

import gradio as gr

from annotation_db import (
    AnnotationError,
    AnnotationStore,
    OutputIn,
    RaterItem,
    StorageError,
    check_study_name,
    safe_file_stem,
)
from annotation_db import read_items as read_item_file
from annotation_db.planner import DEFAULT_ICC, plan_study, power_at
from annotation_db.report import write_report
from annotation_db.results import not_enough
from magnet_model import search
from magnet_model.engine import END_REASONS, Engine, InfillResult
from magnet_model.errors import MagnetError, ModelLoadError
from magnet_model.metrics import repetition_stats
from magnet_model.systems import TITLES

from . import rating_form, render, studies
from .gpu import continue_seconds, gpu, infill_seconds, search_seconds
from .outputs import (
    AdminLogin,
    AdminProgress,
    AdminResults,
    ContinueColumn,
    ContinueView,
    InfillColumn,
    InfillView,
    RaterPage,
    RaterSlot,
    RaterView,
    SearchView,
    StudyForm,
)
from .security import DOWNLOAD_ROUTE, LoginThrottle, PrivateDownloads, RateLimiter
from .settings import AppSettings

log = logging.getLogger("app")

MARKER = studies.MARKER
INFILL_SYSTEMS = studies.INFILL_SYSTEMS  # MAGNET, base zero-shot, base five-shot
CONTINUE_SYSTEMS = ("magnet", "base", "llm2vec")
SEARCH_SYSTEMS = ("magnet", "minilm", "base", "llm2vec")
RATER_PATH = "rate"  # the rater-only page; invite links open it
MAX_OUTPUTS = 4  # output slots on the rater page
MAX_LIKERT = 2  # Likert questions per output on the rater page
BLIND_CHOICES = ("A", "B", "C", "tie", "all_bad")
MAX_SEED = 2**63 - 1  # seeds are stored as 64-bit integers
VOTES_PER_WINDOW, VOTE_WINDOW_S = 6, 300.0  # blind votes per browser session and per client
STATUS_CHOICES = ("open", "closed", "draft")
BLIND_MIN_TEMPERATURE, BLIND_MIN_TOP_P = 0.7, 0.9  # blind runs are sampled at least this widely
PROGRESS = gr.Progress()  # Gradio injects a live tracker where a handler has this default


@dataclass(frozen=True)
class Unavailable:
    """A system that has no result in a comparison, and why: its adapter is not loaded, or it
    failed on this input. Shown in the system's place, never mixed up with a result."""

    system: str
    reason: str

    @property
    def message(self) -> str:
        return f"Unavailable: {self.reason}"


def _error(e: Exception) -> gr.Error:
    return gr.Error(str(e), print_exception=False)


@contextmanager
def user_errors():
    """The one mapping of the two libraries' errors (AnnotationError, MagnetError) raised in
    the block to a gr.Error with their one-sentence message and no traceback; also usable as
    a decorator. A gr.Error raised in the block passes as it is."""
    try:
        yield
    except (AnnotationError, MagnetError) as e:
        raise _error(e) from None


@dataclass
class MagnetApp:
    engine: Engine
    store: AnnotationStore
    settings: AppSettings = field(default_factory=AppSettings)
    cache_dir: Path = field(default_factory=lambda: Path(tempfile.gettempdir()) / "magnet")
    # adapters that did not load -> why (main.load_engine)
    unavailable: dict[str, ModelLoadError] = field(default_factory=dict)
    minilm: search.Encoder | None = None
    login_throttle: LoginThrottle = field(default_factory=LoginThrottle)
    vote_limiter: RateLimiter = field(
        default_factory=lambda: RateLimiter(VOTES_PER_WINDOW, VOTE_WINDOW_S)
    )
    downloads: PrivateDownloads = field(default_factory=PrivateDownloads)
    # per browser session and per client address: digests of the texts seen filled with the
    # system names shown (a blind vote on one of them is flagged)
    shown_unblinded: OrderedDict[str, set[str]] = field(default_factory=OrderedDict)
    cuda_inside_calls: bool = False  # ZeroGPU: the model moves to the GPU inside each call

    def __post_init__(self) -> None:
        """The model work of each comparison as one GPU call (see gpu.py), asking for a
        duration that fits it; bound methods, so only texts and plain values are pickled."""
        self.compare_infill = gpu(
            self._compare_infill,
            lambda text, systems, decoding: infill_seconds(
                text.count(MARKER), decoding["max_span_tokens"]
            ),
        )
        self.compare_continue = gpu(
            self._compare_continue, lambda prompt, kw: continue_seconds(kw["max_new_tokens"])
        )
        self.compare_search = gpu(
            self._compare_search,
            lambda query, corpus, k, progress=None: search_seconds(self._to_embed(corpus)),
        )

    # ---------------------------------------------------------------- shared checks

    def availability(self, system: str) -> Unavailable | None:
        """None when the system can run, else why it cannot (shown in its column)."""
        adapter = system if system not in ("base", "zero-shot", "five-shot", "minilm") else None
        if adapter is None or adapter in self.engine.adapter_names:
            return None
        if adapter in self.unavailable:
            return Unavailable(system, str(self.unavailable[adapter]))
        return Unavailable(
            system,
            f"the '{adapter}' adapter is not loaded (train it into adapters/{adapter}, "
            f"or set MAGNET_ADAPTERS={adapter}=PATH).",
        )

    def check_text(self, text: str | None, what: str) -> str:
        """Empty or over-long input -> a readable gr.Error; else the text."""
        text = text or ""
        if not text.strip():
            raise gr.Error(f"The {what} is empty.", print_exception=False)
        _check_encodable(text, f"The {what}")
        limit = self.settings.max_input_tokens
        if len(text) > self.settings.max_input_chars:
            msg = (
                f"The {what} is {len(text):,} characters long; at most {limit} tokens (about "
                f"{self.settings.max_input_chars:,} characters) fit. Nothing was cut: shorten it "
                "and try again."
            )
            raise gr.Error(msg, print_exception=False)
        n = len(self.engine.tokenizer(text, add_special_tokens=False).input_ids)
        if n > limit:
            raise gr.Error(
                f"The {what} is {n} tokens long; at most {limit} tokens.", print_exception=False
            )
        return text

    # ---------------------------------------------------------------- Infill tab

    def infill(
        self,
        text: str,
        sampling: str = "greedy",
        temperature: float = 1.0,
        top_p: float = 1.0,
        seed: float | None = None,
        max_span: float = 16,
        blind: bool = False,
        request: gr.Request | None = None,
    ) -> InfillView:
        """Fill the blanks with MAGNET, zero-shot and five-shot: a column per system (title,
        highlighted text, info), then the blind-vote state, the vote row's visibility and the
        reveal text."""
        text = self.check_text(text, "text")
        if MARKER not in text:
            raise gr.Error(
                f"The text has no blank; put {MARKER} where words are missing.",
                print_exception=False,
            )
        max_span = int(max_span)
        if not 1 <= max_span <= self.settings.max_span_tokens:
            raise gr.Error(
                f"The span length must be 1 to {self.settings.max_span_tokens} tokens.",
                print_exception=False,
            )
        decoding = {"max_span_tokens": max_span, "do_sample": sampling == "sampled"}
        if decoding["do_sample"] or blind:
            decoding.update(
                do_sample=True,
                temperature=float(temperature),
                top_p=float(top_p),
                seed=_seed(seed),
            )
        if blind:
            # A blind comparison is always sampled, not too close to greedy, with a seed nobody
            # sees: greedy output (or a chosen seed) could be rerun with the names shown.
            decoding.update(
                temperature=max(decoding["temperature"], BLIND_MIN_TEMPERATURE),
                top_p=max(decoding["top_p"], BLIND_MIN_TOP_P),
                seed=None,
            )
        viewers = [f"session:{_session(request)}", f"client:{_client(request)}"]
        digest = hashlib.sha256(text.strip().encode("utf-8")).hexdigest()
        if not blind:
            for key in viewers:
                seen = self.shown_unblinded.pop(key, set())
                seen.add(digest)
                self.shown_unblinded[key] = seen  # most recent last
            while len(self.shown_unblinded) > 20_000:
                self.shown_unblinded.popitem(last=False)
        results = self._infill_all(text, decoding)
        order = list(range(len(INFILL_SYSTEMS)))
        state = None
        if blind:
            ready = [i for i in order if not isinstance(results[i], Unavailable)]
            if len(ready) < 2:
                raise gr.Error("Blind comparison needs at least two systems that can run.")
            random.SystemRandom().shuffle(ready)  # not predictable from earlier orders
            order = ready + [i for i in order if i not in ready]
            state = {
                "vote_id": uuid.uuid4().hex,
                "text": text,
                "seen_unblinded": any(digest in self.shown_unblinded.get(k, ()) for k in viewers),
                "shown": [
                    {
                        "system": INFILL_SYSTEMS[i],
                        "text": results[i].filled,
                        "fills": [s.text.strip() for s in results[i].spans],
                        "decoding": decoding,
                        "seed": results[i].seed,
                        "info": _infill_info(results[i], max_span),
                    }
                    for i in ready
                ],
            }
        cols: list[InfillColumn] = []
        for pos, i in enumerate(order):
            system, r = INFILL_SYSTEMS[i], results[i]
            if isinstance(r, Unavailable):  # not loaded, or failed on this text
                cols.append(InfillColumn(f"### {TITLES[system]}", "", r.message))
                continue
            title = f"### {chr(65 + pos)}" if blind else f"### {TITLES[system]}"
            # Blind: time and token counts would point at the slow five-shot system; they are
            # shown with the names after the vote.
            info = (
                "Time and length are shown after the vote." if blind else _infill_info(r, max_span)
            )
            cols.append(InfillColumn(title, render.filled_html(r.highlighted()), info))
        reveal = (
            "Vote to see which system wrote which output. Blind comparisons are sampled "
            f"(temperature {decoding['temperature']:g}, top-p {decoding['top_p']:g}) with a "
            "hidden seed."
            if blind
            else ""
        )
        return InfillView(cols, state, gr.update(visible=blind), reveal)

    def vote(self, state: dict | None, choice: str, request: gr.Request | None = None) -> tuple:
        """Store a blind vote through annotation_db, then reveal the names -> (reveal, state)."""
        if not state:
            raise gr.Error("Fill a text in blind mode first, then vote.", print_exception=False)
        if choice not in BLIND_CHOICES:
            raise gr.Error(
                "Pick an output (A, B or C), a tie or all bad, then vote.", print_exception=False
            )
        shown = state["shown"]
        if choice in "ABC" and "ABC".index(choice) >= len(shown):
            raise gr.Error(f"There is no output {choice}.", print_exception=False)
        voters = [f"session:{_session(request)}", f"client:{_client(request)}"]
        wait = self.vote_limiter.wait_s(voters)
        if wait > 0:
            raise gr.Error(
                f"At most {VOTES_PER_WINDOW} votes per {VOTE_WINDOW_S / 60:.0f} minutes; "
                f"please vote again in {math.ceil(wait)} s.",
                print_exception=False,
            )
        outs = []
        for o in shown:
            adapter = "magnet" if o["system"] == "magnet" else "base"
            model, revision = studies.provenance(self.engine, adapter)
            outs.append(
                OutputIn(
                    state["vote_id"],
                    o["system"],
                    o["text"],
                    o["fills"],
                    model=model,
                    adapter_revision=revision,
                    decoding=o["decoding"],
                    seed=o["seed"],
                )
            )
        visitor = getattr(request, "session_hash", None) if request else None
        with user_errors():
            receipt = self.store.record_blind_vote(
                state["text"],
                outs,
                choice,
                vote_id=state["vote_id"],
                visitor=visitor,
                seen_unblinded=bool(state.get("seen_unblinded")),
            )
        if not receipt.duplicate:
            self.vote_limiter.record(voters)
        names = "\n".join(
            f"- {chr(65 + i)} = {TITLES.get(s, s)}: {o.get('info', '')}"
            for i, (s, o) in enumerate(zip(receipt.systems, shown, strict=True))
        )
        picked = TITLES.get(receipt.chosen_system or "", render.choice_label(choice).lower())
        return f"Thanks, vote stored ({picked}).\n\n{names}", None

    # ---------------------------------------------------------------- Continue tab

    def continue_(
        self,
        prompt: str,
        max_new_tokens: float = 48,
        sampling: str = "greedy",
        temperature: float = 1.0,
        top_p: float = 1.0,
        seed: float | None = None,
    ) -> Iterator[ContinueView]:
        """Stream MAGNET, base and llm2vec continuations side by side, one token each in turn:
        each step a column (text, stats) per system."""
        prompt = self.check_text(prompt, "prompt")
        n = int(max_new_tokens)
        if not 1 <= n <= self.settings.max_new_tokens:
            raise gr.Error(
                f"The length must be 1 to {self.settings.max_new_tokens} tokens.",
                print_exception=False,
            )
        kw: dict = {"max_new_tokens": n, "do_sample": sampling == "sampled"}
        if kw["do_sample"]:
            kw.update(temperature=float(temperature), top_p=float(top_p), seed=_seed(seed))
        yield from self.compare_continue(prompt, kw)

    # ---------------------------------------------------------------- Search tab

    def corpus(self, upload: str | None) -> search.Corpus:
        """The uploaded corpus if any, else the built-in held-out Wikipedia text."""
        if not upload:
            return _default_corpus()
        path = Path(upload)
        limit = self.settings.max_upload_mb * 1024 * 1024
        if path.stat().st_size > limit:
            raise gr.Error(
                f"The file is larger than {self.settings.max_upload_mb} MB.", print_exception=False
            )
        with user_errors():
            return search.parse_corpus(
                path.name, path.read_bytes(), self.settings.max_passages, limit
            )

    def encoder(self, system: str) -> search.Encoder:
        if system == "minilm":
            if self.minilm is None:
                self.minilm = search.MiniLMEncoder()
            return self.minilm
        return search.EngineEncoder(self.engine, system)

    def search(
        self, query: str, upload: str | None = None, k: float = 5, progress=PROGRESS
    ) -> SearchView:
        """Top-k passages of every encoder; returns one table per system, the overlaps, a note."""
        query = self.check_text(query, "query")
        corpus = self.corpus(upload)
        k = max(1, min(int(k), 20, len(corpus)))
        return self.compare_search(query, corpus, k, progress)

    def _to_embed(self, corpus: search.Corpus) -> int:
        """Passages the search of `corpus` has to embed: those of every encoder that can run
        and has no cached vectors for it yet."""
        todo = 0
        for system in SEARCH_SYSTEMS:
            if self.availability(system):
                continue
            try:
                cached = search.cache_path(self.cache_dir, self.encoder(system), corpus).is_file()
            except MagnetError:
                cached = False  # the search itself reports why this encoder cannot run
            todo += 0 if cached else len(corpus)
        return todo

    # ---------------------------------------------------------------- rater page (/rate)

    def rate_load(self, token_box: str | None, request: gr.Request | None = None) -> RaterPage:
        """On page load: the token of an invite link (?token=...) opens the session."""
        token = (token_box or "").strip()
        if not token and request is not None:
            token = dict(getattr(request, "query_params", {}) or {}).get("token", "")
        if not token:
            hint = "Open your invite link, or paste its token."
            return RaterPage(token, self._rater_view(None, None, hint))
        return RaterPage(token, self.rate_open(token))

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
            return self._rater_view(None, head, "This study is closed. Thank you!")
        if item is not None:
            n_likert = sum(q.kind == "likert" for q in item.questions)
            if len(item.outputs) > MAX_OUTPUTS or n_likert > MAX_LIKERT:
                raise gr.Error(
                    f"This study shows {len(item.outputs)} outputs and {n_likert} 1-5 questions "
                    f"per item; this page shows at most {MAX_OUTPUTS} and {MAX_LIKERT}. Ask the "
                    "study's organiser to rate it with fewer systems or questions.",
                    print_exception=False,
                )
        status = f"{prog.done} of {prog.total} done"
        status += " — all done, thank you!" if prog.finished else ""
        return self._rater_view(item, head, status, token)

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
        self, item: RaterItem | None, head: str | None, status: str, token: str = ""
    ) -> RaterView:
        """Head, status, shown-item id, item text, then per output slot its visibility, title,
        highlighted text, appropriate and Likert questions; then preference, comment, submit."""
        slots: list[RaterSlot] = []
        qs = item.questions if item else []
        has = {q.kind for q in qs}
        likerts = [q for q in qs if q.kind == "likert"][:MAX_LIKERT]
        appropriate = next((q for q in qs if q.kind == "appropriate"), None)
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
                        label=f"{q.prompt} ({q.scale_min}-{q.scale_max})" if q else "",
                        choices=[str(v) for v in range(q.scale_min, q.scale_max + 1)] if q else [],
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
                        label=appropriate.prompt if appropriate else "",
                    ),
                    likert=shown_likert,
                )
            )
        pref = next((q for q in qs if q.kind == "preference"), None)
        choices = [o.label for o in item.outputs] if item else []
        if pref:
            choices += ["tie"] * pref.allow_tie + ["all_bad"] * pref.allow_all_bad
        return RaterView(
            head=head or "",
            status=status,
            shown_item=self._shown_item_id(token, item),
            item_text=gr.update(value=item.text if item else "", visible=item is not None),
            slots=slots,
            preference=gr.update(
                visible=pref is not None, choices=render.choices(choices), value=None
            ),
            comment=gr.update(visible="comment" in has and item is not None, value=""),
            submit=gr.update(visible=item is not None),
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
        likerts = [q for q in item.questions if q.kind == "likert"][:MAX_LIKERT]
        ask_app = any(q.kind == "appropriate" for q in item.questions)
        answers: dict[str, dict] = {}
        for i, out in enumerate(item.outputs[:MAX_OUTPUTS]):
            vals = values[i * per_slot : (i + 1) * per_slot]
            a: dict = {"appropriate": None if vals[0] is None else vals[0] == "Yes"}
            a = a if ask_app else {}
            for q, v in zip(likerts, vals[1:], strict=False):
                a[q.name] = None if v is None else int(v)
            answers[out.label] = a
        preference, comment = [*values[MAX_OUTPUTS * per_slot :], None, None][:2]
        missing = rating_form.missing_answers(item.questions, answers, preference)
        if missing:
            raise gr.Error(missing, print_exception=False)
        if isinstance(comment, str):
            _check_encodable(comment, "The comment")
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

    # ---------------------------------------------------------------- Admin tab

    def admin_login(self, password: str, request: gr.Request | None = None) -> AdminLogin:
        """-> authorized, panel visibility, message, study list. Compared in constant time,
        and only when this client (and the app as a whole) is not locked out after wrong
        passwords; a refusal shows its one message and touches nothing else."""
        client = _client(request)
        wait = self.login_throttle.wait_s(client)
        if wait > 0:
            log.warning("Admin login from %s refused: locked for %.0f s more", client, wait)
            msg = f"Too many wrong passwords; try again in {math.ceil(wait)} s."
            return AdminLogin(False, gr.update(visible=False), msg, gr.skip())
        want = self.settings.admin_password
        given = (password or "").encode("utf-8", "surrogatepass")
        ok = bool(want) and hmac.compare_digest(given, want.encode("utf-8", "surrogatepass"))
        if ok:
            self.login_throttle.succeeded(client)
            return AdminLogin(True, gr.update(visible=True), "", self.admin_studies(True))
        if want:
            self.login_throttle.failed(client)
        return AdminLogin(False, gr.update(visible=False), "Wrong password.", gr.skip())

    def _admin(self, authorized: bool) -> None:
        if not (authorized and self.settings.admin_password):
            raise gr.Error("Log in as admin first.", print_exception=False)

    def admin_studies(self, authorized: bool) -> gr.update:
        self._admin(authorized)
        names = [s.name for s in self.store.list_studies()]
        return gr.update(choices=names, value=names[-1] if names else None)

    def admin_create(
        self,
        authorized: bool,
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
        self._admin(authorized)
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

        def make_items() -> tuple:
            uploaded = read_item_file(upload) if upload else None
            return studies.study_items(item_kind, int(n_items), n_gold, len(systems), uploaded)

        progress(0, desc="Generating outputs")
        with user_errors():
            info, reused = studies.build_study(
                self.engine,
                self.compare_infill,
                self.store,
                name,
                make_items,
                systems,
                questions=list(questions or ["appropriate"]),
                raters_per_item=int(raters_per_item),
                instructions=instructions or "",
                max_span_tokens=int(max_span),
                progress=lambda done, total: progress(
                    done / max(total, 1), desc=f"Outputs {done}/{total}"
                ),
            )
        msg = (
            f"Created study '{info.name}': {render.plural(info.n_items, 'item')} "
            f"({render.plural(info.n_gold, 'attention check')}), systems "
            f"{', '.join(TITLES.get(s, s) for s in info.systems)}."
        )
        if resuming:
            msg += f" Resumed: {reused} outputs had been made before the restart."
        return msg, gr.update(choices=[s.name for s in self.store.list_studies()], value=info.name)

    def admin_preset(self, authorized: bool, preset: str = "paper") -> StudyForm:
        """The paper's protocol in the form (item kind, items, systems, questions, raters,
        checks, max span, instructions); the study is made when the admin clicks create."""
        self._admin(authorized)
        p = studies.PAPER
        return StudyForm(
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
    ) -> str:
        """The sample-size planner's answer for the form's values (Markdown of numbers only),
        and the power of the number of items the form asks for."""
        try:
            k = int(raters_per_item)
            plan = plan_study(float(p1), float(p2), k, icc=float(icc))
            line = f"**Planner:** {plan.summary()}"
            if n_items:
                pw = power_at(int(n_items), float(p1), float(p2), k, icc=float(icc))
                line += f" This form's {int(n_items)} items: power {pw:.0%}."
        except (AnnotationError, TypeError, ValueError) as e:
            return f"Planner: {e}"
        return line

    def admin_unfinished(self, authorized: bool) -> str:
        self._admin(authorized)
        names = studies.unfinished(self.store)
        if not names:
            return ""
        return (
            "Stopped while generating (type the same name and click create to resume): "
            + ", ".join(names)
        )

    def admin_invite(
        self, authorized: bool, study: str, names: str, request: gr.Request | None = None
    ) -> list[list[str]]:
        """One invite per line of names -> [[name, link]] (the only time tokens are shown)."""
        self._admin(authorized)
        people = [n.strip() for n in (names or "").splitlines() if n.strip()]
        if not study or not people:
            raise gr.Error("Pick a study and type one rater name per line.", print_exception=False)
        with user_errors():
            invites = self.store.invite_many(study, people)
        return [[i.display_name, self._invite_link(i.token, request)] for i in invites]

    def admin_progress(self, authorized: bool, study: str) -> AdminProgress:
        self._admin(authorized)
        with user_errors():
            p = self.store.progress(study)
        rows = [
            [r.rater_id, r.display_name, r.done, r.open, r.remaining, r.gold_done, r.gold_failed]
            + ["revoked" if r.revoked else "active"]
            for r in p.raters
        ]
        summary = (
            f"{p.judgments_done} of {p.judgments_needed} judgments ({p.share_done:.0%}); "
            f"{p.items_complete} of {p.n_items} items complete; status {p.status}."
        )
        return AdminProgress(summary, rows)

    def admin_results(self, authorized: bool, study: str) -> AdminResults:
        """-> a table with n on every row, the results as JSON, a plot of the appropriate
        share per system with intervals."""
        self._admin(authorized)
        with user_errors():
            res = self.store.results(study)
        return AdminResults(_results_rows(res), res.to_dict(), _rates_plot(res))

    def admin_status(self, authorized: bool, study: str, status: str) -> str:
        """Close, reopen (or set back to draft) a study; raters of a closed one are told so."""
        self._admin(authorized)
        if not study or status not in STATUS_CHOICES:
            raise gr.Error("Pick a study and a status.", print_exception=False)
        with user_errors():
            info = self.store.set_status(study, status)
        log.info("Study %r set to %s by the admin", info.name, info.status)
        return f"Study '{info.name}' is now {info.status}."

    def admin_revoke(self, authorized: bool, study: str, rater_id: float | None) -> str:
        """Make one rater's invite link stop working (their answers so far are kept)."""
        self._admin(authorized)
        rater = _rater_id(study, rater_id)
        with user_errors():
            r = self.store.revoke(study, rater)
        log.info("Invite of rater %s (%s) in study %r revoked", r.rater_id, r.display_name, study)
        return (
            f"The invite link of rater {r.rater_id} ({r.display_name}) no longer works; "
            f"their {r.done} answers are kept."
        )

    def admin_new_link(
        self,
        authorized: bool,
        study: str,
        rater_id: float | None,
        request: gr.Request | None = None,
    ) -> str:
        """A new invite link for one rater (the old one stops working; answers are kept)."""
        self._admin(authorized)
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

    def admin_export(self, authorized: bool, study: str, fmt: str) -> str:
        """Write the ratings to a private file -> a single-use download link (Markdown)."""
        self._admin(authorized)
        ext = {"csv": "csv", "jsonl": "jsonl"}.get(fmt)
        if not study or ext is None:
            raise gr.Error("Pick a study and a format (csv or jsonl).", print_exception=False)
        out = self.downloads.new_path(f"{safe_file_stem(study)}.{ext}")
        with user_errors():
            return self._download_link(self.store.export(study, fmt, out))

    def admin_report(self, authorized: bool, study: str, exclude_failing_share: float = -1) -> str:
        """The study's self-contained HTML report -> a single-use download link (Markdown)."""
        self._admin(authorized)
        if not study:
            raise gr.Error("Pick a study.", print_exception=False)
        share = (
            None
            if exclude_failing_share is None or exclude_failing_share < 0
            else float(exclude_failing_share)
        )
        out = self.downloads.new_path(f"{safe_file_stem(study)}.html")
        with user_errors():
            return self._download_link(
                write_report(self.store, study, out, exclude_failing_share=share)
            )

    def admin_backup(self, authorized: bool) -> str:
        """A consistent copy of the database -> a single-use download link (Markdown)."""
        self._admin(authorized)
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

    # ---------------------------------------------------------------- model work
    # Each comparison's model work is one method, wrapped into one GPU call in __post_init__.
    # On ZeroGPU these run in a forked worker: they return picklable values and raise gr.Error
    # (which spaces passes on as it is; any other exception would reach the visitor as a
    # bare "ZeroGPU worker error").

    def _on_device(self) -> None:
        if self.cuda_inside_calls:
            self.engine.to_cuda_if_visible()

    def _infill_all(self, text: str, decoding: dict) -> list[InfillResult | Unavailable]:
        """All three infills of one comparison, run as one batch by the engine (one GPU
        call); Unavailable for a system that is not loaded or failed."""
        ready = [system for system in INFILL_SYSTEMS if not self.availability(system)]
        out = self.compare_infill(text, ready, decoding) if ready else []
        done = dict(zip(ready, out, strict=True))
        errors = [r for r in out if isinstance(r, MagnetError)]
        if errors and len(errors) == len(out):
            raise _error(errors[0]) from None
        results: list[InfillResult | Unavailable] = []
        for system in INFILL_SYSTEMS:
            r = done.get(system)
            if r is None:
                results.append(self.availability(system))
            elif isinstance(r, MagnetError):
                results.append(Unavailable(system, str(r)))
            else:
                results.append(r)
        return results

    def _compare_infill(self, text: str, systems: list[str], decoding: dict) -> list:
        """engine.compare_infill of the systems on one text: per system an InfillResult or
        the MagnetError that stopped it; an error of the input itself as gr.Error."""
        self._on_device()
        with user_errors():  # the input itself is bad: say so once
            return self.engine.compare_infill(text, systems, marker=MARKER, **decoding)

    def _compare_continue(self, prompt: str, kw: dict) -> Iterator[ContinueView]:
        """The three continuations grow side by side: rows of one batch, one token each per
        step. Yields a column (text, stats) per system."""
        self._on_device()
        texts = {system: "" for system in CONTINUE_SYSTEMS}
        stats = {system: _stats("") for system in CONTINUE_SYSTEMS}
        running = []
        for system in CONTINUE_SYSTEMS:
            why = self.availability(system)
            if why:
                stats[system] = why.message
            else:
                running.append(system)
        adapters = [None if system == "base" else system for system in running]
        with user_errors():
            steps = self.engine.compare_continue(prompt, adapters, **kw) if running else iter(())
        start = time.perf_counter()
        done: set[str] = set()
        try:
            for step in steps:
                for system, (text, reason) in zip(running, step, strict=True):
                    if system in done:
                        continue
                    texts[system] = text
                    stats[system] = _stats(text)
                    if reason is not None:
                        done.add(system)
                        stats[system] += f" · done in {time.perf_counter() - start:.1f} s"
                yield ContinueView([ContinueColumn(texts[s], stats[s]) for s in CONTINUE_SYSTEMS])
        except MagnetError as e:
            for system in running:
                if system not in done:
                    stats[system] = f"Stopped: {e}"
            yield ContinueView([ContinueColumn(texts[s], stats[s]) for s in CONTINUE_SYSTEMS])

    def _compare_search(
        self, query: str, corpus: search.Corpus, k: int, progress=None
    ) -> SearchView:
        """Top-k passages of every encoder; returns one table per system, the overlaps, a note."""
        self._on_device()
        hits: dict[str, list[search.Hit]] = {}
        tables, notes = [], []
        for n, system in enumerate(SEARCH_SYSTEMS):
            why = self.availability(system)
            if why:
                tables.append([[None, None, why.message]])
                continue
            t0 = time.perf_counter()

            def report(done: int, total: int, n: int = n, system: str = system) -> None:
                if progress is not None:
                    progress(
                        (n + done / max(total, 1)) / len(SEARCH_SYSTEMS),
                        desc=f"Embedding the corpus with {TITLES[system]} ({done}/{total})",
                    )

            with user_errors():
                enc = self.encoder(system)
                vecs = search.corpus_index(enc, corpus, self.cache_dir, report)
                found = search.top_k(enc.encode([query])[0], vecs, corpus, k)
            hits[system] = found
            tables.append([[h.rank, round(h.score, 3), h.text] for h in found])
            notes.append(f"{TITLES[system]}: {time.perf_counter() - t0:.2f} s")
        names = list(hits)
        overlap = [[TITLES[a], *[search.overlap(hits[a], hits[b]) for b in names]] for a in names]
        passages = render.plural(len(corpus), "passage")
        note = f"{corpus.name}: {passages}; top {k}. " + "; ".join(notes)
        headers = ["system", *[TITLES[b] for b in names]]
        return SearchView(tables, gr.update(value=overlap, headers=headers), note)


_DEFAULT_CORPUS: list[search.Corpus] = []


def _default_corpus() -> search.Corpus:
    if not _DEFAULT_CORPUS:
        _DEFAULT_CORPUS.append(search.default_corpus())
    return _DEFAULT_CORPUS[0]


# -------------------------------------------------------------------- rendering helpers


def _seed(seed: float | str | None) -> int | None:
    """A seed from the page or the API: None (or negative) for a random one, else 0..MAX_SEED."""
    if seed in (None, ""):
        return None
    try:
        value = float(seed)
    except (TypeError, ValueError):
        value = math.nan
    if not math.isfinite(value) or value != int(value) or value > MAX_SEED:
        raise gr.Error(
            f"The seed must be a whole number from 0 to {MAX_SEED}, or -1 for a random one.",
            print_exception=False,
        )
    return None if value < 0 else int(value)


def _check_encodable(text: str, what: str) -> None:
    """A lone surrogate (a broken copy-paste, a crafted API call) cannot be encoded; say so."""
    try:
        text.encode("utf-8")
    except UnicodeEncodeError as e:
        raise gr.Error(
            f"{what} contains a character that is not valid text (a lone surrogate at position "
            f"{e.start + 1}); remove it and try again.",
            print_exception=False,
        ) from None


def _mac(token: str, message: str) -> str:
    key = token.encode("utf-8", "surrogatepass")
    return hmac.new(key, message.encode(), hashlib.sha256).hexdigest()[:32]


def _session(request: gr.Request | None) -> str:
    return str(getattr(request, "session_hash", None) or "anonymous")


def _client(request: gr.Request | None) -> str:
    """The client's address as the server saw it (behind a proxy: the proxy's)."""
    client = getattr(request, "client", None)
    return str(getattr(client, "host", None) or "unknown")


def _stats(text: str) -> str:
    s = repetition_stats(text)
    return (
        f"Rep-4 {s.rep_4:.2f} · Rep-Sen {s.rep_sen:.2f} · "
        f"distinct-1 {s.distinct_1:.2f} · distinct-2 {s.distinct_2:.2f} · {len(text.split())} words"
    )


def _rater_id(study: str, rater_id: float | None) -> int:
    """The rater id typed in Admin, or one sentence saying what is missing."""
    ok = isinstance(rater_id, int | float) and math.isfinite(rater_id)
    if not study or not ok or rater_id != int(rater_id) or rater_id < 1:
        raise gr.Error(
            "Pick a study and type the rater's id (see Progress).", print_exception=False
        )
    return int(rater_id)


def _infill_info(r, max_span: int) -> str:
    """Per blank: the tokens kept, why the span ended (in words), tokens written and dropped
    where the system copied context; then when the system was done in the shared batch."""
    parts = []
    for k, span in enumerate(r.spans, start=1):
        n = len(span.token_ids)
        why = END_REASONS.get(span.end_reason, span.end_reason)
        if span.end_reason == "max":
            why = f"{why} ({render.plural(max_span, 'token')})"
        kept = render.plural(n, "token")
        if span.written is not None and span.written != n:
            kept = f"{kept} kept of {span.written} written"
        parts.append(("" if len(r.spans) == 1 else f"blank {k}: ") + f"{kept}, {why}")
    return "; ".join(parts) + f" · done after {r.seconds:.2f} s"


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


def _results_rows(res) -> list[list]:
    """[what, n, estimate, 95% interval] for every number of a study's results, in words;
    below the minimum n the interval column says "not enough votes"."""
    rows: list[list] = []
    for s in res.systems:
        title = TITLES.get(s.system, s.system)
        if s.appropriate is not None:
            a = s.appropriate
            iv = _interval(a.low, a.high, None, "{:.0%}") if a.n else "no ratings yet"
            rows.append([f"{title}: judged appropriate", a.n, f"{a.share:.0%}", iv])
        for q, m in s.likert.items():
            iv = _interval(m.low, m.high, not_enough(m.n, res.min_n), "{:.2f}")
            mean = f"{m.mean:.2f}" if m.n else "–"
            rows.append([f"{title}: {q.replace('_', ' ')} (mean)", m.n, mean, iv])
    for p in res.pairwise:
        a, b = TITLES.get(p.system_a, p.system_a), TITLES.get(p.system_b, p.system_b)
        iv = _interval(p.low, p.high, p.note, "{:.0%}")
        rows.append([f"{a} beats {b} (ties count half)", p.n, f"{p.win_rate_a:.0%}", iv])
    for b in res.bradley_terry:
        title = TITLES.get(b.system, b.system)
        iv = _interval(b.low, b.high, b.note, "{:+.2f}")
        rows.append([f"{title}: Bradley–Terry strength", b.n, f"{b.score:+.2f}", iv])
    return rows


def _rates_plot(res):
    """Share judged appropriate per system with its interval (matplotlib figure), or None."""
    rows = [s for s in res.systems if s.appropriate is not None]
    if not rows:
        return None
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(figsize=(5, 3))
    shares = [s.appropriate.share for s in rows]
    err = [
        [s.appropriate.share - s.appropriate.low for s in rows],
        [s.appropriate.high - s.appropriate.share for s in rows],
    ]
    names = [f"{TITLES.get(s.system, s.system)}\nn = {s.appropriate.n}" for s in rows]
    ax.bar(names, shares, yerr=err, capsize=4)
    ax.set_ylim(0, 1)
    ax.set_ylabel("judged appropriate")
    fig.tight_layout()
    plt.close(fig)
    return fig
