"""The admin's login: the backoff on wrong passwords (per client, and for everyone when a crowd
fails), the sessions behind the HttpOnly cookie, and the checks that keep a page of another
origin from using that cookie."""

from __future__ import annotations

import ipaddress
import logging
import secrets
import threading
import time
from collections import OrderedDict
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from urllib.parse import urlsplit

log = logging.getLogger("app")

ADMIN_COOKIE = "magnet_admin"
ADMIN_SESSION_ROUTE = "admin-session"
CROSS_ORIGIN_LOGIN = "Log in on the app's own page, not from a page of another address."


# -------------------------------------------------------------------- login backoff


@dataclass
class _Failures:
    count: int = 0
    last: float = 0.0
    locked_until: float = 0.0


def client_key(host: str) -> str:
    """The unit the login backoff counts: an IPv4 address, or the /64 network of an IPv6 one
    (one host usually holds a whole /64: its addresses are not 2**64 clients). An IPv6 address
    in brackets, as a proxy may forward it ("[2001:db8::1]", with a port or not), is that
    address."""
    host = (host or "").strip()
    if host.startswith("[") and "]" in host:
        host = host[1 : host.index("]")]
    try:
        addr = ipaddress.ip_address(host)
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


# -------------------------------------------------------------------- sessions


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
