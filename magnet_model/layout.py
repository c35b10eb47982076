"""How a text with removed spans is laid out for the hybrid (MAGNET) mask.

This is the contract between training (MSG view) and inference (infill): both build the
sequence here, so the model sees at inference exactly the layout it was trained on.

For context pieces c0, c1, ..., cn around n blanks and spans s1..sn:

    [bos] c0 <blank> c1 <blank> ... cn | <span_start> s1 | <span_start> s2 | ...
    '---------- context: segment 0 ---'  '- segment 1 -'   '- segment 2 -'

- Context tokens (segment 0) attend bidirectionally to each other, never to span tokens.
- Span k (segment k) attends to all context and causally to its own earlier tokens.
- Positions: context tokens are numbered in order; span k's <span_start> takes the position p
  of its <blank> and its j-th token p + j, so each span sits where it belongs, right after its
  left context, as in ordinary left-to-right text. The context after blank k starts at
  p + 1 + gap_k: the gap leaves room for the span, so no right-context token shares a
  position (a RoPE angle) with a span token as long as the span is at most gap_k tokens long.
  The gap is the adapter's GapRule: its default where the length is unknown, the span's
  length (a hint) where it is known: the true length in training (with noise, in a share of
  the views), a fixed or user-given length at inference. Gap 0 is the first adapters' layout
  (the right context right after the blank), which GapRule() keeps for them.
- Targets (MSG): the output at <span_start> predicts s_k[0], at s_k[j] predicts s_k[j+1], and
  at the last span token predicts <span_end>: the model learns when a span ends, so a blank
  of unknown length is filled with a span that stops by itself.
- If the whole text is one span (no context but the blank) MSG is plain next-token LM.
"""

from __future__ import annotations

import random
from dataclasses import asdict, dataclass, field

from .tokens import TokenRoles

IGNORE = -100


@dataclass(frozen=True)
class GapRule:
    """How many positions the layout leaves between a <blank> and the text after it.

    default: the gap when the span's length is unknown (0: the first adapters' layout).
    hint_share: in training, the share of spans whose gap is their true length (with up to
    hint_noise of relative noise) instead of the default; a model trained with it reads the
    gap as a length hint ("about N tokens"), and a fixed length at inference is such a hint.
    sentence: at inference only, the gap of a blank of unknown length that stands between
    sentences (units.between_sentences), for a model that reads hints: the hint under which
    removed sentences read likeliest, chosen per adapter on its training split's passages
    (docs/method.md); None: the default there too. Training never uses it.
    """

    default: int = 0
    hint_share: float = 0.0
    hint_noise: float = 0.0
    sentence: int | None = None

    def __post_init__(self) -> None:
        if self.default < 0 or not 0 <= self.hint_share <= 1 or not 0 <= self.hint_noise < 1:
            raise ValueError(
                "a gap rule needs default >= 0, hint_share in [0, 1] and hint_noise in [0, 1)"
            )
        if self.sentence is not None and (
            isinstance(self.sentence, bool)
            or not isinstance(self.sentence, int)
            or self.sentence < 1
        ):
            raise ValueError(
                f"a gap rule's sentence gap must be a whole number >= 1, not {self.sentence!r}"
            )

    @property
    def hints(self) -> bool:
        """Whether the model was trained to read the gap as the span's length."""
        return self.hint_share > 0

    def inference_gap(self, length: int | None = None, between_sentences: bool = False) -> int:
        """The gap for a span at inference: its length if the user gave one and the model
        reads hints; else, for a blank between sentences, the sentence gap if the rule has
        one and the model reads hints; else the default."""
        if length is not None and self.hints:
            return max(1, int(length))
        if between_sentences and self.sentence is not None and self.hints:
            return self.sentence
        return self.default

    def training_gap(self, length: int, rng: random.Random) -> int:
        """The gap of a training span of `length` tokens: the default, or (hint_share of the
        time) the length with noise. The draw happens only for a rule with hints, so a
        rule without them leaves the views' random stream as it was."""
        if not self.hints or rng.random() >= self.hint_share:
            return self.default
        noise = rng.uniform(-self.hint_noise, self.hint_noise) if self.hint_noise else 0.0
        return max(1, round(length * (1 + noise)))

    def to_dict(self) -> dict:
        d = asdict(self)
        if d["sentence"] is None:  # a rule without one is written as before it existed
            del d["sentence"]
        return d

    @classmethod
    def from_dict(cls, d: dict | None) -> GapRule:
        """The rule an adapter recorded; none recorded: the first adapters' gap 0."""
        d = d or {}
        return cls(
            default=int(d.get("default", 0)),
            hint_share=float(d.get("hint_share", 0.0)),
            hint_noise=float(d.get("hint_noise", 0.0)),
            sentence=d.get("sentence"),
        )


@dataclass
class HybridSequence:
    input_ids: list[int]
    segments: list[int]  # 0 = context, k = span k (1-based)
    position_ids: list[int]
    labels: list[int]  # MSG targets, IGNORE elsewhere
    blank_positions: list[int] = field(default_factory=list)  # index of each <blank>
    context_length: int = 0

    def span_position(self, k: int, j: int) -> int:
        """The position id of span k's j-th token (j = 0: its <span_start>; k 0-based)."""
        return self.position_ids[self.blank_positions[k]] + j


def build_hybrid(
    pieces: list[list[int]],
    spans: list[list[int]],
    roles: TokenRoles,
    bos: int | None = None,
    with_end: bool = True,
    gaps: list[int] | None = None,
) -> HybridSequence:
    """Lay out context pieces (n + 1 of them) around n blanks, then the n spans.

    spans may be empty lists (inference: the context plus each span's <span_start>).
    with_end=True adds the <span_end> target after each span's last token (training).
    gaps[k]: positions left free after blank k (GapRule); None: no gap (the first layout).
    """
    if len(pieces) != len(spans) + 1:
        raise ValueError("need exactly one more context piece than spans")
    gaps = [0] * len(spans) if gaps is None else list(gaps)
    if len(gaps) != len(spans) or any(g < 0 for g in gaps):
        raise ValueError("need one gap of at least 0 per span")
    ids: list[int] = [] if bos is None else [bos]
    positions: list[int] = list(range(len(ids)))
    blank_positions: list[int] = []
    at = len(ids)  # the next context position
    for i, piece in enumerate(pieces):
        ids.extend(piece)
        positions.extend(range(at, at + len(piece)))
        at += len(piece)
        if i < len(spans):
            blank_positions.append(len(ids))
            positions.append(at)
            ids.append(roles.blank)
            at += 1 + gaps[i]
    n_ctx = len(ids)
    segments = [0] * n_ctx
    labels = [IGNORE] * n_ctx
    for k, (span, b) in enumerate(zip(spans, blank_positions, strict=True), start=1):
        p = positions[b]
        ids.append(roles.span_start)
        ids.extend(span)
        segments.extend([k] * (len(span) + 1))
        positions.extend(p + j for j in range(len(span) + 1))
        targets = list(span) + ([roles.span_end] if with_end else [IGNORE])
        labels.extend(targets)
    return HybridSequence(ids, segments, positions, labels, blank_positions, n_ctx)
