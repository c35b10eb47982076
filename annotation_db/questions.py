"""Question kinds a study can ask: one class per kind, each knowing its own rules.

Per output: ``Appropriate`` (yes/no, the paper's question) and ``Likert`` (1-5 by default).
Per item: ``Preference`` (best of the N outputs shown together; pairwise when N = 2) and
``Comment`` (optional free text).

A kind knows how to check its definition and an answer, its agreement level (what
Krippendorff's alpha is computed at), how an attention check judges its answer, what a person
picks from (``choices``; the app maps them to a widget) and its words for people. A study
stores its questions as ``to_dict()`` (the ``kind`` key names the class), so adding a kind is
one class here, registered by its ``KIND`` name.
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from dataclasses import asdict, dataclass, field
from typing import Any, ClassVar

from .errors import InvalidInputError

TIE = "tie"
ALL_BAD = "all_bad"
_NAME = re.compile(r"^[a-z][a-z0-9_]{0,39}$")
_REGISTRY: dict[str, type[Question]] = {}


@dataclass(frozen=True)
class Question:
    """One question of a study. ``name`` is the key of the answer in exports.

    ``kind`` is not an argument: it is the class's ``KIND``, kept as a field so that
    ``to_dict()``/``asdict`` give the same dict a study has always stored.
    """

    kind: str = field(init=False)
    name: str
    prompt: str
    scale_min: int = 1
    scale_max: int = 5
    min_label: str = ""
    max_label: str = ""
    allow_tie: bool = True
    allow_all_bad: bool = True
    required: bool = True

    KIND: ClassVar[str] = ""
    per_output: ClassVar[bool] = False  # answered for each output shown, else once per item
    # Krippendorff's alpha level of its answers; None: no agreement is computed.
    agreement_level: ClassVar[str | None] = None
    one_per_study: ClassVar[bool] = True

    def __init_subclass__(cls, **kwargs: Any) -> None:
        super().__init_subclass__(**kwargs)
        if cls.KIND:
            _REGISTRY[cls.KIND] = cls

    def __post_init__(self) -> None:
        object.__setattr__(self, "kind", self.KIND)

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)

    @staticmethod
    def from_dict(d: Mapping[str, Any], *, check: bool = True) -> Question:
        """The question a stored dict describes, as an object of its kind's class."""
        d = dict(d)
        kind = d.pop("kind", None)
        cls = _REGISTRY.get(kind) if isinstance(kind, str) else None
        if cls is None:
            raise InvalidInputError(f"question kind {kind!r} is not one of {kinds()}")
        try:
            q = cls(**d)
        except TypeError as e:
            raise InvalidInputError(f"bad question {dict(d, kind=kind)!r}: {e}") from e
        if check:
            q.check()
        return q

    @classmethod
    def from_spec(cls, name: str) -> Question:
        """The question a short spec ``KIND[:NAME]`` asks (the Admin form's and the CLI's)."""
        raise NotImplementedError

    def check(self) -> None:
        """Raise ``InvalidInputError`` when the definition is not one a study can ask."""
        if not _NAME.match(self.name):
            raise InvalidInputError(
                f"question name {self.name!r} must be lower-case letters, digits, '_' (<= 40)"
            )

    # ----------------------------------------------------------- words and widgets

    @property
    def label(self) -> str:
        """The question's heading for people (the app's widget label)."""
        return self.prompt

    @property
    def missing_label(self) -> str:
        """How a sentence names this question when it is not answered yet."""
        return self.name.replace("_", " ")

    def choices(self, labels: Sequence[str] = ()) -> list[str] | None:
        """What a person picks from (None: free text); ``labels``: the outputs shown."""
        return None

    def from_choice(self, picked: str | None) -> Any:
        """The answer a picked choice stands for (None: not answered)."""
        return picked

    # ----------------------------------------------------------- answers

    def normalize(self, value: Any, label: str) -> Any:
        """A per-output answer in its stored form, or ``InvalidInputError``."""
        raise NotImplementedError(f"{type(self).__name__} is not asked per output")

    def check_passed(self, original: Any, wrong: Sequence[Any]) -> bool:
        """Whether a rater's answers to this question about an attention check are right:
        ``original`` about the true text, ``wrong`` about each wrong fill (None: not given,
        which fails nothing). A question that says nothing about a check: True."""
        return True


class Appropriate(Question):
    """Yes/no per output: is the filled-in text contextually appropriate?"""

    KIND = "appropriate"
    per_output = True
    agreement_level = "nominal"

    @classmethod
    def from_spec(cls, name: str) -> Appropriate:
        return appropriate()

    @property
    def missing_label(self) -> str:
        return "appropriate?"

    def choices(self, labels: Sequence[str] = ()) -> list[str]:
        return ["Yes", "No"]

    def from_choice(self, picked: str | None) -> bool | None:
        return None if picked is None else picked == "Yes"

    def normalize(self, value: Any, label: str) -> bool:
        if isinstance(value, bool):
            return value
        if isinstance(value, str) and value.strip().lower() in ("yes", "no"):
            return value.strip().lower() == "yes"
        raise InvalidInputError(
            f"output {label}: 'appropriate' must be yes/no (a bool), got {value!r}"
        )

    def check_passed(self, original: Any, wrong: Sequence[Any]) -> bool:
        """The true text accepted and every wrong fill rejected."""
        return original is not False and all(w is not True for w in wrong)


class Likert(Question):
    """A whole number on a scale per output (1-5 by default)."""

    KIND = "likert"
    per_output = True
    agreement_level = "ordinal"
    one_per_study = False

    @classmethod
    def from_spec(cls, name: str) -> Likert:
        name = name or "quality"
        return likert(name, _LIKERT_PROMPTS.get(name, f"Rate the {name} of the filled-in text."))

    def check(self) -> None:
        super().check()
        if not (self.scale_min < self.scale_max):
            raise InvalidInputError(f"Likert {self.name!r}: scale_min must be below scale_max")

    @property
    def label(self) -> str:
        return f"{self.prompt} ({self.scale_min}-{self.scale_max})"

    def choices(self, labels: Sequence[str] = ()) -> list[str]:
        return [str(v) for v in range(self.scale_min, self.scale_max + 1)]

    def from_choice(self, picked: str | None) -> int | None:
        return None if picked is None else int(picked)

    def normalize(self, value: Any, label: str) -> int:
        if isinstance(value, bool) or not isinstance(value, int | float) or int(value) != value:
            raise InvalidInputError(
                f"output {label}: {self.name} must be a whole number, got {value!r}"
            )
        if not self.scale_min <= int(value) <= self.scale_max:
            raise InvalidInputError(
                f"output {label}: {self.name} must be between {self.scale_min} and "
                f"{self.scale_max}, got {value}"
            )
        return int(value)

    def check_passed(self, original: Any, wrong: Sequence[Any]) -> bool:
        """The true text scored strictly above every wrong fill (the same score everywhere
        ranks nothing)."""
        if not isinstance(original, int):
            return True
        return all(not isinstance(w, int) or original > w for w in wrong)


class Preference(Question):
    """Once per item: the best of the outputs shown, ``"tie"`` or ``"all_bad"``."""

    KIND = "preference"
    agreement_level = "nominal"

    @classmethod
    def from_spec(cls, name: str) -> Preference:
        return preference()

    @property
    def missing_label(self) -> str:
        return "which output is best"

    def choices(self, labels: Sequence[str] = ()) -> list[str]:
        return [*labels] + [TIE] * self.allow_tie + [ALL_BAD] * self.allow_all_bad

    def check_choice(self, pref: Any, labels: Sequence[str]) -> str:
        """The rater's pick, if it is one of ``choices(labels)``."""
        allowed = self.choices(labels)
        if pref not in allowed:
            if pref is None:
                raise InvalidInputError(f"choose one of {allowed}")
            raise InvalidInputError(f"preference must be one of {allowed}, got {pref!r}")
        return pref


class Comment(Question):
    """Once per item: free text, optional unless ``required``."""

    KIND = "comment"

    @classmethod
    def from_spec(cls, name: str) -> Comment:
        return comment()

    def check_comment(self, text: str | None) -> str | None:
        if self.required and not text:
            raise InvalidInputError("a comment is required for this study")
        return text


def kinds() -> tuple[str, ...]:
    """The kind names a stored question may have, in the order they were defined."""
    return tuple(_REGISTRY)


def first(questions: Sequence[Question], kind: type[Question]) -> Any:
    """The study's question of that class (None if it asks none)."""
    return next((q for q in questions if isinstance(q, kind)), None)


def appropriate(prompt: str = "Is the filled-in text contextually appropriate?") -> Appropriate:
    return Appropriate("appropriate", prompt)


def likert(
    name: str,
    prompt: str,
    *,
    scale_min: int = 1,
    scale_max: int = 5,
    min_label: str = "",
    max_label: str = "",
) -> Likert:
    q = Likert(name, prompt, scale_min, scale_max, min_label, max_label)
    q.check()
    return q


def preference(
    prompt: str = "Which filled-in text is best?",
    *,
    allow_tie: bool = True,
    allow_all_bad: bool = True,
) -> Preference:
    return Preference("preference", prompt, allow_tie=allow_tie, allow_all_bad=allow_all_bad)


def comment(prompt: str = "Comment (optional)", *, required: bool = False) -> Comment:
    return Comment("comment", prompt, required=required)


DEFAULT_QUESTIONS: tuple[Question, ...] = (appropriate(),)
_LIKERT_PROMPTS = {
    "fluency": "How fluent is the filled-in text?",
    "coherence": "How well does the filled-in text fit the text on its right?",
}


def parse_questions(questions: Sequence[Question | Mapping[str, Any] | str]) -> list[Question]:
    """Accept Question objects, dicts, or short specs: 'appropriate', 'likert:fluency', ..."""
    out: list[Question] = []
    for q in questions:
        if isinstance(q, Question):
            if type(q) not in _REGISTRY.values():
                raise InvalidInputError(f"question kind {q.kind!r} is not one of {kinds()}")
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
    for cls in _REGISTRY.values():
        if cls.one_per_study and sum(type(q) is cls for q in out) > 1:
            raise InvalidInputError(f"at most one {cls.KIND!r} question per study")
    return out


def _from_spec(spec: str) -> Question:
    kind, _, name = spec.strip().partition(":")
    cls = _REGISTRY.get(kind)
    if cls is None:
        raise InvalidInputError(
            f"unknown question spec {spec!r}; use appropriate, likert:NAME, preference or comment"
        )
    return cls.from_spec(name)


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
        out[q.name] = q.normalize(raw[q.name], label)
    return out
