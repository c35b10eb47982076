"""`python -m app` prepares its process before torch loads: OpenMP threads sleep when idle; a
port that is taken ends the start with one sentence, not a traceback."""

import os
import socket
import subprocess
import sys
import textwrap
from pathlib import Path

from app.settings import SERVER_ENV_DEFAULTS, server_process_env

ROOT = Path(__file__).resolve().parent.parent


def _python(args: list[str], env: dict) -> subprocess.CompletedProcess:
    """This venv's python run from the repository with args, its output captured."""
    return subprocess.run(
        [sys.executable, *args], cwd=ROOT, env=env, capture_output=True, text=True, timeout=300
    )


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
    out = _python(["-c", probe], env)
    assert out.returncode == 0, out.stderr[-2000:]
    assert "OMP_WAIT_POLICY at torch import: ['PASSIVE']" in out.stdout


def _taken(port: int) -> str:
    return f"error: Port {port} on 127.0.0.1 is already in use; choose another with --port N"


def test_a_taken_port_stops_python_m_app_with_one_sentence(tmp_path):
    """Checked before the model loads: nothing is loaded, the exit status is 2."""
    env = {k: v for k, v in os.environ.items() if not k.startswith(("MAGNET_", "GRADIO_"))}
    env.update(MAGNET_DATA_DIR=str(tmp_path / "data"), GRADIO_ANALYTICS_ENABLED="False")
    with socket.create_server(("127.0.0.1", 0)) as held:
        port = held.getsockname()[1]
        out = _python(["-m", "app", "--host", "127.0.0.1", "--port", str(port)], env)
    assert out.returncode == 2, out.stderr[-2000:]
    assert "Traceback" not in out.stderr + out.stdout
    last = out.stderr.strip().splitlines()[-1]
    assert last.startswith(_taken(port)) and "GRADIO_SERVER_PORT" in last, out.stderr[-2000:]


def test_a_port_taken_while_the_model_loads_is_the_same_sentence(tmp_path, monkeypatch, capsys):
    """Gradio's own bind fails (it raises OSError "Cannot find empty port"): main says why."""
    from tiny_models import save_tiny_model

    import app.main as main_mod

    paths = save_tiny_model(tmp_path / "model")
    real, checks = main_mod.port_taken, []

    def free_at_first(host, port):  # the port is taken after the start-up check
        checks.append(port)
        return None if len(checks) == 1 else real(host, port)

    monkeypatch.setattr(main_mod, "port_taken", free_at_first)
    monkeypatch.setenv("MAGNET_DATA_DIR", str(tmp_path / "data"))
    monkeypatch.setenv("GRADIO_ANALYTICS_ENABLED", "False")
    monkeypatch.setenv("FORWARDED_ALLOW_IPS", "")  # main sets it; monkeypatch restores it
    with socket.create_server(("127.0.0.1", 0)) as held:
        port = held.getsockname()[1]
        argv = ["--base-model", str(paths["base"]), "--adapters", "none", "--device", "cpu"]
        argv += ["--host", "127.0.0.1", "--port", str(port), "--db-path", str(tmp_path / "db")]
        argv += ["--cache-dir", str(tmp_path / "cache")]
        assert main_mod.main(argv) == 2
    assert len(checks) == 2
    assert capsys.readouterr().err.strip().splitlines()[-1].startswith(_taken(port))
