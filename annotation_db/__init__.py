"""annotation_db: the human-evaluation store for infilling studies (SQLAlchemy 2, no torch).

Start with ``AnnotationStore`` (see README.md in this folder)::

    store = AnnotationStore()                       # MAGNET_DB_URL / MAGNET_DB_PATH
    store.create_study("pilot", items, outputs, questions=["appropriate", "likert:fluency"])
    invite = store.invite("pilot", "Rater 1")       # invite.token goes in the link
    item = store.next_item(invite.token)            # blind: labels A, B, ... and texts only
    store.submit(invite.token, item.assignment_id, {"A": {"appropriate": True, ...}, ...})
    store.results("pilot").to_dict()

Layout: each module imports only modules listed above it, so there is no import circle::

    errors, settings, questions, views, schema   typed errors, MAGNET_DB_* settings, question
                                                 specs, rater/admin dataclasses, the tables
    migrate, migrations/                         Alembic revisions, run when a store opens
    database                                     Database: the engine, a unit of work per call
    validate                                     checks and limits on what callers send (pure)
    queries                                      shared reads: study, progress, token lookup
    stats, planner, gold, fills                  pure: Wilson, bootstrap, Bradley-Terry,
                                                 alpha; study size; attention-check items;
                                                 fills' problems per system (empty,
                                                 overlong, unfinished, chat, copy, repeats)
    results                                      load_study (SQL) + summarize (pure statistics)
    io                                           CSV/JSONL import (the package's one reader),
                                                 export_rows(session, study), export writers
    rows, backup, arena                          item and output rows; SQLite online backup;
                                                 blind votes (written through store.write)
    store                                        AnnotationStore: the API, one transaction each
    drafts, revise, simulate, report             built on the store: studies generated in
                                                 steps, outputs revised before raters,
                                                 simulated raters, the HTML report
    cli                                          ``python -m annotation_db``
"""

from .attention import AttentionRule, AttentionSettings, plan_checks, planned_settings
from .drafts import (  # also puts the draft tables in Base.metadata (for the migrations)
    Draft,
    discard_draft,
    finish_draft,
    get_draft,
    list_drafts,
    save_output,
    start_draft,
)
from .errors import (
    AlreadySubmittedError,
    AnnotationError,
    DuplicateError,
    ImportFormatError,
    InvalidInputError,
    NotAssignedError,
    NotFoundError,
    StorageError,
    StudyClosedError,
    UnknownTokenError,
    UnsupportedError,
)
from .fills import (
    OVERLONG_RATIO,
    PROBLEM_NAMES,
    PROBLEMS,
    FillCounts,
    FlaggedOutput,
    fill_counts,
    fill_summary,
    flagged_outputs,
    is_chat_reply,
)
from .gold import (
    GOLD_CORRUPTED,
    GOLD_ORIGINAL,
    fill_blanks,
    held_out_gold_items,
    make_gold_items,
)
from .io import export_rows, read_items, read_outputs, safe_file_stem, write_items
from .queries import label_of
from .questions import ALL_BAD, TIE, Question, appropriate, comment, likert, preference
from .results import StudyResults
from .revise import revise_outputs
from .schema import ARENA_SEEN_UNBLINDED, ARENA_STUDY
from .settings import DBSettings, default_db_path, sqlite_url
from .store import AnnotationStore
from .validate import check_study_name
from .views import (
    Invite,
    ItemIn,
    OutputIn,
    RaterItem,
    RaterOutput,
    RaterProgress,
    RaterSession,
    RaterStatus,
    StudyInfo,
    StudyProgress,
    SubmitReceipt,
    VoteReceipt,
)

__all__ = [
    "ALL_BAD",
    "ARENA_SEEN_UNBLINDED",
    "ARENA_STUDY",
    "AlreadySubmittedError",
    "AnnotationError",
    "AnnotationStore",
    "AttentionRule",
    "AttentionSettings",
    "DBSettings",
    "FillCounts",
    "FlaggedOutput",
    "Draft",
    "DuplicateError",
    "GOLD_CORRUPTED",
    "GOLD_ORIGINAL",
    "ImportFormatError",
    "InvalidInputError",
    "Invite",
    "ItemIn",
    "NotAssignedError",
    "NotFoundError",
    "OVERLONG_RATIO",
    "OutputIn",
    "PROBLEM_NAMES",
    "PROBLEMS",
    "Question",
    "RaterItem",
    "RaterOutput",
    "RaterProgress",
    "RaterSession",
    "RaterStatus",
    "StorageError",
    "StudyClosedError",
    "StudyInfo",
    "StudyProgress",
    "StudyResults",
    "SubmitReceipt",
    "TIE",
    "UnknownTokenError",
    "UnsupportedError",
    "VoteReceipt",
    "appropriate",
    "check_study_name",
    "comment",
    "discard_draft",
    "finish_draft",
    "get_draft",
    "list_drafts",
    "save_output",
    "start_draft",
    "default_db_path",
    "export_rows",
    "fill_blanks",
    "fill_counts",
    "fill_summary",
    "flagged_outputs",
    "is_chat_reply",
    "label_of",
    "likert",
    "held_out_gold_items",
    "make_gold_items",
    "plan_checks",
    "planned_settings",
    "preference",
    "read_items",
    "read_outputs",
    "revise_outputs",
    "safe_file_stem",
    "sqlite_url",
    "write_items",
]
