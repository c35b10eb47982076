"""Entry point of a Gradio-SDK Space (ZeroGPU): `app_file: space.py` in deploy/zerogpu/README.md.

Not named app.py, which would shadow the app/ package. `spaces` is imported first: on ZeroGPU it
patches torch, which must happen before anything touches CUDA (app.main imports torch). Then the
Space's defaults (app.settings.space_env) and the same start-up as `python -m app`.
"""

import contextlib
import sys
from pathlib import Path

with contextlib.suppress(ImportError):  # not on a Space: the app runs as everywhere else
    import spaces  # noqa: F401 - before torch, see above

from app.settings import server_process_env, space_env  # noqa: E402 - after spaces

space_env(Path(__file__).resolve().parent)
server_process_env()  # before torch reads its OpenMP settings

from app.main import main  # noqa: E402 - after the environment is set

if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
