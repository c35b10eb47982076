"""pyproject.toml: the scripts point at real CLIs, the dependencies are requirements.txt."""

from __future__ import annotations

import importlib
import tomllib
from pathlib import Path

import pytest
from packaging.requirements import Requirement

ROOT = Path(__file__).resolve().parent.parent
PYPROJECT = tomllib.loads((ROOT / "pyproject.toml").read_text())


def _lines(name: str) -> list[str]:
    """What setuptools' `file =` directive reads: every line that is not blank or a comment."""
    text = (ROOT / name).read_text()
    return [ln for ln in text.splitlines() if ln.strip() and not ln.strip().startswith("#")]


@pytest.mark.parametrize("name", ["requirements.txt", "requirements-dev.txt"])
def test_dependency_files_are_plain_pins(name):
    for line in _lines(name):
        req = Requirement(line)  # an inline comment would not parse
        assert str(req.specifier).startswith("=="), line


def test_runtime_dependencies_leave_out_the_test_tools():
    runtime = {Requirement(ln).name for ln in _lines("requirements.txt")}
    dev = {Requirement(ln).name for ln in _lines("requirements-dev.txt")}
    assert {"torch", "gradio", "sqlalchemy", "pydantic-settings"} <= runtime
    assert {"pytest", "ruff"} <= dev and not runtime & dev
    dynamic = PYPROJECT["tool"]["setuptools"]["dynamic"]
    assert dynamic["dependencies"] == {"file": ["requirements.txt"]}


@pytest.mark.parametrize("script", sorted(PYPROJECT["project"]["scripts"]))
def test_scripts_name_a_cli_main(script):
    target = PYPROJECT["project"]["scripts"][script]
    module, _, func = target.partition(":")
    assert callable(getattr(importlib.import_module(module), func)), target
    assert module.split(".")[0] in ("magnet_model", "annotation_db", "app")


def test_every_top_level_package_is_installed():
    # a package left out of packages.find imports from the checkout and nowhere else (textrules
    # was added under magnet_model and annotation_db; the editable install maps each package)
    packages = {p.parent.name for p in ROOT.glob("*/__init__.py")}
    include = PYPROJECT["tool"]["setuptools"]["packages"]["find"]["include"]
    assert {"textrules", "magnet_model", "annotation_db", "app"} <= packages
    assert sorted(include) == sorted([*packages, *(f"{p}.*" for p in packages)])


def test_every_data_file_a_package_reads_is_installed_with_it():
    import fnmatch

    data = PYPROJECT["tool"]["setuptools"]["package-data"]
    for package in ("textrules", "magnet_model", "annotation_db", "app"):
        files = [
            p.relative_to(ROOT / package).as_posix()
            for p in (ROOT / package).rglob("*")
            if p.is_file()
            and p.suffix not in (".py", ".pyc", ".md")
            and "__pycache__" not in p.parts
        ]
        for f in files:
            assert any(fnmatch.fnmatch(f, pat) for pat in data.get(package, [])), (package, f)
