"""Golden outputs of the engine on the tiny seeded Llama (tests/tiny_models.py): exact token ids
and text of infill / prompted infill / continuation / side-by-side lanes, and checksums of the
embedding vectors, recorded from the code as it was before the engine was split into modules.

A refactor of the inference code must keep them token for token. Regenerate (only when a change
of behaviour is intended, and say so in the commit): `python tests/test_golden.py --write`.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

import numpy as np
import pytest

sys.path.insert(0, str(Path(__file__).parent))
from tiny_models import tiny_engine  # noqa: E402

GOLDEN = Path(__file__).parent / "golden" / "engine_tiny.json"
ONE = "the cat sat on the [blank] and the dog ran to the tree ."
MANY = "the cat [blank] on the [blank] . the dog [blank] in the river ."
PROMPT = "the king of france was in"
SAMPLED = dict(do_sample=True, temperature=1.3, top_p=0.9, seed=7)


def _infill(r) -> dict:
    return {
        "filled": r.filled,
        "system": r.system,
        "adapter": r.adapter,
        "context_tokens": r.context_tokens,
        "seed": r.seed,
        "spans": [[s.token_ids, s.text, s.start, s.end, s.end_reason, s.written] for s in r.spans],
    }


def _continuation(c) -> dict:
    return {"text": c.text, "ids": c.token_ids, "stop": c.stop_reason, "seed": c.seed}


def _lanes(events) -> list:
    """Every step's (text so far, stop reason) per lane of compare_continue."""
    return [[list(pair) for pair in step] for step in events]


def _vectors(x: np.ndarray) -> dict:
    """Checksums that move if any value moves or two values swap."""
    x = np.asarray(x, dtype=np.float64)
    flat = x.reshape(-1)
    weights = np.arange(1, flat.size + 1, dtype=np.float64) / flat.size
    return {
        "shape": list(x.shape),
        "sum": float(flat.sum()),
        "abs_sum": float(np.abs(flat).sum()),
        "weighted": float((flat * weights).sum()),
        "head": [float(v) for v in flat[:8]],
    }


def _result(r) -> dict:
    if isinstance(r, Exception):
        return {"error": type(r).__name__}
    return _infill(r)


def outputs(engine) -> dict:
    """Everything recorded, as plain JSON values. MAGNET fills run without their loop guard
    (the raw decoder the records were made from; the guard has tests of its own) and from
    their greedy first token (the records came before branching), but for the `_branches`
    records."""
    engine.config.fill = engine.magnet_fill({"no_repeat": 0, "branches": 1})
    sents = ["the cat sat on the mat .", "a small bird flew over the river", "one two three"]
    out: dict = {}
    out["infill_one"] = _infill(engine.infill(ONE, max_span_tokens=6))
    out["infill_many"] = _infill(engine.infill(MANY, max_span_tokens=[6, 3, 9]))
    out["infill_fixed"] = _infill(engine.infill(MANY, fixed_lengths=[2, None, 4]))
    out["infill_base"] = _infill(engine.infill(MANY, adapter=None, max_span_tokens=5))
    out["infill_sampled"] = _infill(engine.infill(MANY, max_span_tokens=5, **SAMPLED))
    out["infill_reference"] = _infill(engine.infill_reference(MANY, max_span_tokens=4))
    for name, kw in (("infill_branches", {}), ("infill_branches_sampled", SAMPLED)):
        out[name] = _infill(
            engine.infill(MANY, max_span_tokens=[6, 3, 9], fill={"branches": 4}, **kw)
        )
    for shots in (0, 5):
        r = engine.infill_prompted(MANY, shots=shots, max_span_tokens=4)
        out[f"prompted_{shots}"] = _infill(r)
    r = engine.infill_prompted(ONE, shots=5, max_span_tokens=4, **SAMPLED)
    out["prompted_sampled"] = _infill(r)
    out["continue_text"] = list(engine.continue_text(PROMPT, "magnet", max_new_tokens=10))
    out["generate_base"] = _continuation(engine.generate(PROMPT, None, max_new_tokens=10))
    out["generate_sampled"] = _continuation(
        engine.generate(PROMPT, "llm2vec", max_new_tokens=10, **SAMPLED)
    )
    systems = ["magnet", "llm2vec", "base", "zero-shot", "five-shot"]
    out["compare_infill"] = [
        _result(r) for r in engine.compare_infill(MANY, systems, max_span_tokens=4)
    ]
    out["compare_infill_sampled"] = [
        _result(r) for r in engine.compare_infill(ONE, systems[:3], max_span_tokens=4, **SAMPLED)
    ]
    adapters = ["magnet", "llm2vec", None]
    out["compare_continue"] = _lanes(engine.compare_continue(PROMPT, adapters, max_new_tokens=6))
    out["compare_continue_sampled"] = _lanes(
        engine.compare_continue(PROMPT, adapters, max_new_tokens=6, **SAMPLED)
    )
    for adapter in ("magnet", "llm2vec", None):
        out[f"embed_sentences_{adapter}"] = _vectors(
            engine.embed_sentences(sents, adapter=adapter, batch_size=2)
        )
        t = engine.embed_tokens("the cat sat on the mat", adapter)
        out[f"embed_tokens_{adapter}"] = {
            "tokens": t.tokens,
            "ids": t.token_ids,
            "offsets": [list(o) for o in t.offsets],
            "vectors": _vectors(t.vectors),
        }
    out["embed_sentences_mean_raw"] = _vectors(
        engine.embed_sentences(sents, adapter="magnet", pooling="mean", normalize_embeddings=False)
    )
    return out


@pytest.fixture(scope="module")
def recorded() -> dict:
    return json.loads(GOLDEN.read_text())


@pytest.fixture(scope="module")
def now() -> dict:
    return outputs(tiny_engine())


def _close(got, want, where: str) -> None:
    """Equal, except floats (vector checksums) within a tight tolerance."""
    if isinstance(want, float):
        assert got == pytest.approx(want, rel=1e-4, abs=1e-5), where
    elif isinstance(want, dict):
        assert sorted(got) == sorted(want), where
        for k in want:
            _close(got[k], want[k], f"{where}.{k}")
    elif isinstance(want, list):
        assert len(got) == len(want), where
        for i, (g, w) in enumerate(zip(got, want, strict=True)):
            _close(g, w, f"{where}[{i}]")
    else:
        assert got == want, where


def test_the_golden_file_covers_every_output(recorded, now):
    assert sorted(now) == sorted(recorded)


@pytest.mark.parametrize("key", sorted(json.loads(GOLDEN.read_text())) if GOLDEN.exists() else [])
def test_output_matches_the_golden_record(recorded, now, key):
    _close(now[key], recorded[key], key)


def test_the_tiny_engine_is_reproducible():
    """Two engines built from the same seeds give the same weights: the golden file is
    reproducible on any machine."""
    a, b = tiny_engine(), tiny_engine()
    for (na, pa), (nb, pb) in zip(
        a.model.named_parameters(), b.model.named_parameters(), strict=True
    ):
        assert na == nb and bool((pa == pb).all()), na


if __name__ == "__main__":
    if "--write" not in sys.argv:
        sys.exit("usage: python tests/test_golden.py --write")
    sys.path.insert(0, str(Path(__file__).parent.parent))  # magnet_model, as conftest does
    GOLDEN.parent.mkdir(exist_ok=True)
    GOLDEN.write_text(json.dumps(outputs(tiny_engine()), indent=1) + "\n")
    print(f"wrote {GOLDEN}")
