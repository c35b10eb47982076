"""The project's documentation as the tests read it: README.md and every page of docs/."""

from __future__ import annotations

from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent


def doc_paths() -> list[Path]:
    """README.md first, then docs/*.md in name order."""
    return [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))]


def docs_text() -> str:
    """All of it, one page after the other."""
    return "\n\n".join(path.read_text() for path in doc_paths())
