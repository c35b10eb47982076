"""Reliability under load: many concurrent writers, and a writer killed mid-burst."""

from __future__ import annotations

import os
import signal
import sqlite3
import subprocess
import sys
import textwrap
import threading
from collections import Counter
from pathlib import Path

import pytest
from sqlalchemy import func, select

from annotation_db import AnnotationStore, ItemIn, OutputIn
from annotation_db.schema import Assignment, Rating

from_repo = str(Path(__file__).resolve().parents[2])


def _study(store, n_items, n_outputs, k):
    items = [ItemIn(f"i{i}", f"Item {i} ___.") for i in range(n_items)]
    outputs = [
        OutputIn(f"i{i}", f"sys{j}", f"Item {i} fill {j}.")
        for i in range(n_items)
        for j in range(n_outputs)
    ]
    store.create_study("load", items, outputs, raters_per_item=k)


def _hammer(store, n_threads, items_per_thread, n_outputs, k):
    """Each thread is one rater answering all its items; every 10th answer is sent twice
    (a double click). Returns the receipts and any exception a caller saw."""
    invites = store.invite_many("load", [f"r{i}" for i in range(n_threads)])
    errors: list[BaseException] = []
    receipts: list[tuple[int, int]] = []
    lock = threading.Lock()
    barrier = threading.Barrier(n_threads)

    def work(token):
        try:
            barrier.wait()
            for n in range(items_per_thread):
                item = store.next_item(token)
                ans = {o.label: {"appropriate": n % 2 == 0} for o in item.outputs}
                r = store.submit(token, item.assignment_id, ans)
                if n % 10 == 0:
                    assert store.submit(token, item.assignment_id, ans).duplicate
                with lock:
                    receipts.append((r.assignment_id, len(item.outputs)))
            assert store.next_item(token) is None
        except BaseException as e:  # noqa: BLE001 - collected and re-raised by the test
            errors.append(e)

    threads = [threading.Thread(target=work, args=(inv.token,)) for inv in invites]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    return receipts, errors


def _check_all_stored(store, receipts, expected):
    def fn(s):
        pairs = s.execute(select(Rating.rater_id, Rating.output_id)).all()
        done = set(s.scalars(select(Assignment.id).where(Assignment.completed_at.is_not(None))))
        return pairs, done

    pairs, done = store.db.read(fn)
    assert len(pairs) == expected
    assert len(set(pairs)) == expected  # none duplicated
    assert {a for a, _ in receipts} <= done  # none lost
    per_output = Counter(o for _, o in pairs)
    assert set(per_output.values()) == {store.study("load").raters_per_item}


def test_16_writers_200_ratings_each_on_sqlite(sqlite_store):
    # 100 items x 2 outputs: each rater stores 200 ratings through 100 item submissions.
    _study(sqlite_store, n_items=100, n_outputs=2, k=16)
    receipts, errors = _hammer(sqlite_store, 16, 100, 2, 16)
    assert not errors, errors[:3]  # in particular no "database is locked"
    assert sum(n for _, n in receipts) == 3200
    _check_all_stored(sqlite_store, receipts, 3200)


@pytest.mark.postgres
def test_concurrent_writers_on_postgres(pg_store):
    store = pg_store
    _study(store, n_items=40, n_outputs=2, k=8)
    receipts, errors = _hammer(store, 8, 40, 2, 8)
    assert not errors, errors[:3]
    _check_all_stored(store, receipts, 8 * 40 * 2)


CHILD = textwrap.dedent(
    """
    import sys, threading
    from annotation_db import AnnotationStore
    store = AnnotationStore(path=sys.argv[1])
    lock = threading.Lock()
    def work(token):
        while (item := store.next_item(token)) is not None:
            ans = {o.label: {"appropriate": True} for o in item.outputs}
            r = store.submit(token, item.assignment_id, ans)
            with lock:
                print(r.assignment_id, flush=True)
    ts = [threading.Thread(target=work, args=(t,)) for t in sys.argv[2:]]
    [t.start() for t in ts]
    [t.join() for t in ts]
    print("finished", flush=True)
    """
)


def test_sigkill_mid_burst_loses_no_returned_rating(tmp_path):
    db = tmp_path / "kill.sqlite3"
    with AnnotationStore(path=db) as store:
        _study(store, n_items=400, n_outputs=2, k=4)
        tokens = [inv.token for inv in store.invite_many("load", ["a", "b", "c", "d"])]
    env = {**os.environ, "PYTHONPATH": from_repo + os.pathsep + os.environ.get("PYTHONPATH", "")}
    proc = subprocess.Popen(
        [sys.executable, "-c", CHILD, str(db), *tokens],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env=env,
    )
    returned: list[int] = []
    assert proc.stdout is not None
    for line in proc.stdout:
        returned.append(int(line))
        if len(returned) >= 60:
            break
    os.kill(proc.pid, signal.SIGKILL)
    rest, err = proc.communicate(timeout=30)
    returned += [int(x) for x in rest.split() if x.isdigit()]
    assert proc.returncode == -signal.SIGKILL, err
    assert "finished" not in rest  # it really died mid-burst

    con = sqlite3.connect(db)
    assert con.execute("PRAGMA integrity_check").fetchone()[0] == "ok"
    con.close()
    with AnnotationStore(path=db) as store:

        def fn(s):
            done = dict(
                s.execute(
                    select(Assignment.id, func.count(Rating.id))
                    .join(Rating, Rating.assignment_id == Assignment.id)
                    .where(Assignment.completed_at.is_not(None))
                    .group_by(Assignment.id)
                ).all()
            )
            total = s.scalar(select(func.count(Rating.id)))
            return done, total

        done, total = store.db.read(fn)
    assert set(returned) <= set(done)  # every submit that returned is stored
    assert all(n == 2 for n in done.values())  # and no half-written submission
    assert total == 2 * len(done)


def test_lock_held_by_another_process_is_waited_out(tmp_path, monkeypatch):
    """A lock held longer than busy_timeout is retried, not reported as 'database is locked'."""
    monkeypatch.setenv("MAGNET_DB_BUSY_TIMEOUT_MS", "20")
    db = tmp_path / "locked.sqlite3"
    store = AnnotationStore(path=db)
    assert store.settings.busy_timeout_ms == 20
    _study(store, n_items=2, n_outputs=2, k=1)
    other = sqlite3.connect(db, isolation_level=None, check_same_thread=False)
    other.execute("BEGIN EXCLUSIVE")
    release = threading.Timer(0.5, lambda: other.execute("COMMIT"))
    release.start()
    invite = store.invite("load", "late")  # blocks ~0.5 s behind the foreign lock
    release.join()
    other.close()
    assert store.next_item(invite.token) is not None
    store.close()
