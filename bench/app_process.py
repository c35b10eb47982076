"""`python -m app` as a child process, for the benchmarks that drive it from outside.

Shared by bench_app_load.py and bench_startup.py (bench/common.py stays as the lead wrote it):
a free loopback port, a temporary database with one open study and one invite, a cache folder
that is either empty (cold) or links the de-quantized embedded model (warm), and a context
manager that always ends the child, even when the benchmark fails half-way.
"""

from __future__ import annotations

import contextlib
import os
import socket
import subprocess
import sys
import time
import urllib.request
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

from common import ROOT  # also puts the repository on sys.path

from magnet_model import systems

INFILL_TEXT = "The Eiffel Tower is a wrought-iron [blank] in Paris, France."
RATE_SYSTEMS = systems.for_task("infill")
MAX_SLOTS, PER_SLOT = 4, 3  # the Rate tab's output slots x (appropriate, Likert, Likert)


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def make_study(db_path: Path, n_items: int) -> str:
    """A study of n_items 3-output items with one rater; -> the rater's invite token."""
    from annotation_db import AnnotationStore, ItemIn, OutputIn

    items = [
        ItemIn(f"i{i}", f"Passage {i}: the river [blank] through the valley.", ["winds"])
        for i in range(n_items)
    ]
    outputs = [
        OutputIn(f"i{i}", s, f"Passage {i}: the river {s} through the valley.", fills=[s])
        for i in range(n_items)
        for s in RATE_SYSTEMS
    ]
    with AnnotationStore(path=db_path) as store:
        store.create_study(
            "load", items, outputs, questions=["appropriate", "preference"], raters_per_item=1
        )
        return store.invite_many("load", ["rater"])[0].token


def warm_cache(cache: Path) -> Path:
    """Link the de-quantized embedded model of the user's cache into `cache` (made if absent)."""
    from magnet_model.loading import dequantize_embedded, embedded_cache_path
    from magnet_model.settings import default_cache_dir

    src = dequantize_embedded(default_cache_dir())  # no-op when it is there already
    dst = embedded_cache_path(cache)
    dst.parent.mkdir(parents=True, exist_ok=True)
    if not dst.exists():
        dst.symlink_to(src, target_is_directory=True)
    return cache


@dataclass
class AppProcess:
    proc: subprocess.Popen
    port: int
    log: Path
    started: float  # perf_counter just before Popen

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}/"

    def http_ok(self) -> bool:
        try:
            with urllib.request.urlopen(self.url, timeout=2) as r:
                return r.status == 200
        except OSError:
            return False

    def wait_http(self, timeout: float = 600) -> float:
        """Seconds from process start to the first HTTP 200 of the page."""
        while not self.http_ok():
            if self.proc.poll() is not None:
                raise RuntimeError(f"the app exited ({self.proc.returncode}):\n{self.tail()}")
            if time.perf_counter() - self.started > timeout:
                raise TimeoutError(f"no HTTP 200 after {timeout:.0f} s:\n{self.tail()}")
            time.sleep(0.05)
        return time.perf_counter() - self.started

    def tail(self, n: int = 3000) -> str:
        try:
            return self.log.read_text(errors="replace")[-n:]
        except OSError:
            return ""


@contextlib.contextmanager
def run_app(
    tmp: Path, cache: Path, db: Path, extra_env: dict[str, str] | None = None
) -> Iterator[AppProcess]:
    """Start `python -m app` on a free loopback port; terminate (then kill) it on exit."""
    port = free_port()
    env = dict(
        os.environ,
        MAGNET_DB_PATH=str(db),
        MAGNET_CACHE_DIR=str(cache),
        GRADIO_ANALYTICS_ENABLED="False",
        HF_HUB_OFFLINE="1",
        PYTHONUNBUFFERED="1",
        **(extra_env or {}),
    )
    env.pop("MAGNET_DB_URL", None)
    log = tmp / f"app-{port}.log"
    with open(log, "w") as out:
        started = time.perf_counter()
        proc = subprocess.Popen(
            [sys.executable, "-m", "app", "--host", "127.0.0.1", "--port", str(port)],
            cwd=ROOT,
            env=env,
            stdout=out,
            stderr=subprocess.STDOUT,
        )
    try:
        yield AppProcess(proc, port, log, started)
    finally:
        if proc.poll() is None:
            proc.terminate()
            try:
                proc.wait(15)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait(15)


def client(url: str):
    from gradio_client import Client

    return Client(url, verbose=False, download_files=False)


def infill_args(max_span: int) -> tuple:
    """Arguments of the /infill endpoint: text, greedy decoding, span, not blind."""
    return (INFILL_TEXT, "greedy", 1.0, 1.0, -1, max_span, False)


def submit_args(token: str, shown_item: str) -> tuple:
    """Arguments of /rate_submit: the token, the id of the item the page shows (third output
    of /rate_open and /rate_submit), every output judged appropriate, A preferred, no comment."""
    answers = []
    for _ in range(MAX_SLOTS):
        answers += ["Yes", None, None]
    return (token, shown_item, *answers, "A", "")
