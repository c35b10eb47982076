"""Constraints live in the schema: they hold even for code that bypasses the API."""

from __future__ import annotations

from datetime import UTC, datetime

import pytest
from sqlalchemy.exc import IntegrityError

from annotation_db.schema import Assignment, Rating


def _setup(store, adb):
    items, outputs = adb.make_items(2)
    store.create_study("s", items, outputs, raters_per_item=2)
    tok = store.invite("s", "ann").token
    item = store.next_item(tok)
    store.submit(tok, item.assignment_id, {o.label: {"appropriate": True} for o in item.outputs})
    return store.db.read(lambda s: s.get(Assignment, item.assignment_id))


def _rating(a: Assignment, output_id: int) -> Rating:
    """A rating of assignment a's rater for output_id, as code past the API would add it."""
    now = datetime.now(UTC)
    return Rating(
        rater_id=a.rater_id,
        output_id=output_id,
        assignment_id=a.id,
        answers={},
        position=0,
        shown_at=now,
        answered_at=now,
    )


def test_unique_rating_per_rater_and_output(store, adb):
    a = _setup(store, adb)
    with pytest.raises(IntegrityError):
        store.db.write(lambda s: s.add(_rating(a, a.output_order[0])))


def test_foreign_keys_are_enforced(store, adb):
    a = _setup(store, adb)
    with pytest.raises(IntegrityError):
        store.db.write(lambda s: s.add(_rating(a, 999_999)))


def test_check_constraints(store, adb):
    a = _setup(store, adb)

    def bad_pref(s):
        s.get(Assignment, a.id).preference = "maybe"

    with pytest.raises(IntegrityError):
        store.db.write(bad_pref)

    def choice_without_output(s):
        s.get(Assignment, a.id).preference = "choice"

    with pytest.raises(IntegrityError):
        store.db.write(choice_without_output)
