"""What every handler shares: the services of one process (the engine, the annotation store,
the search encoders, the limits), the checks of what a user typed, and the one mapping of the
libraries' errors to what a visitor sees.

Services is the state that the per-area handler classes (model_calls, demo, rater, admin)
build on; handlers.MagnetApp puts them together. A system without a result is Unavailable,
never mixed up with a result. Errors of the two libraries become gr.Error with their
one-sentence message (user_errors); no traceback reaches a visitor.
"""

from __future__ import annotations

import math
import tempfile
import threading
from collections import OrderedDict
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path

import gradio as gr

from annotation_db import AnnotationError, AnnotationStore
from magnet_model import systems
from magnet_model.errors import MagnetError, ModelLoadError
from magnet_model.inference import search
from magnet_model.inference.engine import Engine

from .blinding import DemoPolicy, StudyPassages
from .jobs import ModelGate, StudyJobs
from .security import AdminSessions, LoginThrottle, PrivateDownloads, RateLimiter, client_key
from .settings import AppSettings

VOTES_PER_WINDOW, VOTE_WINDOW_S = 6, 300.0  # blind votes per browser session and per client
PROGRESS = gr.Progress()  # Gradio injects a live tracker where a handler has this default


PAUSED = (
    "The demo is paused while a rating study runs on this server: its raters judge the "
    "systems' outputs blind, and the demo could show which system wrote which. It is back when "
    "the study is closed."
)


@dataclass(frozen=True)
class Unavailable:
    """A system that has no result in a comparison, and why: its adapter is not loaded, or it
    failed on this input. Shown in the system's place, never mixed up with a result."""

    system: str
    reason: str

    @property
    def message(self) -> str:
        return f"Unavailable: {self.reason}"


def as_gr_error(e: Exception) -> gr.Error:
    """The library's sentence as a sentence: a capital first letter (the libraries write
    theirs to follow "error: " on a command line)."""
    msg = str(e)
    return gr.Error(msg[:1].upper() + msg[1:], print_exception=False)


@contextmanager
def user_errors():
    """The one mapping of the two libraries' errors (AnnotationError, MagnetError) raised in
    the block to a gr.Error with their one-sentence message and no traceback; also usable as
    a decorator. A gr.Error raised in the block passes as it is."""
    try:
        yield
    except (AnnotationError, MagnetError) as e:
        raise as_gr_error(e) from None


@dataclass
class Services:
    """The services of one process and the checks every handler uses."""

    engine: Engine
    store: AnnotationStore
    settings: AppSettings = field(default_factory=AppSettings)
    cache_dir: Path = field(default_factory=lambda: Path(tempfile.gettempdir()) / "magnet")
    # adapters that did not load -> why (main.load_engine)
    unavailable: dict[str, ModelLoadError] = field(default_factory=dict)
    # search encoders by system, built on first use (model_calls.encoder)
    encoders: dict[str, search.Encoder] = field(default_factory=dict)
    login_throttle: LoginThrottle = field(default_factory=LoginThrottle)
    vote_limiter: RateLimiter = field(
        default_factory=lambda: RateLimiter(VOTES_PER_WINDOW, VOTE_WINDOW_S)
    )
    downloads: PrivateDownloads = field(default_factory=PrivateDownloads)
    admin_sessions: AdminSessions = field(default_factory=AdminSessions)
    # demo calls (Infill, Continue, Search) per address and from everyone, per minute; None:
    # made from the settings in __post_init__
    demo_per_client: RateLimiter | None = None
    demo_total: RateLimiter | None = None
    # per browser session and per client address: digests of the texts seen filled with the
    # system names shown (a blind vote on one of them is flagged)
    shown_unblinded: OrderedDict[str, set[str]] = field(default_factory=OrderedDict)
    cuda_inside_calls: bool = False  # ZeroGPU: the model moves to the GPU inside each call
    # studies generated in the background; demo calls go first between their items
    study_jobs: StudyJobs = field(default_factory=StudyJobs)
    model_gate: ModelGate = field(default_factory=ModelGate)
    # the passages of the open studies, which the demo does not fill (None: made from the store)
    study_passages: StudyPassages | None = None
    # the studies beside which the admin keeps the demo on (blinding.DemoPolicy)
    demo_policy: DemoPolicy = field(default_factory=DemoPolicy)
    # studies whose flagged outputs are being made again; an invite to one of them waits
    remaking: set[str] = field(default_factory=set)
    remake_lock: threading.Lock = field(default_factory=threading.Lock)

    def __post_init__(self) -> None:
        st = self.settings
        if self.study_passages is None:
            self.study_passages = StudyPassages(self.store)
        self.admin_sessions.idle_s = st.admin_idle_minutes * 60.0
        self.admin_sessions.max_s = st.admin_session_hours * 3600.0
        if self.demo_per_client is None:
            self.demo_per_client = RateLimiter(st.demo_calls_per_minute, 60.0)
        if self.demo_total is None:
            self.demo_total = RateLimiter(st.demo_calls_per_minute_total, 60.0)

    @property
    def search_cache_bytes(self) -> int:
        return self.settings.search_cache_mb * 2**20

    def demo_call(self, request: gr.Request | None) -> None:
        """Count one demo call, or refuse it with one sentence: the model is shared, and one
        address (or a crowd) may not take it all; ratings never pass through here. Called by
        the validators (demo.py's *_admit) when a call joins the queue and passed its checks,
        so waiting calls count as soon as they wait and refused ones not at all."""
        client = f"client:{quota_client(request)}"
        mine = self.demo_per_client.wait_s([client])
        everyone = self.demo_total.wait_s(["all"])
        if mine > 0 or everyone > 0:
            if mine > 0:
                who, n, wait = "from your address", self.demo_per_client.limit, mine
            else:
                who, n, wait = "on this server", self.demo_total.limit, everyone
            raise gr.Error(
                f"Too many demo requests {who} (at most {n} a minute); "
                f"try again in {math.ceil(wait)} s.",
                print_exception=False,
            )
        self.demo_per_client.record([client])
        self.demo_total.record(["all"])

    def paused_by(self) -> tuple[str, ...]:
        """The live studies (open, with invited raters) that pause the demo: all but those
        the admin keeps the demo on beside (blinding.DemoPolicy)."""
        allowed = self.demo_policy.allowed()
        return tuple(s for s in self.study_passages.live() if s not in allowed)

    def demo_notice(self) -> str:
        """What the page says on opening: that the demo is paused, or nothing."""
        return f"**{PAUSED}**" if self.paused_by() else ""

    def check_demo_open(self) -> None:
        """Refuse any model call of the demo while a study that pauses it runs: a rater could
        otherwise learn which system wrote which output, whatever text they typed."""
        if self.paused_by():
            raise gr.Error(PAUSED, print_exception=False)

    def check_not_study_passage(self, text: str) -> None:
        """Refuse a text that is (close to) a passage of an open study: the demo would show
        which system wrote which of the raters' outputs. How close is not said."""
        if self.study_passages.matches(text):
            raise gr.Error(
                "This text is too close to a passage of a rating study that is running now. "
                "While the study runs the demo does not fill, continue or show its passages: it "
                "would show which system wrote which of the outputs the raters judge blind.",
                print_exception=False,
            )

    def availability(self, system: str) -> Unavailable | None:
        """None when the system can run, else why it cannot (shown in its column)."""
        adapter = systems.get(system).adapter
        if adapter is None or adapter in self.engine.runner.adapter_names:
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
        check_encodable(text, f"The {what}")
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


def check_encodable(text: str, what: str) -> None:
    """A lone surrogate (a broken copy-paste, a crafted API call) cannot be encoded; say so."""
    try:
        text.encode("utf-8")
    except UnicodeEncodeError as e:
        raise gr.Error(
            f"{what} contains a character that is not valid text (a lone surrogate at position "
            f"{e.start + 1}); remove it and try again.",
            print_exception=False,
        ) from None


def session_of(request: gr.Request | None) -> str:
    """The browser session's id as Gradio gave it ("anonymous" without one)."""
    return str(getattr(request, "session_hash", None) or "anonymous")


def client_of(request: gr.Request | None) -> str:
    """The client's address as the server saw it (behind a proxy: the proxy's)."""
    client = getattr(request, "client", None)
    return str(getattr(client, "host", None) or "unknown")


def quota_client(request: gr.Request | None) -> str:
    """The unit a per-address quota counts (demo calls, blind votes): an IPv4 address or the
    /64 network of an IPv6 one, as the login backoff counts (``security.client_key``): one
    host usually holds a whole /64, so its addresses are not that many clients."""
    return client_key(client_of(request))
