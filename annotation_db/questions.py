"""Question types a study can ask, and validation of the answers a rater sends.

Per output: ``appropriate`` (yes/no, the paper's question) and ``likert`` (1-5 by default).
Per item: ``preference`` (best of the N outputs shown together; pairwise when N = 2) and
``comment`` (optional free text).
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from dataclasses import asdict, dataclass
from typing import Any

from .errors import InvalidInputError

KINDS = ("appropriate", "likert", "preference", "comment")
PER_OUTPUT = ("appropriate", "likert")
TIE = "tie"
ALL_BAD = "all_bad"
_NAME = re.compile(r"^[a-z][a-z0-9_]{0,39}$")


@dataclass(frozen=True)
class Question:
    """One question of a study. ``name`` is the key of the answer in exports."""

    kind: str
    name: str
    prompt: str
    scale_min: int = 1
    scale_max: int = 5
    min_label: str = ""
    max_label: str = ""
    allow_tie: bool = True
    allow_all_bad: bool = True
    required: bool = True

    @property
    def per_output(self) -> bool:
        return self.kind in PER_OUTPUT

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)

    @classmethod
    def from_dict(cls, d: Mapping[str, Any]) -> Question:
        try:
            q = cls(**dict(d))
        except TypeError as e:
            raise InvalidInputError(f"bad question {dict(d)!r}: {e}") from e
        q.check()
        return q

    def check(self) -> None:
        if self.kind not in KINDS:
            raise InvalidInputError(f"question kind {self.kind!r} is not one of {KINDS}")
        if not _NAME.match(self.name):
            raise InvalidInputError(
                f"question name {self.name!r} must be lower-case letters, digits, '_' (<= 40)"
            )
        if self.kind == "likert" and not (self.scale_min < self.scale_max):
            raise InvalidInputError(f"Likert {self.name!r}: scale_min must be below scale_max")


def appropriate(prompt: str = "Is the filled-in text contextually appropriate?") -> Question:
    return Question("appropriate", "appropriate", prompt)


def likert(
    name: str,
    prompt: str,
    *,
    scale_min: int = 1,
    scale_max: int = 5,
    min_label: str = "",
    max_label: str = "",
) -> Question:
    q = Question("likert", name, prompt, scale_min, scale_max, min_label, max_label)
    q.check()
    return q


def preference(
    prompt: str = "Which filled-in text is best?",
    *,
    allow_tie: bool = True,
    allow_all_bad: bool = True,
) -> Question:
    return Question(
        "preference", "preference", prompt, allow_tie=allow_tie, allow_all_bad=allow_all_bad
    )


def comment(prompt: str = "Comment (optional)", *, required: bool = False) -> Question:
    return Question("comment", "comment", prompt, required=required)


DEFAULT_QUESTIONS: tuple[Question, ...] = (appropriate(),)


def parse_questions(questions: Sequence[Question | Mapping[str, Any] | str]) -> list[Question]:
    """Accept Question objects, dicts, or short specs: 'appropriate', 'likert:fluency', ..."""
    out: list[Question] = []
    for q in questions:
        if isinstance(q, Question):
            q.check()
            out.append(q)
        elif isinstance(q, Mapping):
            out.append(Question.from_dict(q))
        elif isinstance(q, str):
            out.append(_from_spec(q))
        else:
            raise InvalidInputError(f"cannot read a question from {q!r}")
    if not out:
        raise InvalidInputError("a study needs at least one question")
    names = [q.name for q in out]
    if len(set(names)) != len(names):
        raise InvalidInputError(f"question names must be unique, got {names}")
    for kind in ("appropriate", "preference", "comment"):
        if sum(q.kind == kind for q in out) > 1:
            raise InvalidInputError(f"at most one {kind!r} question per study")
    return out


def _from_spec(spec: str) -> Question:
    kind, _, name = spec.strip().partition(":")
    if kind == "appropriate":
        return appropriate()
    if kind == "preference":
        return preference()
    if kind == "comment":
        return comment()
    if kind == "likert":
        name = name or "quality"
        prompts = {
            "fluency": "How fluent is the filled-in text?",
            "coherence": "How well does the filled-in text fit the text on its right?",
        }
        return likert(name, prompts.get(name, f"Rate the {name} of the filled-in text."))
    raise InvalidInputError(
        f"unknown question spec {spec!r}; use appropriate, likert:NAME, preference or comment"
    )


def normalize_output_answers(questions: Sequence[Question], label: str, raw: Any) -> dict[str, Any]:
    """Check one output's answers against the per-output questions; return canonical values."""
    per_output = [q for q in questions if q.per_output]
    if raw is None:
        raw = {}
    if not isinstance(raw, Mapping):
        raise InvalidInputError(f"answers for output {label} must be a mapping, got {raw!r}")
    known = {q.name for q in per_output}
    extra = set(raw) - known
    if extra:
        raise InvalidInputError(
            f"output {label}: unknown question(s) {sorted(extra)}; expected {sorted(known)}"
        )
    out: dict[str, Any] = {}
    for q in per_output:
        if q.name not in raw or raw[q.name] is None:
            raise InvalidInputError(f"output {label}: question {q.name!r} is not answered")
        v = raw[q.name]
        if q.kind == "appropriate":
            out[q.name] = _yes_no(v, label)
        else:
            if isinstance(v, bool) or not isinstance(v, int | float) or int(v) != v:
                raise InvalidInputError(
                    f"output {label}: {q.name} must be a whole number, got {v!r}"
                )
            if not q.scale_min <= int(v) <= q.scale_max:
                raise InvalidInputError(
                    f"output {label}: {q.name} must be between {q.scale_min} and {q.scale_max},"
                    f" got {v}"
                )
            out[q.name] = int(v)
    return out


def _yes_no(v: Any, label: str) -> bool:
    if isinstance(v, bool):
        return v
    if isinstance(v, str) and v.strip().lower() in ("yes", "no"):
        return v.strip().lower() == "yes"
    raise InvalidInputError(f"output {label}: 'appropriate' must be yes/no (a bool), got {v!r}")
