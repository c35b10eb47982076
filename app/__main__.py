"""`python -m app` and the `magnet-app` script: serve the demo."""

import sys

from app.settings import server_process_env


def serve() -> int:
    server_process_env()  # before torch (imported by app.main) reads its OpenMP settings
    from app.main import main  # imported here, not above, so that torch loads after that

    return main()


if __name__ == "__main__":
    sys.exit(serve())
