"""Guards of the served app: admin-login backoff, vote rate limits, private admin downloads and
an ASGI middleware that caps request bodies and sets Referrer-Policy.

No Gradio here: plain Python and Starlette (the server under Gradio), so each guard is tested
on its own, with an injectable clock where time matters.
"""

from __future__ import annotations

import json
import logging
import secrets
import shutil
import tempfile
import threading
import time
from collections import OrderedDict, deque
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from pathlib import Path

from starlette.background import BackgroundTask
from starlette.requests import Request
from starlette.responses import FileResponse, PlainTextResponse, Response
from starlette.types import ASGIApp, Message, Receive, Scope, Send

log = logging.getLogger("app")

MAX_REQUEST_BYTES = 1024 * 1024  # any API call but an upload: its JSON is a few kB
UPLOAD_OVERHEAD_BYTES = 1024 * 1024  # multipart framing on top of MAGNET_MAX_UPLOAD_MB
DOWNLOAD_TTL_S = 600.0  # an admin download link works once, within 10 minutes
DOWNLOAD_ROUTE = "admin-files"


# -------------------------------------------------------------------- admin login backoff


@dataclass
class _Failures:
    count: int = 0
    last: float = 0.0
    locked_until: float = 0.0


@dataclass
class LoginThrottle:
    """Exponential backoff on wrong passwords, per client and for all clients together.

    After ``free`` wrong passwords from one client, each further one locks that client out for
    ``base_s * 2**k`` seconds (capped at ``max_s``); after ``global_free`` wrong passwords from
    anywhere, every client is locked the same way (capped at ``global_max_s``, so an attacker
    cannot keep the admin out for long). While locked, no password is even compared. Counts are
    forgotten ``forget_s`` after the last failure; a right password clears its client's count.
    """

    free: int = 3
    base_s: float = 1.0
    max_s: float = 900.0
    global_free: int = 20
    global_max_s: float = 300.0
    forget_s: float = 3600.0
    clock: Callable[[], float] = time.monotonic
    _clients: OrderedDict[str, _Failures] = field(default_factory=OrderedDict)
    _all: _Failures = field(default_factory=_Failures)
    _lock: threading.Lock = field(default_factory=threading.Lock)

    def wait_s(self, client: str) -> float:
        """Seconds before ``client`` may try a password (0: now)."""
        now = self.clock()
        with self._lock:
            mine = self._clients.get(client)
            until = max(mine.locked_until if mine else 0.0, self._all.locked_until)
        return max(0.0, until - now)

    def failed(self, client: str) -> float:
        """Record a wrong password; returns the new lockout of this client in seconds."""
        now = self.clock()
        with self._lock:
            mine = self._clients.pop(client, None) or _Failures()
            self._clients[client] = mine  # most recent last
            while len(self._clients) > 10_000:
                self._clients.popitem(last=False)
            for f, free, cap in (
                (mine, self.free, self.max_s),
                (self._all, self.global_free, self.global_max_s),
            ):
                if now - f.last > self.forget_s:
                    f.count = 0
                f.count += 1
                f.last = now
                if f.count > free:
                    f.locked_until = now + min(self.base_s * 2 ** (f.count - free - 1), cap)
            n_all = self._all.count
        wait = self.wait_s(client)
        log.warning(
            "Wrong admin password from %s (%d in a row from it, %d from all clients); "
            "next try allowed in %.0f s",
            client,
            mine.count,
            n_all,
            wait,
        )
        return wait

    def succeeded(self, client: str) -> None:
        with self._lock:
            self._clients.pop(client, None)


# -------------------------------------------------------------------- vote rate limit


@dataclass
class RateLimiter:
    """At most ``limit`` events per ``window_s`` seconds for each key (sliding window)."""

    limit: int
    window_s: float
    clock: Callable[[], float] = time.monotonic
    _events: OrderedDict[str, deque[float]] = field(default_factory=OrderedDict)
    _lock: threading.Lock = field(default_factory=threading.Lock)

    def wait_s(self, keys: Iterable[str]) -> float:
        """Seconds until every key may have one more event (0: now)."""
        now = self.clock()
        with self._lock:
            waits = [0.0]
            for k in keys:
                q = self._events.get(k)
                if q is None:
                    continue
                while q and now - q[0] >= self.window_s:
                    q.popleft()
                if len(q) >= self.limit:
                    waits.append(q[0] + self.window_s - now)
            return max(waits)

    def record(self, keys: Iterable[str]) -> None:
        now = self.clock()
        with self._lock:
            for k in keys:
                q = self._events.pop(k, None) or deque()
                q.append(now)
                self._events[k] = q
            while len(self._events) > 100_000:
                self._events.popitem(last=False)


# -------------------------------------------------------------------- private downloads


class PrivateDownloads:
    """Files for the admin only: written in a folder of their own (mode 0700, files 0600),
    served through a random single-use link, deleted after the download or after ``ttl_s``.

    Nothing goes through Gradio's file cache, so no ``/gradio_api/file=`` URL ever exists for
    an export or a backup.
    """

    def __init__(self, ttl_s: float = DOWNLOAD_TTL_S, clock: Callable[[], float] = time.monotonic):
        self.ttl_s = ttl_s
        self.clock = clock
        self._root: Path | None = None
        self._tickets: dict[str, tuple[Path, float]] = {}
        self._lock = threading.Lock()

    @property
    def root(self) -> Path:
        """The private folder (mode 0700, made on first use)."""
        with self._lock:
            if self._root is None:
                self._root = Path(tempfile.mkdtemp(prefix="magnet-admin-"))
            return self._root

    def new_path(self, filename: str) -> Path:
        """A fresh private folder holding ``filename`` (a name without folders)."""
        if Path(filename).name != filename or filename in ("", ".", ".."):
            raise ValueError(f"not a plain file name: {filename!r}")
        folder = Path(tempfile.mkdtemp(dir=self.root))
        return folder / filename

    def publish(self, path: Path) -> str:
        """Register ``path`` (made by ``new_path``); returns the link's ticket."""
        path = Path(path)
        if path.parent.parent != self.root:
            raise ValueError("publish only files made by new_path")
        path.chmod(0o600)
        ticket = secrets.token_urlsafe(32)
        with self._lock:
            self._tickets[ticket] = (path, self.clock() + self.ttl_s)
        timer = threading.Timer(self.ttl_s, self.sweep)
        timer.daemon = True
        timer.start()
        self.sweep()
        return ticket

    def take(self, ticket: str) -> Path | None:
        """The file of a live ticket, which is used up; None when unknown or expired."""
        self.sweep()
        with self._lock:
            entry = self._tickets.pop(ticket, None)
        return entry[0] if entry and entry[0].exists() else None

    def sweep(self) -> None:
        """Delete the files whose links have expired."""
        now = self.clock()
        with self._lock:
            dead = [t for t, (_, until) in self._tickets.items() if until <= now]
            paths = [self._tickets.pop(t)[0] for t in dead]
        for p in paths:
            _remove(p)

    def close(self) -> None:
        if self._root is not None:
            shutil.rmtree(self._root, ignore_errors=True)

    async def endpoint(self, request: Request) -> Response:
        """GET /admin-files/{ticket}: the file once, as an attachment, then it is deleted."""
        path = self.take(request.path_params.get("ticket", ""))
        if path is None:
            return PlainTextResponse(
                "This download link has expired or was already used; export again.",
                status_code=404,
                headers={"cache-control": "no-store"},
            )
        return FileResponse(
            path,
            filename=path.name,
            headers={"cache-control": "no-store"},
            background=BackgroundTask(_remove, path),
        )


def _remove(path: Path) -> None:
    shutil.rmtree(path.parent, ignore_errors=True)


# -------------------------------------------------------------------- request guard


class RequestGuard:
    """ASGI middleware: refuses request bodies over the cap with 413 and one sentence, before
    anything parses them, and sends ``Referrer-Policy: no-referrer`` with every response, so
    the invite token in a rater's URL never leaves in a Referer header."""

    def __init__(self, app: ASGIApp, max_body_bytes: int, max_upload_bytes: int) -> None:
        self.app = app
        self.max_body_bytes = max_body_bytes
        self.max_upload_bytes = max_upload_bytes

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return

        async def send_with_policy(message: Message) -> None:
            if message["type"] == "http.response.start":
                headers = [
                    (k, v) for k, v in message.get("headers", []) if k.lower() != b"referrer-policy"
                ]
                headers.append((b"referrer-policy", b"no-referrer"))
                message = {**message, "headers": headers}
            await send(message)

        upload = scope["path"].rstrip("/").endswith("/upload")
        limit = self.max_upload_bytes if upload else self.max_body_bytes
        length = dict(scope.get("headers", [])).get(b"content-length")
        if length is not None:
            try:
                too_big = int(length) > limit
            except ValueError:
                too_big = True
            if too_big:
                await _too_large(limit, send_with_policy)
                return
            await self.app(scope, receive, send_with_policy)
            return
        if scope.get("method") in ("GET", "HEAD", "OPTIONS"):
            await self.app(scope, receive, send_with_policy)
            return
        # No length given (chunked): read the body up to the cap, then hand it on.
        chunks, size, more = [], 0, True
        while more:
            message = await receive()
            if message["type"] == "http.disconnect":
                return
            body = message.get("body", b"")
            size += len(body)
            if size > limit:
                await _too_large(limit, send_with_policy)
                return
            chunks.append(body)
            more = message.get("more_body", False)
        replayed = False

        async def replay() -> Message:
            nonlocal replayed
            if not replayed:
                replayed = True
                return {"type": "http.request", "body": b"".join(chunks), "more_body": False}
            return await receive()

        await self.app(scope, replay, send_with_policy)


async def _too_large(limit: int, send: Send) -> None:
    mb = limit / 2**20
    body = json.dumps({"error": f"The request is larger than {mb:.0f} MB; send less."}).encode()
    await send(
        {
            "type": "http.response.start",
            "status": 413,
            "headers": [
                (b"content-type", b"application/json"),
                (b"content-length", str(len(body)).encode()),
            ],
        }
    )
    await send({"type": "http.response.body", "body": body})
