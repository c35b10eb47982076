"""The package's imports point one way: no circle between its modules (lazy and type-only
imports included), and nothing from the model library, the app, torch or Gradio."""

from __future__ import annotations

import ast
from pathlib import Path

PKG = Path(__file__).resolve().parents[2] / "annotation_db"


def _imports() -> dict[str, set[str]]:
    """Module -> the annotation_db modules and the top-level packages it imports, anywhere."""
    graph: dict[str, set[str]] = {}
    for path in PKG.rglob("*.py"):
        name = ".".join(path.relative_to(PKG).with_suffix("").parts)
        deps: set[str] = set()
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(node, ast.ImportFrom):
                if node.level == 1 and path.parent == PKG and node.module:
                    deps.add(node.module.split(".")[0])
                elif node.level == 0 and node.module:
                    deps.add(node.module)
            elif isinstance(node, ast.Import):
                deps.update(a.name for a in node.names)
        graph[name] = deps
    return graph


def _circle(graph: dict[str, set[str]]) -> list[str] | None:
    state: dict[str, int] = {}  # 1: on the path, 2: done

    def visit(node: str, path: list[str]) -> list[str] | None:
        state[node] = 1
        for dep in sorted(graph.get(node, ())):
            if dep not in graph:
                continue
            if state.get(dep) == 1:
                return path[path.index(dep) :] + [dep]
            if dep not in state and (found := visit(dep, path + [dep])):
                return found
        state[node] = 2
        return None

    for start in sorted(graph):
        if start not in state and (found := visit(start, [start])):
            return found
    return None


def test_no_import_circle_inside_the_package():
    graph = _imports()
    assert {"store", "queries", "validate", "results", "io", "migrate"} <= set(graph)
    assert _circle(graph) is None
    # the layers of DESIGN.md: results and io read through queries, never through the store
    for low in ("schema", "validate", "queries", "results", "io", "migrate", "engine"):
        assert "store" not in graph[low], low


def test_the_circle_finder_finds_one():
    assert _circle({"a": {"b"}, "b": {"c"}, "c": {"a"}}) == ["a", "b", "c", "a"]


def test_no_import_of_the_model_library_the_app_torch_or_gradio():
    banned = ("magnet_model", "app", "torch", "gradio", "transformers", "peft")
    for module, deps in _imports().items():
        bad = sorted(d for d in deps if d.split(".")[0] in banned)
        assert not bad, f"annotation_db.{module} imports {bad}"
