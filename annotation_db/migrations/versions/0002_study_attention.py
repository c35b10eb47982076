"""A study's attention-check settings (slip rate, error rates, items and checks per rater).

A nullable JSON column: studies made before it have none, and keep the old placement (checks
spread over everything a rater may do) and the default rule.

Revision ID: 0002_study_attention
Revises: 0001_baseline
"""

import sqlalchemy as sa
from alembic import op

revision = "0002_study_attention"
down_revision = "0001_baseline"
branch_labels = None
depends_on = None


def upgrade() -> None:
    # a database made by create_all at this schema, then adopted without a revision stamp
    # (annotation_db.migrate stamps the baseline), has the column already
    if "attention" in {c["name"] for c in sa.inspect(op.get_bind()).get_columns("study")}:
        return
    with op.batch_alter_table("study") as batch:
        batch.add_column(sa.Column("attention", sa.JSON(), nullable=True))


def downgrade() -> None:
    with op.batch_alter_table("study") as batch:
        batch.drop_column("attention")
