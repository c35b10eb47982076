"""End to end in a real browser: Debian's chromium driven by Playwright against `python -m app`.

The app runs in a subprocess on a free loopback port with a tiny Llama saved to disk (with
'magnet' and 'llm2vec' LoRA adapters), a temporary database and cache, so the whole test takes
about a minute on a CPU. It fills a blank and sees three outputs, streams continuations,
searches an uploaded corpus, rates an item through an invite link and finds the rating in the
database, and logs into Admin. Screenshots of every tab go to artifacts/screenshots/.

Locally the test skips when chromium or the playwright package is missing; with CI=true it
fails instead (.ci/browser.sh installs chromium and exports MAGNET_BROWSER).
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
import time
from pathlib import Path

import pytest
from app_fixtures import app_process, free_port

from annotation_db import AnnotationStore, ItemIn, OutputIn

pytestmark = pytest.mark.browser

ROOT = Path(__file__).resolve().parent.parent
SHOTS = ROOT / "artifacts" / "screenshots"
BROWSER_ARGS = [
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
    "--no-first-run",
]
TIMEOUT_MS = 120_000


def _browser_path() -> str | None:
    for cand in (os.environ.get("MAGNET_BROWSER"), "/usr/bin/chromium", shutil.which("chromium")):
        if cand and Path(cand).is_file():
            return cand
    return None


def _require_browser() -> str:
    """The chromium binary, or skip (locally) / fail (CI=true) with the reason."""
    missing = []
    try:
        import playwright.sync_api  # noqa: F401
    except ImportError:
        missing.append("the Python package 'playwright' (pip install playwright)")
    path = _browser_path()
    if path is None:
        missing.append("Debian's chromium (apt-get install chromium, or set MAGNET_BROWSER)")
    if missing:
        reason = "browser test needs " + " and ".join(missing)
        if os.environ.get("CI", "").lower() == "true":
            pytest.fail(reason + " (CI=true: .ci/browser.sh should have installed it)")
        pytest.skip(reason)
    return path


def _study(db: Path) -> str:
    """A one-item study with two outputs; returns a rater's invite token."""
    with AnnotationStore(path=db) as store:
        item = ItemIn("i1", "the cat [blank] on the mat .", ["sat"])
        outs = [
            OutputIn("i1", "magnet", "the cat sat on the mat .", ["sat"]),
            OutputIn("i1", "zero-shot", "the cat ran on the mat .", ["ran"]),
        ]
        # Room for every rater the tests invite: Browser, Phone, the admin's invite, Second rater.
        store.create_study(
            "e2e", [item], outs, questions=["appropriate", "preference"], raters_per_item=6
        )
        # no rater yet, two chat replies among its outputs: what the admin must be asked about
        items = [ItemIn(f"f{k}", f"the dog [blank] in the park {k} .", ["ran"]) for k in range(3)]
        replies = ["I'm ready to help.", "SmolLM.", "ran"]
        flagged = [
            OutputIn(it.key, sys_, it.text.replace("[blank]", fill), [fill])
            for it, reply in zip(items, replies, strict=True)
            for sys_, fill in (("magnet", "ran"), ("zero-shot", reply))
        ]
        store.create_study("flagged", items, flagged, questions=["appropriate"])
        # many flagged outputs: making them again takes the tiny model a few seconds, time
        # for an invite to come while it runs
        items = [
            ItemIn(f"r{k}", f"the bird [blank] over the sea {k} .", ["flew"]) for k in range(120)
        ]
        chat = [
            OutputIn(it.key, sys_, it.text.replace("[blank]", fill), [fill])
            for it in items
            for sys_, fill in (("magnet", "I'm ready to help."), ("zero-shot", "SmolLM."))
        ]
        store.create_study("remake", items, chat, questions=["appropriate"])
        return store.invite("e2e", "Browser rater").token, store.invite("e2e", "Phone rater").token


# Words a rater's page must not show: the demo's tabs, a page menu, the models and systems.
NOT_ON_RATER_PAGE = "infill continue search admin home magnet zero-shot five-shot llm2vec minilm"
NOT_ON_RATER_PAGE = [*NOT_ON_RATER_PAGE.split(), "smollm", "base model"]


@pytest.fixture(scope="module")
def served(tmp_path_factory):
    _require_browser()
    tmp = tmp_path_factory.mktemp("e2e")
    from tiny_models import save_tiny_model

    paths = save_tiny_model(tmp / "model")
    db = tmp / "db.sqlite3"
    token, phone_token = _study(db)
    port = free_port()
    env = dict(os.environ, MAGNET_ADMIN_PASSWORD="pw", GRADIO_ANALYTICS_ENABLED="False")
    env["MAGNET_DATA_DIR"] = str(tmp / "data")  # the private download folder too
    # the demo runs beside e2e (which has raters) by the admin's choice, so that the tabs can
    # be walked; the last test takes that choice back and sees the demo pause
    (tmp / "data").mkdir()
    (tmp / "data" / "demo-during-studies.json").write_text('["e2e"]')
    env["PYTHONPATH"] = str(ROOT)
    env["MAGNET_SEARCH_WARMUP"] = "false"  # the test searches an uploaded corpus
    adapters = f"magnet={paths['magnet']},llm2vec={paths['llm2vec']}"
    cmd = [sys.executable, "-m", "app", "--base-model", str(paths["base"]), "--adapters",
           adapters, "--device", "cpu", "--port", str(port), "--db-path", str(db),
           "--cache-dir", str(tmp / "cache")]  # fmt: skip
    t0 = time.perf_counter()
    with app_process(cmd, env, tmp / "app.log", port) as url:
        print(f"app ready after {time.perf_counter() - t0:.1f} s")
        yield {"url": url, "db": db, "token": token, "phone_token": phone_token, "tmp": tmp}


@pytest.fixture(scope="module")
def browser(served):
    from playwright.sync_api import sync_playwright

    with sync_playwright() as p:
        b = p.chromium.launch(executable_path=_browser_path(), args=BROWSER_ARGS)
        yield b
        b.close()


def _new_page(browser, width: int, height: int, mobile: bool = False):
    pg = browser.new_page(
        viewport={"width": width, "height": height}, is_mobile=mobile, has_touch=mobile
    )
    pg.set_default_timeout(TIMEOUT_MS)
    return pg


@pytest.fixture(scope="module")
def page(browser):
    return _new_page(browser, 1400, 1000)


@pytest.fixture(scope="module")
def phone(browser):
    return _new_page(browser, 390, 844, mobile=True)


def _open_tab(page, name: str) -> None:
    """A tab by name; on a phone the last tabs sit in an overflow menu."""
    tab = page.get_by_role("tab", name=name)
    if tab.count() == 0 or not tab.first.is_visible():
        page.locator(".overflow-menu button, button.overflow-menu").first.click()
    page.get_by_role("tab", name=name).first.click()


def _pick_study(page, name: str) -> None:
    """The Study list set to name (the blind vote's "arena" study is the newest otherwise)."""
    page.get_by_label("Study", exact=True).click()
    page.get_by_role("option", name=name, exact=True).click()


def _shot(page, name: str) -> None:
    SHOTS.mkdir(parents=True, exist_ok=True)
    page.screenshot(path=str(SHOTS / f"{name}.png"), full_page=True)


def test_end_to_end_in_chromium(served, page):
    from playwright.sync_api import expect

    page.goto(served["url"])
    # An input check's sentence is said on the text box when the call joins the queue (the
    # model call's validator, issue 29), and leaves no bare "Error" pill on the columns.
    page.locator("#infill-run").click()
    expect(page.locator("#infill-text")).to_contain_text("The text is empty.")
    assert page.locator(".infill-col").get_by_text("Error", exact=True).count() == 0
    # Infill: three outputs side by side; markup typed by the visitor stays text.
    text = page.locator("#infill-text textarea")
    text.fill("<b>bold</b> the cat ")
    page.get_by_role("button", name="Insert [blank] at the cursor").click()
    expect(text).to_have_value("<b>bold</b> the cat [blank]")
    text.press("End")
    text.type(" on the mat .")
    page.locator("#infill-run").click()
    cols = page.locator(".infill-col")
    expect(cols).to_have_count(3)
    for i in range(3):
        expect(cols.nth(i)).to_contain_text("done after", timeout=TIMEOUT_MS)
        expect(cols.nth(i)).to_contain_text("<b>bold</b> the cat")
    assert page.locator(".infill-col b:text('bold')").count() == 0  # not rendered as HTML
    _shot(page, "infill")
    # Refused over earlier fills (tour 4, n1): the sentence at once, no "Error" pill left on
    # the fills; the text box is cleared of it once the visitor types.
    for bad, why in [("[blank] [blank]", "only blanks"), (" a [blank]" * 9, "9 blanks")]:
        text.fill(bad)
        page.locator("#infill-run").click()
        expect(page.locator("#infill-text")).to_contain_text(why, timeout=5000)
        assert cols.get_by_text("Error", exact=True).count() == 0
    _shot(page, "infill-refused")
    text.fill("<b>bold</b> the cat [blank] on the mat .")
    # Blind: a vote without a choice is said in the note (no "Error" pill over it); after the
    # vote each column carries its system's name.
    page.get_by_label("Compare blind (vote before the names are shown)").check()
    page.locator("#infill-run").click()
    expect(cols.first).to_contain_text("shown after the vote", timeout=TIMEOUT_MS)
    page.get_by_role("button", name="Vote").click()
    expect(page.get_by_text("Pick an output (A, B or C)")).to_be_visible()
    assert page.get_by_text("Error", exact=True).count() == 0
    page.locator("label", has_text="Output A").click()
    page.get_by_role("button", name="Vote").click()
    expect(cols.first.get_by_role("heading")).to_contain_text("A = ")
    expect(cols.first).to_contain_text("done after")
    _shot(page, "infill-blind-voted")
    page.get_by_label("Compare blind (vote before the names are shown)").uncheck()

    page.get_by_role("tab", name="Continue").click()
    page.get_by_label("Prompt").fill("the cat sat on the")
    page.locator("#continue-run").click()
    expect(page.get_by_text("into the shared batch")).to_have_count(3, timeout=TIMEOUT_MS)
    _shot(page, "continue")

    page.get_by_role("tab", name="Search").click()
    corpus = served["tmp"] / "corpus.txt"
    corpus.write_text(
        "the cat sat on the mat .\nthe bird flew over the sea .\n<i>fire</i> and water\n"
    )
    page.locator("input[type=file]").first.set_input_files(str(corpus))
    page.get_by_label("Query").fill("the bird flew")
    page.locator("#search-run").click()
    note = page.get_by_label("Corpus and timing")
    expect(note).to_have_value(re.compile(r"^corpus\.txt: 3 passages"), timeout=TIMEOUT_MS)
    expect(page.get_by_text("<i>fire</i> and water").first).to_be_visible()  # shown as text
    assert page.locator("table i:text('fire')").count() == 0
    _shot(page, "search")

    # An invite link (the old /?token= form too) opens the rater-only page.
    page.goto(f"{served['url']}/?token={served['token']}")
    page.wait_for_url(re.compile(r"/rate\?token="), timeout=TIMEOUT_MS)
    expect(page.get_by_text("Output B").first).to_be_visible(timeout=TIMEOUT_MS)
    assert page.get_by_role("tab").count() == 0
    body = page.locator("body").inner_text().lower()
    assert [w for w in NOT_ON_RATER_PAGE if w in body] == [], body
    assert "0 done, up to 1 more" in body
    expect(page.locator("footer")).to_be_hidden()  # no "Use via API" or "Settings" for raters
    expect(page.get_by_label("Study and instructions")).to_have_value(re.compile("Browser rater"))
    # One answer missing: one inline sentence, no error overlay, answers kept, page usable.
    page.locator("label:visible", has_text="Yes").first.click()
    page.locator("#rate-submit").click()
    msg = page.locator("#rate-message")
    expect(msg).to_contain_text("Please answer: output B (appropriate?) and which output is best")
    expect(page.get_by_text("Please answer")).to_have_count(1)
    assert page.locator(".toast-body:visible").count() == 0
    assert page.get_by_text("Error", exact=True).count() == 0
    assert page.locator("input[type=radio]:checked").count() == 1  # the answer given is kept
    _shot(page, "rate-missing-answer")
    page.locator("label:visible", has_text="Yes").nth(1).click()
    page.locator("label:visible", has_text="A tie").first.click()
    _shot(page, "rate")
    page.locator("#rate-submit").click()
    expect(page.get_by_text("all done")).to_be_visible(timeout=TIMEOUT_MS)
    expect(msg).to_have_text("")
    _shot(page, "rate-done")
    with AnnotationStore(path=served["db"]) as store:
        prog = store.progress("e2e")
        assert prog.judgments_done == 1 and prog.raters[0].display_name == "Browser rater"
        res = store.results("e2e").to_dict()
        assert {s["system"]: s["appropriate"]["share"] for s in res["systems"]} == {
            "magnet": 1.0,
            "zero-shot": 1.0,
        }

    page.goto(served["url"])
    page.get_by_role("tab", name="Admin").click()
    expect(page.get_by_role("button", name="Log out")).to_be_hidden()  # only once logged in
    for press in ("Enter", None):  # Enter logs in, and so does the button
        page.get_by_label("Admin password").fill("nope")
        if press:
            page.get_by_label("Admin password").press(press)
        else:
            page.get_by_role("button", name="Log in").click()
        expect(page.get_by_text("Wrong password.")).to_be_visible()
        page.wait_for_timeout(1000)
        assert page.locator(".toast-body:visible").count() == 0  # only "Wrong password."
    page.get_by_label("Admin password").fill("pw")
    page.get_by_label("Admin password").press("Enter")
    expect(page.get_by_role("heading", name="New study")).to_be_visible()
    status = page.locator("input[type=radio][value=open]")
    expect(status).to_be_checked()  # the study's own status, not "closed"
    assert page.get_by_label("Rater id (see Progress)").input_value() == ""
    _shot(page, "admin")
    # a refused create: its sentence under the button, no "Error" pill over the Study list
    page.get_by_role("button", name="Generate outputs and create the study").click()
    expect(page.locator("#admin-create-msg textarea")).to_have_value("Give the study a name.")
    assert page.get_by_text("Error", exact=True).count() == 0
    page.get_by_label("Study", exact=True).click()  # the list still opens
    page.keyboard.press("Escape")
    page.get_by_role("button", name="Revoke this rater's invite link").click()
    expect(page.locator("#admin-msg textarea")).to_have_value(
        "Pick a study and type the rater's id (see Progress)."
    )
    _shot(page, "admin-refused")
    _pick_study(page, "e2e")
    # the picked study's outputs checked before inviting, and invites that name their study
    # and open (browser tour s4, N-M2 and N-M3)
    expect(page.locator("#admin-check-report")).to_contain_text("Outputs of e2e, checked")
    expect(page.locator("#admin-check-report")).to_contain_text("Base, zero-shot prompt")
    page.get_by_role("button", name="Drop items with flagged outputs").click()
    expect(page.locator("#admin-check-msg")).to_contain_text("invited raters")  # e2e has some
    _shot(page, "admin-check")
    page.get_by_label("Rater names, one per line").fill("Invited in the browser")
    page.get_by_role("button", name="Create invite links for 'e2e'").click()
    expect(page.locator("#admin-invite-msg")).to_contain_text("1 invite link for the study e2e")
    page.get_by_text("/rate?token=").first.wait_for(state="attached")
    link = re.search(r"https?://[^\s\"'<>]+/rate\?token=[\w-]+", page.content()).group(0)
    _shot(page, "admin-invited")
    rater = page.context.browser.new_page()  # a page of its own (no admin cookie)
    rater.goto(link)  # the link made opens the study's rater page
    study_box = rater.get_by_label("Study and instructions")
    expect(study_box).to_have_value(re.compile("rater: Invited in the browser"), timeout=TIMEOUT_MS)
    rater.close()
    page.get_by_role("button", name="Results", exact=True).click()  # study e2e: one vote
    note = page.get_by_text("not enough votes for an interval (n = 1, need 10)")
    note.first.wait_for(state="attached")  # a cell of the results table
    _shot(page, "admin-results")
    # A study with flagged outputs and no rater: the first invite asks (it would freeze the
    # outputs), dropping says what would go and asks, and only the second click drops.
    _pick_study(page, "flagged")
    expect(page.locator("#admin-check-report")).to_contain_text("Outputs of flagged, checked")
    page.get_by_label("Rater names, one per line").fill("Zoe")
    page.get_by_role("button", name="Create invite links for 'flagged'").click()
    invite_msg = page.locator("#admin-invite-msg")
    expect(invite_msg).to_contain_text("2 outputs of flagged are flagged")
    expect(invite_msg).to_contain_text("Nobody was invited yet")
    expect(page.get_by_role("button", name="Invite anyway (2 flagged outputs)")).to_be_visible()
    _shot(page, "admin-invite-asks")
    page.get_by_role("button", name="Drop items with flagged outputs").click()
    check_msg = page.locator("#admin-check-msg")
    expect(check_msg).to_contain_text("Dropping would remove 2 of 3 items, leaving 1 item")
    expect(check_msg).to_contain_text("Nothing was dropped yet")
    with AnnotationStore(path=served["db"]) as store:
        assert store.study("flagged").n_items == 3  # asked, not dropped
    _shot(page, "admin-drop-preview")
    page.get_by_role("button", name="Yes, drop 2 items").click()
    expect(check_msg).to_contain_text("Dropped 2 items")
    expect(page.get_by_role("button", name="Drop items with flagged outputs")).to_be_visible()
    expect(page.get_by_role("button", name="Create invite links for 'flagged'")).to_be_visible()
    _shot(page, "admin-dropped")
    with AnnotationStore(path=served["db"]) as store:
        assert store.study("flagged").n_items == 1
    # An invite while the study's flagged outputs are being made again is refused with the
    # reason (it would freeze the outputs and throw that work away); the remake then ends.
    _pick_study(page, "remake")
    expect(page.locator("#admin-check-report")).to_contain_text("Outputs of remake, checked")
    page.get_by_role("button", name="Make flagged outputs again").click()
    page.get_by_label("Rater names, one per line").fill("Yan")
    page.get_by_role("button", name="Create invite links for 'remake'").click()
    expect(invite_msg).to_contain_text("'remake' is making its flagged outputs again")
    _shot(page, "admin-invite-during-remake")
    expect(check_msg).to_contain_text("flagged outputs again;", timeout=3 * TIMEOUT_MS)
    with AnnotationStore(path=served["db"]) as store:
        assert store.study("remake").n_raters == 0  # nobody was invited meanwhile
    _shot(page, "admin-remade")
    # the login is an HttpOnly, SameSite=Strict cookie (no script reads it), and Log out ends it
    assert "magnet_admin" not in page.evaluate("document.cookie")
    (cookie,) = [c for c in page.context.cookies() if c["name"] == "magnet_admin"]
    assert cookie["httpOnly"] and cookie["sameSite"] == "Strict"
    page.get_by_role("button", name="Log out").click()
    expect(page.get_by_text("Logged out.")).to_be_visible()
    expect(page.get_by_role("heading", name="New study")).to_be_hidden()
    expect(page.locator("#admin-check-msg")).to_be_hidden()  # nothing of the panel is left


def test_phone_width_infill_search_and_rater_page(served, phone):
    """390 px wide: the filled text flows and wraps at word edges, the search tables stack,
    and the rater page is the whole page."""
    from playwright.sync_api import expect

    phone.goto(served["url"])
    phone.locator("#infill-text textarea").fill(
        "Wellington is the capital of New Zealand and [blank] at the southern tip of the island."
    )
    phone.locator("#infill-run").click()
    expect(phone.locator(".infill-col").first).to_contain_text("done after", timeout=TIMEOUT_MS)
    paragraphs = phone.locator(".infill-col p.filled")
    expect(paragraphs).to_have_count(3)
    assert phone.locator(".infill-col p.filled mark.fill").count() == 3  # inline, one per column
    # no word is broken across lines: the paragraph wraps at spaces only
    assert paragraphs.first.evaluate("e => getComputedStyle(e).wordBreak") == "normal"
    # flush with the column's title, not indented by three paddings (tour p6)
    left = "e => e.getBoundingClientRect().left"
    indent = paragraphs.first.evaluate(left) - phone.locator(".infill-col").first.evaluate(left)
    assert indent < 4, indent
    _shot(phone, "infill-phone")
    # blind on a phone: after the vote the names sit on the columns, not a scroll away
    phone.get_by_label("Compare blind (vote before the names are shown)").check()
    phone.locator("#infill-run").click()
    cols = phone.locator(".infill-col")
    expect(cols.first).to_contain_text("shown after the vote", timeout=TIMEOUT_MS)
    phone.locator("label", has_text="Output B").click()
    phone.get_by_role("button", name="Vote").click()
    expect(cols.nth(1).get_by_role("heading")).to_contain_text("B = ")
    _shot(phone, "infill-blind-voted-phone")

    _open_tab(phone, "Search")
    phone.get_by_label("Query").fill("the bird flew")
    phone.locator("#search-run").click()
    note = phone.get_by_label("Corpus and timing")
    expect(note).to_have_value(re.compile(r"passages; top 5"), timeout=TIMEOUT_MS)
    # the overlap table names the systems short (the lists above carry the full titles)
    overlap = phone.locator(".overlap-table table")
    expect(overlap).to_contain_text("MiniLM")
    expect(overlap).not_to_contain_text("all-MiniLM-L6-v2")
    # the whole matrix in view: nothing around it scrolls sideways on a phone (tour q2)
    wide = overlap.evaluate(
        """t => { const out = [];
                  for (let e = t; e && e !== document.body; e = e.parentElement)
                    if (e.scrollWidth > e.clientWidth + 1)
                      out.push(`${e.className || e.tagName}: ${e.scrollWidth}/${e.clientWidth} px`);
                  return out; }"""
    )
    assert wide == [], wide
    _shot(phone, "search-phone")

    phone.goto(f"{served['url']}/rate?token={served['phone_token']}")
    expect(phone.get_by_text("Output B").first).to_be_visible(timeout=TIMEOUT_MS)
    assert phone.get_by_role("tab").count() == 0
    body = phone.locator("body").inner_text().lower()
    assert [w for w in NOT_ON_RATER_PAGE if w in body] == [], body
    _shot(phone, "rate-phone")

    phone.goto(served["url"])
    expect(phone.locator("#infill-run")).to_be_visible()  # the tabs are there
    _open_tab(phone, "Admin")
    phone.get_by_label("Admin password").fill("pw")
    phone.get_by_label("Admin password").press("Enter")
    expect(phone.get_by_role("heading", name="New study")).to_be_visible()
    phone.get_by_role("button", name="Generate outputs and create the study").click()
    expect(phone.locator("#admin-create-msg textarea")).to_have_value("Give the study a name.")
    _shot(phone, "admin-phone")
    _pick_study(phone, "e2e")
    expect(phone.locator("#admin-check-report")).to_contain_text("Outputs of e2e, checked")
    phone.locator("#admin-check-report").scroll_into_view_if_needed()
    _shot(phone, "admin-check-phone")


def test_paper_preset_planner_and_report_in_chromium(served, page, phone):
    """Admin's paper preset and planner, the report download, and the report itself opened
    from disk with every request recorded: a self-contained file makes none but its own."""
    from playwright.sync_api import expect

    with AnnotationStore(path=served["db"]) as store:  # one more rating, whatever ran before
        token = store.invite("e2e", "Second rater").token
        item = store.next_item(token)
        answers = {o.label: {"appropriate": o.label == "A"} for o in item.outputs}
        store.submit(token, item.assignment_id, answers, preference="A")
    page.goto(served["url"])
    page.get_by_role("tab", name="Admin").click()
    page.get_by_label("Admin password").fill("pw")
    page.get_by_role("button", name="Log in").click()
    expect(page.locator("#admin-plan")).to_contain_text("items x 3 raters per item")
    page.locator("#admin-paper").click()
    expect(page.get_by_label("Instructions for raters")).to_have_value(
        re.compile("one sentence removed"), timeout=TIMEOUT_MS
    )
    _shot(page, "admin-paper-preset")
    _pick_study(page, "e2e")
    page.locator("#admin-report").click()
    expect(page.get_by_text("e2e.html").first).to_be_visible(timeout=TIMEOUT_MS)

    report = SHOTS.parent / "report-e2e.html"
    cmd = [sys.executable, "-m", "annotation_db", "--db-path", str(served["db"]), "report",
           "e2e", "--out", str(report)]  # fmt: skip
    subprocess.run(cmd, cwd=ROOT, check=True, env=dict(os.environ, PYTHONPATH=str(ROOT)))
    requests: list[str] = []
    page.on("request", lambda r: requests.append(r.url))
    page.goto(report.as_uri())
    expect(page.get_by_role("heading", name="Study report: e2e")).to_be_visible()
    for heading in ("Pairwise win rates", "Agreement (Krippendorff's alpha)", "Attention checks"):
        expect(page.get_by_role("heading", name=heading)).to_be_visible()
    widths = page.eval_on_selector_all("img", "imgs => imgs.map(i => i.naturalWidth)")
    assert len(widths) >= 2 and all(w > 0 for w in widths)  # every figure decoded
    assert all(u.startswith(("file:", "data:")) for u in requests), requests
    _shot(page, "report")
    phone.goto(report.as_uri())  # laid out at the phone's width, not 980 px of tiny text
    expect(phone.get_by_role("heading", name="Study report: e2e")).to_be_visible()
    assert phone.evaluate("document.documentElement.scrollWidth") <= 400
    _shot(phone, "report-phone")


def test_the_demo_pauses_while_a_study_has_raters(served, page, phone):
    """The admin takes back the choice to keep the demo on beside e2e (which has raters):
    Infill answers with the pause's sentence at desktop and phone widths, and Admin says which
    rule is in force; keeping it on again brings the demo back."""
    from playwright.sync_api import expect

    page.goto(served["url"])
    page.get_by_role("tab", name="Admin").click()
    page.get_by_label("Admin password").fill("pw")
    page.get_by_label("Admin password").press("Enter")
    _pick_study(page, "e2e")
    keep = page.locator("#admin-keep-demo input[type=checkbox]")
    expect(keep).to_be_checked(timeout=20_000)
    expect(page.locator("#admin-demo-rule")).to_contain_text("Kept on beside 'e2e'")
    keep.uncheck()
    expect(page.locator("#admin-demo-rule")).to_contain_text("Demo tabs: paused while 'e2e'")
    _shot(page, "admin-demo-paused")
    for pg, name in ((page, "infill-paused"), (phone, "infill-paused-phone")):
        pg.goto(served["url"])
        pg.locator("#infill-text textarea").fill("the bird [blank] over the sea .")
        pg.locator("#infill-run").click()
        expect(pg.locator("#infill-text")).to_contain_text(
            "The demo is paused while a rating study runs", timeout=15_000
        )
        _shot(pg, name)
    page.get_by_role("tab", name="Admin").click()  # a new page: the admin logs in again
    page.get_by_label("Admin password").fill("pw")
    page.get_by_label("Admin password").press("Enter")
    _pick_study(page, "e2e")
    page.locator("#admin-keep-demo input[type=checkbox]").check()
    expect(page.locator("#admin-demo-rule")).to_contain_text("Kept on beside 'e2e'")
