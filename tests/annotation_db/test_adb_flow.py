"""Studies, blind assignment, submission and the reliability rules of the issue, on SQLite and
(when reachable) PostgreSQL."""

from __future__ import annotations

import dataclasses

import pytest
from sqlalchemy import func, select

from annotation_db import (
    AlreadySubmittedError,
    AnnotationError,
    DuplicateError,
    InvalidInputError,
    ItemIn,
    NotAssignedError,
    NotFoundError,
    OutputIn,
    RaterItem,
    RaterSession,
    StudyClosedError,
    UnknownTokenError,
)
from annotation_db.schema import Assignment, Rater, Rating

QUESTIONS = ["appropriate", "likert:fluency", "preference", "comment"]


def count(store, model) -> int:
    return store.db.read(lambda s: s.scalar(select(func.count()).select_from(model)))


def new_study(store, adb, n=6, k=2, name="pilot", questions=QUESTIONS):
    items, outputs = adb.make_items(n)
    return store.create_study(
        name,
        items,
        outputs,
        questions=questions,
        raters_per_item=k,
        instructions="# Read me\nJudge each fill.",
    )


def test_create_study_reports_items_and_systems(store, adb):
    info = new_study(store, adb)
    assert info.n_items == 6 and info.n_gold == 0
    assert info.systems == sorted(adb.SYSTEMS)
    assert [q.kind for q in info.questions] == ["appropriate", "likert", "preference", "comment"]
    assert store.study("pilot").id == info.id
    with pytest.raises(DuplicateError, match="already exists"):
        new_study(store, adb)


def test_each_item_gets_k_raters_in_per_rater_random_order(store, adb):
    new_study(store, adb, n=8, k=2)
    invites = store.invite_many("pilot", [f"r{i}" for i in range(3)])
    seen: dict[str, list[str]] = {}
    orders: dict[str, list[list[str]]] = {}
    for inv in invites:
        while (item := store.next_item(inv.token)) is not None:
            seen.setdefault(inv.display_name, []).append(item.text)
            orders.setdefault(inv.display_name, []).append([o.text for o in item.outputs])
            store.submit(inv.token, item.assignment_id, adb.answer_all(item), preference="A")
    per_item: dict[str, int] = {}
    for texts in seen.values():
        assert len(texts) == len(set(texts))  # never the same item twice
        for t in texts:
            per_item[t] = per_item.get(t, 0) + 1
    assert len(per_item) == 8 and set(per_item.values()) == {2}
    # Orders differ between raters (items and outputs), and the order shown is stored.
    assert seen["r0"] != seen["r1"]
    stored = store.db.read(lambda s: {a.id: a.output_order for a in s.scalars(select(Assignment))})
    assert len({tuple(v) for v in stored.values()}) > 1
    prog = store.progress("pilot")
    assert prog.judgments_done == prog.judgments_needed == 16
    assert prog.share_done == 1.0 and prog.items_complete == 8


def test_next_item_resumes_the_open_item(store, adb):
    new_study(store, adb)
    tok = store.invite("pilot", "ann").token
    first = store.next_item(tok)
    again = store.next_item(tok)
    assert again == first  # same item, same output order: a reload resumes
    store.submit(tok, first.assignment_id, adb.answer_all(first), preference="tie")
    assert store.next_item(tok).assignment_id != first.assignment_id


def test_rater_side_is_blind(store, adb):
    new_study(store, adb)
    tok = store.invite("pilot", "ann").token
    session = store.open_session(tok)
    item = store.next_item(tok)
    forbidden = {
        "system",
        "model",
        "adapter_revision",
        "decoding",
        "seed",
        "gold_role",
        "is_gold",
        "original",
        "source",
    }

    def field_names(cls):
        names = set()
        for f in dataclasses.fields(cls):
            names.add(f.name)
        return names

    from annotation_db import RaterOutput, RaterProgress, SubmitReceipt

    for cls in (RaterSession, RaterItem, RaterOutput, RaterProgress, SubmitReceipt):
        assert not field_names(cls) & forbidden, cls
    receipt = store.submit(tok, item.assignment_id, adb.answer_all(item), preference="B")
    blob = repr((session, item, receipt, store.rater_progress(tok)))
    for name in adb.SYSTEMS + ("tiny-llama", "rev-1", "987654321", "doc-", "temperature"):
        assert name not in blob
    assert [o.label for o in item.outputs] == ["A", "B", "C"]


def test_token_is_stored_only_as_a_hash(store, adb):
    new_study(store, adb)
    inv = store.invite("pilot", "ann")
    hashes = store.db.read(lambda s: list(s.scalars(select(Rater.token_hash))))
    assert inv.token not in hashes and len(hashes[0]) == 64
    import hashlib

    assert hashes == [hashlib.sha256(inv.token.encode()).hexdigest()]


def test_a_token_reaches_only_its_own_assignments(store, adb):
    new_study(store, adb)
    ann, bob = store.invite_many("pilot", ["ann", "bob"])
    item = store.next_item(ann.token)
    with pytest.raises(NotAssignedError, match="not assigned to you"):
        store.submit(bob.token, item.assignment_id, adb.answer_all(item), preference="A")
    with pytest.raises(UnknownTokenError):
        store.next_item("not-a-token")
    with pytest.raises(UnknownTokenError):
        store.open_session("")
    assert count(store, Rating) == 0


def test_same_submission_twice_is_stored_once(store, adb):
    new_study(store, adb)
    tok = store.invite("pilot", "ann").token
    item = store.next_item(tok)
    ans = adb.answer_all(item, fluency=3)
    r1 = store.submit(tok, item.assignment_id, ans, preference="B", comment=" fine ")
    r2 = store.submit(tok, item.assignment_id, ans, preference="B", comment="fine")
    assert not r1.duplicate and r2.duplicate
    assert (r2.assignment_id, r2.answered_at, r2.done) == (r1.assignment_id, r1.answered_at, 1)
    assert count(store, Rating) == 3
    with pytest.raises(AlreadySubmittedError):
        store.submit(tok, item.assignment_id, ans, preference="C", comment="fine")
    assert count(store, Rating) == 3


@pytest.mark.parametrize(
    "change, error, message",
    [
        (lambda a, kw: a["A"].update(fluency=6), InvalidInputError, "between 1 and 5"),
        (lambda a, kw: a["A"].update(fluency=True), InvalidInputError, "whole number"),
        (lambda a, kw: a["A"].update(appropriate="maybe"), InvalidInputError, "yes/no"),
        (lambda a, kw: a["B"].pop("appropriate"), InvalidInputError, "not answered"),
        (lambda a, kw: a.pop("C"), InvalidInputError, "missing"),
        (lambda a, kw: a.update(Z={"appropriate": True}), NotAssignedError, "not part of"),
        (lambda a, kw: a["A"].update(bogus=1), InvalidInputError, "unknown question"),
        (lambda a, kw: kw.update(comment="x" * 2001), InvalidInputError, "at most 2000"),
        (lambda a, kw: kw.update(preference="D"), InvalidInputError, "preference must be"),
        (lambda a, kw: kw.update(preference=None), InvalidInputError, "choose one of"),
    ],
)
def test_bad_input_is_a_typed_error_and_writes_nothing(store, change, error, message, adb):
    new_study(store, adb)
    tok = store.invite("pilot", "ann").token
    item = store.next_item(tok)
    ans = adb.answer_all(item)
    kw = {"preference": "A", "comment": None}
    change(ans, kw)
    with pytest.raises(error, match=message) as exc:
        store.submit(tok, item.assignment_id, ans, **kw)
    assert isinstance(exc.value, AnnotationError)
    assert count(store, Rating) == 0
    done = store.db.read(lambda s: s.scalar(select(Assignment.completed_at)))
    assert done is None


def test_bad_study_input_writes_nothing(store, adb):
    items, outputs = adb.make_items(3)
    bad_outputs = outputs + [OutputIn("nope", "magnet", "x")]
    with pytest.raises(NotFoundError, match="unknown item key 'nope'"):
        store.create_study("s", items, bad_outputs)
    with pytest.raises(DuplicateError, match="two outputs"):
        store.create_study("s", items, outputs + [outputs[0]])
    with pytest.raises(InvalidInputError, match="has no outputs"):
        store.create_study("s", items + [ItemIn("lonely", "a ___ b")], outputs)
    with pytest.raises(InvalidInputError, match="raters_per_item"):
        store.create_study("s", items, outputs, raters_per_item=0)
    with pytest.raises(InvalidInputError, match="unknown question spec"):
        store.create_study("s", items, outputs, questions=["stars"])
    with pytest.raises(InvalidInputError, match="reserved"):
        store.create_study("arena", items, outputs)
    assert store.list_studies() == []


def test_closed_study_refuses_new_work(store, adb):
    new_study(store, adb)
    tok = store.invite("pilot", "ann").token
    item = store.next_item(tok)
    store.set_status("pilot", "closed")
    with pytest.raises(StudyClosedError):
        store.next_item(tok)
    with pytest.raises(StudyClosedError):
        store.submit(tok, item.assignment_id, adb.answer_all(item), preference="A")
    assert store.open_session(tok).is_open is False


def test_rater_progress_counts_down(store, adb):
    new_study(store, adb, n=3, k=1)
    tok = store.invite("pilot", "ann").token
    assert store.rater_progress(tok).total == 3
    item = store.next_item(tok)
    store.submit(tok, item.assignment_id, adb.answer_all(item), preference="A")
    p = store.rater_progress(tok)
    assert (p.done, p.remaining, p.total, p.finished) == (1, 2, 3, False)


def test_preference_only_study(store, adb):
    items, outputs = adb.make_items(2)
    store.create_study("pref", items, outputs, questions=["preference"], raters_per_item=1)
    tok = store.invite("pref", "ann").token
    item = store.next_item(tok)
    store.submit(tok, item.assignment_id, preference="all_bad")
    with pytest.raises(InvalidInputError, match="asks nothing per output"):
        item2 = store.next_item(tok)
        store.submit(tok, item2.assignment_id, {"A": {"appropriate": True}}, preference="A")
    assert count(store, Rating) == 3  # the first item's three outputs, marked as seen


def test_blind_vote_is_stored_once_and_counted(store, adb):
    outs = [
        OutputIn("", "magnet", "The cat sat."),
        OutputIn("", "base", "The cat ran."),
        OutputIn("", "base-5shot", "The cat sang."),
    ]
    v1 = store.record_blind_vote("The cat ___.", outs, "A", vote_id="v1", visitor="browser-1")
    again = store.record_blind_vote("The cat ___.", outs, "A", vote_id="v1", visitor="browser-1")
    assert v1.chosen_system == "magnet" and again.duplicate and not v1.duplicate
    store.record_blind_vote("The cat ___.", outs[::-1], "C", visitor="browser-2")
    store.record_blind_vote("The cat ___.", outs, "tie")
    with pytest.raises(InvalidInputError, match="choice must be one of"):
        store.record_blind_vote("The cat ___.", outs, "D")
    res = store.results("arena")
    assert res.bradley_terry[0].system == "magnet"
    assert res.preference_counts == {"choice": 2, "tie": 1, "all_bad": 0}
    # arena raters cannot be used as invite tokens
    with pytest.raises(UnknownTokenError):
        store.next_item("arena-visitor:browser-1")


def test_item_order_is_shuffled_per_rater(sqlite_store, adb):
    """Positions are not the creation order, and two raters' orders are unrelated."""
    from scipy.stats import spearmanr

    items, outputs = adb.make_items(60)
    sqlite_store.create_study(
        "big", items, outputs, questions=["appropriate", "likert:fluency"], raters_per_item=2
    )
    orders = []
    for inv in sqlite_store.invite_many("big", ["a", "b"]):
        seq = []
        while (item := sqlite_store.next_item(inv.token)) is not None:
            seq.append(int(item.text.split()[1]))
            sqlite_store.submit(inv.token, item.assignment_id, adb.answer_all(item))
        orders.append(seq)
    a, b = orders
    assert sorted(a) == sorted(b) == list(range(60))
    rank_b = {v: i for i, v in enumerate(b)}
    assert abs(spearmanr(range(60), a).statistic) < 0.5
    assert abs(spearmanr(range(60), [rank_b[v] for v in a]).statistic) < 0.5


def test_concurrent_next_item_of_one_rater_gives_one_item(store, adb):
    import threading

    new_study(store, adb)
    tok = store.invite("pilot", "ann").token
    got = []
    threads = [
        threading.Thread(target=lambda: got.append(store.next_item(tok).assignment_id))
        for _ in range(6)
    ]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert len(set(got)) == 1
    assert count(store, Assignment) == 1
