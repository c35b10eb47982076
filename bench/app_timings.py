"""Wall time of the app's main requests, through the same handlers Gradio calls.

    .venv/bin/python bench/app_timings.py      # writes bench/results/app_timings.json

One infill comparison (MAGNET + zero-shot + five-shot), one continuation comparison
(three streams of 48 tokens), and a search over the default corpus twice (the first time
embeds the corpus with every encoder; the second reads the cache). Uses the model spec of
the environment (the shipped adapters by default), a temporary database and cache. Plain
seconds for now: the performance issue turns these into ratios against baselines.
"""

from __future__ import annotations

import json
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from annotation_db import AnnotationStore  # noqa: E402
from app.handlers import MagnetApp  # noqa: E402
from app.settings import AppSettings  # noqa: E402
from magnet_model.engine import Engine  # noqa: E402
from magnet_model.hardware import describe  # noqa: E402
from magnet_model.settings import ModelSpec  # noqa: E402

INFILL = "The Eiffel Tower is a wrought-iron [blank] in Paris, France."
PROMPT = "The history of the city begins"


def main() -> int:
    tmp = Path(tempfile.mkdtemp(prefix="magnet-bench-"))
    engine = Engine.from_spec(ModelSpec.from_env())
    store = AnnotationStore(path=tmp / "db.sqlite3")
    app = MagnetApp(engine, store, AppSettings.from_env(), tmp / "cache", {})
    rows = {}
    t = time.perf_counter()
    app.infill(INFILL, max_span=16)
    rows["infill comparison, max span 16"] = time.perf_counter() - t
    t = time.perf_counter()
    for _ in app.continue_(PROMPT, max_new_tokens=48):
        pass
    rows["continuation comparison, 3 x 48 tokens"] = time.perf_counter() - t
    for n in ("first", "second"):
        t = time.perf_counter()
        app.search("volcanic eruption", None, 5, progress=lambda *a, **k: None)
        rows[f"search over the default corpus, {n} time"] = time.perf_counter() - t
    for name, seconds in rows.items():
        print(f"{name:45s} {seconds:8.2f} s")
    out = Path(__file__).parent / "results" / "app_timings.json"
    out.parent.mkdir(exist_ok=True)
    hw = describe(engine.device, engine.dtype)
    report = {"seconds": rows, "adapters": engine.adapter_names, "hardware": hw}
    out.write_text(json.dumps(report, indent=2) + "\n")
    print(f"wrote {out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
