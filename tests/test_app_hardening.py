"""Issue 12, app side: retried submissions, admin password guessing, hostile study names,
read-only databases, private downloads, arena votes, attention checks, request limits, admin
operations. Real store (a temporary SQLite file), tiny Llama, and the real Gradio server where
the protocol matters."""

from __future__ import annotations

import json
import re
import stat
import threading
from functools import partial

import app_fixtures
import gradio as gr
import pytest
from app_fixtures import (
    TEXT,
    Clock,
    admin_request,
    downloaded,
    fake_request,
    form_answers,
    free_port,
    in_process,
    serving,
    visitor,
)
from sqlalchemy import event

from annotation_db.schema import Rating, Study
from app.main import build_demo
from app.security import LoginThrottle, PrivateDownloads, RateLimiter
from app.services import VOTES_PER_WINDOW

# three items, each with a comment box
small_study = partial(app_fixtures.small_study, n=3, questions=("appropriate", "comment"))


def ratings_by_assignment(app) -> dict[int, int]:
    def fn(s):
        out: dict[int, int] = {}
        for r in s.query(Rating).all():
            out[r.assignment_id] = out.get(r.assignment_id, 0) + 1
        return out

    return app.store.db.read(fn)


def rated_texts(app) -> dict[str, int]:
    """Item text -> ratings stored for it (one per output shown)."""
    from annotation_db.schema import Assignment, Item

    def fn(s):
        out: dict[str, int] = {}
        for r in s.query(Rating).all():
            text = s.get(Item, s.get(Assignment, r.assignment_id).item_id).text
            out[text] = out.get(text, 0) + 1
        return out

    return app.store.db.read(fn)


def aid_of(shown: str) -> int:
    return int(shown.split(".")[0])


# ---------------------------------------------------------------- 1: retried submissions


def test_a_resent_submission_lands_once_on_the_displayed_item(app):
    token = small_study(app)
    shown = app.rate_open(token).shown_item
    first = app.rate_submit(token, shown, *form_answers(), None, "ok")
    again = app.rate_submit(token, shown, *form_answers(), None, "ok")  # double click / retry
    assert again.shown_item == first.shown_item != shown  # the same next item, not a second write
    assert ratings_by_assignment(app) == {aid_of(shown): 2}  # two outputs, one item
    # a lost response: the page never saw `first`, so it sends the old item once more
    lost = app.rate_submit(token, shown, *form_answers(), None, "ok")
    assert lost == first and ratings_by_assignment(app) == {aid_of(shown): 2}
    with pytest.raises(gr.Error, match="already answered differently"):
        app.rate_submit(token, shown, *form_answers(("No", "No")), None, "ok")
    assert app.store.progress("pilot").raters[0].done == 1


def test_four_concurrent_sends_of_one_submission_store_one_rating(app):
    token = small_study(app)
    shown = app.rate_open(token).shown_item
    results, errors = [], []
    barrier = threading.Barrier(4)

    def send():
        barrier.wait()
        try:
            results.append(app.rate_submit(token, shown, *form_answers(), None, ""))
        except Exception as e:  # noqa: BLE001 - collected and asserted below
            errors.append(e)

    threads = [threading.Thread(target=send) for _ in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert errors == [] and len(results) == 4
    assert len({r.shown_item for r in results}) == 1  # every send sees the same next item
    assert ratings_by_assignment(app) == {aid_of(shown): 2}


def test_a_shown_item_id_works_only_with_its_token(app):
    token = small_study(app)
    other = app.store.invite("pilot", "Bob").token
    shown = app.rate_open(token).shown_item
    for bad in (shown, f"{aid_of(shown)}.forged", str(aid_of(shown)), "", None):
        with pytest.raises(gr.Error, match="reload your invite link|Open your invite"):
            app.rate_submit(other, bad, *form_answers(), None, "")
    assert ratings_by_assignment(app) == {}


@pytest.fixture
def served(app):
    """The real Gradio server on a free port, and a client of its API."""
    from gradio_client import Client

    with serving(app) as url:
        yield Client(url, verbose=False)


def test_over_the_gradio_api_a_retried_submit_never_moves_to_the_next_item(app, served):
    """What a browser or an API client does: the endpoint's own parameters (the shown item is
    one of them only when the page sends it), the same answers sent again, four at once, and
    once more after a response that was never read."""
    token = small_study(app)
    api = served.view_api(return_format="dict", print_info=False)["named_endpoints"]
    params = [p["parameter_name"] for p in api["/rate_submit"]["parameters"]]
    sends_item = "shown_item" in params
    opened = served.predict(token, api_name="/rate_open")
    displayed = opened[3] if sends_item else opened[2]  # the item text the rater reads
    displayed = displayed["value"] if isinstance(displayed, dict) else displayed  # an update
    args = [token, *([opened[2]] if sends_item else []), *form_answers(), None, "ok"]
    first = served.predict(*args, api_name="/rate_submit")
    served.predict(*args, api_name="/rate_submit")  # sent twice
    jobs = [served.submit(*args, api_name="/rate_submit") for _ in range(4)]  # concurrently
    [j.result() for j in jobs]
    served.submit(*args, api_name="/rate_submit")  # its response is never read
    last = served.predict(*args, api_name="/rate_submit")
    assert rated_texts(app) == {displayed: 2}  # one rating per output of the displayed item
    assert last == first and app.store.progress("pilot").raters[0].done == 1


# ---------------------------------------------------------------- 2: admin password guessing


def test_fifty_wrong_passwords_take_hours_and_the_right_one_works_after(app):
    clock = Clock()
    app.login_throttle = LoginThrottle(clock=clock)
    start, tried = clock.now, 0
    while tried < 50:  # an attacker who tries again the moment it is allowed
        login = app.admin_login(f"guess{tried}", fake_request())
        ok, msg = login.authorized, login.message
        assert ok is False
        if msg.startswith("Too many"):
            clock.now += float(re.search(r"in (\d+) s", msg).group(1))
        else:
            tried += 1
    assert clock.now - start > 3 * 3600
    login = app.admin_login("s3cret", fake_request())  # locked: not even compared
    ok, msg = login.authorized, login.message
    assert ok is False and msg.startswith("Too many")
    clock.now += app.login_throttle.wait_s("unknown")
    assert app.admin_login("s3cret", fake_request()).authorized is True


def test_login_lockout_without_a_fake_clock_stops_fast_guessing(app):
    checked = 0
    for n in range(50):
        msg = app.admin_login(f"guess{n}", fake_request()).message
        checked += msg == "Wrong password."
    assert checked <= app.login_throttle.free + 1  # the rest were refused unchecked


def test_many_clients_together_are_slowed_down_too(app):
    """Slowed, not locked (issue 29: a lock for everyone locked the owner out too)."""
    clock = Clock()
    app.login_throttle = LoginThrottle(clock=clock)
    msgs = []
    for n in range(30):
        msgs.append(app.admin_login("wrong", visitor(f"10.0.0.{n}")).message)
    assert msgs == ["Wrong password."] * 30
    assert app.login_throttle.delay_s() == 10 * app.login_throttle.global_step_s


# ---------------------------------------------------------------- 3: hostile study names


def test_traversal_study_names_are_refused_and_exports_stay_private(app, tmp_path):
    for name in ("../../x", "/tmp/x"):
        with pytest.raises(gr.Error, match="study name"):
            app.admin_create(
                admin_request(app), name, None, 2, ["magnet"], ["appropriate"], 1, 0, "", 3
            )
    # a study made before names were checked is exported under a sanitized name
    app.store.db.write(
        lambda s: s.add(Study(name="../x-evil", questions=[{"kind": "appropriate",
                              "name": "appropriate"}], raters_per_item=1))
    )  # fmt: skip
    link = app.admin_export(admin_request(app), "../x-evil", "csv")
    path = downloaded(app, link)
    assert path.parent.parent == app.downloads.root and path.name == "_x-evil.csv"
    assert not (tmp_path.parent / "x-evil.csv").exists()


# ---------------------------------------------------------------- 5: storage failures


def test_an_unwritable_database_at_submit_says_the_answer_was_not_saved(app):
    token = small_study(app)
    shown = app.rate_open(token).shown_item
    engine = app.store.db.engine
    engine.dispose()

    @event.listens_for(engine, "connect")
    def _read_only(dbapi_conn, _record):  # noqa: ANN001
        dbapi_conn.execute("PRAGMA query_only=ON")

    with pytest.raises(gr.Error, match="NOT saved") as e:
        app.rate_submit(token, shown, *form_answers(), None, "")
    assert "\n" not in e.value.message
    event.remove(engine, "connect", _read_only)
    engine.dispose()
    assert ratings_by_assignment(app) == {}
    app.rate_submit(token, shown, *form_answers(), None, "")  # the same answer, sent again, lands
    assert ratings_by_assignment(app) == {aid_of(shown): 2}


def test_app_refuses_to_start_on_an_unwritable_database(tmp_path, capsys):
    from app.main import main

    (tmp_path / "a_file").write_text("x")
    port = str(free_port())
    code = main(["--db-path", str(tmp_path / "a_file" / "db.sqlite3"), "--port", port])
    err = capsys.readouterr().err
    assert code == 2 and err.startswith("error: The database") and err.count("\n") == 1


# ---------------------------------------------------------------- 6: private downloads


@pytest.fixture
def http(app):
    with in_process(app) as client:
        yield client


def test_exports_are_single_use_private_links_never_gradio_files(app, http):
    token = small_study(app)
    app.rate_submit(token, app.rate_open(token).shown_item, *form_answers(), None, "")
    link = app.admin_export(admin_request(app), "pilot", "csv")
    assert "gradio_api/file=" not in link
    url = re.search(r"\]\((admin-files/[\w-]+)\)", link).group(1)
    files = list(app.downloads.root.rglob("*.csv"))
    assert len(files) == 1 and stat.S_IMODE(files[0].stat().st_mode) == 0o600
    assert stat.S_IMODE(app.downloads.root.stat().st_mode) == 0o700
    got = http.get(f"/{url}")
    assert got.status_code == 200 and got.text.startswith("study,")
    assert "attachment" in got.headers["content-disposition"]
    assert not files[0].exists()  # deleted once sent
    again = http.get(f"/{url}")
    assert again.status_code == 404 and "expired or was already used" in again.text
    assert http.get("/admin-files/guess").status_code == 404
    backup = app.admin_backup(admin_request(app))
    burl = re.search(r"\]\((admin-files/[\w-]+)\)", backup).group(1)
    assert http.get(f"/{burl}").content.startswith(b"SQLite format 3")


def test_uploads_in_gradios_cache_are_deleted_after_an_hour(app):
    assert build_demo(app).delete_cache == (600, 3600)


def test_unused_download_links_expire_and_their_files_are_deleted(tmp_path):
    clock = Clock()
    d = PrivateDownloads(ttl_s=60, clock=clock)
    path = d.new_path("x.csv")
    path.write_text("a")
    ticket = d.publish(path)
    clock.now += 61
    d.sweep()
    assert not path.exists() and d.take(ticket) is None
    with pytest.raises(ValueError):
        d.new_path("../x.csv")
    d.close()


# ---------------------------------------------------------------- 7: arena votes


def test_blind_runs_are_sampled_with_a_hidden_seed_and_hide_timing(app):
    outs = [app.infill(TEXT, "greedy", 1.0, 1.0, 7, 3, True, fake_request()) for _ in range(2)]
    for out in outs:
        state = out.state
        assert all(o["decoding"]["do_sample"] for o in state["shown"])
        infos = [c.info for c in out.columns]
        assert all(" s · " not in i and "tokens" not in i for i in infos)
    seeds = [{o["seed"] for o in out.state["shown"]} for out in outs]
    near_greedy = app.infill(TEXT, "sampled", 0.05, 0.1, 7, 3, True, fake_request()).state
    assert near_greedy["shown"][0]["decoding"]["temperature"] >= 0.7  # not greedy in disguise
    assert near_greedy["shown"][0]["decoding"]["top_p"] >= 0.9
    assert seeds[0] != seeds[1] and 7 not in seeds[0] | seeds[1]  # not the visitor's seed
    message = app.vote(outs[0].state, "A", fake_request()).reveal
    assert message.count(" · done after ") == len(outs[0].state["shown"])  # timing after the vote


def test_votes_after_an_unblinded_run_of_the_same_text_are_flagged(app):
    req = fake_request()
    app.infill(TEXT, max_span=3, request=req)  # names shown
    state = app.infill(TEXT, max_span=3, blind=True, request=req).state
    app.vote(state, "A", req)
    fresh = app.infill("a new [blank] text .", max_span=3, blind=True, request=req).state
    app.vote(fresh, "B", req)
    res = app.store.results("arena")
    assert res.n_votes_seen_unblinded == 1 and res.n_judgments == 2
    other_tab = fake_request()  # a new session from the same address is flagged as well
    other_tab.session_hash, other_tab.client = "visitor-2", type("C", (), {"host": "10.1.1.1"})()
    same_address = fake_request()
    same_address.session_hash, same_address.client = "visitor-3", other_tab.client
    app.infill("one more [blank] text .", max_span=3, request=other_tab)
    late = app.infill("one more [blank] text .", max_span=3, blind=True, request=same_address)
    app.vote(late.state, "A", same_address)
    assert app.store.results("arena").n_votes_seen_unblinded == 2


def test_one_vote_per_comparison_and_a_rate_limit_per_session(app):
    req = fake_request()
    state = app.infill(TEXT, max_span=2, blind=True, request=req).state
    voted = app.vote(state, "A", req).state
    with pytest.raises(gr.Error, match="already voted"):
        app.vote(voted, "B", req)
    app.vote(state, "A", req)  # a replay of the same vote stores nothing new
    for _ in range(VOTES_PER_WINDOW - 1):
        app.vote(app.infill(TEXT, max_span=2, blind=True, request=req).state, "B", req)
    late = app.infill(TEXT, max_span=2, blind=True, request=req).state
    with pytest.raises(gr.Error, match="votes per"):
        app.vote(late, "A", req)
    assert app.store.results("arena").n_judgments == VOTES_PER_WINDOW


def test_rate_limiter_window_slides():
    clock = Clock()
    lim = RateLimiter(2, 60, clock=clock)
    lim.record(["a"])
    lim.record(["a"])
    assert lim.wait_s(["a"]) == 60 and lim.wait_s(["b"]) == 0
    clock.now += 60
    assert lim.wait_s(["a"]) == 0


# ---------------------------------------------------------------- 8: attention checks


def test_attention_checks_look_like_regular_items(app):
    systems = ["magnet", "zero-shot", "five-shot"]
    app.admin_create(admin_request(app), "s", None, 3, systems, ["appropriate"], 1, 2, "", 2)
    items, outputs = app.store.items("s")
    per_item = {it.key: sum(o.item_key == it.key for o in outputs) for it in items}
    assert set(per_item.values()) == {3}  # checks show three outputs, like every item
    gold = [it for it in items if it.is_gold]
    regular = [it for it in items if not it.is_gold]
    assert len(gold) == 2 and len(regular) == 3
    words = [set(it.text.replace("[blank]", " ").split()) for it in regular]
    for g in gold:  # a check's passage is none of the rated passages
        g_words = set(g.text.replace("[blank]", " ").split())
        assert all(len(g_words & w) < 0.5 * len(g_words) for w in words)
    token = app.store.invite("s", "Ada").token
    for _ in range(5):
        shown = app.rate_open(token)
        assert sum(1 for slot in shown.slots[:3] if slot.visible["visible"]) == 3
        app.rate_submit(token, shown.shown_item, *form_answers(("Yes", "Yes", "Yes")), None, "")
    res = app.admin_results(admin_request(app), "s").results
    assert res["n_raters_checked"] == 1 and res["n_raters_failed_attention"] == 1


# ---------------------------------------------------------------- 9: request limits, bad input


def test_oversized_requests_get_413_before_anyone_parses_them(http):
    big = json.dumps({"data": ["x" * (2 * 2**20)], "fn_index": 0, "session_hash": "s"})
    r = http.post("/gradio_api/queue/join", content=big, headers={"content-type": "text/json"})
    assert r.status_code == 413 and "larger than 1 MB" in r.json()["error"]

    def chunks():
        for _ in range(3):
            yield b"x" * 2**20

    r = http.post("/gradio_api/queue/join", content=chunks())  # no length given
    assert r.status_code == 413
    r = http.post("/gradio_api/upload", content=b"x" * (7 * 2**20))  # 5 MB uploads + framing
    assert r.status_code == 413
    assert http.get("/gradio_api/info").status_code == 200


@pytest.mark.parametrize("seed", [2**64, 1e30, float("nan"), float("inf"), 1.5])
def test_seeds_outside_64_bits_are_one_sentence(app, seed):
    with pytest.raises(gr.Error, match="seed must be a whole number") as e:
        app.infill(TEXT, "sampled", 0.9, 0.9, seed, 3)
    assert e.value.message.endswith(".")
    with pytest.raises(gr.Error, match="seed must be a whole number"):
        list(app.continue_("the cat", 4, "sampled", 0.9, 0.9, seed))


def test_lone_surrogates_are_one_sentence(app):
    with pytest.raises(gr.Error, match="not valid text"):
        app.infill("the cat \ud800 [blank] .", max_span=3)
    token = small_study(app)
    shown = app.rate_open(token).shown_item
    with pytest.raises(gr.Error, match="comment contains a character that is not valid"):
        app.rate_submit(token, shown, *form_answers(), None, "bad \udfff")
    with pytest.raises(gr.Error, match="invite token is not valid"):
        app.rate_open("tok\ud800")
    assert ratings_by_assignment(app) == {}


# ---------------------------------------------------------------- 10: admin operations


def test_admin_closes_reopens_and_revokes(app):
    token = small_study(app)
    bob = app.store.invite("pilot", "Bob").token
    assert app.admin_status(admin_request(app), "pilot", "closed") == "Study 'pilot' is now closed."
    assert "closed" in app.rate_open(token).status
    app.admin_status(admin_request(app), "pilot", "open")
    shown = app.rate_open(token).shown_item
    assert shown
    rater_id = app.admin_progress(admin_request(app), "pilot").rows[0][0]
    assert "no longer works" in app.admin_revoke(admin_request(app), "pilot", rater_id)
    with pytest.raises(gr.Error, match="invite token is not valid"):
        app.rate_open(token)
    with pytest.raises(gr.Error, match="invite token is not valid"):
        app.rate_submit(token, shown, *form_answers(), None, "")
    assert app.rate_open(bob).shown_item  # the others go on
    assert [r[-1] for r in app.admin_progress(admin_request(app), "pilot").rows] == [
        "revoked",
        "active",
    ]
    for call in (
        lambda: app.admin_status(fake_request(), "pilot", "open"),
        lambda: app.admin_revoke(fake_request(), "pilot", 2),
    ):
        with pytest.raises(gr.Error, match="Log in"):
            call()


def test_a_new_link_replaces_the_old_one_and_keeps_the_raters_answers(app):
    token = small_study(app)
    app.rate_submit(token, app.rate_open(token).shown_item, *form_answers(), None, "")  # one done
    shown = app.rate_open(token).shown_item  # the item shown next
    rater_id = app.admin_progress(admin_request(app), "pilot").rows[0][0]
    msg = app.admin_new_link(admin_request(app), "pilot", rater_id)
    assert "old one no longer works" in msg
    new = msg.rsplit("?token=", 1)[1]
    assert new != token and len(new) >= 24
    with pytest.raises(gr.Error, match="invite token is not valid"):
        app.rate_open(token)
    again = app.rate_open(new)
    assert again.shown_item  # the same rater goes on: the answer kept, an item to rate
    row = app.admin_progress(admin_request(app), "pilot").rows[0]
    assert row[0] == rater_id and row[2] == 1 and row[-1] == "active"
    # only the hash is stored, and a revoked rater can be given a link again
    from annotation_db.schema import Rater

    assert app.store.db.read(lambda s: s.get(Rater, rater_id).token_hash) != new
    assert "no longer works" in app.admin_revoke(admin_request(app), "pilot", rater_id)
    newer = app.admin_new_link(admin_request(app), "pilot", rater_id).rsplit("?token=", 1)[1]
    assert app.rate_open(newer).shown_item
    assert shown  # (the shown item id was valid only with the old token)
    with pytest.raises(gr.Error, match="Log in"):
        app.admin_new_link(fake_request(), "pilot", rater_id)
    with pytest.raises(gr.Error, match="rater's id"):
        app.admin_new_link(admin_request(app), "pilot", None)


def test_every_response_says_no_referrer(http):
    for path in ("/gradio_api/info", "/admin-files/none"):
        assert http.get(path).headers["referrer-policy"] == "no-referrer"


def test_the_launched_server_has_the_guard_and_the_download_route(app, served):
    """The same middleware and route through `demo.launch(app_kwargs=...)`, as `python -m app`
    starts it, over a real socket."""
    import httpx

    base = served.src.rstrip("/")
    r = httpx.get(f"{base}/gradio_api/info")
    assert r.status_code == 200 and r.headers["referrer-policy"] == "no-referrer"
    r = httpx.post(f"{base}/gradio_api/queue/join", content=b"{" + b" " * (2 * 2**20) + b"}")
    assert r.status_code == 413
    token = small_study(app)
    app.rate_submit(token, app.rate_open(token).shown_item, *form_answers(), None, "")
    url = re.search(
        r"\]\((admin-files/[\w-]+)\)", app.admin_export(admin_request(app), "pilot", "jsonl")
    )
    first, second = httpx.get(f"{base}/{url.group(1)}"), httpx.get(f"{base}/{url.group(1)}")
    assert first.status_code == 200 and json.loads(first.text.splitlines()[0])["study"] == "pilot"
    assert second.status_code == 404
