"""Attention checks scored as a whole: the stored verdicts of answered checks are scored again.

Before this revision a check was failed only when a wrong fill was accepted, scored above the
true text or preferred; rejecting everything passed every check. Now a check is passed only
when every answer about it is right (``annotation_db.attention.check_passed``). This revision
scores every answered check of every study again from its stored ratings, so that one study
never mixes the two rules. A study whose stored slip rate is the old default (0.1, meant for
the old scoring) gets the new default (0.2, ``attention.DEFAULT_SLIP``); a slip rate a
researcher chose otherwise is kept. The downgrade leaves the verdicts as they are (the old rule
is not kept anywhere).

Revision ID: 0003_whole_check_scoring
Revises: 0002_study_attention
"""

import json
from collections import defaultdict

import sqlalchemy as sa
from alembic import op

from annotation_db.attention import DEFAULT_SLIP, check_passed
from annotation_db.questions import parse_questions

revision = "0003_whole_check_scoring"
down_revision = "0002_study_attention"
branch_labels = None
depends_on = None

OLD_DEFAULT_SLIP = 0.1


def _json(value):  # noqa: ANN001, ANN202 - a JSON column as the driver returns it
    return json.loads(value) if isinstance(value, str) else value


def upgrade() -> None:
    bind = op.get_bind()
    for study_id, questions, attention in bind.execute(
        sa.text("SELECT id, questions, attention FROM study")
    ).all():
        qs = parse_questions(_json(questions))
        settings = _json(attention)
        if isinstance(settings, dict) and settings.get("slip") == OLD_DEFAULT_SLIP:
            settings = {**settings, "slip": DEFAULT_SLIP}
            bind.execute(
                sa.text("UPDATE study SET attention = :a WHERE id = :i").bindparams(
                    sa.bindparam("a", type_=sa.JSON)
                ),
                {"a": settings, "i": study_id},
            )
        checks = bind.execute(
            sa.text(
                "SELECT a.id, a.item_id, a.preference, a.preferred_output_id FROM assignment a "
                "JOIN item i ON i.id = a.item_id "
                "WHERE i.study_id = :s AND i.is_gold AND a.completed_at IS NOT NULL"
            ),
            {"s": study_id},
        ).all()
        if not checks:
            continue
        roles: dict[int, dict[str, str]] = defaultdict(dict)
        for output_id, item_id, role in bind.execute(
            sa.text(
                "SELECT o.id, o.item_id, o.gold_role FROM output o JOIN item i ON i.id = o.item_id"
                " WHERE i.study_id = :s AND i.is_gold"
            ),
            {"s": study_id},
        ).all():
            roles[item_id][str(output_id)] = role or "corrupted"
        answers: dict[int, dict[str, dict]] = defaultdict(dict)
        for assignment_id, output_id, given in bind.execute(
            sa.text(
                "SELECT r.assignment_id, r.output_id, r.answers FROM rating r "
                "JOIN assignment a ON a.id = r.assignment_id JOIN item i ON i.id = a.item_id "
                "WHERE i.study_id = :s AND i.is_gold"
            ),
            {"s": study_id},
        ).all():
            answers[assignment_id][str(output_id)] = _json(given) or {}
        for assignment_id, item_id, preference, preferred in checks:
            item_roles = roles.get(item_id, {})
            if "original" not in item_roles.values():
                continue
            pref = None if preference is None else preference
            if preference == "choice":
                pref = str(preferred)
            passed = check_passed(qs, item_roles, answers.get(assignment_id, {}), pref)
            bind.execute(
                sa.text("UPDATE assignment SET gold_passed = :p WHERE id = :i"),
                {"p": passed, "i": assignment_id},
            )


def downgrade() -> None:
    pass
