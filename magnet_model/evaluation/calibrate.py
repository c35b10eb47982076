"""Fit the calibration bias of an adapter's <span_end> logit on its own training views.

    python -m magnet_model.evaluation.calibrate --adapter adapters/magnet [--texts 128] [--write]

The views are rebuilt exactly as the trainer built them (its corpus, sampler, seed and view
settings, read from the adapter's magnet_config.json), so nothing held out for evaluation is
seen. The adapter runs frozen; at every MSG target position the logits are read as decoding
reads them (span_end.SpanEnd: the end token takes its whole head-row tie) and one number b is
fitted: the bias on the end logit that minimises the mean NLL of all span targets (ends and
span tokens alike; scipy's bounded scalar minimiser). With --write, b and how it was fitted are
stored in the adapter's magnet_config.json ("calibration"), which decoding (infill) and scoring
(scoring.hybrid_span_nll, the evaluator) then apply identically.

This is a calibration, not training: it moves where the model's end probability sits, not
which positions it prefers (the AUC of p(end) is unchanged by a constant bias).
"""

from __future__ import annotations

import argparse
import random
import sys
from pathlib import Path

import numpy as np
import torch

from ..adapter_meta import META_FILE, load_meta, save_meta
from ..errors import ConfigError, MagnetError
from ..layout import IGNORE
from ..masks import additive, allowed_mask
from ..settings import ModelSpec, add_model_args
from ..span_end import SpanEnd
from ..tokens import word_edges, word_start_table

ADAPTER = "calibrated"
COMMAND = "python -m magnet_model.evaluation.calibrate"


def training_views(engine, adapter: str, n_texts: int, record: dict) -> list:
    """(MaskedExample, draw) for n_texts texts of the adapter's training run, drawn by its
    sampler at its last steps, with the view RNG the trainer used for those draws."""
    from ..training.train import Sampler, load_corpus, recorded_config
    from ..training.views import masked_example, replacement_vocab

    cfg = recorded_config(record)
    tok = engine.tokenizer
    examples = load_corpus(cfg, tok)
    if record.get("n_texts") and len(examples) != record["n_texts"]:
        raise ConfigError(
            f"The corpus rebuilt here has {len(examples)} texts, the adapter's record says "
            f"{record['n_texts']}: it cannot be the one the adapter was trained on."
        )
    roles, bos = engine.runner.roles(adapter), engine.runner.bos(adapter)
    sampler = Sampler(len(examples), cfg.seed)
    vocab = replacement_vocab(len(tok), roles, set(tok.all_special_ids))
    view = cfg.view
    starts = word_start_table(tok)
    steps = int(record.get("steps_done") or cfg.total_steps)
    out = []
    draw = steps * cfg.grad_accum - 1
    while len(out) < n_texts and draw >= 0:
        rng = random.Random(f"{cfg.seed}-views-{draw}")
        for i in sampler.indices(draw, cfg.batch_size):
            ex = masked_example(
                list(examples[i].ids),
                roles,
                vocab,
                view,
                rng,
                bos=bos,
                edges=word_edges(examples[i].ids, starts),
                units=examples[i].units,
            )
            if any(y != IGNORE for y in ex.msg_labels):
                out.append((ex, draw))
        draw -= 1
    return out[:n_texts]


def span_logits(engine, adapter: str, views: list, span_end: SpanEnd) -> tuple:
    """(end logit, log-sum-exp of every other token, the target's logit, is the target the
    end) at every MSG target of the views, logits read through span_end (no bias)."""
    runner = engine.runner
    end = span_end.token
    unbiased = SpanEnd(end, span_end.tie)
    z_end, z_rest, z_target, is_end = [], [], [], []
    for ex, _ in views:
        ids = runner.tensor([ex.input_ids])
        seg = runner.tensor([ex.segments])
        mask = additive(allowed_mask("hybrid", torch.ones_like(ids), seg), runner.dtype)
        labels = torch.tensor(ex.msg_labels)
        sel = (labels != IGNORE).nonzero().flatten()
        with runner.using(adapter):
            h = runner.hidden_states(ids, mask, runner.tensor([ex.position_ids]))[0]
            logits = unbiased.apply(runner.logits(h[sel.to(h.device)]).float().cpu())
        y = labels[sel]
        rest = logits.clone()
        rest[:, end] = float("-inf")
        z_end.append(logits[:, end])
        z_rest.append(torch.logsumexp(rest, dim=-1))
        z_target.append(logits.gather(1, y[:, None])[:, 0])
        is_end.append(y == end)
    cat = [torch.cat(x).double().numpy() for x in (z_end, z_rest, z_target)]
    return (*cat, torch.cat(is_end).numpy())


def nlls(b: float, z_end, z_rest, z_target, is_end) -> tuple[float, float, float]:
    """(mean NLL of all span targets, of the end targets, of the other targets) with bias b."""
    lse = np.logaddexp(z_end + b, z_rest)
    nll = np.where(is_end, lse - (z_end + b), lse - z_target)
    return float(nll.mean()), float(nll[is_end].mean()), float(nll[~is_end].mean())


def fit(engine, adapter: str, n_texts: int, record: dict) -> dict:
    """The fitted bias and the numbers that show what it does, as stored in the config."""
    from scipy.optimize import minimize_scalar

    span_end = engine.runner.span_end(adapter)
    views = training_views(engine, adapter, n_texts, record)
    if not views:
        raise MagnetError("No training view with a span could be rebuilt for this adapter.")
    z = span_logits(engine, adapter, views, span_end)
    best = minimize_scalar(lambda b: nlls(b, *z)[0], bounds=(-20.0, 20.0), method="bounded")
    b = round(float(best.x), 3)
    before, after = nlls(0.0, *z), nlls(b, *z)
    draws = sorted({d for _, d in views})
    return {
        "span_end_bias": b,
        "method": (
            "one bias on the <span_end> logit (its head-row tie merged by log-sum-exp), "
            "minimising the mean NLL of all MSG targets of frozen training views"
        ),
        "fitted_on": (
            f"{len(views)} training texts (trainer draws {draws[0]}..{draws[-1]}, its seed "
            f"and view settings), {len(z[3])} span targets of which {int(z[3].sum())} ends"
        ),
        "tie": list(span_end.tie),
        "end_nll": [round(before[1], 3), round(after[1], 3)],
        "span_token_nll": [round(before[2], 3), round(after[2], 3)],
        "command": f"{COMMAND} --adapter ADAPTER --texts {n_texts} --write",
    }


def build_parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog=COMMAND, description=__doc__.split("\n\n")[0])
    p.add_argument("--adapter", required=True, help="adapter folder (with magnet_config.json)")
    p.add_argument("--texts", type=int, default=128, help="training texts to fit on")
    p.add_argument("--write", action="store_true", help=f"store the result in {META_FILE}")
    p.add_argument("--threads", type=int, default=None, help="torch CPU threads")
    add_model_args(p)  # its --adapters is ignored: --adapter is the one calibrated
    return p


def main(argv: list[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    try:
        folder = Path(args.adapter)
        meta = load_meta(folder)
        if meta is None:
            raise ConfigError(f"{folder} has no {META_FILE}: not a MAGNET adapter.")
        if not meta.training:
            raise ConfigError(f"{folder}/{META_FILE} records no training run to rebuild.")
        from ..inference.engine import Engine

        args.adapters = f"{ADAPTER}={folder}"
        engine = Engine.from_spec(ModelSpec.from_args(args))
        engine.runner.metas[ADAPTER].calibration = {}  # fit from scratch
        result = fit(engine, ADAPTER, args.texts, meta.training)
        result["command"] = result["command"].replace("ADAPTER", str(folder))
        print(
            f"span_end bias {result['span_end_bias']:+.3f}: end NLL {result['end_nll'][0]:.3f}"
            f" -> {result['end_nll'][1]:.3f}, other span tokens {result['span_token_nll'][0]:.3f}"
            f" -> {result['span_token_nll'][1]:.3f} ({result['fitted_on']})"
        )
        if args.write:
            meta.calibration = result
            save_meta(folder, meta)
            print(f"written to {folder / META_FILE}")
    except MagnetError as e:
        print(f"error: {e}", file=sys.stderr)
        return 2
    return 0


if __name__ == "__main__":
    sys.exit(main())
