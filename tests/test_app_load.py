"""Issue 22, point 4: demo traffic never fails a rater's submit, under load, over a socket.

`python -m app` runs in a subprocess on a free loopback port with a tiny Llama saved to disk
(as test_browser.py starts it). 40 anonymous callers flood the Infill endpoint through the
queue (`queue/join`, as the review's probe did) for FLOOD_S seconds while 16 raters, each
with their own invite, submit SUBMITS answers one after another. Every rater submit must be
stored; the figures (demo calls made/refused, rater submits ok/failed, durations) are
printed. Bounded: the flood stops by itself, every request has a timeout, and the server is
stopped by its PID at the end.
"""

from __future__ import annotations

import json
import os
import statistics
import sys
import threading
import time
import uuid
from collections import Counter
from pathlib import Path

import httpx
import pytest
from app_fixtures import app_process, free_port

from annotation_db import AnnotationStore, ItemIn, OutputIn

ROOT = Path(__file__).resolve().parent.parent
DEMO_CALLERS, RATERS, SUBMITS, FLOOD_S = 40, 16, 6, 25.0
# MAGNET_LOAD_DEMO_CALLERS=0 measures the raters alone, for comparison (not an assertion)
DEMO_CALLERS = int(os.environ.get("MAGNET_LOAD_DEMO_CALLERS", DEMO_CALLERS))
# not the study's passages ("the cat [blank] on the mat k ."): those the demo refuses at once
TEXT = "a bird [blank] over the sea . the dog [blank] in the river ."


def _tokens(db: Path) -> list[str]:
    """A study with an item per rater submit, one rater per item; one invite per rater.
    Items are handed out as raters go, and a rater's last submit is shown one more item: so
    SUBMITS + 1 per rater, or a fast rater's extra item leaves a slow one with nothing."""
    with AnnotationStore(path=db) as store:
        n = RATERS * (SUBMITS + 1)
        items = [ItemIn(f"i{k}", f"the cat [blank] on the mat {k} .", ["sat"]) for k in range(n)]
        outs = [
            OutputIn(it.key, system, it.text.replace("[blank]", fill), [fill])
            for it in items
            for system, fill in (("magnet", "sat"), ("zero-shot", "ran"))
        ]
        store.create_study("load", items, outs, questions=["appropriate"], raters_per_item=1)
        return [store.invite("load", f"rater {r}").token for r in range(RATERS)]


@pytest.fixture(scope="module")
def server(tmp_path_factory):
    from tiny_models import save_tiny_model

    tmp = tmp_path_factory.mktemp("load")
    paths = save_tiny_model(tmp / "model")
    db = tmp / "db.sqlite3"
    tokens = _tokens(db)
    port = free_port()
    env = dict(os.environ, GRADIO_ANALYTICS_ENABLED="False", PYTHONPATH=str(ROOT))
    env |= {"MAGNET_DATA_DIR": str(tmp / "data"), "GRADIO_TEMP_DIR": str(tmp / "gradio")}
    env |= {"OMP_NUM_THREADS": "1", "MAGNET_QUEUE_SIZE": "32"}  # the review's queue size
    env["MAGNET_SEARCH_WARMUP"] = "false"  # no default-corpus embedding beside the load
    # the quota counts at join (issue 29): raised, so that the flood fills the queue itself
    env |= {
        "MAGNET_DEMO_CALLS_PER_MINUTE": "100000",
        "MAGNET_DEMO_CALLS_PER_MINUTE_TOTAL": "100000",
    }
    env.pop("MAGNET_ADMIN_PASSWORD", None)
    # the admin kept the demo on beside the study (it pauses while a study has raters)
    (tmp / "data").mkdir()
    (tmp / "data" / "demo-during-studies.json").write_text('["load"]')
    adapters = f"magnet={paths['magnet']},llm2vec={paths['llm2vec']}"
    cmd = [sys.executable, "-m", "app", "--base-model", str(paths["base"]), "--adapters",
           adapters, "--device", "cpu", "--port", str(port), "--db-path", str(db),
           "--cache-dir", str(tmp / "cache")]  # fmt: skip
    with app_process(cmd, env, tmp / "app.log", port) as url:
        yield {"url": url, "db": db, "tokens": tokens}


def _fn_index(url: str, api_name: str) -> int:
    config = httpx.get(f"{url}/config", timeout=30).json()
    for dep in config["dependencies"]:
        if dep.get("api_name") == api_name:
            return dep["id"]
    raise AssertionError(f"no endpoint {api_name}")


def _demo_caller(url: str, fn: int, deadline: float, tally: Counter, lock: threading.Lock):
    """Infill calls through the queue, one after another, until the deadline."""
    with httpx.Client(timeout=httpx.Timeout(30.0)) as http:
        while time.monotonic() < deadline:
            session = uuid.uuid4().hex[:11]
            body = {"data": [TEXT, "greedy", 0.8, 0.95, "-1", 4, False], "fn_index": fn}
            body |= {"session_hash": session, "trigger_id": None, "event_data": None}
            try:
                r = http.post(f"{url}/gradio_api/queue/join", json=body)
            except httpx.HTTPError:
                outcome = "connection error"
            else:
                if r.status_code == 422 and "Too many demo" in r.text:
                    outcome = "refused by the quota"  # counted at join (issue 29)
                elif r.status_code != 200:
                    outcome = f"join refused ({r.status_code})"
                else:
                    outcome = _result(http, url, session)
            with lock:
                tally[outcome] += 1
            if outcome.startswith("join refused"):
                time.sleep(0.05)


def _result(http: httpx.Client, url: str, session: str) -> str:
    try:
        with http.stream(
            "GET", f"{url}/gradio_api/queue/data", params={"session_hash": session}
        ) as s:
            for line in s.iter_lines():
                if not line.startswith("data:"):
                    continue
                msg = json.loads(line[5:])
                if msg.get("msg") == "process_completed":
                    if msg.get("success"):
                        return "ran"
                    error = str((msg.get("output") or {}).get("error") or "")
                    return "refused by the quota" if "Too many demo" in error else "failed"
    except httpx.HTTPError:
        return "stream error"
    return "no result"


def _answers(n_outputs: int = 2) -> list:
    from app.rater import MAX_LIKERT, MAX_OUTPUTS

    vals = []
    for i in range(MAX_OUTPUTS):
        vals += ["Yes" if i < n_outputs else None] + [None] * MAX_LIKERT
    return vals


def _value(v):
    return v.get("value") if isinstance(v, dict) else v


def _rater(url: str, token: str, fns: dict, results: list, lock: threading.Lock) -> None:
    """What a rater's browser does: the rating events skip the queue, so the page POSTs them
    to /gradio_api/run/<name>. Open the invite, then SUBMITS submits in a row; each must be
    acknowledged and land on a new item."""
    session = uuid.uuid4().hex[:11]

    def call(name: str, data: list) -> list:
        body = {"data": data, "fn_index": fns[name], "session_hash": session}
        body |= {"event_data": None, "trigger_id": None}
        r = http.post(f"{url}/gradio_api/run/{name}", json=body)
        if r.status_code != 200:
            raise RuntimeError(f"HTTP {r.status_code}: {r.text[:200]}")
        return r.json()["data"]

    with httpx.Client(timeout=httpx.Timeout(60.0)) as http:
        shown = _value(call("rate_open", [token])[2])
        for _ in range(SUBMITS):
            t0 = time.perf_counter()
            try:
                out = call("rate_submit", [token, shown, *_answers(), None, ""])
                nxt, message = _value(out[2]), _value(out[-1])
                ok = message in ("", None) and nxt != shown
                why = "" if ok else str(message)[:200]
                shown = nxt
            except Exception as e:  # noqa: BLE001 - every failure is counted and shown
                ok, why = False, f"{type(e).__name__}: {str(e)[:200]}"
            with lock:
                results.append((ok, time.perf_counter() - t0, why))


def test_forty_demo_callers_never_fail_sixteen_raters(server):
    url, lock = server["url"], threading.Lock()
    fn = _fn_index(url, "infill")
    fns = {name: _fn_index(url, name) for name in ("rate_open", "rate_submit")}
    tally: Counter = Counter()
    results: list = []
    t0 = time.monotonic()
    deadline = t0 + FLOOD_S
    flood = [
        threading.Thread(target=_demo_caller, args=(url, fn, deadline, tally, lock), daemon=True)
        for _ in range(DEMO_CALLERS)
    ]
    for t in flood:
        t.start()
    time.sleep(3.0)  # the queue is full by now
    raters = [
        threading.Thread(target=_rater, args=(url, tok, fns, results, lock), daemon=True)
        for tok in server["tokens"]
    ]
    for t in raters:
        t.start()
    for t in raters:
        t.join(timeout=FLOOD_S + 120)
    raters_s = time.monotonic() - t0 - 3.0
    for t in flood:
        t.join(timeout=60)
    flood_s = time.monotonic() - t0
    ok = [r for r in results if r[0]]
    failed = [r for r in results if not r[0]]
    secs = sorted(r[1] for r in results) or [0.0]
    with AnnotationStore(path=server["db"]) as store:
        done = store.progress("load").judgments_done
    made = sum(tally.values())
    refused = sum(n for k, n in tally.items() if k != "ran")
    print(
        f"\nload test: {DEMO_CALLERS} demo callers for {flood_s:.1f} s: {made} Infill calls, "
        f"{tally['ran']} ran, {refused} refused ({dict(tally)})"
        f"\n{RATERS} raters x {SUBMITS} submits in {raters_s:.1f} s: {len(ok)} ok, "
        f"{len(failed)} failed; submit seconds median {statistics.median(secs):.2f}, "
        f"max {secs[-1]:.2f}; {done} judgments stored"
    )
    assert not any(t.is_alive() for t in raters), "a rater was still waiting"
    assert failed == [], failed[:3]
    assert len(ok) == RATERS * SUBMITS and done == RATERS * SUBMITS
    if DEMO_CALLERS:
        assert tally["join refused (503)"] + tally["refused by the quota"] > 0  # a real flood
