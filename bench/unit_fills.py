"""What the benchmarks of MAGNET's unit-suite fills share (bench_fill_guard.py,
bench_length_hints.py): the engine with one adapter, the held-out passages per domain, and a
table cell of a share with its interval, paired with a reference setting's."""

from __future__ import annotations

from common import ROOT  # noqa: F401 (puts the project on sys.path)

from magnet_model.evaluation.stats import paired_shares, share


def magnet_engine(adapter: str, threads: int | None):
    """The default base model with `adapter` loaded as "magnet" (torch threads if given)."""
    import torch

    from magnet_model.inference.engine import Engine
    from magnet_model.settings import ModelSpec

    if threads:
        torch.set_num_threads(threads)
    return Engine.from_spec(ModelSpec(adapters={"magnet": adapter}))


def heldout_sources() -> dict:
    """Domain -> a function returning its held-out passages (the evaluator's)."""
    from magnet_model.data import lee_background_docs, wikipedia_paragraphs

    return {"wikipedia": lambda: wikipedia_paragraphs("heldout"), "news": lee_background_docs}


def share_cell(flags: list[bool], against: list[bool] | None) -> tuple[str, dict | None]:
    """ "40% (26%–55%)", and with a reference's flags on the same cases the paired difference
    ", +8 pts (p=0.51)" -> (cell, the paired comparison or None)."""
    s = share(flags)
    cell = f"{s['share']:.0%} ({s['lo']:.0%}–{s['hi']:.0%})"
    if against is None:
        return cell, None
    d = paired_shares(flags, against)
    return cell + f", {100 * d['diff']:+.0f} pts (p={d['p']:.2g})", d
