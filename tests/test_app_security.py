"""Issue 22 ("A study nobody can game"), points 3, 4 and 7, app side.

3: the admin's credential is a server-made token in an HttpOnly cookie (never Gradio's
session id), with expiry and logout; Gradio's deep links and monitoring are closed.
4: rating events skip the queue; demo calls and uploads have per-address and total quotas and
a free-space floor (the load test is test_app_load.py).
7: the low findings of the security review (lockout, forwarded headers, framing, leftover
downloads, search cache, names and sizes before generation, '$' in names, seeds).
Issue 29: a request from another origin never carries the admin's login; a crowd of addresses
slows logins down but never locks the owner out; the demo quota counts valid calls when they
join the queue, and model calls are reachable only through it.
Real store, tiny Llama, and the real Gradio server where the protocol matters.
"""

from __future__ import annotations

import asyncio
import io
import json
import re
import threading
import time
from pathlib import Path

import gradio as gr
import httpx
import pytest
from app_fixtures import (
    TEXT,
    Clock,
    admin_request,
    admit_refusal,
    fake_request,
    form_answers,
    in_process,
    make_app,
    serving,
    small_study,
    visitor,
)
from starlette.testclient import TestClient

from annotation_db import list_drafts
from app.demo import MAX_SEED, _seed
from app.main import build_demo, server_app_kwargs
from app.security import (
    ADMIN_COOKIE,
    AdminSessions,
    LoginThrottle,
    PrivateDownloads,
    RateLimiter,
    RequestGuard,
    UploadQuota,
    parse_networks,
)
from app.settings import SPACE_PROXIES, proxy_env


@pytest.fixture
def served(app):
    with serving(app) as url:
        yield url


@pytest.fixture
def http(app):
    with in_process(app) as client:
        yield client


def _client(url: str, cookie: str | None = None):
    from gradio_client import Client

    headers = {"cookie": f"{ADMIN_COOKIE}={cookie}"} if cookie else None
    return Client(url, verbose=False, headers=headers)


# ---------------------------------------------------------------- 3: the admin's session


def _refusal(client, api: str, args=()) -> str:
    """What an admin endpoint answers: its refusal is one of its outputs (app.outputs.said_in,
    since the page shows no toast off the queue), never the data asked for."""
    out = client.predict(*args, api_name=api)
    return " ".join(map(str, out)) if isinstance(out, tuple | list) else str(out)


def test_admin_calls_need_the_login_cookie_not_a_gradio_session_id(app, served):
    """The review's hijack: a session id from a proxy log, replayed by another client, gave
    the database. Now the password buys an HttpOnly cookie from /admin-session, and every
    admin endpoint checks it; Gradio's session id is no credential at all."""
    small_study(app)
    wrong = httpx.post(f"{served}/admin-session", json={"password": "nope"})
    assert wrong.json() == {"ok": False, "message": "Wrong password."}
    assert "set-cookie" not in wrong.headers
    login = httpx.post(f"{served}/admin-session", json={"password": "s3cret"})
    assert login.json()["ok"] is True
    cookie = login.headers["set-cookie"]
    assert cookie.startswith(f"{ADMIN_COOKIE}=") and "HttpOnly" in cookie
    assert "SameSite=Strict" in cookie and "Max-Age=28800" in cookie
    assert "Secure" not in cookie  # plain http here; over https it is Secure (below)
    token = login.cookies[ADMIN_COOKIE]
    for page in ("/", "/rate"):  # the pages themselves may not be framed
        h = httpx.get(f"{served}{page}").headers
        assert (
            h["x-frame-options"] == "DENY"
            and "frame-ancestors 'none'" in h["content-security-policy"]
        )
    assert len(token) >= 43  # secrets.token_urlsafe(32)
    assert login.headers["cache-control"] == "no-store"

    link = _client(served, token).predict(api_name="/admin_backup")
    assert "admin-files/" in link
    ticket = re.search(r"\]\((admin-files/[\w-]+)\)", link).group(1)
    assert httpx.get(f"{served}/{ticket}").content.startswith(b"SQLite format 3")
    anonymous = _client(served)
    for api, args in [
        ("/admin_backup", []),
        ("/admin_studies", []),
        ("/admin_export", [None, "csv"]),
    ]:
        assert "Log in as admin first" in _refusal(anonymous, api, args)
    forged = _client(served, "forged-" + token[7:])
    assert "Log in as admin first" in _refusal(forged, "/admin_backup")

    out = httpx.delete(f"{served}/admin-session", cookies={ADMIN_COOKIE: token})
    assert out.json()["message"] == "Logged out." and "Max-Age=0" in out.headers["set-cookie"]
    dead = _client(served, token)  # the old cookie is dead
    assert "Log in as admin first" in _refusal(dead, "/admin_backup")
    bad = httpx.post(f"{served}/admin-session", content="password=s3cret")  # a form post
    assert bad.status_code == 400 and "set-cookie" not in bad.headers


def test_the_login_route_keeps_the_backoff_and_says_secure_over_https(app, http):
    for _ in range(app.login_throttle.free + 1):
        http.post("/admin-session", json={"password": "wrong"})
    locked = http.post("/admin-session", json={"password": "s3cret"})
    assert locked.json()["ok"] is False and locked.json()["message"].startswith("Too many")
    app.login_throttle = LoginThrottle()
    https = TestClient(http.app, base_url="https://demo.test")
    ok = https.post("/admin-session", json={"password": "s3cret"})
    assert ok.json()["ok"] is True and "; Secure" in ok.headers["set-cookie"]


def test_the_login_route_waits_the_delay_and_takes_one_login_at_a_time(app):
    app.login_throttle = LoginThrottle(global_free=2, global_step_s=0.4)
    with in_process(app) as http:
        for n in range(3):
            app.login_throttle.failed(f"10.9.0.{n}")
        t0 = time.perf_counter()
        ok = http.post("/admin-session", json={"password": "s3cret"})
        assert ok.json()["ok"] and time.perf_counter() - t0 >= 0.4
        app.login_throttle.begin("testclient")  # a login of this address still being checked
        busy = http.post("/admin-session", json={"password": "s3cret"})
        assert busy.status_code == 429 and "being checked" in busy.json()["message"]


def test_admin_sessions_expire_when_idle_and_at_most_hours_after_login():
    clock = Clock()
    sessions = AdminSessions(idle_s=1800, max_s=8 * 3600, clock=clock)
    a, b = sessions.start(), sessions.start()
    assert a != b and sessions.valid(a) and not sessions.valid("") and not sessions.valid(None)
    clock.now += 1799
    assert sessions.valid(a)  # used: the idle clock starts again
    clock.now += 1
    assert not sessions.valid(b)  # 30 minutes unused
    while clock.now + 1790 < 1000 + 8 * 3600:  # in use every 30 minutes, for 8 hours
        clock.now += 1790
        assert sessions.valid(a)
    clock.now = 1000 + 8 * 3600 - 1
    assert sessions.valid(a)
    clock.now += 1
    assert not sessions.valid(a)  # 8 hours after the login, however busy
    c = sessions.start()
    sessions.end(c)
    assert not sessions.valid(c)


def test_the_panel_shows_only_with_a_live_cookie_and_says_why_not(app):
    login = app.admin_login("s3cret", fake_request())
    assert login.authorized and login.session
    without = app.admin_panel(login.message, fake_request())  # e.g. inside a cross-site frame
    assert without.panel["visible"] is False and "did not send the login cookie" in without.message
    with_cookie = fake_request()
    with_cookie.cookies = {ADMIN_COOKIE: login.session}
    assert app.admin_panel(login.message, with_cookie).panel["visible"] is True
    assert app.admin_panel("Wrong password.", fake_request()).message == gr.skip()


def test_deep_links_and_monitoring_are_closed(http):
    """/gradio_api/deep_link wrote a session's values (invite links) to a public file;
    /monitoring/summary listed every admin call."""
    for path in (
        "/gradio_api/deep_link?session_hash=abc",
        "/monitoring",
        "/monitoring/summary",
        "/monitoring/some-key",
        "/gradio_api/monitoring",
    ):
        r = http.get(path)
        assert r.status_code == 404, path
        assert r.headers["referrer-policy"] == "no-referrer"
    assert http.get("/gradio_api/info").status_code == 200


def test_a_page_of_another_origin_cannot_use_the_admin_login(app):
    """Review 4, N5: admin logged in at 127.0.0.1:7871, a page at 127.0.0.1:7879 (same site,
    so SameSite=Strict sent the cookie) called admin_backup and read the single-use link."""
    with in_process(app, base_url="http://127.0.0.1:7871") as http:
        assert http.post("/admin-session", json={"password": "s3cret"}).json()["ok"]
        token = http.cookies[ADMIN_COOKIE]
        own = {"origin": "http://127.0.0.1:7871", "sec-fetch-site": "same-origin"}
        foreign = [
            {"origin": "http://127.0.0.1:7879", "sec-fetch-site": "same-site"},
            {"origin": "http://127.0.0.1:7879"},  # a browser without Sec-Fetch-Site
            {"origin": "null"},
            {"origin": "https://evil.example", "sec-fetch-site": "cross-site"},
        ]
        backup = http.post("/gradio_api/run/admin_backup", json={"data": []}, headers=own)
        assert "admin-files/" in backup.json()["data"][0]
        for headers in foreign:
            r = http.post("/gradio_api/run/admin_backup", json={"data": []}, headers=headers)
            assert "admin-files/" not in r.text and "Log in as admin first" in r.text, headers
            out = http.delete("/admin-session", headers=headers)  # logout CSRF
            assert out.status_code == 403 and "set-cookie" not in out.headers
            login = http.post("/admin-session", json={"password": "s3cret"}, headers=headers)
            assert login.status_code == 403 and "set-cookie" not in login.headers
        assert app.admin_sessions.valid(token)  # still logged in
    # the handlers check it too, whatever reaches them
    req = fake_request()
    req.cookies = {ADMIN_COOKIE: token}
    req.headers = {"host": "demo.test:7860", "origin": "http://demo.test:7861"}
    with pytest.raises(gr.Error, match="Log in as admin first"):
        app.admin_backup(req)
    req.headers = {"host": "demo.test:7860", "origin": "http://demo.test:7860"}
    assert "admin-files/" in app.admin_backup(req)


def test_same_origin_is_the_host_or_the_public_url():
    from app.security import cross_origin

    assert not cross_origin({})  # curl, gradio_client: no page
    assert not cross_origin({"sec-fetch-site": "same-origin", "origin": "http://x"})
    assert not cross_origin({"host": "a.example", "origin": "https://a.example"})
    assert cross_origin({"host": "a.example", "origin": "https://b.a.example"})  # a sibling
    behind = {"host": "127.0.0.1:7860", "origin": "https://magnet.example.org"}
    assert cross_origin(behind)
    assert not cross_origin(behind, public_url="https://magnet.example.org")


# ---------------------------------------------------------------- 4: demo traffic vs raters


def test_demo_calls_are_limited_per_address_and_in_total(engine, tmp_path):
    app = make_app(tmp_path, engine, demo_calls_per_minute=2, demo_calls_per_minute_total=3)
    clock = Clock()
    app.demo_per_client = RateLimiter(2, 60.0, clock=clock)
    app.demo_total = RateLimiter(3, 60.0, clock=clock)
    a, b, c = visitor("10.0.0.1"), visitor("10.0.0.2"), visitor("10.0.0.3")
    assert admit_refusal(app.infill_admit(TEXT, max_span=2, request=a)) is None
    assert admit_refusal(app.continue_admit("the cat", 2, request=a)) is None
    why = admit_refusal(app.infill_admit(TEXT, max_span=2, request=a))
    assert re.search(r"from your address \(at most 2 a minute\); try again in", why)
    assert admit_refusal(app.search_admit("the cat", None, 1, request=b)) is None
    why = admit_refusal(app.infill_admit(TEXT, max_span=2, request=c))
    assert "on this server (at most 3 a minute)" in why
    token = small_study(app)  # ratings never count against the demo's quota
    shown = app.rate_open(token).shown_item
    app.rate_submit(token, shown, *form_answers(), None, "")
    clock.now += 61
    assert admit_refusal(app.infill_admit(TEXT, max_span=2, request=c)) is None  # the window slid


def test_one_ipv6_network_counts_as_one_address_for_the_demo_quota(engine, tmp_path):
    """Addresses of one /64 are one host's: they share the per-address quota, as one IPv4
    address does; another /64 does not."""
    app = make_app(tmp_path, engine, demo_calls_per_minute=2, demo_calls_per_minute_total=50)
    clock = Clock()
    app.demo_per_client = RateLimiter(2, 60.0, clock=clock)
    one_host = [visitor(f"2001:db8:1:2::{i:x}") for i in range(1, 4)]
    assert admit_refusal(app.infill_admit(TEXT, max_span=2, request=one_host[0])) is None
    assert admit_refusal(app.infill_admit(TEXT, max_span=2, request=one_host[1])) is None
    why = admit_refusal(app.infill_admit(TEXT, max_span=2, request=one_host[2]))
    assert why and "from your address" in why
    another_network = visitor("2001:db8:1:3::1")
    assert admit_refusal(app.infill_admit(TEXT, max_span=2, request=another_network)) is None
    # the same network in brackets, as a proxy forwards it (with a port or not): the same host
    bracketed = visitor("[2001:db8:1:3::2]")
    assert admit_refusal(app.infill_admit(TEXT, max_span=2, request=bracketed)) is None
    why = admit_refusal(
        app.infill_admit(TEXT, max_span=2, request=visitor("[2001:db8:1:3::3]:443"))
    )
    assert why and "from your address" in why  # its third call: refused as the plain ones


def test_quotas_count_at_join_only_valid_calls_and_only_through_the_queue(engine, tmp_path):
    """Review 4: N10 (32 queued calls of one address all served: the quota was checked when a
    call ran), N12 (calls without a blank burnt the shared quota), N13 (`run/infill` skipped
    the queue); and the tour's n1 (only blanks, 9 blanks: told after 15-26 s in the queue)."""
    from gradio_client import Client
    from gradio_client.exceptions import ValidationError

    app = make_app(tmp_path, engine, demo_calls_per_minute=3)
    release, running = threading.Event(), threading.Event()
    real = app.compare_infill

    def held(*args, **kwargs):  # the model busy with a long call
        running.set()
        release.wait(60)
        return real(*args, **kwargs)

    app.compare_infill = held
    with serving(app) as url:
        try:
            client = Client(url, verbose=False)
            args = ("greedy", 0.8, 0.95, "-1", 2, False)
            for bad in ("no blank here", "the cat sat"):  # refused at once, not counted
                with pytest.raises(ValidationError, match="has no blank"):
                    client.predict(bad, *args, api_name="/infill")
            jobs = [client.submit(TEXT, *args, api_name="/infill") for _ in range(3)]
            assert running.wait(30)  # the first call holds the model; two wait in the queue
            for bad, why in [
                ("[blank] [blank]", "only blanks"),
                (" ".join(["a [blank]"] * 9), "9 blanks; at most 8"),
                (TEXT, "Too many demo requests from your address"),  # the 4th, counted at join
            ]:
                t0 = time.perf_counter()
                with pytest.raises(ValidationError, match=why):
                    client.predict(bad, *args, api_name="/infill")
                assert time.perf_counter() - t0 < 10 and not release.is_set()  # no wait
            for name, data in [
                ("infill", [TEXT, *args]),
                ("continue", ["the cat", 2, "greedy", 0.8, 0.95, "-1"]),
                ("search", ["the cat", None, 1]),
            ]:
                r = httpx.post(f"{url}/gradio_api/run/{name}", json={"data": data}, timeout=30)
                assert r.status_code == 404 and "join the queue" in r.text, name
            release.set()
            for job in jobs:
                assert job.result(timeout=60)
        finally:
            release.set()


def _uploads_app(app):
    demo = build_demo(app)
    demo.max_file_size = None  # what launch() sets (Gradio's own cap; the guard's is below it)
    return gr.routes.App.create_app(demo, app_kwargs=server_app_kwargs(app))


def _upload(http, size: int):
    return http.post("/gradio_api/upload", files={"files": ("c.txt", b"x" * size, "text/plain")})


def test_uploads_have_a_quota_per_address_and_in_total(engine, tmp_path):
    app = make_app(tmp_path, engine, upload_mb_per_hour=1, upload_mb_per_hour_total=50)
    fastapi_app = _uploads_app(app)
    with TestClient(fastapi_app) as http:
        assert _upload(http, 600_000).status_code == 200
        refused = _upload(http, 600_000)
        assert refused.status_code == 429
        assert re.fullmatch(
            r"Too many uploads from your address: at most 1 MB an hour; try again in \d+ min\.",
            refused.json()["error"],
        )
    clock = Clock()
    quota = UploadQuota(3000, 5000, tmp_path, 0, window_s=3600, clock=clock)
    assert quota.refuse("a", 2500) is None and quota.refuse("b", 2500) is None
    status, why = quota.refuse("c", 10)
    assert status == 429 and why.startswith("Too many uploads to this server")
    clock.now += 3601
    assert quota.refuse("c", 10) is None


def test_uploads_stop_before_the_disk_fills(engine, tmp_path):
    """100 MB of anonymous uploads in 4 s filled the database's disk; now uploads stop while
    the upload folder's disk has less free space than the floor."""
    free = {"bytes": 10 * 2**20}
    quota = UploadQuota(2**40, 2**40, tmp_path, 8 * 2**20, free_bytes=lambda _: free["bytes"])
    assert quota.refuse("a", 2**20) is None
    status, why = quota.refuse("a", 3 * 2**20)
    assert status == 507 and why == (
        "Uploads are paused: the server's disk is nearly full. Try again later."
    )
    app = make_app(tmp_path, engine, upload_min_free_mb=10**7)  # more than any disk has free
    fastapi_app = _uploads_app(app)
    with TestClient(fastapi_app) as http:
        r = _upload(http, 1000)
        assert r.status_code == 507 and "disk is nearly full" in r.json()["error"]


# ---------------------------------------------------------------- 7: the low findings


def test_one_patient_attacker_never_locks_the_admin_out(app):
    """The review's B9: an attacker sent a wrong password each time the lock ended and kept
    the admin out for 11 minutes and counting. An address now adds to the global count
    once, so a handful of them never arm the global lock; the admin gets in every time."""
    clock = Clock()
    app.login_throttle = LoginThrottle(clock=clock)
    compared, refused = 0, 0
    attacker = {f"6.6.6.{k}": clock.now for k in range(3)}  # one attacker, a few addresses
    end = clock.now + 3 * 3600
    while clock.now < end:
        for host, allowed in attacker.items():
            if clock.now >= allowed:
                msg = app.admin_login("guess", visitor(host)).message
                compared += msg == "Wrong password."
                wait = re.search(r"in (\d+) s", msg)
                attacker[host] = clock.now + (float(wait.group(1)) if wait else 0.1)
        if int(clock.now) % 15 == 0:  # the admin, from elsewhere, every 15 s
            login = app.admin_login("s3cret", visitor("192.0.2.10"))
            refused += not login.authorized
        clock.now += 1
    assert compared > 40 and refused == 0
    for n in range(25):  # many different addresses slow everyone down, but lock no one out
        app.admin_login("wrong", visitor(f"10.1.0.{n}"))
    assert app.login_throttle.delay_s() > 0
    assert app.admin_login("s3cret", visitor("192.0.2.10")).authorized


def test_a_crowd_of_addresses_slows_logins_but_never_locks_the_owner_out(app):
    """Review 4, B9: 40 addresses (one IPv6 /64, say), one wrong password each, locked the
    admin out for 300 s, and each new address re-armed it."""
    clock = Clock()
    app.login_throttle = throttle = LoginThrottle(clock=clock)
    for n in range(40):
        assert app.admin_login("wrong", visitor(f"203.0.113.{n}")).message == "Wrong password."
    assert throttle.wait_s("192.0.2.10") == 0  # no lock for anyone who did not fail
    assert 0 < throttle.delay_s() <= throttle.global_max_delay_s
    for _ in range(12):  # each new address, for an hour: the owner gets in every time
        clock.now += 290
        app.admin_login("wrong", visitor(f"198.51.100.{int(clock.now) % 250}"))
        assert app.admin_login("s3cret", visitor("192.0.2.10")).authorized
    clock.now += 3601
    assert throttle.delay_s() == 0  # forgotten after an hour
    # one /64 is one client: its 2**64 addresses do not reset its lock
    for n in range(throttle.free + 1):
        app.admin_login("wrong", visitor(f"2001:db8:1:2::{n + 1:x}"))
    assert app.admin_login("wrong", visitor("2001:db8:1:2::ffff")).message.startswith("Too many")
    assert app.admin_login("s3cret", visitor("2001:db8:1:3::1")).authorized  # another /64


def _through_guard(scope_extra: dict, trusted: str = "") -> dict:
    seen: dict = {}

    async def inner(scope, receive, send):
        seen.update(scope)
        await send({"type": "http.response.start", "status": 200, "headers": []})
        await send({"type": "http.response.body", "body": b""})

    guard = RequestGuard(inner, 2**20, 2**20, trusted_proxies=parse_networks(trusted))
    scope = {"type": "http", "method": "GET", "path": "/", "scheme": "http"} | scope_extra

    async def receive():
        return {"type": "http.request", "body": b"", "more_body": False}

    async def send(message):
        pass

    asyncio.run(guard(scope, receive, send))
    return seen


def test_forwarded_headers_count_only_from_a_configured_proxy():
    """From loopback (a same-host tunnel), X-Forwarded-For picked the client's address for
    the login backoff and the vote limits, and X-Forwarded-Host the invite links' host."""
    headers = [
        (b"x-forwarded-for", b"10.0.0.5"),
        (b"x-forwarded-host", b"evil.example"),
        (b"x-forwarded-proto", b"https"),
        (b"host", b"demo.test"),
    ]
    scope = {"client": ("127.0.0.1", 5000), "headers": headers}
    untrusted = _through_guard(scope)
    assert untrusted["client"] == ("127.0.0.1", 5000) and untrusted["scheme"] == "http"
    assert [k for k, _ in untrusted["headers"]] == [b"x-forwarded-proto", b"host"]
    trusted = _through_guard(scope, trusted="127.0.0.1")
    assert trusted["client"][0] == "10.0.0.5" and trusted["scheme"] == "https"
    assert (b"x-forwarded-host", b"evil.example") in trusted["headers"]
    chain = [(b"x-forwarded-for", b"6.6.6.6, 198.51.100.7, 10.9.0.2")]
    hops = _through_guard({"client": ("10.9.0.1", 1), "headers": chain}, trusted="10.9.0.0/24")
    assert hops["client"][0] == "198.51.100.7"  # the rightmost address a proxy added
    with pytest.raises(ValueError, match="not an IP address"):
        parse_networks("10.0.0.1, proxy.local")
    docker = (Path(__file__).resolve().parent.parent / "Dockerfile").read_text()
    assert f"MAGNET_TRUSTED_PROXIES={SPACE_PROXIES} " in docker  # both Space kinds alike
    env = {"FORWARDED_ALLOW_IPS": "127.0.0.1"}
    proxy_env(env)  # uvicorn's own rewriting is off; RequestGuard decides
    assert env["FORWARDED_ALLOW_IPS"] == ""


def test_invite_links_ignore_a_forwarded_host_from_anyone_but_a_proxy(app, http):
    small_study(app)
    r = http.post(
        "/admin-session", json={"password": "s3cret"}, headers={"x-forwarded-host": "evil.example"}
    )
    req = fake_request()
    req.cookies = {ADMIN_COOKIE: r.cookies[ADMIN_COOKIE]}
    req.headers = {"host": "demo.test:7860"}  # what the guard lets through
    (link,) = app.admin_invite(req, "pilot", "Bob").rows
    assert link[1].startswith("http://demo.test:7860/rate?token=")


def test_pages_may_not_be_framed_or_sniffed(http, engine, tmp_path):
    for path in ("/config", "/gradio_api/info", "/admin-files/none", "/nothing"):
        h = http.get(path).headers
        assert h["x-frame-options"] == "DENY", path
        assert h["content-security-policy"] == "frame-ancestors 'none'"
        assert h["x-content-type-options"] == "nosniff"
    space = make_app(tmp_path / "s", engine, frame_ancestors="https://huggingface.co")
    with in_process(space) as client:
        h = client.get("/config").headers
        assert h["content-security-policy"] == "frame-ancestors https://huggingface.co"
        assert "x-frame-options" not in h  # it cannot name a site; the CSP does


def test_the_private_download_folder_is_emptied_at_start_and_at_close(tmp_path):
    """A backup left by a killed process (a whole copy of the database) stayed on disk."""
    import os
    import subprocess
    import sys

    root = tmp_path / "admin-files"
    dead = subprocess.run([sys.executable, "-c", "import os; print(os.getpid())"], text=True,
                          capture_output=True, check=True).stdout.strip()  # fmt: skip
    (root / dead / "tmpold").mkdir(parents=True)
    (root / dead / "tmpold" / "annotations-1.sqlite3").write_bytes(b"SQLite format 3")
    (root / "stray.csv").write_text("x")
    (root / str(os.getppid())).mkdir()  # a server that still runs keeps its folder
    downloads = PrivateDownloads(root=root)
    assert sorted(p.name for p in root.iterdir()) == sorted([str(os.getppid()), str(os.getpid())])
    assert (root.stat().st_mode & 0o777) == 0o700 and downloads.root == root / str(os.getpid())
    path = downloads.new_path("x.csv")
    path.write_text("a")
    downloads.publish(path)
    downloads.close()
    assert [p.name for p in root.iterdir()] == [str(os.getppid())]


def test_a_csv_corpus_cell_over_128_kb_is_one_sentence(app, tmp_path):
    big = tmp_path / "big.csv"
    big.write_text("text\n" + "w" * 200_000 + "\n")
    with pytest.raises(gr.Error, match=r"Line \d+ of the \.csv file cannot be read"):
        app.corpus(str(big))
    deep = tmp_path / "deep.jsonl"
    deep.write_text("[" * 200_000 + "]" * 200_000 + "\n")
    with pytest.raises(gr.Error, match="Line 1 of the .jsonl file is not JSON"):
        app.corpus(str(deep))


def test_names_and_item_sizes_are_checked_before_any_generation(app, tmp_path, monkeypatch):
    calls = []
    app.compare_infill_many = lambda requests: calls.extend(r[0] for r in requests) or iter(())
    long_item = tmp_path / "long.jsonl"
    rows = [{"key": "long", "text": "the cat " * 600 + "[blank] ."}]
    rows += [{"key": f"k{i}", "text": f"the dog [blank] in the river {i} ."} for i in range(3)]
    long_item.write_text("\n".join(json.dumps(r) for r in rows))
    args = (2, ["magnet", "zero-shot"], ["appropriate"], 1, 0, "", 3)
    with pytest.raises(gr.Error, match=r"Item 'long' is \d+ tokens long.*nothing was generated"):
        app.admin_create(admin_request(app), "long one", str(long_item), *args)
    assert calls == [] and list_drafts(app.store) == []  # nothing generated, nothing stuck

    from app import study_cli

    def no_model(*a, **k):
        raise AssertionError("the model loaded before the name was checked")

    monkeypatch.setattr(study_cli, "load_engine", no_model)
    code = study_cli.main(["--name", "../cli-escape", "--db-path", str(tmp_path / "c.sqlite3")])
    assert code == 2


def test_a_dollar_sign_in_a_system_name_keeps_results_and_their_plot(app):
    token = small_study(app, systems=("$\\undefinedmacro{x}$", "zero-shot"))
    shown = app.rate_open(token).shown_item
    app.rate_submit(token, shown, *form_answers(), None, "")
    res = app.admin_results(admin_request(app), "pilot")
    buf = io.BytesIO()
    res.plot.savefig(buf, format="png")  # what gr.Plot does with it
    assert buf.getvalue().startswith(b"\x89PNG")


@pytest.mark.parametrize(
    ("seed", "want"),
    [("", None), ("-1", None), (-1, None), ("7", 7), (7.0, 7), (str(MAX_SEED), MAX_SEED)]
    + [(MAX_SEED, MAX_SEED), (" 42 ", 42)],
)
def test_seeds_are_whole_numbers_up_to_the_stated_maximum(seed, want):
    assert _seed(seed) == want


@pytest.mark.parametrize("seed", ["abc", "nan", "inf", "1e30", str(MAX_SEED + 1), "1.5", True])
def test_bad_seeds_are_one_sentence(seed):
    with pytest.raises(gr.Error, match=f"from 0 to {MAX_SEED}, or -1"):
        _seed(seed)


def test_a_non_numeric_seed_over_the_api_is_one_sentence(app, served):
    """`gr.Number` failed on "abc" before the handler and the client got {"error": null};
    now the validator says it when the call joins the queue."""
    from gradio_client.exceptions import ValidationError

    client = _client(served)
    for seed in ("abc", "nan", ""):
        args = (TEXT, "sampled", 0.9, 0.9, seed, 2, False)
        if seed == "":
            assert client.predict(*args, api_name="/infill")  # empty: a random seed
            continue
        with pytest.raises(ValidationError, match="seed must be a whole number"):
            client.predict(*args, api_name="/infill")
    out = client.predict(TEXT, "sampled", 0.9, 0.9, str(MAX_SEED), 2, False, api_name="/infill")
    assert out
