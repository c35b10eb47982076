"""What the buttons call: validation, calls into magnet_model / annotation_db, rendering.

Every handler is a method of MagnetApp (the services of one process: the engine, the
annotation store, the search encoders), so tests call exactly what Gradio calls. Errors of the
two libraries become gr.Error with their one-sentence message; no traceback reaches a visitor.
Everything a user typed or uploaded goes to Textbox / HighlightedText / Dataframe values
(rendered as text by the browser), never into Markdown or HTML.
"""

from __future__ import annotations

import hmac
import itertools
import logging
import random
import tempfile
import time
import uuid
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path

import gradio as gr

from annotation_db import AnnotationError, AnnotationStore, OutputIn, RaterItem
from annotation_db import read_items as read_item_file
from magnet_model import search
from magnet_model.engine import Engine
from magnet_model.errors import MagnetError
from magnet_model.metrics import repetition_stats

from . import studies
from .gpu import gpu
from .settings import AppSettings

log = logging.getLogger("app")

MARKER = studies.MARKER
INFILL_SYSTEMS = studies.INFILL_SYSTEMS  # MAGNET, base zero-shot, base five-shot
CONTINUE_SYSTEMS = ("magnet", "base", "llm2vec")
SEARCH_SYSTEMS = ("magnet", "minilm", "base", "llm2vec")
TITLES = {
    "magnet": "MAGNET",
    "zero-shot": "Base, zero-shot prompt",
    "five-shot": "Base, five-shot prompt",
    "base": "Base model",
    "llm2vec": "LLM2Vec-style",
    "minilm": "all-MiniLM-L6-v2",
}
MAX_OUTPUTS = 4  # output slots on the Rate tab
MAX_LIKERT = 2  # Likert questions per output on the Rate tab
BLIND_CHOICES = ("A", "B", "C", "tie", "all_bad")
PROGRESS = gr.Progress()  # Gradio injects a live tracker where a handler has this default


def _error(e: Exception) -> gr.Error:
    return gr.Error(str(e), print_exception=False)


@dataclass
class MagnetApp:
    engine: Engine
    store: AnnotationStore
    settings: AppSettings = field(default_factory=AppSettings)
    cache_dir: Path = field(default_factory=lambda: Path(tempfile.gettempdir()) / "magnet")
    unavailable: dict[str, str] = field(default_factory=dict)  # adapter -> why not loaded
    minilm: search.Encoder | None = None

    # ---------------------------------------------------------------- shared checks

    def availability(self, system: str) -> str | None:
        """None when the system can run, else the reason it cannot (shown in its column)."""
        adapter = system if system not in ("base", "zero-shot", "five-shot", "minilm") else None
        if adapter is None or adapter in self.engine.adapter_names:
            return None
        return self.unavailable.get(
            adapter,
            f"the '{adapter}' adapter is not loaded (train it into adapters/{adapter}, "
            f"or set MAGNET_ADAPTERS={adapter}=PATH).",
        )

    def check_text(self, text: str | None, what: str) -> str:
        """Empty or over-long input -> a readable gr.Error; else the text."""
        text = text or ""
        if not text.strip():
            raise gr.Error(f"The {what} is empty.", print_exception=False)
        limit = self.settings.max_input_tokens
        if len(text) > self.settings.max_input_chars:
            msg = f"The {what} is too long: at most {limit} tokens."
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
    ) -> tuple:
        """Fill the blanks with MAGNET, zero-shot and five-shot.

        Returns (title, highlighted, info) for each of three columns, then the blind-vote
        state, the vote row's visibility and the reveal text.
        """
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
        if decoding["do_sample"]:
            decoding.update(
                temperature=float(temperature),
                top_p=float(top_p),
                seed=None if seed in (None, "") or seed < 0 else int(seed),
            )
        results = _infill_all(self, text, decoding)
        order = list(range(len(INFILL_SYSTEMS)))
        state = None
        if blind:
            ready = [i for i in order if isinstance(results[i], tuple) is False]
            if len(ready) < 2:
                raise gr.Error("Blind comparison needs at least two systems that can run.")
            random.shuffle(ready)
            order = ready + [i for i in order if i not in ready]
            state = {
                "vote_id": uuid.uuid4().hex,
                "text": text,
                "shown": [
                    {
                        "system": INFILL_SYSTEMS[i],
                        "text": results[i].filled,
                        "fills": [s.text.strip() for s in results[i].spans],
                        "decoding": decoding,
                        "seed": results[i].seed,
                    }
                    for i in ready
                ],
            }
        cols: list = []
        for pos, i in enumerate(order):
            system, r = INFILL_SYSTEMS[i], results[i]
            if isinstance(r, tuple):  # (None, reason): unavailable or failed
                cols += [f"### {TITLES[system]}", [], f"Unavailable: {r[1]}"]
                continue
            title = f"### {chr(65 + pos)}" if blind else f"### {TITLES[system]}"
            ends = ", ".join(s.end_reason for s in r.spans)
            info = f"{r.seconds:.2f} s · {r.generated_tokens} tokens · span ends: {ends}"
            cols += [title, r.highlighted(), info]
        reveal = "Vote to see which system wrote which output." if blind else ""
        return (*cols, state, gr.update(visible=blind), reveal)

    def vote(self, state: dict | None, choice: str, request: gr.Request | None = None) -> tuple:
        """Store a blind vote through annotation_db, then reveal the names -> (reveal, state)."""
        if not state:
            raise gr.Error("Fill a text in blind mode first, then vote.", print_exception=False)
        if choice not in BLIND_CHOICES:
            raise gr.Error(f"Unknown choice {choice!r}.", print_exception=False)
        shown = state["shown"]
        if choice in "ABC" and "ABC".index(choice) >= len(shown):
            raise gr.Error(f"There is no output {choice}.", print_exception=False)
        outs = [
            OutputIn(
                state["vote_id"],
                o["system"],
                o["text"],
                o["fills"],
                model=self.engine.loaded.source,
                decoding=o["decoding"],
                seed=o["seed"],
            )
            for o in shown
        ]
        visitor = getattr(request, "session_hash", None) if request else None
        try:
            receipt = self.store.record_blind_vote(
                state["text"], outs, choice, vote_id=state["vote_id"], visitor=visitor
            )
        except AnnotationError as e:
            raise _error(e) from None
        names = " · ".join(
            f"{chr(65 + i)} = {TITLES.get(s, s)}" for i, s in enumerate(receipt.systems)
        )
        picked = TITLES.get(receipt.chosen_system or "", choice.replace("_", " "))
        return f"Thanks, vote stored ({picked}). {names}", None

    # ---------------------------------------------------------------- Continue tab

    def continue_(
        self,
        prompt: str,
        max_new_tokens: float = 48,
        sampling: str = "greedy",
        temperature: float = 1.0,
        top_p: float = 1.0,
        seed: float | None = None,
    ) -> Iterator[tuple]:
        """Stream MAGNET, base and llm2vec continuations side by side, one token each in turn.

        Yields (text, stats) for each of the three columns.
        """
        prompt = self.check_text(prompt, "prompt")
        n = int(max_new_tokens)
        if not 1 <= n <= self.settings.max_new_tokens:
            raise gr.Error(
                f"The length must be 1 to {self.settings.max_new_tokens} tokens.",
                print_exception=False,
            )
        kw: dict = {"max_new_tokens": n, "do_sample": sampling == "sampled"}
        if kw["do_sample"]:
            s = None if seed in (None, "") or seed < 0 else int(seed)
            kw.update(temperature=float(temperature), top_p=float(top_p), seed=s)
        yield from _continue_all(self, prompt, kw)

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
        try:
            return search.parse_corpus(path.name, path.read_bytes())
        except MagnetError as e:
            raise _error(e) from None

    def encoder(self, system: str) -> search.Encoder:
        if system == "minilm":
            if self.minilm is None:
                self.minilm = search.MiniLMEncoder()
            return self.minilm
        return search.EngineEncoder(self.engine, system)

    def search(
        self, query: str, upload: str | None = None, k: float = 5, progress=PROGRESS
    ) -> tuple:
        """Top-k passages of every encoder; returns one table per system, the overlaps, a note."""
        query = self.check_text(query, "query")
        corpus = self.corpus(upload)
        k = max(1, min(int(k), 20, len(corpus)))
        hits: dict[str, list[search.Hit]] = {}
        tables, notes = [], []
        for n, system in enumerate(SEARCH_SYSTEMS):
            why = self.availability(system)
            if why:
                tables.append([[None, None, f"Unavailable: {why}"]])
                continue
            t0 = time.perf_counter()

            def report(done: int, total: int, n: int = n, system: str = system) -> None:
                progress(
                    (n + done / max(total, 1)) / len(SEARCH_SYSTEMS),
                    desc=f"Embedding the corpus with {TITLES[system]} ({done}/{total})",
                )

            try:
                found = _search_one(self, system, corpus, query, k, report)
            except MagnetError as e:
                raise _error(e) from None
            hits[system] = found
            tables.append([[h.rank, round(h.score, 3), h.text] for h in found])
            notes.append(f"{TITLES[system]}: {time.perf_counter() - t0:.2f} s")
        names = list(hits)
        overlap = [[TITLES[a], *[search.overlap(hits[a], hits[b]) for b in names]] for a in names]
        note = f"{corpus.name}: {len(corpus)} passages; top {k}. " + "; ".join(notes)
        headers = ["system", *[TITLES[b] for b in names]]
        return (*tables, gr.update(value=overlap, headers=headers), note)

    # ---------------------------------------------------------------- Rate tab

    def rate_load(self, token_box: str | None, request: gr.Request | None = None) -> tuple:
        """On page load: the token of an invite link (?token=...) opens the session."""
        token = (token_box or "").strip()
        if not token and request is not None:
            token = dict(getattr(request, "query_params", {}) or {}).get("token", "")
        if not token:
            hint = "Open your invite link, or paste its token."
            return (token, *self._rater_view(None, None, hint))
        return (token, *self.rate_open(token))

    def rate_open(self, token: str) -> tuple:
        """Open a rater's session and show their current (or next) item."""
        token = (token or "").strip()
        if not token:
            raise gr.Error("Paste the token of your invite link.", print_exception=False)
        try:
            session = self.store.open_session(token)
            item = self.store.next_item(token) if session.is_open else None
            prog = self.store.rater_progress(token)
        except AnnotationError as e:
            raise _error(e) from None
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
        return self._rater_view(item, head, status)

    def _rater_view(self, item: RaterItem | None, head: str | None, status: str) -> tuple:
        """(head, status, assignment id, item text, then per output slot: visibility, title,
        highlighted text, appropriate, Likert x MAX_LIKERT; then preference, comment, submit)."""
        slots: list = []
        qs = item.questions if item else []
        has = {q.kind for q in qs}
        likerts = [q for q in qs if q.kind == "likert"][:MAX_LIKERT]
        appropriate = next((q for q in qs if q.kind == "appropriate"), None)
        for i in range(MAX_OUTPUTS):
            out = item.outputs[i] if item and i < len(item.outputs) else None
            slots.append(gr.update(visible=out is not None))
            if out is None:
                slots += [None, None, gr.update(value=None), *[gr.update(value=None)] * MAX_LIKERT]
                continue
            slots += [f"Output {out.label}", _fills_highlighted(item.text, out.text, out.fills)]
            slots.append(
                gr.update(
                    visible=appropriate is not None,
                    value=None,
                    label=appropriate.prompt if appropriate else "",
                )
            )
            for j in range(MAX_LIKERT):
                q = likerts[j] if j < len(likerts) else None
                slots.append(
                    gr.update(
                        visible=q is not None,
                        value=None,
                        label=f"{q.prompt} ({q.scale_min}-{q.scale_max})" if q else "",
                        choices=[str(v) for v in range(q.scale_min, q.scale_max + 1)] if q else [],
                    )
                )
        pref = next((q for q in qs if q.kind == "preference"), None)
        choices = [o.label for o in item.outputs] if item else []
        if pref:
            choices += ["tie"] * pref.allow_tie + ["all_bad"] * pref.allow_all_bad
        return (
            head or "",
            status,
            item.assignment_id if item else None,
            item.text if item else "",
            *slots,
            gr.update(visible=pref is not None, choices=choices, value=None),
            gr.update(visible="comment" in has or item is not None, value=""),
            gr.update(visible=item is not None),
        )

    def rate_submit(self, token: str, assignment_id: int | None, *values) -> tuple:
        """Submit the answers to the shown item, then show the next one.

        values: per output slot (appropriate, Likert x MAX_LIKERT), then preference, comment.
        """
        if not token or assignment_id is None:
            raise gr.Error("Open your invite link first.", print_exception=False)
        per_slot = 1 + MAX_LIKERT
        try:
            item = self.store.next_item(token)
        except AnnotationError as e:
            raise _error(e) from None
        if item is None or item.assignment_id != assignment_id:
            return self.rate_open(token)  # answered elsewhere (another tab): show the current one
        likerts = [q for q in item.questions if q.kind == "likert"][:MAX_LIKERT]
        ask_app = any(q.kind == "appropriate" for q in item.questions)
        answers: dict[str, dict] = {}
        for i, out in enumerate(item.outputs[:MAX_OUTPUTS]):
            vals = values[i * per_slot : (i + 1) * per_slot]
            a: dict = {}
            if ask_app:
                if vals[0] is None:
                    raise gr.Error(
                        f"Answer the question for output {out.label}.", print_exception=False
                    )
                a["appropriate"] = vals[0] == "Yes"
            for q, v in zip(likerts, vals[1:], strict=False):
                if v is not None:
                    a[q.name] = int(v)
            answers[out.label] = a
        preference, comment = [*values[MAX_OUTPUTS * per_slot :], None, None][:2]
        try:
            self.store.submit(
                token,
                assignment_id,
                answers,
                preference=preference or None,
                comment=(comment or "").strip() or None,
            )
        except AnnotationError as e:
            raise _error(e) from None
        return self.rate_open(token)

    # ---------------------------------------------------------------- Admin tab

    def admin_login(self, password: str) -> tuple:
        """-> (authorized, panel visibility, message). Compared in constant time."""
        want = self.settings.admin_password
        ok = bool(want) and hmac.compare_digest((password or "").encode(), want.encode())
        return ok, gr.update(visible=ok), "" if ok else "Wrong password."

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
        progress=PROGRESS,
    ) -> tuple:
        """Items (built-in or uploaded), every system's outputs made ahead, one new study."""
        self._admin(authorized)
        if not (name or "").strip():
            raise gr.Error("Give the study a name.", print_exception=False)
        systems = list(systems or [])
        if not systems:
            raise gr.Error("Pick at least one system.", print_exception=False)
        for s in systems:
            why = self.availability(s)
            if why:
                raise gr.Error(f"{TITLES.get(s, s)} is unavailable: {why}", print_exception=False)
        try:
            if upload:
                if Path(upload).stat().st_size > self.settings.max_upload_mb * 1024 * 1024:
                    raise gr.Error(f"The file is larger than {self.settings.max_upload_mb} MB.")
                items = studies.blank_uploaded(read_item_file(upload))[: int(n_items)]
            else:
                items = studies.builtin_items(int(n_items))
            if not items:
                raise gr.Error("No usable item: texts need a [blank] or at least 11 words.")
            progress(0, desc="Generating outputs")
            outputs = studies.generate_outputs(
                self.engine,
                items,
                systems,
                int(max_span),
                lambda done, total: progress(done / total, desc=f"Outputs {done}/{total}"),
            )
            gold_items, gold_outputs = [], []
            if int(n_gold) > 0:
                from annotation_db import make_gold_items

                gold_items, gold_outputs = make_gold_items(items, int(n_gold), blank=MARKER)
            info = self.store.create_study(
                name.strip(),
                items + gold_items,
                outputs + gold_outputs,
                questions=list(questions or ["appropriate"]),
                instructions=instructions or "",
                raters_per_item=int(raters_per_item),
            )
        except (AnnotationError, MagnetError) as e:
            raise _error(e) from None
        msg = (
            f"Created study '{info.name}': {info.n_items} items ({info.n_gold} attention checks), "
            f"systems {', '.join(info.systems)}."
        )
        return msg, gr.update(choices=[s.name for s in self.store.list_studies()], value=info.name)

    def admin_invite(
        self, authorized: bool, study: str, names: str, request: gr.Request | None = None
    ) -> list[list[str]]:
        """One invite per line of names -> [[name, link]] (the only time tokens are shown)."""
        self._admin(authorized)
        people = [n.strip() for n in (names or "").splitlines() if n.strip()]
        if not study or not people:
            raise gr.Error("Pick a study and type one rater name per line.", print_exception=False)
        try:
            invites = self.store.invite_many(study, people)
        except AnnotationError as e:
            raise _error(e) from None
        base = self.settings.public_url or _base_url(request)
        return [[i.display_name, f"{base}/?token={i.token}"] for i in invites]

    def admin_progress(self, authorized: bool, study: str) -> tuple:
        self._admin(authorized)
        try:
            p = self.store.progress(study)
        except AnnotationError as e:
            raise _error(e) from None
        rows = [
            [r.display_name, r.done, r.open, r.remaining, r.gold_done, r.gold_failed]
            for r in p.raters
        ]
        summary = (
            f"{p.judgments_done} of {p.judgments_needed} judgments ({p.share_done:.0%}); "
            f"{p.items_complete} of {p.n_items} items complete; status {p.status}."
        )
        return summary, rows

    def admin_results(self, authorized: bool, study: str) -> tuple:
        """-> (results as JSON, a plot of the appropriate share per system with intervals)."""
        self._admin(authorized)
        try:
            res = self.store.results(study)
        except AnnotationError as e:
            raise _error(e) from None
        return res.to_dict(), _rates_plot(res)

    def admin_export(self, authorized: bool, study: str, fmt: str) -> str:
        self._admin(authorized)
        ext = {"csv": "csv", "jsonl": "jsonl"}.get(fmt)
        if not study or ext is None:
            raise gr.Error("Pick a study and a format (csv or jsonl).", print_exception=False)
        out = Path(tempfile.mkdtemp(prefix="magnet-export-")) / f"{study}.{ext}"
        try:
            return str(self.store.export(study, fmt, out))
        except AnnotationError as e:
            raise _error(e) from None

    def admin_backup(self, authorized: bool) -> str:
        self._admin(authorized)
        stamp = time.strftime("%Y%m%d-%H%M%S")
        out = Path(tempfile.mkdtemp(prefix="magnet-backup-")) / f"annotations-{stamp}.sqlite3"
        try:
            return str(self.store.backup(out))
        except AnnotationError as e:
            raise _error(e) from None


# -------------------------------------------------------------------- model work (GPU-decorated)


@gpu
def _infill_all(app: MagnetApp, text: str, decoding: dict) -> list:
    """All three infills of one comparison, run as one batch by the engine (one ZeroGPU
    call); (None, reason) for a system that is unavailable or failed."""
    ready = [system for system in INFILL_SYSTEMS if not app.availability(system)]
    try:
        out = app.engine.compare_infill(text, ready, marker=MARKER, **decoding) if ready else []
    except MagnetError as e:
        raise _error(e) from None  # the input itself is bad: say so once
    done = dict(zip(ready, out, strict=True))
    errors = [r for r in out if isinstance(r, MagnetError)]
    if errors and len(errors) == len(out):
        raise _error(errors[0]) from None
    results: list = []
    for system in INFILL_SYSTEMS:
        r = done.get(system)
        if r is None:
            results.append((None, app.availability(system)))
        elif isinstance(r, MagnetError):
            results.append((None, str(r)))
        else:
            results.append(r)
    return results


@gpu
def _continue_all(app: MagnetApp, prompt: str, kw: dict) -> Iterator[tuple]:
    """The three continuations grow side by side: rows of one batch, one token each per step."""
    texts = {system: "" for system in CONTINUE_SYSTEMS}
    stats = {system: _stats("") for system in CONTINUE_SYSTEMS}
    running = []
    for system in CONTINUE_SYSTEMS:
        why = app.availability(system)
        if why:
            stats[system] = f"Unavailable: {why}"
        else:
            running.append(system)
    adapters = [None if system == "base" else system for system in running]
    try:
        steps = app.engine.compare_continue(prompt, adapters, **kw) if running else iter(())
    except MagnetError as e:
        raise _error(e) from None
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
            yield tuple(
                itertools.chain.from_iterable((texts[s], stats[s]) for s in CONTINUE_SYSTEMS)
            )
    except MagnetError as e:
        for system in running:
            if system not in done:
                stats[system] = f"Stopped: {e}"
        yield tuple(itertools.chain.from_iterable((texts[s], stats[s]) for s in CONTINUE_SYSTEMS))


def _search_one(app: MagnetApp, system: str, corpus, query: str, k: int, report) -> list:
    enc = app.encoder(system)
    vecs = search.corpus_vectors(enc, corpus, app.cache_dir, report)
    return search.top_k(enc.encode([query])[0], vecs, corpus, k)


_DEFAULT_CORPUS: list[search.Corpus] = []


def _default_corpus() -> search.Corpus:
    if not _DEFAULT_CORPUS:
        _DEFAULT_CORPUS.append(search.default_corpus())
    return _DEFAULT_CORPUS[0]


# -------------------------------------------------------------------- rendering helpers


def _stats(text: str) -> str:
    s = repetition_stats(text)
    return (
        f"Rep-4 {s.rep_4:.2f} · Rep-Sen {s.rep_sen:.2f} · "
        f"distinct-1 {s.distinct_1:.2f} · distinct-2 {s.distinct_2:.2f} · {len(text.split())} words"
    )


def _fills_highlighted(text: str, filled: str, fills: list[str] | None) -> list[tuple]:
    """The item text with each blank replaced by its fill, the fills labelled for highlighting."""
    pieces = text.split(MARKER)
    if not fills or len(pieces) != len(fills) + 1:
        return [(filled, None)]
    out: list[tuple] = []
    for k, fill in enumerate(fills):
        out.append((pieces[k], None))
        out.append((fill, "filled in"))
    out.append((pieces[-1], None))
    return [(p, lab) for p, lab in out if p]


def _base_url(request: gr.Request | None) -> str:
    if request is None:
        return "http://127.0.0.1:7860"
    headers = dict(getattr(request, "headers", {}) or {})
    host = headers.get("x-forwarded-host") or headers.get("host") or "127.0.0.1:7860"
    proto = headers.get("x-forwarded-proto") or "http"
    return f"{proto}://{host}"


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
    ax.bar([TITLES.get(s.system, s.system) for s in rows], shares, yerr=err, capsize=4)
    ax.set_ylim(0, 1)
    ax.set_ylabel("judged appropriate")
    fig.tight_layout()
    plt.close(fig)
    return fig
