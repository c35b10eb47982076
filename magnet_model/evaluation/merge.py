"""One report from several sittings (`evaluate --add-to DIR`).

A full run at the default sizes takes longer on a 2-core CPU than one sitting allows, so the
tasks may run in parts: the first writes DIR, each later one runs other tasks (or the same ones
again) and adds them to DIR's report. The parts must measure the same thing, so a part is
refused before it starts when its conditions differ from the report's: seed, sizes, domains,
quick mode, the decoding settings (loop guard, sentence rule, prompt formats, copy guard,
attempts per reply), the machine's dtype, device and torch, and the adapter behind every name
both parts use (its files, wherever its folder now is). The merged report keeps every command,
in order, and its targets are judged anew on all its tasks.
"""

from __future__ import annotations

import hashlib
import json
import shlex
from pathlib import Path

from ..decoding import MagnetFill
from ..errors import InputError
from ..settings import parse_adapters

# what every part must share, and how a refusal names it
SAME_RUN = {
    "seed": "--seed",
    "quick": "--quick",
    "sizes": "the size flags",
    "domains": "--domains",
    "heldout": "--heldout",
}
SAME_ENGINE = {
    "fill_no_repeat": "--fill-no-repeat",
    "fill_close_sentences": "--fill-close-sentences",
    "fill_stop": "--fill-stop",
    "fill_branches": "--fill-branches",
    "fill_sentence_tokens": "--fill-sentence-tokens",
    "prompt_formats": "--prompt-format",
    "prompt_no_copy": "--prompt-no-copy",
    "prompt_asks": "the prompted baselines' attempts per reply (prompted.ASKS)",
}
SAME_HARDWARE = {k: k for k in ("cpu", "device", "gpu", "dtype", "torch")}


def load_earlier(folder: Path) -> dict:
    """The report in `folder` that a part adds to -> its results.json (InputError when there
    is none, or it cannot be read)."""
    path = Path(folder).expanduser() / "results.json"
    if not path.is_file():
        raise InputError(
            f"--add-to {folder}: no results.json there; run the first part with "
            f"--output {folder}, then add the others to it."
        )
    try:
        report = json.loads(path.read_text())
    except (OSError, UnicodeDecodeError, json.JSONDecodeError) as e:
        raise InputError(f"--add-to {folder}: results.json cannot be read ({e}).") from None
    if not isinstance(report, dict) or not isinstance(report.get("tasks"), dict):
        raise InputError(f"--add-to {folder}: results.json is not an evaluator report.")
    return report


def _differ(earlier: dict, now: dict, keys) -> list[str]:
    return [
        f"{flag} ({earlier.get(k)!r} there, {now.get(k)!r} now)"
        for k, flag in keys.items()
        if k in earlier and earlier.get(k) != now.get(k)
    ]


def _refuse(folder, bad: list[str]) -> None:
    if bad:
        raise InputError(
            f"--add-to {folder}: this part would measure under other conditions than the "
            f"report there: {'; '.join(bad)}. Run it with the same settings, or into another "
            "folder."
        )


def check_run(earlier: dict, now: dict, folder) -> None:
    """Before the model loads: the run's own settings (seed, sizes, domains, quick). A size
    the report there predates (the speeches' passages, before that domain) measured nothing
    in it: only the sizes it records are compared."""
    sizes = earlier.get("sizes")
    if isinstance(sizes, dict) and isinstance(now.get("sizes"), dict):
        now = {**now, "sizes": {k: v for k, v in now["sizes"].items() if k in sizes}}
    _refuse(folder, _differ(earlier, now, SAME_RUN))


# the files besides the weights that decide what an adapter does (its role rows and its
# MAGNET settings, the calibrated <span_end> among them); adapter_config.json is left out: the
# base model's name in it changes when a folder is published, and its rank and targets are in
# the weights' shapes
BEHAVIOUR_FILES = ("role_rows.safetensors", "magnet_config.json")


def adapter_record(adapters: dict[str, str]) -> dict[str, dict]:
    """name -> where the adapter came from (a local folder resolved, else the Hub id as given),
    the SHA-256 of its weights file and of its other behaviour files (BEHAVIOUR_FILES; a local
    folder only), for a report to keep: a later part is refused if a name points to an adapter
    whose files differ. A folder moved or copied with the same files is the same adapter."""
    out = {}
    for name, ref in adapters.items():
        path = Path(ref).expanduser()
        entry = {"path": ref, "sha256": None}
        if path.is_dir():
            entry["path"] = str(path.resolve())
            weights = path / "adapter_model.safetensors"
            if weights.is_file():
                entry["sha256"] = hashlib.sha256(weights.read_bytes()).hexdigest()[:16]
                h = hashlib.sha256()
                for rel in BEHAVIOUR_FILES:
                    f = path / rel
                    h.update(rel.encode() + b"\0" + (f.read_bytes() if f.is_file() else b""))
                entry["files_sha256"] = h.hexdigest()[:16]
        out[name] = entry
    return out


def adapters_of(report: dict) -> dict[str, dict] | None:
    """The report's adapter record (adapter_record); a report from before that record: where
    its command's --adapters named them (no hash), None when it did not name them."""
    if "adapters" in report:
        return report["adapters"]
    words = shlex.split(report.get("command") or "")
    for i, word in enumerate(words):
        value = word.split("=", 1)[1] if word.startswith("--adapters=") else None
        if word == "--adapters" and i + 1 < len(words):
            value = words[i + 1]
        if value is not None:
            return {
                n: {"path": str(Path(r).expanduser().resolve()), "sha256": None}
                for n, r in parse_adapters(value).items()
            }
    return None


def _same_adapter(a: dict, b: dict) -> bool:
    """The same adapter: the same weights and behaviour files wherever the folder now is (a
    record from before the files' hash: the same weights), else, with no hash to compare (a
    Hub id, a report from before hashes), the same place."""
    if a.get("sha256") and b.get("sha256"):
        if a["sha256"] != b["sha256"]:
            return False
        files = a.get("files_sha256"), b.get("files_sha256")
        return None in files or files[0] == files[1]
    return a["path"] == b["path"]


def check_engine(earlier: dict, now: dict, folder) -> None:
    """Once the model is loaded: decoding settings, machine, and the adapters behind names."""
    if "fill_no_repeat" in earlier:
        # a report from before a rule was made under what came before it (no stop rule: the
        # model's own end; no branching: the greedy path; ...)
        earlier = {**earlier, **MagnetFill.from_record(earlier, MagnetFill()).record()}
    bad = _differ(earlier, now, SAME_ENGINE)
    bad += _differ(earlier.get("hardware", {}), now.get("hardware", {}), SAME_HARDWARE)
    then, new = adapters_of(earlier), adapters_of(now) or {}
    if then is None:
        bad.append("the adapters (the report there does not record where its adapters came from)")
    else:
        bad += [
            f"adapter {name!r} ({_show(then[name])} there, {_show(new[name])} now)"
            for name in sorted(set(then) & set(new))
            if not _same_adapter(then[name], new[name])
        ]
    _refuse(folder, bad)


def _show(entry: dict) -> str:
    sha = entry.get("sha256")
    return entry["path"] + (f", weights {sha}" if sha else "")


def commands(report: dict) -> list[str]:
    """Every command behind a report, in order (a report of one part has one)."""
    return list(report.get("commands") or [report.get("command", "")])


def merge(earlier: dict, now: dict) -> dict:
    """`now`'s tasks added to `earlier`'s (a task run again replaces the earlier one); systems,
    adapters and the baseline cache's counts are united, the commands kept in order. The
    targets are left to the caller, which judges them on the merged tasks."""
    out = dict(now)
    out["tasks"] = {**earlier["tasks"], **now["tasks"]}
    out["systems"] = {**earlier.get("systems", {}), **now.get("systems", {})}
    out["adapters"] = {**(adapters_of(earlier) or {}), **(adapters_of(now) or {})}
    if "units" not in now["tasks"] and "suites" in earlier:
        out["suites"] = earlier["suites"]  # the suites of the units the report keeps
    cache_then, cache_now = earlier.get("baseline_cache") or {}, now.get("baseline_cache") or {}
    out["baseline_cache"] = {
        "path": cache_now.get("path") or cache_then.get("path"),
        "reused": cache_then.get("reused", 0) + cache_now.get("reused", 0),
        "computed": cache_then.get("computed", 0) + cache_now.get("computed", 0),
    }
    out["commands"] = commands(earlier) + commands(now)
    out["command"] = " ; ".join(out["commands"])
    return out
