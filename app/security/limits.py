"""Rate limits: events per key in a sliding window (blind votes, demo calls), and the quota on
anonymous uploads (per address, in total, and a floor of free disk)."""

from __future__ import annotations

import logging
import math
import shutil
import threading
import time
from collections import OrderedDict, deque
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from pathlib import Path

log = logging.getLogger("app")


@dataclass
class RateLimiter:
    """At most ``limit`` events per ``window_s`` seconds for each key (sliding window)."""

    limit: int
    window_s: float
    clock: Callable[[], float] = time.monotonic
    _events: OrderedDict[str, deque[float]] = field(default_factory=OrderedDict)
    _lock: threading.Lock = field(default_factory=threading.Lock)

    def wait_s(self, keys: Iterable[str]) -> float:
        """Seconds until every key may have one more event (0: now)."""
        now = self.clock()
        with self._lock:
            waits = [0.0]
            for k in keys:
                q = self._events.get(k)
                if q is None:
                    continue
                while q and now - q[0] >= self.window_s:
                    q.popleft()
                if len(q) >= self.limit:
                    waits.append(q[0] + self.window_s - now)
            return max(waits)

    def record(self, keys: Iterable[str]) -> None:
        now = self.clock()
        with self._lock:
            for k in keys:
                q = self._events.pop(k, None) or deque()
                q.append(now)
                self._events[k] = q
            while len(self._events) > 100_000:
                self._events.popitem(last=False)


@dataclass
class UploadQuota:
    """Anonymous uploads (Search corpora, items files) may not fill the disk: at most
    ``per_client_bytes`` per address and ``total_bytes`` from everyone in ``window_s``, and
    none while the upload folder's disk has less than ``min_free_bytes`` free (that disk is
    often the rating database's too)."""

    per_client_bytes: int
    total_bytes: int
    folder: Path
    min_free_bytes: int
    window_s: float = 3600.0
    clock: Callable[[], float] = time.monotonic
    free_bytes: Callable[[Path], int] | None = None  # injectable for tests
    _log: deque[tuple[float, str, int]] = field(default_factory=deque)
    _lock: threading.Lock = field(default_factory=threading.Lock)

    def _free(self) -> int:
        if self.free_bytes is not None:
            return self.free_bytes(self.folder)
        where = Path(self.folder)
        while not where.exists() and where != where.parent:
            where = where.parent
        return shutil.disk_usage(where).free

    def refuse(self, client: str, size: int) -> tuple[int, str] | None:
        """(HTTP status, one sentence) when this upload may not go in; else None, and it is
        counted."""
        if self._free() - size < self.min_free_bytes:
            log.warning("Upload of %d bytes from %s refused: the disk is nearly full", size, client)
            return 507, "Uploads are paused: the server's disk is nearly full. Try again later."
        now = self.clock()
        with self._lock:
            while self._log and now - self._log[0][0] >= self.window_s:
                self._log.popleft()
            mine = [(t, n) for t, c, n in self._log if c == client]
            total = sum(n for _, _, n in self._log)
            for used, cap, events, whose in (
                (sum(n for _, n in mine), self.per_client_bytes, mine, "from your address"),
                (total, self.total_bytes, [(t, n) for t, _, n in self._log], "to this server"),
            ):
                if used + size > cap:
                    wait = events[0][0] + self.window_s - now if events else self.window_s
                    minutes = max(1, math.ceil(wait / 60))
                    log.warning("Upload of %d bytes from %s refused: quota", size, client)
                    return 429, (
                        f"Too many uploads {whose}: at most {cap / 2**20:.0f} MB an hour; "
                        f"try again in {minutes} min."
                    )
            self._log.append((now, client, size))
        return None
