"""Before raters: a flagged output made again or its item dropped (revise_outputs), and invites
refused for a study whose links could not be rated (browser tour s4, N-M2 and N-M3)."""

from __future__ import annotations

import pytest

from annotation_db import (
    InvalidInputError,
    ItemIn,
    NotFoundError,
    OutputIn,
    UnknownTokenError,
    revise_outputs,
)


def _study(store, name="rev"):
    items = [ItemIn(f"i{i}", f"Passage {i} with [blank] inside.", ["two words"]) for i in range(3)]
    outputs = [
        OutputIn(it.key, s, it.text.replace("[blank]", f), [f], seed=1)
        for it in items
        for s, f in (("magnet", "a fill"), ("zero-shot", "I'm ready to help."))
    ]
    gold = [ItemIn("g", "Check [blank] here.", ["x"], is_gold=True)]
    gold_outs = [
        OutputIn("g", "original", "Check x here.", ["x"], gold_role="original"),
        OutputIn("g", "corrupted", "Check y here.", ["y"], gold_role="corrupted"),
    ]
    store.create_study(name, items + gold, outputs + gold_outs, raters_per_item=1)


def test_a_flagged_output_is_replaced_and_a_flagged_item_dropped(sqlite_store):
    _study(sqlite_store)
    assert sqlite_store.fill_counts("rev")[1].chat == 3
    new = OutputIn("i0", "zero-shot", "Passage 0 with two birds inside.", ["two birds"], seed=7)
    revise_outputs(sqlite_store, "rev", replace=[new], drop=["i1"])
    items, outputs = sqlite_store.items("rev")
    assert [it.key for it in items] == ["i0", "i2", "g"]
    (o,) = [o for o in outputs if (o.item_key, o.system) == ("i0", "zero-shot")]
    assert (o.fills, o.seed) == (["two birds"], 7)
    zs = {c.system: c for c in sqlite_store.fill_counts("rev")}["zero-shot"]
    assert (zs.n_outputs, zs.chat) == (2, 1)
    assert sqlite_store.study("rev").n_items == 2  # regular items (the check besides)


def test_revising_is_refused_once_raters_are_invited_and_for_checks(sqlite_store):
    _study(sqlite_store)
    with pytest.raises(InvalidInputError, match="attention check"):
        revise_outputs(sqlite_store, "rev", drop=["g"])
    with pytest.raises(InvalidInputError, match="no item to rate"):
        revise_outputs(sqlite_store, "rev", drop=["i0", "i1", "i2"])
    with pytest.raises(NotFoundError, match="no item 'nope'"):
        revise_outputs(sqlite_store, "rev", drop=["nope"])
    with pytest.raises(NotFoundError, match="no output of 'five-shot'"):
        revise_outputs(sqlite_store, "rev", replace=[OutputIn("i0", "five-shot", "t", ["t"])])
    sqlite_store.invite("rev", "Ann")
    with pytest.raises(InvalidInputError, match="1 invited rater"):
        revise_outputs(sqlite_store, "rev", drop=["i1"])
    assert len(sqlite_store.items("rev")[0]) == 4  # nothing changed


def test_no_invite_for_the_arena_or_a_study_without_items(sqlite_store):
    """Arena tokens never open a rater page ("This invite token is not valid"): no link is
    made for it, nor for a study left with attention checks alone."""
    outs = [OutputIn("", "magnet", "The cat sat."), OutputIn("", "zero-shot", "The cat ran.")]
    sqlite_store.record_blind_vote("The cat ___.", outs, "A")
    visitors = sqlite_store.study("arena").n_raters
    with pytest.raises(InvalidInputError, match="demo's blind votes"):
        sqlite_store.invite_many("arena", ["Zed"])
    assert sqlite_store.study("arena").n_raters == visitors  # no rater was made
    gold = [ItemIn("g", "Check [blank] here.", ["x"], is_gold=True)]
    gold_outs = [
        OutputIn("g", "original", "Check x here.", ["x"], gold_role="original"),
        OutputIn("g", "corrupted", "Check y here.", ["y"], gold_role="corrupted"),
    ]
    sqlite_store.create_study("checks-only", gold, gold_outs, raters_per_item=1)
    with pytest.raises(InvalidInputError, match="no item to rate"):
        sqlite_store.invite_many("checks-only", ["Ann"])
    _study(sqlite_store, "ok")
    (inv,) = sqlite_store.invite_many("ok", ["Ann"])
    assert sqlite_store.open_session(inv.token).study == "ok"  # the link made opens
    with pytest.raises(UnknownTokenError):
        sqlite_store.open_session("arena-visitor:x")
