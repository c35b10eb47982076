"""Alembic environment, configured in code (``annotation_db.migrate.alembic_config``): no
alembic.ini, so it works from an installed package. ``annotation_db.migrate`` passes its open
connection in ``config.attributes["connection"]``; otherwise ``sqlalchemy.url`` is used."""

from alembic import context
from sqlalchemy import engine_from_config, pool

from annotation_db.drafts import StudyDraft  # noqa: F401 - registers the draft tables
from annotation_db.schema import Base

config = context.config
target_metadata = Base.metadata


def run(connection) -> None:  # noqa: ANN001
    context.configure(
        connection=connection,
        target_metadata=target_metadata,
        # SQLite cannot ALTER most things: a revision's op.batch_alter_table copies the table.
        render_as_batch=connection.dialect.name == "sqlite",
    )
    with context.begin_transaction():
        context.run_migrations()


if context.is_offline_mode():
    context.configure(
        url=config.get_main_option("sqlalchemy.url"),
        target_metadata=target_metadata,
        literal_binds=True,
    )
    with context.begin_transaction():
        context.run_migrations()
elif (connection := config.attributes.get("connection")) is not None:
    run(connection)
else:
    engine = engine_from_config(
        config.get_section(config.config_ini_section, {}),
        prefix="sqlalchemy.",
        poolclass=pool.NullPool,
    )
    with engine.begin() as conn:
        run(conn)
