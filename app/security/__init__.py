"""Guards of the served app, one file each: the admin's login (backoff, sessions, cross-origin
checks: login.py), rate limits and the upload quota (limits.py), the admin's private
single-use downloads (downloads.py) and the ASGI middleware in front of every route
(guard.py).

No Gradio here: plain Python and Starlette (the server under Gradio), so each guard is tested
on its own, with an injectable clock where time matters.
"""

from .downloads import DOWNLOAD_ROUTE, DOWNLOAD_TTL_S, PrivateDownloads
from .guard import (
    BLOCKED_PATHS,
    FORWARDED_HEADERS,
    MAX_REQUEST_BYTES,
    UPLOAD_OVERHEAD_BYTES,
    RequestGuard,
    parse_networks,
)
from .limits import RateLimiter, UploadQuota
from .login import (
    ADMIN_COOKIE,
    ADMIN_SESSION_ROUTE,
    CROSS_ORIGIN_LOGIN,
    AdminSessions,
    LoginThrottle,
    client_key,
    cookie_of,
    cross_origin,
    session_cookie,
    without_admin_cookie,
)

__all__ = [
    "ADMIN_COOKIE",
    "ADMIN_SESSION_ROUTE",
    "BLOCKED_PATHS",
    "CROSS_ORIGIN_LOGIN",
    "DOWNLOAD_ROUTE",
    "DOWNLOAD_TTL_S",
    "FORWARDED_HEADERS",
    "MAX_REQUEST_BYTES",
    "UPLOAD_OVERHEAD_BYTES",
    "AdminSessions",
    "LoginThrottle",
    "PrivateDownloads",
    "RateLimiter",
    "RequestGuard",
    "UploadQuota",
    "client_key",
    "cookie_of",
    "cross_origin",
    "parse_networks",
    "session_cookie",
    "without_admin_cookie",
]
