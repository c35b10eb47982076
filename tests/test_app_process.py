"""`python -m app` prepares its process before torch loads: OpenMP threads sleep when idle."""

import os
import subprocess
import sys
import textwrap
from pathlib import Path

from app.settings import SERVER_ENV_DEFAULTS, server_process_env

ROOT = Path(__file__).resolve().parent.parent


def test_server_env_sets_passive_wait_and_keeps_a_user_choice():
    env: dict[str, str] = {}
    server_process_env(env)
    assert env == {"OMP_WAIT_POLICY": "PASSIVE"} == SERVER_ENV_DEFAULTS
    env = {"OMP_WAIT_POLICY": "ACTIVE"}
    server_process_env(env)
    assert env["OMP_WAIT_POLICY"] == "ACTIVE"
    env = {"OMP_WAIT_POLICY": ""}  # set but empty: OpenMP's own default, on purpose
    server_process_env(env)
    assert env["OMP_WAIT_POLICY"] == ""


def test_python_m_app_sets_the_wait_policy_before_importing_torch():
    """What OpenMP reads is the environment at the moment torch is first imported."""
    probe = textwrap.dedent(
        """
        import importlib.abc, os, runpy, sys

        seen = []

        class Spy(importlib.abc.MetaPathFinder):
            def find_spec(self, name, path=None, target=None):
                if name == "torch" and not seen:
                    seen.append(os.environ.get("OMP_WAIT_POLICY"))
                return None

        sys.meta_path.insert(0, Spy())
        sys.argv = ["app", "--help"]
        try:
            runpy.run_module("app", run_name="__main__", alter_sys=True)
        except SystemExit:
            pass
        print("OMP_WAIT_POLICY at torch import:", seen)
        """
    )
    env = {k: v for k, v in os.environ.items() if k != "OMP_WAIT_POLICY"}
    out = subprocess.run(
        [sys.executable, "-c", probe],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert out.returncode == 0, out.stderr[-2000:]
    assert "OMP_WAIT_POLICY at torch import: ['PASSIVE']" in out.stdout
