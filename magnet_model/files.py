"""Reading the text files users give: JSON Lines, one record a line.

One parser for the trainer's --corpus files and the search tab's uploads; each caller checks
the fields it needs and words a bad line as its own error (a flag's, an upload's).
"""

from __future__ import annotations

import json
from collections.abc import Iterator


class BadLine(ValueError):
    """A line of a JSON Lines text that is not JSON: its number (from 1) and json's reason."""

    def __init__(self, line: int, reason: str):
        super().__init__(f"line {line} is not valid JSON ({reason})")
        self.line, self.reason = line, reason


def jsonl_records(text: str) -> Iterator[tuple[int, object]]:
    """(line number from 1, parsed value) of every non-blank line; BadLine at one not JSON."""
    for n, line in enumerate(text.splitlines(), start=1):
        if not line.strip():
            continue
        try:
            yield n, json.loads(line)
        except json.JSONDecodeError as e:
            raise BadLine(n, e.msg) from None
        except RecursionError:  # nested thousands deep: not a record anyone meant
            raise BadLine(n, "nested too deeply") from None
