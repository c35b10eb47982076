"""Typed errors: every failure a caller can act on has its own class and a readable message.

The app turns these into ``gr.Error``; nothing is written to the database when one is raised.
"""

from __future__ import annotations


class AnnotationError(Exception):
    """Base class of every error this package raises on purpose."""


class InvalidInputError(AnnotationError, ValueError):
    """A value given by the caller is malformed or out of range (Likert 7 on a 1-5 scale...)."""


class ImportFormatError(InvalidInputError):
    """An items/outputs file (JSONL or CSV) cannot be read; the message names the line."""


class NotFoundError(AnnotationError, LookupError):
    """A study, item or output named by the caller does not exist."""


class UnknownTokenError(NotFoundError):
    """The invite token matches no rater (mistyped, revoked, or from another database)."""


class NotAssignedError(AnnotationError, PermissionError):
    """The rater tried to see or rate something that was not assigned to them."""


class AlreadySubmittedError(AnnotationError):
    """A different answer was sent for an item this rater has already answered."""


class StudyClosedError(AnnotationError):
    """The study does not accept ratings (draft or closed)."""


class DuplicateError(AnnotationError):
    """A name that must be unique (study name, item key, system per item) is taken."""


class UnsupportedError(AnnotationError):
    """The operation does not exist for this database backend (e.g. SQLite backup on Postgres)."""


class StorageError(AnnotationError):
    """The database cannot be opened, read or written (read-only file or folder, full disk,
    server gone); nothing of the failed operation was stored."""
