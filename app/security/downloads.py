"""The admin's files (exports, reports, backups): private on disk, served once through a random
link, deleted after the download or when the link expires."""

from __future__ import annotations

import logging
import os
import secrets
import shutil
import tempfile
import threading
import time
from collections.abc import Callable
from pathlib import Path

from starlette.background import BackgroundTask
from starlette.requests import Request
from starlette.responses import FileResponse, PlainTextResponse, Response

log = logging.getLogger("app")

DOWNLOAD_TTL_S = 600.0  # an admin download link works once, within 10 minutes
DOWNLOAD_ROUTE = "admin-files"


class PrivateDownloads:
    """Files for the admin only: written in a folder of their own (mode 0700, files 0600),
    served through a random single-use link, deleted after the download or after ``ttl_s``.

    Nothing goes through Gradio's file cache, so no ``/gradio_api/file=`` URL ever exists for
    an export or a backup.
    """

    def __init__(
        self,
        ttl_s: float = DOWNLOAD_TTL_S,
        clock: Callable[[], float] = time.monotonic,
        root: Path | None = None,
    ):
        """``root``: a fixed folder (the server's: $MAGNET_DATA_DIR/admin-files). This process
        writes in a folder of its own inside it, and deletes now what processes that no longer
        run left there (a killed server's backups, whole copies of the database, do not
        outlive it); None: a new temporary folder."""
        self.ttl_s = ttl_s
        self.clock = clock
        self._root: Path | None = None
        self._tickets: dict[str, tuple[Path, float]] = {}
        self._lock = threading.Lock()
        self._fixed = root is not None
        if root is not None:
            root = Path(root)
            root.mkdir(mode=0o700, parents=True, exist_ok=True)
            root.chmod(0o700)
            for left in root.iterdir():
                if left.name.isdigit() and _running(int(left.name)):
                    continue  # another server's live folder
                log.info("Deleting %s, admin downloads left by an earlier run", left)
                if left.is_dir() and not left.is_symlink():
                    shutil.rmtree(left, ignore_errors=True)
                else:
                    left.unlink(missing_ok=True)
            mine = root / str(os.getpid())
            mine.mkdir(mode=0o700)
            self._root = mine

    @property
    def root(self) -> Path:
        """The private folder (mode 0700, made on first use)."""
        with self._lock:
            if self._root is None:
                self._root = Path(tempfile.mkdtemp(prefix="magnet-admin-"))
            return self._root

    def new_path(self, filename: str) -> Path:
        """A fresh private folder holding ``filename`` (a name without folders)."""
        if Path(filename).name != filename or filename in ("", ".", ".."):
            raise ValueError(f"not a plain file name: {filename!r}")
        folder = Path(tempfile.mkdtemp(dir=self.root))
        return folder / filename

    def publish(self, path: Path) -> str:
        """Register ``path`` (made by ``new_path``); returns the link's ticket."""
        path = Path(path)
        if path.parent.parent != self.root:
            raise ValueError("publish only files made by new_path")
        path.chmod(0o600)
        ticket = secrets.token_urlsafe(32)
        with self._lock:
            self._tickets[ticket] = (path, self.clock() + self.ttl_s)
        timer = threading.Timer(self.ttl_s, self.sweep)
        timer.daemon = True
        timer.start()
        self.sweep()
        return ticket

    def take(self, ticket: str) -> Path | None:
        """The file of a live ticket, which is used up; None when unknown or expired."""
        self.sweep()
        with self._lock:
            entry = self._tickets.pop(ticket, None)
        return entry[0] if entry and entry[0].exists() else None

    def sweep(self) -> None:
        """Delete the files whose links have expired."""
        now = self.clock()
        with self._lock:
            dead = [t for t, (_, until) in self._tickets.items() if until <= now]
            paths = [self._tickets.pop(t)[0] for t in dead]
        for p in paths:
            _remove(p)

    def close(self) -> None:
        """Delete every file and this process's folder (at shutdown)."""
        with self._lock:
            self._tickets.clear()
        if self._root is None or not self._root.is_dir():
            return
        shutil.rmtree(self._root, ignore_errors=True)

    async def endpoint(self, request: Request) -> Response:
        """GET /admin-files/{ticket}: the file once, as an attachment, then it is deleted."""
        path = self.take(request.path_params.get("ticket", ""))
        if path is None:
            return PlainTextResponse(
                "This download link has expired or was already used; export again.",
                status_code=404,
                headers={"cache-control": "no-store"},
            )
        return FileResponse(
            path,
            filename=path.name,
            headers={"cache-control": "no-store"},
            background=BackgroundTask(_remove, path),
        )


def _running(pid: int) -> bool:
    if pid == os.getpid():
        return False  # a folder of an earlier process that had our id
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True  # someone else's process
    return True


def _remove(path: Path) -> None:
    shutil.rmtree(path.parent, ignore_errors=True)
