"""Files for the admin: ratings (CSV, JSONL), the HTML report and a backup of the database,
each behind a single-use download link (security.PrivateDownloads).
"""

from __future__ import annotations

import time
from pathlib import Path

import gradio as gr

from annotation_db import safe_file_stem
from annotation_db.report import write_report
from magnet_model.systems import TITLES

from .. import studies
from ..security import DOWNLOAD_ROUTE
from ..services import user_errors
from .base import AdminBase
from .view import admin_view


class ExportViews(AdminBase):
    """Export ratings, write the report, back up the database."""

    @admin_view("The export")
    def admin_export(self, request: gr.Request | None, study: str, fmt: str) -> str:
        """Write the ratings to a private file -> a single-use download link (Markdown)."""
        self._admin(request)
        ext = {"csv": "csv", "jsonl": "jsonl"}.get(fmt)
        if not study or ext is None:
            raise gr.Error("Pick a study and a format (csv or jsonl).", print_exception=False)
        out = self.downloads.new_path(f"{safe_file_stem(study)}.{ext}")
        with user_errors():
            return self._download_link(self.store.export(study, fmt, out))

    @admin_view("The report")
    def admin_report(self, request: gr.Request | None, study: str, exclude: bool = True) -> str:
        """The study's self-contained HTML report -> a single-use download link (Markdown).
        ``exclude``: leave out the raters the attention rule excludes (the report shows every
        rater's figures beside them either way)."""
        self._admin(request)
        if not study:
            raise gr.Error("Pick a study.", print_exception=False)
        out = self.downloads.new_path(f"{safe_file_stem(study)}.html")
        with user_errors():
            titles = {s: TITLES[s] for s in studies.in_order(list(TITLES))}  # the app's order
            path = write_report(self.store, study, out, exclude=bool(exclude), titles=titles)
            return self._download_link(path)

    @admin_view("The backup")
    def admin_backup(self, request: gr.Request | None) -> str:
        """A consistent copy of the database -> a single-use download link (Markdown)."""
        self._admin(request)
        stamp = time.strftime("%Y%m%d-%H%M%S")
        out = self.downloads.new_path(f"annotations-{stamp}.sqlite3")
        with user_errors():
            return self._download_link(self.store.backup(out))

    def _download_link(self, path: Path) -> str:
        ticket = self.downloads.publish(path)
        minutes = self.downloads.ttl_s / 60
        return (
            f"[Download {path.name}]({DOWNLOAD_ROUTE}/{ticket}) — this link works once, "
            f"within {minutes:.0f} minutes, then the file is deleted from the server."
        )
