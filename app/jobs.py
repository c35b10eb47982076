"""Long work in the background: a study's outputs are generated in a thread of their own, item
by item, while demo visitors keep using the model.

A study of 100 items takes many minutes on a CPU. Run as a Gradio event it held the model's
queue for all of it (every Infill waited behind it) and seemed to stop when the admin closed
the tab. Here it runs in a thread that outlives the tab; between two items it lets every
demo call that is running finish first (ModelGate), and its progress can be asked for at any
time (StudyJobs.get), so a returning admin sees "generating in the background, 63/300".
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field

from annotation_db import StudyInfo

log = logging.getLogger("app")

MAX_YIELD_S = 60.0  # a study waits at most this long between two items for demo calls


class ModelGate:
    """Demo calls first: a background job waits between its steps while any runs."""

    def __init__(self, max_wait_s: float = MAX_YIELD_S) -> None:
        self._running = 0
        self._cond = threading.Condition()
        self.max_wait_s = max_wait_s

    @contextmanager
    def interactive(self) -> Iterator[None]:
        """Around a visitor's model call."""
        with self._cond:
            self._running += 1
        try:
            yield
        finally:
            with self._cond:
                self._running -= 1
                self._cond.notify_all()

    def background_turn(self) -> None:
        """Before a background step: wait until no visitor's call runs (or max_wait_s passed,
        so a steady stream of visitors slows a study down but cannot stop it)."""
        with self._cond:
            self._cond.wait_for(lambda: self._running == 0, timeout=self.max_wait_s)


@dataclass
class StudyJob:
    """One study being generated in this process."""

    name: str
    done: int = 0
    total: int = 0
    error: str | None = None  # why it stopped, in one sentence
    info: StudyInfo | None = None  # the study, once made
    reused: int = 0  # outputs made before a restart
    started: float = field(default_factory=time.monotonic)
    _finished: threading.Event = field(default_factory=threading.Event, repr=False)

    @property
    def running(self) -> bool:
        return not self._finished.is_set()

    def wait(self, timeout: float | None = None) -> bool:
        """True once the job has finished (made the study or stopped)."""
        return self._finished.wait(timeout)

    def progress(self, done: int, total: int) -> None:
        self.done, self.total = done, total


class StudyJobs:
    """The studies this process is generating, by name; at most one job per name."""

    def __init__(self) -> None:
        self._jobs: dict[str, StudyJob] = {}
        self._lock = threading.Lock()

    def get(self, name: str) -> StudyJob | None:
        with self._lock:
            return self._jobs.get(name)

    def running(self, name: str) -> StudyJob | None:
        job = self.get(name)
        return job if job is not None and job.running else None

    def start(
        self,
        name: str,
        work: Callable[[Callable[[int, int], None]], tuple[StudyInfo, int]],
        errors: tuple[type[Exception], ...] = (Exception,),
    ) -> StudyJob:
        """Run ``work(progress)`` in a thread of its own -> its job; the running job when one
        of this name already runs (a second click attaches to it, it never starts twice).
        An exception of ``errors`` stops the job with its message; the thread is a daemon, so
        it never keeps a stopping server alive (the outputs made so far are stored)."""
        with self._lock:
            job = self._jobs.get(name)
            if job is not None and job.running:
                return job
            job = self._jobs[name] = StudyJob(name)

        def run() -> None:
            try:
                job.info, job.reused = work(job.progress)
            except errors as e:
                job.error = str(getattr(e, "message", None) or e) or type(e).__name__
                log.warning("Generation of study %r stopped: %s", name, job.error)
            finally:
                job._finished.set()

        threading.Thread(target=run, name=f"study:{name}", daemon=True).start()
        return job
