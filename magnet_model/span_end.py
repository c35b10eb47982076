"""How a span's end is read off the LM logits: the end token with its tie, plus a calibration.

A head row shared by several tokens (head_rows.tie_of) gives each the same logit, so the
probability the model means for "end" is split among them. SpanEnd gives the end token the
whole tie's mass (log-sum-exp of their logits; the other tied tokens get none, so none of
them can appear inside a span) and adds a calibration bias to the end logit, fitted on
training views (magnet_model.evaluation.calibrate) and stored in the adapter's magnet_config.json.
Decoding (infill.span_steps) and scoring (scoring.hybrid_span_nll) apply the same SpanEnd.
For an end token with a row of its own and no calibration it changes nothing.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import torch


@dataclass(frozen=True)
class SpanEnd:
    token: int
    tie: tuple[int, ...] = ()  # the token and the tokens whose head row duplicates its row
    bias: float = 0.0  # calibration added to the end logit
    calibration: dict = field(default_factory=dict, compare=False)  # how the bias was fitted

    @property
    def others(self) -> list[int]:
        return [t for t in self.tie if t != self.token]

    @property
    def changes_logits(self) -> bool:
        return bool(self.others) or self.bias != 0.0

    def apply(self, logits: torch.Tensor) -> torch.Tensor:
        """The end's logit made from its tie and the bias, the other tied tokens at -inf; in
        place on (..., vocab) logits, which are returned."""
        if self.others:
            merged = torch.logsumexp(logits[..., list(self.tie)], dim=-1)
            logits[..., self.others] = float("-inf")
            logits[..., self.token] = merged
        if self.bias:
            logits[..., self.token] += self.bias
        return logits
