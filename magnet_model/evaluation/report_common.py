"""What the evaluator's report modules share: the tasks and domains, the prompted rows, the
Target a report judges, and how a table cell, a verdict and a system's column read."""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass

from .. import systems as table
from ..systems import MINILM, TITLES
from .domains import NAMES

TASKS = ("infill", "units", "sts", "retrieval", "docsim", "probe", "repetition", "knowledge")
DOMAINS = NAMES  # infill and units: held-out Wikipedia (or --heldout), Lee news, speeches
PRIMARY_DOMAIN = "wikipedia"
# The prompted baselines (systems table), run on the base model by the infill task, as
# (key in results.json, system name).
PROMPTED_ROWS = [s for s in table.SYSTEMS if s.kind == table.PROMPTED]
PROMPTED_KEYS = tuple((s.name.replace("-", "_"), s.name) for s in PROMPTED_ROWS)


def domain_key(domain: str) -> str:
    """Where a domain's numbers sit in a system's result: the first at the top (the keys the
    sweep and older reports read), any other under its name."""
    return "" if domain == PRIMARY_DOMAIN else domain


# ---------------------------------------------------------------- targets


@dataclass
class Target:
    task: str
    row: str  # the table row it belongs to
    text: str
    met: bool | None  # None: a system it needs was not measured


def _get(report: dict, task: str, system: str, *keys):
    node = report["tasks"].get(task, {}).get("systems", {}).get(system)
    for k in keys:
        if not isinstance(node, dict) or k not in node:
            return None
        node = node[k]
    return node if isinstance(node, int | float) and not math.isnan(node) else None


def _cmp(a, b, ok: Callable) -> bool | None:
    return None if a is None or b is None else bool(ok(a, b))


def _cell(result: dict | None, path: tuple, fmt: str) -> str:
    if result is None:
        return ""
    if "n/a" in result:
        return "n/a"
    node, parent = result, None
    for k in path:
        parent, node = node, node.get(k) if isinstance(node, dict) else None
    if node is None or (isinstance(node, float) and math.isnan(node)):
        return "–"
    cell = fmt.format(node)
    # a share's 95% interval, where its result keeps one (fills: stats.share)
    lo_hi = (parent.get("intervals") or {}).get(path[-1]) if isinstance(parent, dict) else None
    if lo_hi and not any(map(math.isnan, lo_hi)):
        cell += f" ({lo_hi[0]:.0%}–{lo_hi[1]:.0%})"
    return cell


def _verdict(met: bool | None) -> str:
    return {True: "yes", False: "no", None: "n/a"}[met]


def _column(system: str) -> str:
    """A system as the tables name it: as given to --systems (magnet@mean reads as typed), the
    sentence encoder by its model's name."""
    return TITLES[MINILM] if system == MINILM else system
