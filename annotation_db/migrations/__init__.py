"""Alembic migrations of the annotation_db schema (run by ``annotation_db.migrate``)."""
