"""The demo tabs: Infill (with the blind vote), Continue and Search.

Each handler checks what the visitor typed, runs its comparison through model_calls (one GPU
call) and returns a named result (outputs.py). Everything a user typed goes to Textbox values,
or into HTML only escaped (render.filled_html); never into Markdown.
"""

from __future__ import annotations

import hashlib
import math
import random
import uuid
from collections.abc import Callable, Iterator
from pathlib import Path

import gradio as gr

from annotation_db import OutputIn
from magnet_model import systems
from magnet_model.decoding import FillSettings
from magnet_model.inference import search
from magnet_model.inference.blanks import split_blanks
from magnet_model.inference.engine import END_REASONS
from magnet_model.systems import TITLES

from . import render, studies
from .model_calls import ModelCalls, default_corpus
from .outputs import ContinueView, InfillColumn, InfillView, SearchView, VoteView
from .services import (
    PROGRESS,
    VOTE_WINDOW_S,
    VOTES_PER_WINDOW,
    Unavailable,
    quota_client,
    session_of,
    user_errors,
)
from .studies import INFILL_SYSTEMS, MARKER

BLIND_CHOICES = ("A", "B", "C", "tie", "all_bad")
CONTINUE_NO_REPEAT = 3  # the Continue tab's loop guard: no 3-gram of tokens twice
MAX_SEED = 2**63 - 1  # seeds are stored as 64-bit integers
BLIND_MIN_TEMPERATURE, BLIND_MIN_TOP_P = 0.7, 0.9  # blind runs are sampled at least this widely


class DemoHandlers(ModelCalls):
    """What the buttons of the Infill, Continue and Search tabs call."""

    # ---------------------------------------------------------------- Infill tab

    def _infill_text(self, text: str) -> str:
        """The text, with its blanks checked as the engine checks them (no blank, only blanks,
        too many: said here, not after the call waited for the model), and no passage of an
        open study; or one sentence."""
        self.check_demo_open()
        text = self.check_text(text, "text")
        with user_errors():
            split_blanks(text, MARKER)
        self.check_not_study_passage(text)
        return text

    def _infill_input(self, text: str, max_span: float) -> tuple[str, int]:
        span = _tokens_in_range(max_span, self.settings.max_span_tokens, "span length")
        return self._infill_text(text), span

    def infill_admit(
        self,
        text: str,
        sampling: str = "greedy",
        temperature: float = 1.0,
        top_p: float = 1.0,
        seed: float | str | None = None,
        max_span: float = 16,
        blind: bool = False,
        request: gr.Request | None = None,
    ) -> list[dict]:
        """Gradio's validator of infill, run when the call joins the queue (the page's call and
        any API client's alike): the input checks at once, then the demo quota, counted only
        for a call that passed them. A refusal is said on the text box."""
        most = self.settings.max_span_tokens
        return _admit(
            7,
            [
                lambda: self._infill_text(text),
                lambda: _tokens_in_range(max_span, most, "span length"),
                lambda: _seed(seed) if sampling == "sampled" or blind else None,
                lambda: self.demo_call(request),
            ],
        )

    def infill(
        self,
        text: str,
        sampling: str = "greedy",
        temperature: float = 1.0,
        top_p: float = 1.0,
        seed: float | str | None = None,
        max_span: float = 16,
        blind: bool = False,
        request: gr.Request | None = None,
    ) -> InfillView:
        """Fill the blanks with MAGNET, zero-shot and five-shot: a column per system (title,
        highlighted text, info), then the blind-vote state, the vote row's visibility and the
        reveal text. Reached only through the queue, after infill_admit counted the call."""
        text, max_span = self._infill_input(text, max_span)
        settings = FillSettings(max_span)
        if sampling == "sampled" or blind:
            settings = FillSettings(max_span, True, float(temperature), float(top_p), _seed(seed))
        if blind:
            # A blind comparison is always sampled, not too close to greedy, with a seed nobody
            # sees: greedy output (or a chosen seed) could be rerun with the names shown.
            settings = FillSettings(
                max_span,
                True,
                max(settings.temperature, BLIND_MIN_TEMPERATURE),
                max(settings.top_p, BLIND_MIN_TOP_P),
            )
        decoding = settings.record()  # stored with a blind vote's outputs
        viewers = [f"session:{session_of(request)}", f"client:{quota_client(request)}"]
        digest = hashlib.sha256(text.strip().encode("utf-8")).hexdigest()
        if not blind:
            for key in viewers:
                seen = self.shown_unblinded.pop(key, set())
                seen.add(digest)
                self.shown_unblinded[key] = seen  # most recent last
            while len(self.shown_unblinded) > 20_000:
                self.shown_unblinded.popitem(last=False)
        results = self._infill_all(text, settings)
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
            f"(temperature {settings.temperature:g}, top-p {settings.top_p:g}) with a "
            "hidden seed."
            if blind
            else ""
        )
        return InfillView(cols, state, gr.update(visible=blind), reveal)

    def vote(self, state: dict | None, choice: str, request: gr.Request | None = None) -> VoteView:
        """Store a blind vote through annotation_db, then reveal the names: in the list under
        the columns and on the columns themselves (title and info)."""
        if state and state.get("voted"):
            raise gr.Error(
                "You already voted on this comparison; it was counted once. Fill the blanks "
                "again for a new one.",
                print_exception=False,
            )
        if not state:
            raise gr.Error("Fill a text in blind mode first, then vote.", print_exception=False)
        if choice not in BLIND_CHOICES:
            raise gr.Error(
                "Pick an output (A, B or C), a tie or all bad, then vote.", print_exception=False
            )
        shown = state["shown"]
        if choice in "ABC" and "ABC".index(choice) >= len(shown):
            raise gr.Error(f"There is no output {choice}.", print_exception=False)
        voters = [f"session:{session_of(request)}", f"client:{quota_client(request)}"]
        wait = self.vote_limiter.wait_s(voters)
        if wait > 0:
            raise gr.Error(
                f"At most {VOTES_PER_WINDOW} votes per {VOTE_WINDOW_S / 60:.0f} minutes; "
                f"please vote again in {math.ceil(wait)} s.",
                print_exception=False,
            )
        outs = []
        for o in shown:
            adapter = systems.get(o["system"]).adapter or systems.BASE
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
        rest = [gr.skip()] * (len(INFILL_SYSTEMS) - len(shown))  # unavailable: named already
        titles = [f"### {chr(65 + i)} = {TITLES.get(s, s)}" for i, s in enumerate(receipt.systems)]
        infos = [o.get("info", "") for o in shown]
        return VoteView(
            f"Thanks, vote stored ({picked}).\n\n{names}",
            {"voted": True},
            titles + rest,
            infos + rest,
        )

    # ---------------------------------------------------------------- Continue tab

    def continue_check(self, prompt: str, max_new_tokens: float = 48) -> tuple[str, int]:
        """The input checks of continue_ (also run at join, by continue_admit): the demo not
        paused by a study, the prompt no passage of an open study, the length in range."""
        self.check_demo_open()
        prompt = self.check_text(prompt, "prompt")
        self.check_not_study_passage(prompt)
        return prompt, _tokens_in_range(max_new_tokens, self.settings.max_new_tokens, "length")

    def continue_admit(
        self,
        prompt: str,
        max_new_tokens: float = 48,
        sampling: str = "greedy",
        temperature: float = 1.0,
        top_p: float = 1.0,
        seed: float | str | None = None,
        loop_guard: bool = False,
        request: gr.Request | None = None,
    ) -> list[dict]:
        """Gradio's validator of continue_: the checks, then the quota, at join."""
        return _admit(
            7,
            [
                lambda: self.continue_check(prompt, max_new_tokens),
                lambda: _seed(seed) if sampling == "sampled" else None,
                lambda: self.demo_call(request),
            ],
        )

    def continue_(
        self,
        prompt: str,
        max_new_tokens: float = 48,
        sampling: str = "greedy",
        temperature: float = 1.0,
        top_p: float = 1.0,
        seed: float | str | None = None,
        loop_guard: bool = False,
        request: gr.Request | None = None,
    ) -> Iterator[ContinueView]:
        """Stream MAGNET, base and llm2vec continuations side by side, one token each in turn:
        each step a column (text, stats) per system. Counted at join (continue_admit).
        loop_guard: no 3-gram of tokens twice in a continuation, for every system alike (off
        by default: the side-by-side is the paper's comparison of the raw models)."""
        prompt, n = self.continue_check(prompt, max_new_tokens)
        kw: dict = {"max_new_tokens": n, "do_sample": sampling == "sampled"}
        if loop_guard:
            kw["no_repeat"] = CONTINUE_NO_REPEAT
        if kw["do_sample"]:
            kw.update(temperature=float(temperature), top_p=float(top_p), seed=_seed(seed))
        with self.model_gate.interactive():  # a study being generated waits for it
            yield from self.compare_continue(prompt, kw)

    # ---------------------------------------------------------------- Search tab

    def corpus(self, upload: str | None) -> search.Corpus:
        """The uploaded corpus if any, else the built-in held-out Wikipedia text."""
        if not upload:
            return default_corpus()
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

    def search(
        self,
        query: str,
        upload: str | None = None,
        k: float = 5,
        progress=PROGRESS,
        request: gr.Request | None = None,
    ) -> SearchView:
        """Top-k passages of every encoder; returns one table per system, the overlaps, a note.
        Counted at join (search_admit)."""
        query = self.search_check(query)
        corpus = self.corpus(upload)
        k = max(1, min(int(k), 20, len(corpus)))
        with self.model_gate.interactive():  # a study being generated waits for it
            return self.compare_search(query, corpus, k, progress)

    def search_check(self, query: str, upload: str | None = None, k: float = 5) -> str:
        """The query's checks (also run at join, by search_admit): the demo not paused by a
        study, the query no passage of an open study."""
        self.check_demo_open()
        query = self.check_text(query, "query")
        self.check_not_study_passage(query)
        return query

    def search_admit(
        self,
        query: str,
        upload: str | None = None,
        k: float = 5,
        request: gr.Request | None = None,
    ) -> list[dict]:
        """Gradio's validator of search: the query, the uploaded corpus (read now: a file
        without a 'text' column is told before any wait), then the quota, at join."""
        return _admit(
            3,
            [
                lambda: self.search_check(query),
                lambda: self.corpus(upload) if upload else None,  # the default one is fine
                lambda: self.demo_call(request),
            ],
        )


def _admit(n_inputs: int, checks: list[Callable[[], object]]) -> list[dict]:
    """A validator's answer: each check in turn; the first refusal (gr.Error) is said on the
    first input, and the later checks (the quota last) do not run. On the text, the prompt or
    the query whatever it is about: only a text box shows Gradio's validation message (a
    slider or a file box would not), and the seed's box is in a closed accordion."""
    for check in checks:
        try:
            check()
        except gr.Error as e:
            return [gr.validate(False, str(e.message))] + [gr.validate(True, "")] * (n_inputs - 1)
    return [gr.validate(True, "")] * n_inputs


def sampling_controls(sampling: str, blind: bool = False) -> tuple[dict, dict]:
    """Temperature and top-p usable only where they act: sampled decoding, or a blind
    comparison (always sampled, at least at BLIND_MIN_TEMPERATURE / BLIND_MIN_TOP_P)."""
    on = sampling == "sampled" or bool(blind)
    return gr.update(interactive=on), gr.update(interactive=on)


def _tokens_in_range(value: float, most: int, what: str) -> int:
    """A token count from a slider or the API, 1..most, or one sentence saying so."""
    n = int(value)
    if not 1 <= n <= most:
        raise gr.Error(f"The {what} must be 1 to {most} tokens.", print_exception=False)
    return n


def _seed(seed: float | str | None) -> int | None:
    """A seed from the page (text) or the API (text or a number): empty or negative for a
    random one, else a whole number 0..MAX_SEED, compared as an integer (a float cannot hold
    2**63 - 1); anything else is one sentence."""
    if isinstance(seed, bool):
        value = None
    elif isinstance(seed, int):
        value = seed
    else:
        text = "" if seed is None else str(seed).strip()
        if text == "":
            return None
        try:
            value = int(text)
        except ValueError:
            try:
                f = float(text)
            except ValueError:
                f = math.nan
            value = int(f) if math.isfinite(f) and f == int(f) and abs(f) < 2**53 else None
    if value is None or value > MAX_SEED:
        raise gr.Error(
            f"The seed must be a whole number from 0 to {MAX_SEED}, or -1 for a random one.",
            print_exception=False,
        )
    return None if value < 0 else value


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
