import sys

from app.settings import server_process_env

server_process_env()  # before torch (imported by app.main) reads its OpenMP settings

from app.main import main  # noqa: E402

sys.exit(main())
