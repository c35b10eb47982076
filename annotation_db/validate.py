"""The checks and limits on everything a caller sends, run before anything is written.

Pure functions (no database): a check returns the cleaned value or raises ``InvalidInputError``
(or another ``AnnotationError``) with a sentence the caller can act on. The schema's
constraints stay the last line of defence; these give the readable message first.
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from typing import Any, TypeVar

from .errors import DuplicateError, InvalidInputError, NotAssignedError, NotFoundError
from .questions import Comment, Preference, Question, first, normalize_output_answers
from .schema import GOLD_ROLES, STUDY_STATUSES
from .views import ItemIn, OutputIn

T = TypeVar("T")

MAX_TEXT_CHARS = 100_000


MAX_NAME_CHARS = 200


MAX_DISPLAY_NAME_CHARS = 100


MAX_TOKEN_CHARS = 200


MAX_STUDY_NAME_CHARS = 100


_CONTROL = re.compile(r"[\x00-\x08\x0b\x0c\x0e-\x1f\x7f]")  # C0 but tab, LF, CR; DEL
# A study name is also a file name (exports, backups): ASCII letters and digits, with
# '-', '_', '.' or spaces inside; never '/', '\\', '..' or a leading dot.
_STUDY_NAME = re.compile(r"[A-Za-z0-9](?:[A-Za-z0-9 _.-]*[A-Za-z0-9])?")


def coerce(cls: type[T], obj: Any, what: str) -> T:
    if isinstance(obj, cls):
        return obj
    if isinstance(obj, Mapping):
        try:
            return cls(**dict(obj))
        except TypeError as e:
            raise InvalidInputError(f"bad {what} {dict(obj)!r}: {e}") from e
    raise InvalidInputError(f"expected an {what} (dataclass or mapping), got {obj!r}")


def check_study_name(v: Any) -> str:
    """A study name that is safe as a file name; ``InvalidInputError`` naming the rule if not."""
    v = check_name(v, "study name", MAX_STUDY_NAME_CHARS)
    if not _STUDY_NAME.fullmatch(v) or ".." in v:
        raise InvalidInputError(
            f"the study name {v!r} may only use letters, digits, '-', '_', '.' and spaces, "
            "start and end with a letter or digit, and not contain '..'"
        )
    return v


def check_encodable(v: str, what: str) -> str:
    """Text that every backend can store: a lone surrogate (from a broken copy-paste or a
    crafted request) cannot be written as UTF-8, and PostgreSQL refuses a NUL byte, which
    would read as "the database is not writable" and fail the same way on every retry; the
    other C0 control characters but tab and line breaks are refused with it, on every
    backend alike."""
    try:
        v.encode("utf-8")
    except UnicodeEncodeError as e:
        raise InvalidInputError(
            f"{what} contains a character that is not valid text (a lone surrogate at "
            f"position {e.start + 1}); remove it and try again"
        ) from None
    bad = _CONTROL.search(v)
    if bad:
        raise InvalidInputError(
            f"{what} contains a control character (U+{ord(bad.group()):04X}) at position "
            f"{bad.start() + 1}; remove it and try again"
        )
    return v


def check_name(v: Any, what: str, max_len: int = MAX_NAME_CHARS) -> str:
    if not isinstance(v, str) or not v.strip():
        raise InvalidInputError(f"{what} must be non-empty text, got {v!r}")
    v = check_encodable(v.strip(), what)
    if len(v) > max_len:
        raise InvalidInputError(f"{what} is {len(v)} characters; at most {max_len} allowed")
    return v


def check_text(v: Any, what: str) -> str:
    if not isinstance(v, str) or not v.strip():
        raise InvalidInputError(f"{what} must be non-empty text")
    if len(v) > MAX_TEXT_CHARS:
        raise InvalidInputError(f"{what} is {len(v)} characters; at most {MAX_TEXT_CHARS} allowed")
    return check_encodable(v, what)


def check_int(v: Any, what: str, lo: int, hi: int) -> None:
    if isinstance(v, bool) or not isinstance(v, int) or not lo <= v <= hi:
        raise InvalidInputError(f"{what} must be an integer between {lo} and {hi}, got {v!r}")


def spans(v: Sequence[str] | str | None, what: str) -> list[str] | None:
    if v is None:
        return None
    if isinstance(v, str):
        return [check_encodable(v, what)]
    if not all(isinstance(x, str) for x in v):
        raise InvalidInputError(f"{what} must be text or a list of texts")
    return [check_encodable(x, what) for x in v]


def check_items(items: Sequence[ItemIn]) -> set[str]:
    """Each item's key, text, original and source (sizes, characters, duplicates), before any
    output is made for it (a draft); returns the keys."""
    keys: set[str] = set()
    for it in items:
        check_name(it.key, "item key")
        if it.key in keys:
            raise DuplicateError(f"item key {it.key!r} appears twice")
        keys.add(it.key)
        check_text(it.text, f"text of item {it.key!r}")
        spans(it.original, f"original of item {it.key!r}")
        if it.source is not None and (not isinstance(it.source, str) or len(it.source) > 500):
            raise InvalidInputError(f"source of item {it.key!r} must be text (<= 500 characters)")
    return keys


def check_items_outputs(items: Sequence[ItemIn], outputs: Sequence[OutputIn]) -> None:
    """Validate everything before anything is written."""
    keys = check_items(items)
    seen: set[tuple[str, str]] = set()
    roles: dict[str, list[str]] = {}
    for o in outputs:
        if o.item_key not in keys:
            raise NotFoundError(f"output for unknown item key {o.item_key!r}")
        check_name(o.system, f"system of an output of item {o.item_key!r}")
        if (o.item_key, o.system) in seen:
            raise DuplicateError(f"item {o.item_key!r} has two outputs from system {o.system!r}")
        seen.add((o.item_key, o.system))
        check_text(o.text, f"output of {o.system!r} for item {o.item_key!r}")
        spans(o.fills, f"fills of {o.system!r} for item {o.item_key!r}")
        if o.seed is not None and (isinstance(o.seed, bool) or not isinstance(o.seed, int)):
            raise InvalidInputError(f"seed must be an integer, got {o.seed!r}")
        if not isinstance(o.decoding, Mapping):
            raise InvalidInputError("decoding settings must be a mapping")
        if o.gold_role is not None:
            if o.gold_role not in GOLD_ROLES:
                raise InvalidInputError(
                    f"gold_role must be original/corrupted, got {o.gold_role!r}"
                )
            roles.setdefault(o.item_key, []).append(o.gold_role)
    per_item = {k: 0 for k in keys}
    for o in outputs:
        per_item[o.item_key] += 1
    for it in items:
        if per_item[it.key] == 0:
            raise InvalidInputError(f"item {it.key!r} has no outputs")
        r = roles.get(it.key, [])
        if it.is_gold and (r.count("original") != 1 or len(r) != per_item[it.key] or len(r) < 2):
            raise InvalidInputError(
                f"attention-check item {it.key!r} needs one output with gold_role='original'"
                " and the others with gold_role='corrupted'"
            )
        if not it.is_gold and r:
            raise InvalidInputError(f"item {it.key!r} has gold_role outputs but is_gold=False")
    _check_gold_looks_regular(items, outputs, per_item)


def _check_gold_looks_regular(
    items: Sequence[ItemIn], outputs: Sequence[OutputIn], per_item: Mapping[str, int]
) -> None:
    """An attention check must not stand out: as many outputs as the regular items show (when
    they all show the same number), and a passage that is not also one of the regular items."""
    regular = [it for it in items if not it.is_gold]
    counts = {per_item[it.key] for it in regular}
    regular_texts = {it.text.strip() for it in regular}
    regular_texts |= {o.text.strip() for o in outputs if o.gold_role is None}
    for it in items:
        if not it.is_gold:
            continue
        if len(counts) == 1 and per_item[it.key] not in counts:
            raise InvalidInputError(
                f"attention-check item {it.key!r} has {per_item[it.key]} outputs but every "
                f"regular item has {counts.pop()}; raters would spot it"
            )
        gold_texts = {it.text.strip()} | {
            o.text.strip() for o in outputs if o.item_key == it.key and o.gold_role == "original"
        }
        if gold_texts & regular_texts:
            raise InvalidInputError(
                f"attention-check item {it.key!r} uses the passage of a regular item; build "
                "checks from passages that are not in the study"
            )


def normalize_submission(
    qs: Sequence[Question],
    labels: Mapping[str, int],
    answers: Mapping[str, Any] | None,
    pref: Any,
    comment: str | None,
    comment_max_chars: int,
) -> tuple[dict[str, dict[str, Any]], str | None, str | None]:
    answers = answers or {}
    if not isinstance(answers, Mapping):
        raise InvalidInputError("answers must map output labels (A, B, ...) to answers")
    unknown = [k for k in answers if k not in labels]
    if unknown:
        raise NotAssignedError(
            f"output(s) {unknown} are not part of this item; it shows {sorted(labels)}"
        )
    per_output: dict[str, dict[str, Any]] = {}
    if any(q.per_output for q in qs):
        missing = [lab for lab in labels if lab not in answers]
        if missing:
            raise InvalidInputError(f"answer every output; missing {missing}")
        for lab in labels:
            per_output[lab] = normalize_output_answers(qs, lab, answers[lab])
    else:
        for lab, v in answers.items():
            if v:
                raise InvalidInputError(f"this study asks nothing per output (got {lab}: {v!r})")
    pq: Preference | None = first(qs, Preference)
    if pq is None:
        if pref is not None:
            raise InvalidInputError("this study does not ask for a preference")
    else:
        pq.check_choice(pref, list(labels))
    cq: Comment | None = first(qs, Comment)
    if comment is not None and len(comment) > comment_max_chars:
        raise InvalidInputError(
            f"the comment is {len(comment)} characters; at most {comment_max_chars} allowed"
        )
    if cq is not None:
        cq.check_comment(comment)
    return per_output, pref, comment


def check_status(status: Any) -> str:
    """One of the statuses the schema allows (draft, open, closed)."""
    if status not in STUDY_STATUSES:
        raise InvalidInputError(f"status must be one of {STUDY_STATUSES}, got {status!r}")
    return status
