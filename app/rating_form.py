"""The one check of a rater's answers before they are stored: what is still missing, in words.

A pure function of the study's questions and the values the page sent, so the Rate page can
show one inline sentence (and keep everything entered) instead of an error per field.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from annotation_db.questions import Preference, Question


def _join(parts: list[str]) -> str:
    return parts[0] if len(parts) == 1 else ", ".join(parts[:-1]) + " and " + parts[-1]


def missing_answers(
    questions: Sequence[Question],
    answers: Mapping[str, Mapping[str, Any]],
    preference: str | None,
) -> str | None:
    """None when every required question is answered, else one sentence naming what is
    missing, e.g. "Please answer: output A (appropriate?), output B (fluency) and which
    output is best."

    answers: output label -> question name -> value (None: not answered)."""
    per_output = [q for q in questions if q.per_output and q.required]
    parts = []
    for label, given in answers.items():
        names = [q.missing_label for q in per_output if given.get(q.name) is None]
        if names:
            parts.append(f"output {label} ({_join(names)})")
    for q in questions:
        if isinstance(q, Preference) and q.required and not preference:
            parts.append(q.missing_label)
    return f"Please answer: {_join(parts)}." if parts else None
