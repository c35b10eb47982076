"""The layout DESIGN.md asks for, checked on the source: each package stays in its room, and the
imports inside the project form no circle. Every import statement counts, the ones inside
functions too, so a lazy import cannot hide a circle."""

from __future__ import annotations

import ast
import graphlib
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
PACKAGES = ("textrules", "magnet_model", "annotation_db", "app")

# What each room must not import (top-level names of packages). textrules, the text rules both
# libraries share, stands below them all: pure standard library.
FORBIDDEN = {
    "textrules": {
        "magnet_model",
        "annotation_db",
        "app",
        "torch",
        "transformers",
        "peft",
        "gradio",
        "sqlalchemy",
        "alembic",
    },
    "magnet_model": {"gradio", "sqlalchemy", "alembic", "annotation_db", "app"},
    "annotation_db": {"torch", "transformers", "peft", "gradio", "magnet_model", "app"},
    "app": {"sqlalchemy", "alembic", "peft"},
}
# The rooms each room may import, besides its own: the libraries stand on textrules, the app on
# all three (the text rules come to it through the libraries, or directly).
MAY_USE = {
    "textrules": set(),
    "magnet_model": {"textrules"},
    "annotation_db": {"textrules"},
    "app": {"textrules", "magnet_model", "annotation_db"},
}


def module_name(path: Path) -> str:
    parts = list(path.relative_to(ROOT).with_suffix("").parts)
    if parts[-1] == "__init__":
        parts.pop()
    return ".".join(parts)


def modules() -> dict[str, Path]:
    found = {}
    for pkg in PACKAGES:
        for path in sorted((ROOT / pkg).rglob("*.py")):
            found[module_name(path)] = path
    return found


def imported_names(path: Path, name: str, known: set[str] | frozenset = frozenset()) -> set[str]:
    """Absolute dotted names of everything a module imports (with `from x import y`, both x
    and x.y, so a submodule imported by name is seen). `from pkg import sub` of a known
    submodule counts as an import of sub alone: pkg's __init__ runs for every import below pkg
    (`from pkg.other import f` too), so it is no arrow of its own."""
    tree = ast.parse(path.read_text(), filename=str(path))
    package = name if path.name == "__init__.py" else name.rpartition(".")[0]
    names = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            names.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                base = package.split(".")
                base = base[: len(base) - (node.level - 1)]
                prefix = ".".join(base + ([node.module] if node.module else []))
            else:
                prefix = node.module
            subs = {f"{prefix}.{alias.name}" for alias in node.names}
            if not subs <= known:
                names.add(prefix)
            names.update(subs)
    return names


def project_graph() -> dict[str, set[str]]:
    mods = modules()
    graph = {}
    for name, path in mods.items():
        edges = set()
        for imported in imported_names(path, name, set(mods)):
            # the longest project module that the dotted name starts with
            while imported and imported not in mods:
                imported = imported.rpartition(".")[0]
            if imported and imported != name:
                edges.add(imported)
        graph[name] = edges
    return graph


def test_the_graph_sees_the_project():
    graph = project_graph()
    assert "magnet_model.inference.engine" in graph and "annotation_db.store" in graph
    assert "magnet_model.inference.engine" in graph["app.main"] | set().union(
        *(graph[m] for m in graph if m.startswith("app"))
    )


def test_no_import_circle_inside_the_project():
    try:
        graphlib.TopologicalSorter(project_graph()).prepare()
    except graphlib.CycleError as e:
        pytest.fail("import circle: " + " -> ".join(e.args[1]))


def test_the_detector_finds_a_lazy_circle(tmp_path):
    # the check above is only worth something if a circle through a function-level import fails
    graph = {"p.a": {"p.b"}, "p.b": {"p.a"}}
    with pytest.raises(graphlib.CycleError):
        graphlib.TopologicalSorter(graph).prepare()
    src = tmp_path / "m.py"
    src.write_text("def f():\n    from . import other\n    import torch\n")
    assert {"p.other", "torch"} <= imported_names(src, "p.m")
    # the package itself is an arrow only when something other than a submodule comes from it
    assert "p" in imported_names(src, "p.m") and "p" not in imported_names(src, "p.m", {"p.other"})


def room_violations(package: str, mods: dict[str, Path]) -> list[str]:
    bad = []
    for name, path in mods.items():
        if name.split(".")[0] != package:
            continue
        for imported in imported_names(path, name):
            if imported.split(".")[0] in FORBIDDEN[package]:
                bad.append(f"{name} imports {imported}")
    return sorted(bad)


@pytest.mark.parametrize("package", PACKAGES)
def test_each_package_stays_in_its_room(package):
    bad = room_violations(package, modules())
    assert not bad, "; ".join(bad)


def test_the_text_rules_import_the_standard_library_alone():
    """textrules is the floor under both libraries: beyond its own modules, only the standard
    library (so no third-party package, torch, SQL or Gradio, can reach it unlisted)."""
    mods = modules()
    outside = set()
    for name, path in mods.items():
        if name.split(".")[0] == "textrules":
            outside |= {i.split(".")[0] for i in imported_names(path, name)} - {"textrules"}
    assert outside <= set(sys.stdlib_module_names), sorted(outside - set(sys.stdlib_module_names))


def test_a_room_that_imports_what_it_must_not_fails(tmp_path):
    # the room check is only worth something if a forbidden import in textrules is caught
    src = tmp_path / "rule.py"
    src.write_text("def f():\n    from annotation_db.fills import MARKER\n    import torch\n")
    assert room_violations("textrules", {"textrules.rule": src}) == [
        "textrules.rule imports annotation_db.fills",
        "textrules.rule imports annotation_db.fills.MARKER",
        "textrules.rule imports torch",
    ]


def test_libraries_never_import_upwards():
    graph = project_graph()
    for name, edges in graph.items():
        room = name.split(".")[0]
        allowed = {room, *MAY_USE[room]}
        assert not {e for e in edges if e.split(".")[0] not in allowed}, name


def test_both_libraries_stand_on_the_text_rules():
    graph = project_graph()
    assert "textrules" in graph["annotation_db.fills"]
    assert "textrules" in graph["magnet_model.prompts"]
    assert "textrules" in graph["magnet_model.evaluation.fills"]


def test_the_layers_point_one_way():
    """DESIGN.md's layers: the engine's task modules build on the runner, never on the facade;
    annotation_db's results and io read through queries, never through the store."""
    graph = project_graph()
    for task in ("runner", "infill", "prompted", "generation", "embedding", "multi_lora"):
        assert "magnet_model.inference.engine" not in graph[f"magnet_model.inference.{task}"], task
    for low in ("schema", "validate", "queries", "results", "io", "migrate", "database"):
        assert "annotation_db.store" not in graph[f"annotation_db.{low}"], low


WINGS = ("inference", "training", "evaluation")


def wing(module: str) -> str | None:
    """The wing of a magnet_model module (None for the shared ground floor)."""
    parts = module.split(".")
    return parts[1] if len(parts) > 2 and parts[1] in WINGS else None


def test_magnet_model_is_three_wings_over_a_ground_floor():
    """Inference never imports training and training never imports inference; the ground floor
    imports no wing. Evaluation may read both (it measures trained adapters by serving them)."""
    graph = project_graph()
    bad = []
    for name, edges in graph.items():
        if not name.startswith("magnet_model."):
            continue  # magnet_model/__init__ re-exports the public API from every wing
        mine = wing(name)
        for target in edges:
            theirs = wing(target)
            if theirs is None or theirs == mine:
                continue
            if (
                mine is None
                or {mine, theirs} == {"inference", "training"}
                or theirs == "evaluation"
            ):
                bad.append(f"{name} -> {target}")
    assert not bad, "; ".join(sorted(bad))
    assert {wing(m) for m in graph if m.startswith("magnet_model.")} == {*WINGS, None}


def test_the_wing_rule_is_not_vacuous():
    # the rule above fails on the arrow the move removed (embedding used training's pooling)
    assert wing("magnet_model.inference.embedding") == "inference"
    assert wing("magnet_model.training.objectives") == "training"
    assert wing("magnet_model.pooling") is None
    assert "magnet_model.pooling" in project_graph()["magnet_model.inference.embedding"]
