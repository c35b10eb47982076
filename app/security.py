"""Guards of the served app: admin-login backoff, admin sessions, vote and demo rate limits,
upload quotas, private admin downloads and an ASGI middleware that caps request bodies, keeps
forwarded headers to trusted proxies and sets the security headers.

No Gradio here: plain Python and Starlette (the server under Gradio), so each guard is tested
on its own, with an injectable clock where time matters.
"""

from __future__ import annotations

import ipaddress
import json
import logging
import math
import os
import secrets
import shutil
import tempfile
import threading
import time
from collections import OrderedDict, deque
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from urllib.parse import urlsplit

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


def client_key(host: str) -> str:
    """The unit the login backoff counts: an IPv4 address, or the /64 network of an IPv6 one
    (one host usually holds a whole /64: its addresses are not 2**64 clients)."""
    try:
        addr = ipaddress.ip_address((host or "").strip())
    except ValueError:
        return host
    if addr.version == 6:
        if addr.ipv4_mapped is not None:
            return str(addr.ipv4_mapped)
        return str(ipaddress.ip_network(f"{addr}/64", strict=False))
    return str(addr)


@dataclass
class LoginThrottle:
    """Exponential backoff on wrong passwords per client, and a slower answer for everyone
    when many clients fail, never a lock that keeps the admin out.

    A client is an address (an IPv6 /64, client_key). After ``free`` wrong passwords from one
    client, each further one locks that client out for ``base_s * 2**k`` seconds (capped at
    ``max_s``); while locked, no password of it is even compared. After wrong passwords from
    more than ``global_free`` different clients (in ``forget_s``), every login is answered only
    after ``delay_s()`` (``global_step_s`` per client over the limit, at most
    ``global_max_delay_s``), the right password too: a crowd of addresses, one wrong password
    each, slows every guess down but cannot lock the owner out (security review 4, B9: 40
    addresses locked the admin out for 300 s, and each new one re-armed it). ``begin``/``end``
    hold one login at a time per client, so that delay cannot be filled with parallel guesses.
    Counts are forgotten ``forget_s`` after the last failure; a right password clears its
    client's count.
    """

    free: int = 3
    base_s: float = 1.0
    max_s: float = 900.0
    global_free: int = 20
    global_step_s: float = 0.25
    global_max_delay_s: float = 5.0
    forget_s: float = 3600.0
    clock: Callable[[], float] = time.monotonic
    _clients: OrderedDict[str, _Failures] = field(default_factory=OrderedDict)
    _failed_clients: OrderedDict[str, float] = field(default_factory=OrderedDict)  # -> last
    _pending: set[str] = field(default_factory=set)
    _lock: threading.Lock = field(default_factory=threading.Lock)

    def wait_s(self, client: str) -> float:
        """Seconds before ``client`` may try a password (0: now); only its own failures count."""
        now = self.clock()
        with self._lock:
            mine = self._clients.get(client_key(client))
            until = mine.locked_until if mine else 0.0
        return max(0.0, until - now)

    def delay_s(self) -> float:
        """How long every login waits before its password is compared (0: no crowd failed)."""
        now = self.clock()
        with self._lock:
            self._forget(now)
            over = len(self._failed_clients) - self.global_free
        return 0.0 if over <= 0 else min(self.global_step_s * over, self.global_max_delay_s)

    def begin(self, client: str) -> bool:
        """Start a login of ``client``; False while another of its logins is being checked."""
        with self._lock:
            key = client_key(client)
            if key in self._pending:
                return False
            self._pending.add(key)
            return True

    def end(self, client: str) -> None:
        with self._lock:
            self._pending.discard(client_key(client))

    def failed(self, client: str) -> float:
        """Record a wrong password; returns the new lockout of this client in seconds."""
        now = self.clock()
        key = client_key(client)
        with self._lock:
            mine = self._clients.pop(key, None) or _Failures()
            self._clients[key] = mine  # most recent last
            while len(self._clients) > 10_000:
                self._clients.popitem(last=False)
            if now - mine.last > self.forget_s:
                mine.count = 0
            mine.count += 1
            mine.last = now
            if mine.count > self.free:
                mine.locked_until = now + min(
                    self.base_s * 2 ** (mine.count - self.free - 1), self.max_s
                )
            self._failed_clients.pop(key, None)
            self._failed_clients[key] = now
            while len(self._failed_clients) > 100_000:
                self._failed_clients.popitem(last=False)
            n_all = len(self._failed_clients)
        wait = self.wait_s(client)
        log.warning(
            "Wrong admin password from %s (%d in a row from it; %d clients failed); "
            "next try allowed in %.0f s",
            client,
            mine.count,
            n_all,
            wait,
        )
        return wait

    def succeeded(self, client: str) -> None:
        with self._lock:
            self._clients.pop(client_key(client), None)

    def _forget(self, now: float) -> None:
        while self._failed_clients:
            key, last = next(iter(self._failed_clients.items()))
            if now - last <= self.forget_s:
                break
            del self._failed_clients[key]


# -------------------------------------------------------------------- admin sessions


ADMIN_COOKIE = "magnet_admin"
ADMIN_SESSION_ROUTE = "admin-session"


@dataclass
class AdminSessions:
    """The admin's logins: a random token made here (never Gradio's session id, which travels
    in URLs and is made with Math.random), kept in an HttpOnly cookie, valid for ``idle_s``
    after its last use and at most ``max_s`` after the login; ``end`` is the logout."""

    idle_s: float = 1800.0
    max_s: float = 8 * 3600.0
    clock: Callable[[], float] = time.monotonic
    _live: dict[str, tuple[float, float]] = field(default_factory=dict)  # token -> (start, last)
    _lock: threading.Lock = field(default_factory=threading.Lock)

    def start(self) -> str:
        token = secrets.token_urlsafe(32)
        now = self.clock()
        with self._lock:
            self._drop_expired(now)
            self._live[token] = (now, now)
        return token

    def valid(self, token: str | None) -> bool:
        """Whether ``token`` is a live login; a valid one counts as used now."""
        if not token or not isinstance(token, str):
            return False
        now = self.clock()
        with self._lock:
            self._drop_expired(now)
            entry = self._live.get(token)
            if entry is None:
                return False
            self._live[token] = (entry[0], now)
            return True

    def end(self, token: str | None) -> None:
        with self._lock:
            self._live.pop(token or "", None)

    def _drop_expired(self, now: float) -> None:
        dead = [
            t
            for t, (start, last) in self._live.items()
            if now - last >= self.idle_s or now - start >= self.max_s
        ]
        for t in dead:
            del self._live[t]


def session_cookie(token: str, max_age_s: float, secure: bool) -> str:
    """The Set-Cookie value of an admin login (HttpOnly: no script reads it; SameSite=Strict:
    no other site's page sends it; Secure over https)."""
    parts = [f"{ADMIN_COOKIE}={token}", "Path=/", "HttpOnly", "SameSite=Strict"]
    parts.append(f"Max-Age={int(max_age_s)}")
    if secure:
        parts.append("Secure")
    return "; ".join(parts)


def cookie_of(request: object) -> str | None:
    """The admin cookie of a Starlette or Gradio request (None without one)."""
    cookies = getattr(request, "cookies", None) or {}
    try:
        value = dict(cookies).get(ADMIN_COOKIE)
    except (TypeError, ValueError):
        return None
    return value if isinstance(value, str) else None


def cross_origin(headers: Mapping[str, str] | None, public_url: str | None = None) -> bool:
    """Whether a request comes from a page of another origin: another site, or the same site
    on another port or subdomain, which a ``SameSite=Strict`` cookie does not tell apart
    (review 4, N5: a page on another port of the same host ran the admin's backup).

    A browser's ``Sec-Fetch-Site`` says it directly; without one (an older browser), the
    ``Origin`` must name this server's host (the ``Host`` header, a trusted proxy's
    ``X-Forwarded-Host``, or ``MAGNET_PUBLIC_URL``'s). A request with neither header is no page's
    (curl, gradio_client) and carries no browser's cookie by itself."""
    if not headers:
        return False
    site = headers.get("sec-fetch-site")
    if site is not None:
        return site.strip().lower() not in ("same-origin", "none")
    origin = headers.get("origin")
    if origin is None:
        return False
    netloc = urlsplit(origin.strip()).netloc.lower()
    own = {headers.get("host"), headers.get("x-forwarded-host")}
    if public_url:
        own.add(urlsplit(public_url).netloc)
    return not netloc or netloc not in {h.strip().lower() for h in own if h}


def without_admin_cookie(cookie_header: str) -> str:
    """A Cookie header without the admin's login cookie (the others are kept)."""
    kept = [c for c in cookie_header.split(";") if c.split("=", 1)[0].strip() != ADMIN_COOKIE]
    return ";".join(kept).strip()


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

    def __init__(
        self,
        ttl_s: float = DOWNLOAD_TTL_S,
        clock: Callable[[], float] = time.monotonic,
        root: Path | None = None,
    ):
        """``root``: a fixed folder (the server's: $MAGNET_DATA_DIR/admin-files). This process
        writes in a folder of its own inside it, and deletes now what processes that no longer
        run left there (a killed server's backups, whole copies of the database, do not
        outlive it); None: a new temporary folder."""
        self.ttl_s = ttl_s
        self.clock = clock
        self._root: Path | None = None
        self._tickets: dict[str, tuple[Path, float]] = {}
        self._lock = threading.Lock()
        self._fixed = root is not None
        if root is not None:
            root = Path(root)
            root.mkdir(mode=0o700, parents=True, exist_ok=True)
            root.chmod(0o700)
            for left in root.iterdir():
                if left.name.isdigit() and _running(int(left.name)):
                    continue  # another server's live folder
                log.info("Deleting %s, admin downloads left by an earlier run", left)
                if left.is_dir() and not left.is_symlink():
                    shutil.rmtree(left, ignore_errors=True)
                else:
                    left.unlink(missing_ok=True)
            mine = root / str(os.getpid())
            mine.mkdir(mode=0o700)
            self._root = mine

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
        """Delete every file and this process's folder (at shutdown)."""
        with self._lock:
            self._tickets.clear()
        if self._root is None or not self._root.is_dir():
            return
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


def _running(pid: int) -> bool:
    if pid == os.getpid():
        return False  # a folder of an earlier process that had our id
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True  # someone else's process
    return True


def _remove(path: Path) -> None:
    shutil.rmtree(path.parent, ignore_errors=True)


# -------------------------------------------------------------------- uploads


@dataclass
class UploadQuota:
    """Anonymous uploads (Search corpora, items files) may not fill the disk: at most
    ``per_client_bytes`` per address and ``total_bytes`` from everyone in ``window_s``, and
    none while the upload folder's disk has less than ``min_free_bytes`` free (that disk is
    often the rating database's too)."""

    per_client_bytes: int
    total_bytes: int
    folder: Path
    min_free_bytes: int
    window_s: float = 3600.0
    clock: Callable[[], float] = time.monotonic
    free_bytes: Callable[[Path], int] | None = None  # injectable for tests
    _log: deque[tuple[float, str, int]] = field(default_factory=deque)
    _lock: threading.Lock = field(default_factory=threading.Lock)

    def _free(self) -> int:
        if self.free_bytes is not None:
            return self.free_bytes(self.folder)
        where = Path(self.folder)
        while not where.exists() and where != where.parent:
            where = where.parent
        return shutil.disk_usage(where).free

    def refuse(self, client: str, size: int) -> tuple[int, str] | None:
        """(HTTP status, one sentence) when this upload may not go in; else None, and it is
        counted."""
        if self._free() - size < self.min_free_bytes:
            log.warning("Upload of %d bytes from %s refused: the disk is nearly full", size, client)
            return 507, "Uploads are paused: the server's disk is nearly full. Try again later."
        now = self.clock()
        with self._lock:
            while self._log and now - self._log[0][0] >= self.window_s:
                self._log.popleft()
            mine = [(t, n) for t, c, n in self._log if c == client]
            total = sum(n for _, _, n in self._log)
            for used, cap, events, whose in (
                (sum(n for _, n in mine), self.per_client_bytes, mine, "from your address"),
                (total, self.total_bytes, [(t, n) for t, _, n in self._log], "to this server"),
            ):
                if used + size > cap:
                    wait = events[0][0] + self.window_s - now if events else self.window_s
                    minutes = max(1, math.ceil(wait / 60))
                    log.warning("Upload of %d bytes from %s refused: quota", size, client)
                    return 429, (
                        f"Too many uploads {whose}: at most {cap / 2**20:.0f} MB an hour; "
                        f"try again in {minutes} min."
                    )
            self._log.append((now, client, size))
        return None


# -------------------------------------------------------------------- request guard


# X-Forwarded-Proto is kept from anyone: Gradio builds https file URLs from it behind a proxy,
# and a client that claims https only changes its own URLs (the scheme itself changes only
# for a trusted proxy).
FORWARDED_HEADERS = (
    b"x-forwarded-for",
    b"x-forwarded-host",
    b"x-forwarded-port",
    b"x-forwarded-prefix",
    b"x-real-ip",
    b"forwarded",
)
# Gradio routes this app does not use, which would leak: /gradio_api/deep_link writes a
# session's values (invite links among them) to a file anyone can fetch; /monitoring lists
# every endpoint's calls (admin ones too).
BLOCKED_PATHS = ("/gradio_api/deep_link", "/monitoring", "/gradio_api/monitoring")


def parse_networks(text: str | Iterable[str]) -> tuple:
    """'10.0.0.1, 172.16.0.0/12' -> ip networks; a bad entry raises ValueError naming it."""
    parts = text.split(",") if isinstance(text, str) else list(text)
    out = []
    for part in (p.strip() for p in parts):
        if part:
            try:
                out.append(ipaddress.ip_network(part, strict=False))
            except ValueError:
                raise ValueError(f"not an IP address or network: {part!r}") from None
    return tuple(out)


def _in(networks: tuple, host: str | None) -> bool:
    try:
        addr = ipaddress.ip_address((host or "").strip())
    except ValueError:
        return False
    return any(addr in n for n in networks)


class RequestGuard:
    """ASGI middleware in front of every route:

    - request bodies over the cap get 413 and one sentence, before anything parses them;
    - ``X-Forwarded-*`` headers count only from a configured proxy (``trusted_proxies``): from
      it the client is the rightmost address it added, else the headers are dropped, so no
      client picks its own address (login backoff, vote limits) or the invite links' host;
    - uploads go through the ``uploads`` quota (per address, in total, free disk);
    - a request from a page of another origin (another site, or another port or subdomain of
      this one: cross_origin) never carries the admin's login: its admin cookie is taken out,
      so it is served as an anonymous client's (Gradio's CORS answers credentialed requests
      from any origin, and SameSite=Strict lets a sibling's page send the cookie), and the
      login route refuses it;
    - Gradio's deep-link and monitoring routes answer 404;
    - every response says ``Referrer-Policy: no-referrer`` (the invite token in a rater's URL
      never leaves in a Referer header), may not be framed by another site
      (``frame_ancestors``) and is not content-sniffed.
    """

    def __init__(
        self,
        app: ASGIApp,
        max_body_bytes: int,
        max_upload_bytes: int,
        trusted_proxies: tuple = (),
        frame_ancestors: str = "'none'",
        uploads: UploadQuota | None = None,
        public_url: str | None = None,
    ) -> None:
        self.app = app
        self.public_url = public_url
        self.max_body_bytes = max_body_bytes
        self.max_upload_bytes = max_upload_bytes
        self.trusted_proxies = tuple(trusted_proxies)
        self.uploads = uploads
        framing = [(b"content-security-policy", f"frame-ancestors {frame_ancestors}".encode())]
        if frame_ancestors.strip() == "'none'":
            framing.append((b"x-frame-options", b"DENY"))
        self.extra_headers = [
            (b"referrer-policy", b"no-referrer"),
            (b"x-content-type-options", b"nosniff"),
            *framing,
        ]
        self._replaced = {k for k, _ in self.extra_headers}

    def _from_proxy(self, scope: Scope) -> Scope:
        """The scope with the client a trusted proxy names, or without forwarded headers."""
        peer = (scope.get("client") or (None, 0))[0]
        headers = list(scope.get("headers", []))
        if not _in(self.trusted_proxies, peer):
            kept = [(k, v) for k, v in headers if k.lower() not in FORWARDED_HEADERS]
            return {**scope, "headers": kept} if len(kept) != len(headers) else scope
        scope = dict(scope)
        chain = b",".join(v for k, v in headers if k.lower() == b"x-forwarded-for").decode(
            "latin-1"
        )
        hops = [h.strip() for h in chain.split(",") if h.strip()]
        while hops and _in(self.trusted_proxies, hops[-1]):
            hops.pop()  # proxies in front of proxies
        if hops:
            scope["client"] = (hops[-1], 0)
        proto = dict(headers).get(b"x-forwarded-proto", b"").decode("latin-1").strip().lower()
        if proto in ("http", "https"):
            scope["scheme"] = proto
        return scope

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] not in ("http", "websocket"):
            await self.app(scope, receive, send)
            return
        scope = self._from_proxy(scope)
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return

        async def send_with_policy(message: Message) -> None:
            if message["type"] == "http.response.start":
                headers = [
                    (k, v) for k, v in message.get("headers", []) if k.lower() not in self._replaced
                ]
                message = {**message, "headers": headers + self.extra_headers}
            await send(message)

        path = scope["path"].rstrip("/")
        if any(path == p or path.startswith(p + "/") for p in BLOCKED_PATHS):
            await _sentence(404, "Not found.", send_with_policy)
            return
        raw = scope.get("headers", [])
        named = {k.decode("latin-1").lower(): v.decode("latin-1") for k, v in raw}
        if cross_origin(named, self.public_url):
            if path == f"/{ADMIN_SESSION_ROUTE}":
                await _sentence(403, CROSS_ORIGIN_LOGIN, send_with_policy)
                return
            scope = _without_admin_login(scope)
        upload = path.endswith("/upload")
        limit = self.max_upload_bytes if upload else self.max_body_bytes
        length = dict(scope.get("headers", [])).get(b"content-length")
        if length is not None:
            try:
                size = int(length)
                too_big = size > limit
            except ValueError:
                too_big = True
            if too_big:
                await _too_large(limit, send_with_policy)
                return
            if upload and await self._refused(scope, size, send_with_policy):
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
        if upload and await self._refused(scope, size, send_with_policy):
            return
        replayed = False

        async def replay() -> Message:
            nonlocal replayed
            if not replayed:
                replayed = True
                return {"type": "http.request", "body": b"".join(chunks), "more_body": False}
            return await receive()

        await self.app(scope, replay, send_with_policy)

    async def _refused(self, scope: Scope, size: int, send: Send) -> bool:
        if self.uploads is None:
            return False
        client = str((scope.get("client") or ("unknown", 0))[0])
        refusal = self.uploads.refuse(client, size)
        if refusal is None:
            return False
        await _sentence(*refusal, send)
        return True


CROSS_ORIGIN_LOGIN = "Log in on the app's own page, not from a page of another address."


def _without_admin_login(scope: Scope) -> Scope:
    headers = []
    for k, v in scope.get("headers", []):
        if k.lower() == b"cookie":
            v = without_admin_cookie(v.decode("latin-1")).encode("latin-1")
        headers.append((k, v))
    return {**scope, "headers": headers}


async def _sentence(status: int, text: str, send: Send) -> None:
    body = json.dumps({"error": text, "detail": text}).encode()
    await send(
        {
            "type": "http.response.start",
            "status": status,
            "headers": [
                (b"content-type", b"application/json"),
                (b"content-length", str(len(body)).encode()),
            ],
        }
    )
    await send({"type": "http.response.body", "body": body})


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
