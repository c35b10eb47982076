"""The admin's login: the password checked (constant time, throttled), the session cookie set
and cleared by the login route, and the panel shown only with a live session.
"""

from __future__ import annotations

import asyncio
import hmac
import logging
import math
from dataclasses import dataclass

import gradio as gr
from starlette.requests import Request
from starlette.responses import JSONResponse, Response

from ..outputs import AdminPanel
from ..security import CROSS_ORIGIN_LOGIN, cookie_of, cross_origin, session_cookie
from ..services import client_of
from .base import AdminBase
from .view import admin_view

log = logging.getLogger("app")

LOGGED_IN = "Logged in."
NO_COOKIE = (
    "The password was right, but this browser did not send the login cookie back: open the "
    "app at its own address (not inside another page) and log in again."
)


@dataclass(frozen=True)
class LoginResult:
    """A password check: whether it was right, the one sentence to show, and the new
    session's token (only on success; it goes into the cookie, nowhere else)."""

    authorized: bool
    message: str
    session: str | None = None


class LoginViews(AdminBase):
    """Log in, the login route, and the panel after a login or logout."""

    def admin_login(self, password: str, request: object | None = None) -> LoginResult:
        """Compared in constant time, and only when this client (and the app as a whole) is
        not locked out after wrong passwords. The right password starts a session, whose token
        the login route (session_endpoint) puts in an HttpOnly cookie; it never reaches a page
        or a URL."""
        client = client_of(request)
        wait = self.login_throttle.wait_s(client)
        if wait > 0:
            log.warning("Admin login from %s refused: locked for %.0f s more", client, wait)
            msg = f"Too many wrong passwords; try again in {math.ceil(wait)} s."
            return LoginResult(False, msg)
        want = self.settings.admin_password
        given = (password if isinstance(password, str) else "").encode("utf-8", "surrogatepass")
        ok = bool(want) and hmac.compare_digest(given, want.encode("utf-8", "surrogatepass"))
        if ok:
            self.login_throttle.succeeded(client)
            log.info("Admin logged in from %s", client)
            return LoginResult(True, LOGGED_IN, self.admin_sessions.start())
        if want:
            self.login_throttle.failed(client)
        return LoginResult(False, "Wrong password.")

    async def session_endpoint(self, request: Request) -> Response:
        """POST /admin-session {"password": ...}: the admin cookie on the right password;
        DELETE /admin-session: log out (the session ends on the server, the cookie is
        cleared). JSON only, so no other site's form can post here; from a page of another
        origin, neither (security.cross_origin). One login at a time per address, answered
        after the throttle's delay while a crowd of addresses is failing."""
        headers = {"cache-control": "no-store"}
        if not self.settings.admin_password:
            return JSONResponse({"message": "Not found."}, status_code=404, headers=headers)
        if cross_origin(request.headers, self.settings.public_url):
            body = {"ok": False, "message": CROSS_ORIGIN_LOGIN}
            return JSONResponse(body, status_code=403, headers=headers)
        secure = request.url.scheme == "https" or (self.settings.public_url or "").startswith(
            "https://"
        )
        if request.method == "DELETE":
            self.admin_sessions.end(cookie_of(request))
            out = JSONResponse({"ok": True, "message": "Logged out."}, headers=headers)
            out.headers.append("set-cookie", session_cookie("", 0, secure))
            return out
        kind = request.headers.get("content-type", "").split(";")[0].strip().lower()
        try:
            body = await request.json() if kind == "application/json" else None
        except ValueError:
            body = None
        if not isinstance(body, dict):
            msg = 'Send {"password": ...} as application/json.'
            return JSONResponse({"ok": False, "message": msg}, status_code=400, headers=headers)
        client = client_of(request)
        if not self.login_throttle.begin(client):
            msg = "A login from your address is being checked; wait for its answer."
            return JSONResponse({"ok": False, "message": msg}, status_code=429, headers=headers)
        try:
            delay = self.login_throttle.delay_s()
            if delay > 0:
                await asyncio.sleep(delay)
            login = self.admin_login(body.get("password"), request)
        finally:
            self.login_throttle.end(client)
        out = JSONResponse({"ok": login.authorized, "message": login.message}, headers=headers)
        if login.session:
            out.headers.append(
                "set-cookie", session_cookie(login.session, self.admin_sessions.max_s, secure)
            )
        return out

    @admin_view("Opening the admin panel")
    def admin_panel(self, login_message: str = "", request: gr.Request | None = None) -> AdminPanel:
        """After a login or logout on the page: the panel when this browser sent a live admin
        cookie, else hidden (with why, when the password was right but no cookie came back)."""
        if self._is_admin(request):
            return AdminPanel(
                gr.update(visible=True),
                "",
                self.admin_studies(request),
                self.admin_unfinished(request),
                gr.update(visible=True),
            )
        msg = NO_COOKIE if login_message == LOGGED_IN else gr.skip()
        return AdminPanel(gr.update(visible=False), msg, gr.skip(), "", gr.update(visible=False))
