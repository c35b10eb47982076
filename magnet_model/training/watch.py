"""What tells early whether a run's sentence vectors learn: the Spearman correlation (x 100) of
their cosines with the gold scores of STS-B pairs, measured inside the run at every checkpoint
(--watch-sts N) and logged beside the losses as `sts_dev`.

The pairs come from STS-B's dev split, never its test split, which the evaluator reports: a
run watched and stopped on the test pairs would be tuned to them. The vectors are made as the
trainer's SSCL makes them (the instruction, the sentence mode, the run's pooling), in eval
mode (no dropout), under the run's autocast; the model goes back to training mode after.
"""

from __future__ import annotations

import random
from dataclasses import dataclass

import numpy as np
import torch
import torch.nn.functional as F

from ..pooling import pool
from .objectives import encode
from .views import collate_sentences

BATCH = 64


@dataclass(frozen=True)
class StsWatch:
    """The watched pairs, tokenized once: the unique sentences, each pair's two indices into
    them, and the gold scores."""

    texts: list[list[int]]
    first: list[int]
    second: list[int]
    gold: list[float]


def sts_watch(tokenizer, n: int, seed: int, max_tokens: int) -> StsWatch:
    """n seeded STS-B dev pairs (all when n exceeds them), tokenized and cut to max_tokens."""
    from ..data import load_sts_b

    pairs = load_sts_b("dev")
    if n < len(pairs):
        pairs = random.Random(f"{seed}-watch-sts").sample(pairs, n)
    sentences = list(dict.fromkeys(s for p in pairs for s in (p.sentence1, p.sentence2)))
    index = {s: i for i, s in enumerate(sentences)}
    ids = tokenizer(sentences, add_special_tokens=False).input_ids
    return StsWatch(
        [list(x[:max_tokens]) for x in ids],
        [index[p.sentence1] for p in pairs],
        [index[p.sentence2] for p in pairs],
        [p.score for p in pairs],
    )


@torch.no_grad()
def sts_spearman(run, watch: StsWatch) -> float:
    """Spearman x 100 of the run's current sentence vectors on the watched pairs."""
    from scipy.stats import spearmanr

    cfg, model = run.cfg, run.model
    was_training = model.training
    model.eval()
    try:
        vectors = []
        for i in range(0, len(watch.texts), BATCH):
            batch = collate_sentences(
                watch.texts[i : i + BATCH], [], run.instruction_ids, run.roles, run.bos
            ).to(run.device)
            with run.autocast():
                hidden = encode(
                    model,
                    batch.input_ids,
                    batch.attention_mask,
                    cfg.sentence_mode(),
                    mask_dtype=run.mask_dtype,
                )
            vectors.append(F.normalize(pool(hidden, batch.pool_mask, cfg.pooling).float(), dim=-1))
        z = torch.cat(vectors).cpu().numpy()
    finally:
        model.train(was_training)
    cos = np.sum(z[watch.first] * z[watch.second], axis=1)
    return 100 * float(spearmanr(cos, watch.gold).statistic)
