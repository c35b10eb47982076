"""How annotations_before_alembic.sqlite3 was made: run at commit bb146d5 (before Alembic)
with ``python tests/annotation_db/data/make_before_alembic.py OUT``. A study with 3 items x 2
systems, 3 raters (2 answered 2 items each), an arena vote and a draft."""

import sqlite3
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[3]))

from annotation_db import AnnotationStore, ItemIn, OutputIn, start_draft  # noqa: E402

out = Path(sys.argv[1])
out.unlink(missing_ok=True)
store = AnnotationStore(path=out)
items = [
    ItemIn(f"item-{i}", f"Text {i} with a ___ in it.", ["blank"], source=f"doc-{i}")
    for i in range(3)
]
outputs = [
    OutputIn(f"item-{i}", s, f"Text {i} with a {s}-fill in it.", fills=[f"{s}-fill"],
             model="tiny", decoding={"temperature": 0.7}, seed=7)
    for i in range(3)
    for s in ("magnet", "base")
]  # fmt: skip
store.create_study(
    "pilot", items, outputs, questions=["appropriate", "likert:fluency", "preference"],
    raters_per_item=2,
)  # fmt: skip
for name in ("Ada", "Bob"):
    tok = store.invite("pilot", name).token
    for _ in range(2):
        it = store.next_item(tok)
        answers = {o.label: {"appropriate": o.label == "A", "fluency": 4} for o in it.outputs}
        store.submit(tok, it.assignment_id, answers, preference="A")
store.invite("pilot", "Cy")
store.record_blind_vote(
    "A ___ text.", [OutputIn("x", "magnet", "A good text."), OutputIn("x", "base", "A bad text.")],
    "A", vote_id="v1",
)  # fmt: skip
start_draft(store, "later", items[:1], ["magnet"], {"raters_per_item": 1})
store.close()
con = sqlite3.connect(out)  # one self-contained file: no -wal beside it
con.execute("PRAGMA wal_checkpoint(TRUNCATE)")
con.execute("PRAGMA journal_mode=DELETE")
con.execute("VACUUM")
con.close()
