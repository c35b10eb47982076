"""The ASGI middleware in front of every route: body caps, forwarded headers only from trusted
proxies, the upload quota, no admin cookie from a page of another origin, closed Gradio routes
and the security headers."""

from __future__ import annotations

import ipaddress
import json
from collections.abc import Iterable

from starlette.types import ASGIApp, Message, Receive, Scope, Send

from .limits import UploadQuota
from .login import ADMIN_SESSION_ROUTE, CROSS_ORIGIN_LOGIN, cross_origin, without_admin_cookie

MAX_REQUEST_BYTES = 1024 * 1024  # any API call but an upload: its JSON is a few kB
UPLOAD_OVERHEAD_BYTES = 1024 * 1024  # multipart framing on top of MAGNET_MAX_UPLOAD_MB

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
