"""The first Search of a fresh start (issue 24, part 1): the default corpus prepared or not.

    python bench/bench_first_search.py       # writes bench/results/first_search.json

Two fresh `python -m app` starts on the real embedded model and the shipped adapters, each with
its own MAGNET_CACHE_DIR (the de-quantized model linked in, so only the search vectors differ):

- prepared: `python -m magnet_model.inference.search prepare` ran first (what `make prepare`
  and the Docker build do), so the default corpus's vectors of every search system are cached;
- the baseline, not prepared: the start finds no vectors; its background warm-up embeds the
  corpus while the page is served, and a search that comes meanwhile waits for it (before
  issue 24 the first search embedded it all itself).

Each clock runs from the page's first HTTP 200 to the answer of the first `/search` (the
default corpus, top 5) through `gradio_client`; the prepare step's own time is reported too.
"""

from __future__ import annotations

import re
import subprocess
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from app_process import client, run_app, warm_cache  # noqa: E402
from common import ROOT, Row, app_dtype, write_report  # noqa: E402

QUERY = "Which river flows through the capital?"


def first_search(tmp: Path, cache: Path) -> tuple[float, float | None]:
    """Seconds from the page's first HTTP 200 to the first search's answer, and the warm-up's
    own time as the app logged it ("Default search corpus after N s")."""
    with run_app(tmp, cache, tmp / f"db-{time.monotonic_ns()}.sqlite3") as app:
        try:
            app.wait_http()
            c = client(app.url)
            t0 = time.perf_counter()
            c.predict(QUERY, None, 5, api_name="/search")
            took = time.perf_counter() - t0
            warm = re.search(r"Default search corpus after ([\d.]+) s", app.tail(200_000))
            return took, float(warm.group(1)) if warm else None
        except BaseException:
            print(app.tail(), file=sys.stderr)
            raise


def main() -> int:
    with tempfile.TemporaryDirectory(prefix="magnet-first-search-") as tmp_name:
        tmp = Path(tmp_name)
        prepared = warm_cache(tmp / "prepared")
        t0 = time.perf_counter()
        subprocess.run(
            [sys.executable, "-m", "magnet_model.inference.search", "prepare", "--no-progress"]
            + ["--cache-dir", str(prepared)],
            cwd=ROOT,
            check=True,
        )
        prepare_s = time.perf_counter() - t0
        fast, warm_fast = first_search(tmp, prepared)
        print(f"prepared: first search {fast:.1f} s (prepare took {prepare_s:.0f} s)", flush=True)
        slow, _ = first_search(tmp, warm_cache(tmp / "bare"))
        print(f"not prepared: first search {slow:.1f} s", flush=True)
    rows = [
        Row(
            "first search, default corpus prepared (page's HTTP 200 to the answer)",
            fast,
            "s",
            target="<= 5",
        ),
        Row("first search, prepared vs not", fast, "s", slow, "the same start, not prepared"),
        Row("python -m magnet_model.inference.search prepare", prepare_s, "s"),
    ]
    if warm_fast is not None:
        rows.append(Row("start-up warm-up, prepared vectors (in the background)", warm_fast, "s"))
    write_report("first_search", rows, dtype=app_dtype())
    return 0


if __name__ == "__main__":
    sys.exit(main())
