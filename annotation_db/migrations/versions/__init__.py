"""Revisions, oldest first: 0001_baseline is the schema before migrations existed."""
