"""Issue 29, points 5-8 and the visitor's minor findings (security review 4, browser tour 4).

5: a page of another origin (another port of the same host) ran the admin's backup with the
admin's cookie and read its link; now a cross-origin request never carries the admin login.
6: the demo reproduced study outputs under their system names; now it refuses a passage of an
open study. 7: 40 addresses with one wrong password each locked the admin out; now they slow
logins down. 8: the demo quota was counted when a call ran, before its input checks, and
`/gradio_api/run/infill` skipped the queue; now it is counted at join, for valid calls only,
and model calls are reachable only through the queue.
Real store, tiny Llama, and the real Gradio server where the protocol matters.
"""

from __future__ import annotations

import threading
import time

import gradio as gr
import httpx
import pytest
from app_fixtures import Clock, fake_request, make_app
from starlette.testclient import TestClient
from tiny_models import tiny_engine

from annotation_db import ItemIn, OutputIn
from app.main import build_demo, server_app_kwargs
from app.security import ADMIN_COOKIE, LoginThrottle
from magnet_model.inference.search import EngineEncoder

TEXT = "the cat [blank] on the mat . the dog [blank] in the river ."


@pytest.fixture(scope="module")
def engine():
    return tiny_engine()


@pytest.fixture
def app(engine, tmp_path):
    return make_app(tmp_path, engine)


def _served(app):
    demo = build_demo(app)
    demo.launch(
        prevent_thread_lock=True, quiet=True, app_kwargs=server_app_kwargs(app),
        enable_monitoring=False,
    )  # fmt: skip
    return demo


def _visitor(host: str):
    req = fake_request()
    req.client = type("C", (), {"host": host})()
    return req


def _refusal(validation: list[dict]) -> str | None:
    """The sentence of a validator's refusal (None: the call was admitted)."""
    bad = [v["message"] for v in validation if not v["is_valid"]]
    return bad[0] if bad else None


# ---------------------------------------------------------------- 5: cross-origin admin calls


def test_a_page_of_another_origin_cannot_use_the_admin_login(app):
    """Review 4, N5: admin logged in at 127.0.0.1:7871, a page at 127.0.0.1:7879 (same site,
    so SameSite=Strict sent the cookie) called admin_backup and read the single-use link."""
    fastapi_app = gr.routes.App.create_app(build_demo(app), app_kwargs=server_app_kwargs(app))
    with TestClient(fastapi_app, base_url="http://127.0.0.1:7871") as http:
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


# ---------------------------------------------------------------- 6: study passages


def _open_study(app) -> list[str]:
    texts = [
        "The Great Wall of China is a series of fortifications that were built [blank] "
        "across the historical northern borders of ancient Chinese states.",
        "Photosynthesis is the process by which green plants and some other organisms use "
        "sunlight to [blank] foods from carbon dioxide and water.",
        "A short [blank] item.",
    ]
    items = [ItemIn(f"i{k}", t, ["x"]) for k, t in enumerate(texts)]
    outputs = [
        OutputIn(it.key, s, it.text.replace("[blank]", fill), [fill])
        for it in items
        for s, fill in [("magnet", "over centuries"), ("zero-shot", "make")]
    ]
    app.store.create_study("pilot", items, outputs, questions=["appropriate"], raters_per_item=1)
    app.store.set_status("pilot", "open")
    return texts


def test_the_demo_refuses_passages_of_an_open_study_and_says_why(app):
    """Review 4, N15: 18 demo runs of study items reproduced 3 of 18 study outputs exactly,
    under their system names."""
    from app.blinding import StudyPassages

    clock = Clock()
    app.study_passages = StudyPassages(app.store, refresh_s=5.0, clock=clock)
    texts = _open_study(app)
    near = (  # another blank, other words around, and one run of 8 words kept
        "In my notes: a series of fortifications that were built across the [blank] borders."
    )
    refused = [
        texts[0],
        texts[1].upper().replace("[BLANK]", "  [blank]"),  # case and spacing do not matter
        near,
        "A SHORT [blank] item!",  # a short passage, copied whole
    ]
    for text in refused:
        why = _refusal(app.infill_admit(text, max_span=2, request=_visitor("10.0.0.1")))
        assert why and "rating study that is running now" in why, text
        with pytest.raises(gr.Error, match="does not fill, continue or show"):  # the handler too
            app.infill(text, max_span=2)
    fine = "The Great Wall of China is long, and [blank] visit it every year."  # 6 shared words
    assert _refusal(app.infill_admit("This is a short [blank] item.", max_span=2)) is None
    assert _refusal(app.infill_admit(fine, max_span=2)) is None
    app.infill(fine, max_span=2)
    app.store.set_status("pilot", "closed")
    clock.now += 5  # looked at again within seconds
    assert _refusal(app.infill_admit(texts[0], max_span=2)) is None


# ---------------------------------------------------------------- 7: many addresses, one owner


def test_a_crowd_of_addresses_slows_logins_but_never_locks_the_owner_out(app):
    """Review 4, B9: 40 addresses (one IPv6 /64, say), one wrong password each, locked the
    admin out for 300 s, and each new address re-armed it."""
    clock = Clock()
    app.login_throttle = throttle = LoginThrottle(clock=clock)
    for n in range(40):
        assert app.admin_login("wrong", _visitor(f"203.0.113.{n}")).message == "Wrong password."
    assert throttle.wait_s("192.0.2.10") == 0  # no lock for anyone who did not fail
    assert 0 < throttle.delay_s() <= throttle.global_max_delay_s
    for _ in range(12):  # each new address, for an hour: the owner gets in every time
        clock.now += 290
        app.admin_login("wrong", _visitor(f"198.51.100.{int(clock.now) % 250}"))
        assert app.admin_login("s3cret", _visitor("192.0.2.10")).authorized
    clock.now += 3601
    assert throttle.delay_s() == 0  # forgotten after an hour
    # one /64 is one client: its 2**64 addresses do not reset its lock
    for n in range(throttle.free + 1):
        app.admin_login("wrong", _visitor(f"2001:db8:1:2::{n + 1:x}"))
    assert app.admin_login("wrong", _visitor("2001:db8:1:2::ffff")).message.startswith("Too many")
    assert app.admin_login("s3cret", _visitor("2001:db8:1:3::1")).authorized  # another /64


def test_the_login_route_waits_the_delay_and_takes_one_login_at_a_time(app):
    app.login_throttle = LoginThrottle(global_free=2, global_step_s=0.4)
    fastapi_app = gr.routes.App.create_app(build_demo(app), app_kwargs=server_app_kwargs(app))
    with TestClient(fastapi_app) as http:
        for n in range(3):
            app.login_throttle.failed(f"10.9.0.{n}")
        t0 = time.perf_counter()
        ok = http.post("/admin-session", json={"password": "s3cret"})
        assert ok.json()["ok"] and time.perf_counter() - t0 >= 0.4
        app.login_throttle.begin("testclient")  # a login of this address still being checked
        busy = http.post("/admin-session", json={"password": "s3cret"})
        assert busy.status_code == 429 and "being checked" in busy.json()["message"]


# ---------------------------------------------------------------- 8: quotas at join


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
    demo = _served(app)
    url = demo.local_url.rstrip("/")
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
        demo.close()


# ---------------------------------------------------------------- visitor: search cache key


def test_the_search_cache_key_does_not_change_with_how_the_weights_were_loaded(engine):
    """Tour 4, n2: the key held the model's source description ("de-quantized into ..." on
    the first start, "cache ..." later), so the first start's vectors were never reused."""
    was = engine.loaded.source, getattr(engine.loaded, "weights", "")
    try:
        engine.loaded.weights = "/cache/models/SmolLM2-135M-Instruct-Q4_1-x"
        engine.loaded.source = "embedded (de-quantized into /cache/models/...)"
        first = EngineEncoder(engine, None).key
        engine.loaded.source = "embedded (cache /cache/models/...)"
        assert EngineEncoder(engine, None).key == first
        engine.loaded.weights = "/cache/models/another-model"
        assert EngineEncoder(engine, None).key != first
    finally:
        engine.loaded.source, engine.loaded.weights = was


# ---------------------------------------------------------------- visitor: controls, revoke


def test_temperature_and_top_p_are_greyed_out_while_they_do_nothing(app):
    """Tour 4, p9: Temperature and Top-p looked active and movable under greedy."""
    demo = build_demo(app)
    sliders = [b for b in demo.blocks.values() if getattr(b, "label", None) == "Temperature"]
    assert sliders and all(s.interactive is False for s in sliders)  # greedy is the default
    (toggle,) = {d.fn for d in demo.fns.values() if d.name == "sampling_controls"}
    assert [u["interactive"] for u in toggle("sampled")] == [True, True]
    assert [u["interactive"] for u in toggle("greedy", True)] == [True, True]  # blind samples
    assert [u["interactive"] for u in toggle("greedy", False)] == [False, False]


def test_revoking_asks_first_and_no_revokes_nothing(app):
    """Tour 4, p10: "Revoke this rater's invite link" acted at once."""
    from app_fixtures import admin_request

    from app.admin import NOT_CONFIRMED

    demo = build_demo(app)
    (revoke,) = [d for d in demo.fns.values() if d.name == "admin_revoke"]
    assert "window.confirm(" in revoke.js and repr(NOT_CONFIRMED) in revoke.js
    _open_study(app)
    rater = app.store.invite("pilot", "Ada")
    assert app.admin_revoke(admin_request(app), "pilot", NOT_CONFIRMED) == "Nothing was revoked."
    assert app.store.open_session(rater.token)  # the link still works
    assert "no longer works" in app.admin_revoke(admin_request(app), "pilot", str(rater.rater_id))
